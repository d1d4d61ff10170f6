"""Pulumi stacks for the cluster layer: components that register the render core's output.

- :mod:`~gpucluster.pulumi.objects`: one rendered object → one provider resource.
- :mod:`~gpucluster.pulumi.plan`: what each stack registers and what it leaves out (with reasons).
- :mod:`~gpucluster.pulumi.components`: the ComponentResources.
- :mod:`~gpucluster.pulumi.programs`: the ``platform`` and ``tenants`` programs.
- :mod:`~gpucluster.pulumi.engine`: the Automation API driver (inline programs, file backend, offline).
- :mod:`~gpucluster.pulumi.cluster`: discovery and readiness against the target cluster.
- :mod:`~gpucluster.pulumi.ownership`: what the stacks would create that exists without being ours
  (refused before the first create, or adopted with ``up --adopt``).
- :mod:`~gpucluster.pulumi.teardown`: what ``down`` deletes and keeps, from the stack state.
"""
