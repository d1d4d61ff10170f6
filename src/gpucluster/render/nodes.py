"""Node labels and taints per host: what Ansible passes to kubelet and the platform stack patches.

Nodes are created by their kubelets, not by us, so this is data (host → labels/taints), not objects
for ``kubectl apply``. :func:`management_labels` are the labels that tell the GPU Operator's operands
and the DRA driver how to serve a pool's nodes.
"""

from __future__ import annotations

from gpucluster import labels as L
from gpucluster.render.gpu_operator import mig_config_name
from gpucluster.render.topology import node_labels
from gpucluster.spec.model import ClusterSpec, NodePool, SharingMode


def management_labels(pool: NodePool) -> dict[str, str]:
    """Labels our render core sets so the operators configure each pool's nodes."""
    labels: dict[str, str] = {}
    if pool.gpu is None:
        return labels
    if pool.shares_gpus:
        labels[L.DEVICE_PLUGIN_CONFIG] = pool.name
    if pool.sharing.mode is SharingMode.mig:
        labels[L.MIG_CONFIG] = mig_config_name(pool)
        if pool.sharing.mig and pool.sharing.mig.managed_by == "host":
            # Ansible's mig-parted applies the layout; the operator's MIG manager must stay off the node.
            labels[L.DEPLOY_MIG_MANAGER] = "false"
    if pool.sharing.mode is SharingMode.dynamic_mig:
        # The DRA driver creates and removes MIG instances per claim; a MIG manager applying a
        # mig-parted config (the operator's default all-disabled) would tear them down under it.
        labels[L.DEPLOY_MIG_MANAGER] = "false"
    if pool.uses_dra:
        labels[L.DRA] = "true"
    if not pool.uses_device_plugin:
        labels[L.DEPLOY_DEVICE_PLUGIN] = "false"
    return labels


def node_config(spec: ClusterSpec) -> dict[str, dict]:
    """Per host: the labels we manage (pool, fabric domains, user labels, operator selection) and the taints."""
    out: dict[str, dict] = {}
    pools = spec.pools_by_host()
    for host in spec.hosts:
        pool = pools.get(host.name)
        labels: dict[str, str] = {}
        taints: list[dict] = []
        labels.update(node_labels(host))
        if pool is not None:
            labels[L.POOL] = pool.name
            labels.update(pool.labels)
            labels.update(management_labels(pool))
            taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in pool.effective_taints]
        out[host.name] = {"labels": dict(sorted(labels.items())), "taints": taints}
    return out
