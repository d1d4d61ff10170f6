"""What a spec's pools advertise through the device plugin, for validation's capacity sums, and the
extended resources they offer (which tenant quotas may name).

Built on :mod:`gpucluster.devices` (the device plugin's arithmetic) with the sharing settings of each
pool straight from the spec.
"""

from __future__ import annotations

from gpucluster import catalog, devices
from gpucluster.spec import mig as miglib
from gpucluster.spec.model import ClusterSpec, NodePool
from gpucluster.upstream import mig_resource


def sharing(spec: ClusterSpec, pool: NodePool) -> devices.Sharing:
    """One pool's sharing settings for :mod:`gpucluster.devices`, straight from the spec."""
    mode = pool.sharing.mode.value
    return devices.Sharing(
        mode=mode,
        replicas=pool.sharing.replicas or 1,
        rename_by_default=pool.sharing.rename_by_default,
        mig=miglib.pool_layout(pool) if mode == "mig" else None,
        mig_strategy=spec.gpu_operator.mig_strategy,
    )


def cluster_gpu_capacity(spec: ClusterSpec) -> int:
    """Total ``nvidia.com/gpu`` the cluster serves: what the device plugin advertises, plus the whole GPUs
    of DRA pools that serve it as an extended resource (``extendedResource``)."""
    total = 0
    for pool in spec.gpu_pools:
        if pool.gpu and pool.uses_device_plugin:
            res = devices.advertised_resources(pool.gpu.count, sharing(spec, pool))
            total += len(pool.hosts) * res.get("nvidia.com/gpu", 0)
        elif pool.gpu and pool.uses_dra and pool.extended_resource and spec.dra.enabled:
            total += len(pool.hosts) * pool.gpu.count
    return total


def offered_resources(spec: ClusterSpec) -> list[str]:
    """GPU-bearing extended resources besides ``nvidia.com/gpu`` that the cluster's pools can advertise.

    MIG resources are listed for every profile of every MIG-capable model a device-plugin pool holds
    (with the mixed strategy), not just today's layout: a new layout label would otherwise open a
    resource no quota names.
    """
    names: set[str] = set()
    for pool in spec.gpu_pools:
        assert pool.gpu is not None
        if not pool.uses_device_plugin:
            continue
        if pool.shares_gpus and pool.sharing.rename_by_default:
            names.add("nvidia.com/gpu.shared")
        model = catalog.get(pool.gpu.model)
        if model.mig is not None and spec.gpu_operator.mig_strategy == "mixed":
            names |= {mig_resource(p) for p in model.mig.profiles}
    for pool in spec.node_pools:
        if pool.rdma:
            names.add(f"rdma/{pool.rdma.resource_name}")
    names |= {f"rdma/{n.resource_name}" for n in spec.networking.secondary_networks if n.resource_name}
    return sorted(names)
