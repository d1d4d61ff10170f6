"""What a spec's pools advertise through the device plugin, for validation's capacity sums.

Built on :mod:`gpucluster.devices` (the device plugin's arithmetic) with the sharing settings of each
pool straight from the spec.
"""

from __future__ import annotations

from gpucluster import devices
from gpucluster.spec import mig as miglib
from gpucluster.spec.model import ClusterSpec, NodePool


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
