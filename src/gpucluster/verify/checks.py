"""Every check id verify can emit, and which of them a run may leave not measured.

A row that could not be measured is never a pass: ``verify``, ``up``, the rolling-upgrade gate and the
pytest suite fail on it unless its check is *allowed* to be unmeasured, one check id at a time:

- by the user, ``--allow-not-measured CHECK[,CHECK...]`` (the pytest suite:
  ``--gpucluster-allow-not-measured``; ``playbooks/upgrade.yml``: ``upgrade_verify_allow_not_measured``);
- by the local world, which installs no chart: :data:`LOCAL_WORLD` and nothing else;
- by ``--no-chart-repositories``, where the operators' releases are not installed on purpose:
  :data:`NO_CHART_REPOSITORIES`.

Nothing else is allowed by default. ``networkPolicyEnforcement: bring-your-own`` leaves the
``network-policy-enforcer`` row not measured (gpucluster does not know the owner's enforcer): the operator
who declared it says so again with ``--allow-not-measured network-policy-enforcer``, or the run fails on it.

Every allowed row is still listed, with its own reason and who allowed it. ``tests/unit/test_check_coverage.py``
keeps :data:`CHECKS` equal to the ids the source emits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from gpucluster.errors import InputError

if TYPE_CHECKING:
    from gpucluster.spec.model import ClusterSpec

#: Check id -> what it compares (docs/verification.md has the source and the proving fault of each).
CHECKS: dict[str, str] = {
    "node-ready": "a Node per spec host, Ready",
    "node-known": "no Node the spec does not list",
    "node-capacity": "GPU/RDMA extended resources in capacity",
    "node-allocatable": "GPU/RDMA extended resources in allocatable",
    "node-labels": "managed, GFD, NFD and network-operator labels",
    "node-taints": "taints with a key the spec manages",
    "gpu-health": "per GPU node: DCGM exporter, GPU Operator validator, DRA device taints, node-problem-detector",
    "gpu-metrics": "a DCGM endpoint given with --metrics-url can be scraped",
    "dra-slices": "the DRA driver's ResourceSlices per node",
    "deviceclass-matches": "each DeviceClass as rendered, matching exactly its devices",
    "dra-extended-resource": "the DeviceClass that serves plain nvidia.com/gpu",
    "dra-claims": "the devices allocated claims hold",
    "dra-quarantine": "GPUs quarantined with gpucluster quarantine",
    "daemonsets-ready": "the operators' DaemonSets, current and ready on their hosts",
    "tenant-quota": "each tenant's ResourceQuota",
    "tenant-limitrange": "each tenant's LimitRange",
    "tenant-queue": "each tenant's Volcano queue",
    "topology-domains": "each node in the Volcano HyperNode of its fabric domain at every tier",
    "nvlink-clique": "the nodes of each NVLink domain report one NVLink clique (GFD's nvidia.com/gpu.clique), "
                     "no two domains the same",
    "kubelet-resource-managers": "the Topology, CPU and Memory Manager policies each kubelet runs, as its pool sets",
    "tenant-security": "Pod Security labels and NetworkPolicies of each tenant namespace",
    "network-policy-enforcer": "flannel's NetworkPolicy add-on (kube-network-policies) runs, ready on every host",
    "tenant-admission": "tenant admission policies, bindings and namespace allowances",
    "tenant-rbac": "what each tenant group may do, asked of the authorizer",
    "priority-classes": "the spec's PriorityClasses, and no other global default",
    "alert-rules": "the GPU alert rules, as rendered and loaded",
    "charts-installed": "Helm's deployed release records: chart, version and values",
    "mig-reconfig": "MIG layout changes reach success",
    "sharing-reconfig": "sharing changes reach GPU Feature Discovery",
    "driver-upgrade": "GPU Operator driver upgrades",
    "control-plane-certificates": "the API server's serving and the kubeconfig's client certificate, not near expiry",
    "host-reachable": "the host answers",
    "host-swap": "swap off",
    "host-sysctl": "bridge/forwarding sysctls, live and persisted",
    "host-modules": "overlay/br_netfilter persisted",
    "host-kubelet": "kubelet installed and active",
    "host-nouveau": "nouveau not loaded",
    "host-containerd": "containerd registers the NVIDIA runtime with CDI",
    "host-nvidia-module": "the nvidia module loaded",
    "host-nvidia-smi": "nvidia-smi reports the pool's model and count",
    "host-rdma": "RDMA ports ACTIVE with the spec's link layer",
}

#: What the local world leaves unmeasured, and why: it installs no chart (its GPU simulator stands in for
#: the operators' node agents, so every device row is still measured; nothing stands in for flannel and its
#: NetworkPolicy enforcer). Nothing else is allowed there.
LOCAL_WORLD: dict[str, str] = {
    "daemonsets-ready": "the local world installs no chart: no operator DaemonSet runs there",
    "charts-installed": "the local world installs no chart from a repository (none can be fetched)",
    "network-policy-enforcer": "the local world installs no chart: flannel and its NetworkPolicy add-on do not run "
                               "there (its kwok nodes have no pod network)",
    "kubelet-resource-managers": "the local world's kwok nodes have no kubelet: nothing serves /configz there",
}

#: What ``--no-chart-repositories`` leaves unmeasured: the operators' releases and what their node agents
#: would publish (a node that publishes devices anyway is still compared).
NO_CHART_REPOSITORIES: dict[str, str] = {
    "daemonsets-ready": "--no-chart-repositories: the operators' releases are not installed",
    "charts-installed": "--no-chart-repositories: releases from a chart repository are not installed",
    "node-capacity": "--no-chart-repositories: no device plugin publishes GPU/RDMA resources",
    "node-allocatable": "--no-chart-repositories: no device plugin publishes GPU/RDMA resources",
    "node-labels": "--no-chart-repositories: GPU Feature Discovery, NFD and the network operator do not run",
    "dra-slices": "--no-chart-repositories: the DRA driver's kubelet plugin does not run",
    "deviceclass-matches": "--no-chart-repositories: no DRA device is published to match",
    "gpu-health": "--no-chart-repositories: neither the DCGM exporter nor the GPU Operator's validator runs",
    "tenant-queue": "--no-chart-repositories: Volcano's chart, which brings the Queue CRD, is not installed",
    "topology-domains": "--no-chart-repositories: Volcano's chart, which brings the HyperNode CRD, is not installed",
    "nvlink-clique": "--no-chart-repositories: GPU Feature Discovery, which labels the clique, does not run",
    "network-policy-enforcer": "--no-chart-repositories: flannel's chart, whose add-on enforces NetworkPolicies, "
                               "is not installed",
}

#: Who allowed the rows of a user's list.
BY_USER = "allowed by --allow-not-measured"


def parse(values: Iterable[str], option: str = "--allow-not-measured") -> dict[str, str]:
    """``CHECK[,CHECK...]`` (repeatable) -> {check: who allowed it}; InputError naming any unknown id."""
    ids = [c.strip() for v in values for c in str(v).split(",") if c.strip()]
    unknown = sorted(set(ids) - set(CHECKS))
    if unknown:
        raise InputError(f"{option}: unknown check id(s) {', '.join(unknown)} (known: {', '.join(sorted(CHECKS))}; "
                         "`gpucluster verify` names each row's check in its first column)")
    return dict.fromkeys(ids, BY_USER)


def allowed(user: Mapping[str, str] | Iterable[str] = (), *, local_world: bool = False,
            chart_repositories: bool = True, spec: ClusterSpec | None = None) -> dict[str, str]:
    """Every check a run may leave unmeasured, with who allowed it (the user's reason wins).

    With ``spec``: where it brings its own NetworkPolicy enforcer, a missing chart is not why
    ``network-policy-enforcer`` is unmeasured, so neither chart allowance covers it (only the user's does).
    """
    out: dict[str, str] = {}
    if local_world:
        out.update(LOCAL_WORLD)
    if not chart_repositories:
        out.update(NO_CHART_REPOSITORIES)
    if spec is not None and spec.networking.pod_network.network_policy_enforcement == "bring-your-own":
        out.pop("network-policy-enforcer", None)
    out.update(user if isinstance(user, Mapping) else dict.fromkeys(user, BY_USER))
    return out
