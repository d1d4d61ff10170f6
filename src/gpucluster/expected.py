"""The expected state of every host, computed from the spec in one place.

Verification compares the live cluster with this. Labels we set come from the render core
(:func:`gpucluster.render.nodes.node_config`, so verify checks that the cluster carries what we
rendered); what NVIDIA's agents publish comes from :mod:`gpucluster.devices`, fed with each pool's
sharing settings straight from the spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpucluster import catalog, devices
from gpucluster import labels as L
from gpucluster.devices import Device
from gpucluster.render.nodes import management_labels
from gpucluster.spec.capacity import sharing_args
from gpucluster.spec.model import ClusterSpec


@dataclass
class HostState:
    name: str
    pool: str | None
    gpu_model: str | None
    gpu_count: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[str] = field(default_factory=list)
    resources: dict[str, int] = field(default_factory=dict)  # extended resources: capacity == allocatable
    devices: list[Device] = field(default_factory=list)


def host_states(spec: ClusterSpec) -> dict[str, HostState]:
    """Expected labels, taints, extended resources and DRA devices for every host of the spec."""
    out: dict[str, HostState] = {}
    pools = spec.pools_by_host()
    per_pool: dict[str, tuple[dict, dict, dict]] = {}  # pool → (gfd labels, management labels, resources)
    for host in spec.hosts:
        pool = pools.get(host.name)
        state = HostState(name=host.name, pool=pool.name if pool else None, gpu_model=None, gpu_count=0)
        out[host.name] = state
        if "control-plane" in [r.value for r in host.roles]:
            state.labels[L.CONTROL_PLANE] = ""
        if pool is None:
            continue
        state.labels[L.POOL] = pool.name
        state.labels.update(pool.labels)
        state.taints = [str(t) for t in pool.effective_taints]
        if pool.rdma:
            state.resources[f"rdma/{pool.rdma.resource_name}"] = spec.networking.rdma_hca_max
        if not pool.gpu:
            continue
        model = catalog.get(pool.gpu.model)
        state.gpu_model, state.gpu_count = pool.gpu.model, pool.gpu.count
        args = sharing_args(spec, pool)
        if pool.name not in per_pool:  # identical for every host of the pool
            per_pool[pool.name] = (
                devices.gfd_labels(model, pool.gpu.count, **args),
                management_labels(pool),
                devices.advertised_resources(model, pool.gpu.count, **args) if pool.uses_device_plugin else {},
            )
        gfd, management, resources = per_pool[pool.name]
        state.labels.update(gfd)
        state.labels.update(management)
        state.resources.update(resources)
        if pool.uses_dra:
            state.devices = devices.dra_devices(spec.metadata.name, host.name, model, pool.gpu.count, args["mig"])
    return out
