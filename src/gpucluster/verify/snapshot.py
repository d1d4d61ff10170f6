"""A snapshot of the cluster state verification needs, fetched with a handful of LIST calls.

Responses are read as raw JSON through the client's REST layer: building the client's model objects
for thousands of nodes costs more than the LIST itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster import kube
from gpucluster.errors import ClusterUnreachable

Obj = dict[str, Any]


@dataclass
class Snapshot:
    nodes: list[Obj] = field(default_factory=list)
    resource_slices: list[Obj] | None = None  # None: the API does not serve resource.k8s.io/v1
    device_classes: list[Obj] | None = None
    daemonsets: list[Obj] = field(default_factory=list)
    quotas: list[Obj] = field(default_factory=list)
    limit_ranges: list[Obj] = field(default_factory=list)
    queues: list[Obj] | None = None  # None: Volcano CRDs absent
    prometheus_rules: list[Obj] | None = None  # None: prometheus-operator CRDs absent
    namespaces: list[Obj] = field(default_factory=list)
    network_policies: list[Obj] = field(default_factory=list)
    priority_classes: list[Obj] = field(default_factory=list)
    calls: int = 0


#: Snapshot field → the LIST that fills it.
PATHS = {
    "nodes": kube.NODES,
    "resource_slices": kube.RESOURCE_SLICES,
    "device_classes": kube.DEVICE_CLASSES,
    "daemonsets": kube.DAEMONSETS,
    "quotas": kube.RESOURCE_QUOTAS,
    "limit_ranges": kube.LIMIT_RANGES,
    "queues": kube.VOLCANO_QUEUES,
    "prometheus_rules": kube.PROMETHEUS_RULES,
    "namespaces": kube.NAMESPACES,
    "network_policies": kube.NETWORK_POLICIES,
    "priority_classes": kube.PRIORITY_CLASSES,
}
#: Core APIs every Kubernetes API server serves: absent means it is not one.
REQUIRED = ("nodes", "daemonsets", "quotas", "limit_ranges", "namespaces")


def fetch(kubeconfig: str | Path | None = None, context: str | None = None) -> Snapshot:
    """One LIST each: nodes, ResourceSlices, DeviceClasses, DaemonSets, quotas, limit ranges, Volcano
    queues, PrometheusRules, namespaces, NetworkPolicies, PriorityClasses (11 calls in all)."""
    snap = Snapshot()
    with kube.Kube(kubeconfig, context=context, timeout=60) as api:
        for attr, path in PATHS.items():
            try:
                items = api.list(path)
            except ClusterUnreachable as err:
                raise ClusterUnreachable(f"{err}; verification needs read access to nodes, DRA objects, quotas "
                                         "and the operators' CRs") from None
            snap.calls += 1
            if items is None and attr in REQUIRED:
                raise ClusterUnreachable(f"{path} is not served; is this a Kubernetes API server?")
            setattr(snap, attr, items)
    return snap
