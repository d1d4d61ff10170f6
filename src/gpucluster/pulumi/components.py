"""ComponentResources that register the render core's output: one per render component.

Each component takes rendered objects (and, for operator components, the pinned Helm releases) and
registers them as children (``parent=self``) through one explicit Kubernetes provider. Namespaced
objects depend on their Namespace when the same stack creates it, so a fresh cluster converges in one
run. No object is spelled out here: the data comes from :mod:`gpucluster.render`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import pulumi

from gpucluster import components
from gpucluster.pulumi.objects import PROVIDER_VERSION, K8sObject, Obj, object_key
from gpucluster.pulumi.plan import ChartSource


class ObjectsArgs(TypedDict, total=False):
    """Inputs of every component."""

    objects: Sequence[Obj]
    """Rendered Kubernetes objects to register (required)."""
    releases: Sequence[ChartSource]
    """Pinned Helm releases this component installs (operator components only)."""
    namespaces: Mapping[str, pulumi.Resource]
    """Namespace resources of this stack by name; namespaced children depend on theirs."""
    patch: bool
    """Register the objects as server-side-apply patches (objects owned by someone else: Nodes)."""


class ClusterObjects(pulumi.ComponentResource):
    """Registers a list of rendered objects (and releases) as children; see the module docstring."""

    resources: dict[str, pulumi.Resource]
    """Registered objects by logical name (``kind/namespace/name``)."""
    releases: dict[str, pulumi.Resource]
    """Registered Helm releases by release name."""
    namespaces: dict[str, pulumi.Resource]
    """The Namespace resources this component created, by namespace name."""

    def __init__(self, type_: str, name: str, args: ObjectsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_, name, {}, opts)
        namespaces = dict(args.get("namespaces") or {})
        self.resources = {}
        # Namespaces of this component first: its other children depend on them.
        ordered = sorted(args["objects"], key=lambda o: o["kind"] != "Namespace")
        for obj in ordered:
            key = object_key(obj)
            ns = obj["metadata"].get("namespace")
            deps = [namespaces[ns]] if ns in namespaces else []
            self.resources[key] = K8sObject(
                key, obj, pulumi.ResourceOptions(parent=self, depends_on=deps), patch=bool(args.get("patch"))
            )
            if obj["kind"] == "Namespace" and not args.get("patch"):
                namespaces[obj["metadata"]["name"]] = self.resources[key]
        self.namespaces = {n: r for n, r in namespaces.items() if r in self.resources.values()}
        self.releases = {}
        for src in args.get("releases") or ():
            ns = src.release.namespace
            deps = [namespaces[ns]] if ns in namespaces else []
            self.releases[src.release.name] = helm_release(
                src, pulumi.ResourceOptions(parent=self, depends_on=deps)
            )
        self.register_outputs({
            "objects": sorted(self.resources),
            "releases": sorted(self.releases),
        })


def helm_release(src: ChartSource, opts: pulumi.ResourceOptions) -> pulumi.Resource:
    """A Helm release (``helm.sh/v3`` Release) of a pinned chart with the render core's values.

    A local chart is installed from its folder; a remote one from its repository at the pinned
    version. ``atomic`` rolls a failed install back so a re-run starts clean.
    """
    from pulumi_kubernetes.helm.v3 import Release, ReleaseArgs, RepositoryOptsArgs

    rel = src.release
    args: dict[str, Any] = {
        "name": rel.name,
        "chart": src.chart,
        "namespace": rel.namespace,
        "values": rel.values,
        "atomic": True,
        "create_namespace": False,
    }
    if src.local_path is None:
        args["version"] = rel.version
        args["repository_opts"] = RepositoryOptsArgs(repo=rel.repository)
    opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=PROVIDER_VERSION))
    return Release(f"release/{rel.name}", ReleaseArgs(**args), opts)


def register(component: str, name: str, args: ObjectsArgs, opts: pulumi.ResourceOptions) -> ClusterObjects:
    """Create the Pulumi component of registry row ``component`` (see :mod:`gpucluster.components`).

    Earlier names of the row become aliases, so a renamed component keeps its resources.
    """
    row = components.get(component)
    aliases = [pulumi.Alias(name=old if name == component else name, type_=components.type_token(row.stack, kind))
               for old, kind in row.aliases]
    if aliases:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=aliases))
    return ClusterObjects(row.type_token, name, args, opts)
