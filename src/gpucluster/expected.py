"""The expected state of every host, computed from the spec in one place.

Verification compares the live cluster with this; the render core labels nodes from it; the GPU
simulator uses the same *device arithmetic* (:func:`advertised_resources`, :func:`gfd_labels`,
:func:`dra_devices`) but feeds it what it reads from the deployed ConfigMaps, so a wrong rendered
ConfigMap shows up as a node that disagrees with this module.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from gpucluster import catalog
from gpucluster.catalog import GpuModel
from gpucluster.spec import mig as miglib
from gpucluster.spec.model import ClusterSpec, NodePool, SharingMode

POOL_LABEL = "gpucluster.dev/pool"
DRA_LABEL = "gpucluster.dev/dra"
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
DEPLOY_DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
DRA_DRIVER = "gpu.nvidia.com"


@dataclass(frozen=True)
class Device:
    """One device a DRA ResourceSlice should publish."""

    name: str
    type: str  # "gpu" or "mig"
    uuid: str
    product_name: str
    architecture: str
    compute_capability: str
    memory_bytes: int
    pci_bus_id: str
    profile: str | None = None
    parent_uuid: str | None = None


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


def mig_layout(pool: NodePool) -> dict[str, int]:
    """Profile → count on one GPU of a MIG pool (validated before this is called)."""
    assert pool.gpu and pool.sharing.mig
    model = catalog.get(pool.gpu.model)
    if pool.sharing.mig.profiles is not None:
        return dict(pool.sharing.mig.profiles)
    return miglib.resolve_named(model, pool.sharing.mig.layout or "all-balanced")


def mig_config_name(pool: NodePool) -> str:
    """The mig-parted config name a MIG pool's nodes are labelled with."""
    assert pool.sharing.mig
    if pool.sharing.mig.profiles is None and pool.sharing.mig.layout:
        return pool.sharing.mig.layout
    return f"gpucluster-{pool.name}"


def advertised_resources(
    model: GpuModel,
    count: int,
    *,
    mode: str = "exclusive",
    replicas: int = 1,
    rename_by_default: bool = False,
    mig: dict[str, int] | None = None,
    mig_strategy: str = "mixed",
) -> dict[str, int]:
    """What the NVIDIA device plugin advertises on one node (capacity and allocatable)."""
    if mode == SharingMode.mig.value:
        layout = mig or {}
        if mig_strategy == "single":
            return {"nvidia.com/gpu": count * sum(layout.values())}
        return {f"nvidia.com/mig-{p}": count * c for p, c in sorted(layout.items()) if c}
    if mode in (SharingMode.time_slicing.value, SharingMode.mps.value) and replicas > 1:
        name = "nvidia.com/gpu.shared" if rename_by_default else "nvidia.com/gpu"
        return {name: count * replicas}
    return {"nvidia.com/gpu": count}


def gfd_labels(
    model: GpuModel,
    count: int,
    *,
    mode: str = "exclusive",
    replicas: int = 1,
    rename_by_default: bool = False,
    mig: dict[str, int] | None = None,
    mig_strategy: str = "mixed",
) -> dict[str, str]:
    """The labels GPU Feature Discovery puts on a node."""
    shared = mode in (SharingMode.time_slicing.value, SharingMode.mps.value) and replicas > 1
    product = model.product_label
    memory = model.memory_mib
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.family": model.family,
        "nvidia.com/gpu.compute.major": str(model.compute_major),
        "nvidia.com/gpu.compute.minor": str(model.compute_minor),
        "nvidia.com/gpu.replicas": str(replicas if shared else 1),
        "nvidia.com/gpu.sharing-strategy": mode if shared else "none",
        "nvidia.com/mig.capable": str(model.mig_capable).lower(),
    }
    if model.mig_capable:
        labels["nvidia.com/mig.strategy"] = mig_strategy
    if mode == SharingMode.mig.value and model.mig:
        layout = mig or {}
        labels["nvidia.com/mig.config.state"] = "success"
        if mig_strategy == "single" and len(layout) == 1:
            (profile, per_gpu), = layout.items()
            product = f"{product}-MIG-{profile}"
            memory = model.mig.profiles[profile].memory_mib
            labels["nvidia.com/gpu.count"] = str(count * per_gpu)
        else:
            for profile, per_gpu in sorted(layout.items()):
                labels[f"nvidia.com/mig-{profile}.count"] = str(count * per_gpu)
                labels[f"nvidia.com/mig-{profile}.memory"] = str(model.mig.profiles[profile].memory_mib)
    if shared and not rename_by_default:
        product += "-SHARED"
    labels["nvidia.com/gpu.product"] = product
    labels["nvidia.com/gpu.memory"] = str(memory)
    return labels


def device_uuid(cluster: str, host: str, index: int, mig: str = "") -> str:
    """A stable UUID per (cluster, host, GPU index[, MIG slot]), formatted as NVML does."""
    raw = uuid.uuid5(uuid.NAMESPACE_URL, f"gpucluster://{cluster}/{host}/{index}/{mig}")
    return f"{'MIG' if mig else 'GPU'}-{raw}"


def dra_devices(
    cluster: str, host: str, model: GpuModel, count: int, mig: dict[str, int] | None = None
) -> list[Device]:
    """The devices the DRA driver publishes for one node: whole GPUs, or the MIG devices on them."""
    devices = []
    for i in range(count):
        gpu_uuid = device_uuid(cluster, host, i)
        bus = f"0000:{0x18 + 0x10 * i:02x}:00.0"
        common = dict(product_name=model.product_name, architecture=model.architecture,
                      compute_capability=model.compute_capability, pci_bus_id=bus)
        if mig and model.mig:
            slot = 0
            for profile, n in sorted(mig.items()):
                p = model.mig.profiles[profile]
                for _ in range(n):
                    devices.append(Device(
                        name=f"gpu-{i}-mig-{profile.replace('.', '-').replace('+', '-')}-{slot}", type="mig",
                        uuid=device_uuid(cluster, host, i, str(slot)), memory_bytes=p.memory_mib * 2**20,
                        profile=profile, parent_uuid=gpu_uuid, **common))
                    slot += 1
        else:
            devices.append(Device(name=f"gpu-{i}", type="gpu", uuid=gpu_uuid,
                                  memory_bytes=model.memory_bytes, **common))
    return devices


def pool_sharing_args(spec: ClusterSpec, pool: NodePool) -> dict:
    """The keyword arguments of the device arithmetic for one pool, straight from the spec."""
    mode = pool.sharing.mode.value
    return dict(
        mode=mode,
        replicas=pool.sharing.replicas or 1,
        rename_by_default=pool.sharing.rename_by_default,
        mig=mig_layout(pool) if mode == "mig" else None,
        mig_strategy=spec.gpu_operator.mig_strategy,
    )


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
            state.labels["node-role.kubernetes.io/control-plane"] = ""
        if pool is None:
            continue
        state.labels[POOL_LABEL] = pool.name
        state.labels.update(pool.labels)
        state.taints = [str(t) for t in pool.effective_taints]
        if pool.rdma:
            state.resources[f"rdma/{pool.rdma.resource_name}"] = spec.networking.rdma_hca_max
        if not pool.gpu:
            continue
        model = catalog.get(pool.gpu.model)
        state.gpu_model, state.gpu_count = pool.gpu.model, pool.gpu.count
        args = pool_sharing_args(spec, pool)
        if pool.name not in per_pool:  # identical for every host of the pool
            per_pool[pool.name] = (
                gfd_labels(model, pool.gpu.count, **args),
                node_management_labels(spec, pool),
                advertised_resources(model, pool.gpu.count, **args) if pool.uses_device_plugin else {},
            )
        gfd, management, resources = per_pool[pool.name]
        state.labels.update(gfd)
        state.labels.update(management)
        state.resources.update(resources)
        if pool.uses_dra:
            state.devices = dra_devices(spec.metadata.name, host.name, model, pool.gpu.count, args["mig"])
    return out


def node_management_labels(spec: ClusterSpec, pool: NodePool) -> dict[str, str]:
    """Labels our render core sets so the operators configure each pool's nodes."""
    labels: dict[str, str] = {}
    if pool.gpu is None:
        return labels
    if pool.uses_device_plugin and pool.sharing.mode in (SharingMode.time_slicing, SharingMode.mps):
        labels[DEVICE_PLUGIN_CONFIG_LABEL] = pool.name
    if pool.sharing.mode is SharingMode.mig:
        labels[MIG_CONFIG_LABEL] = mig_config_name(pool)
    if pool.uses_dra:
        labels[DRA_LABEL] = "true"
    if not pool.uses_device_plugin:
        labels[DEPLOY_DEVICE_PLUGIN_LABEL] = "false"
    return labels


def cluster_gpu_capacity(spec: ClusterSpec) -> int:
    """Total ``nvidia.com/gpu`` the device plugin advertises across the cluster."""
    total = 0
    for pool in spec.gpu_pools:
        if pool.gpu and pool.uses_device_plugin:
            res = advertised_resources(catalog.get(pool.gpu.model), pool.gpu.count, **pool_sharing_args(spec, pool))
            total += len(pool.hosts) * res.get("nvidia.com/gpu", 0)
    return total


def physical_gpus(spec: ClusterSpec) -> int:
    return sum(len(p.hosts) * p.gpu.count for p in spec.gpu_pools if p.gpu)
