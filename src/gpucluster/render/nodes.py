"""Node labels and taints per host: what Ansible passes to kubelet and the platform stack patches.

Nodes are created by their kubelets, not by us, so this is data (host → labels/taints), not objects
for ``kubectl apply``.
"""

from __future__ import annotations

from gpucluster import expected
from gpucluster.spec.model import ClusterSpec


def node_config(spec: ClusterSpec) -> dict[str, dict]:
    """Per host: the labels we manage (pool, user labels, operator selection) and the taints."""
    out: dict[str, dict] = {}
    pools = spec.pools_by_host()
    for host in spec.hosts:
        pool = pools.get(host.name)
        labels: dict[str, str] = {}
        taints: list[dict] = []
        if pool is not None:
            labels[expected.POOL_LABEL] = pool.name
            labels.update(pool.labels)
            labels.update(expected.node_management_labels(spec, pool))
            taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in pool.effective_taints]
        out[host.name] = {"labels": dict(sorted(labels.items())), "taints": taints}
    return out
