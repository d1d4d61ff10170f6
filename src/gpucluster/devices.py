"""NVIDIA device arithmetic: what a GPU model and a sharing setting make a node advertise and publish.

Pure functions of plain values (a catalog model, a GPU count, a sharing mode, a MIG layout), named
after the agent whose behaviour they describe: the device plugin's advertised resources, GPU Feature
Discovery's labels, the DRA driver's devices. Verification's expectations (:mod:`gpucluster.expected`)
and spec validation's capacity sums are built on them. The GPU simulator does NOT use them: it derives
what it publishes from upstream facts and code, so the two sides of a check never share arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpucluster import catalog
from gpucluster import labels as L
from gpucluster.catalog import GpuModel
from gpucluster.upstream import counter_set_name, mig_name_part, mig_resource, shares_gpus


@dataclass(frozen=True)
class Device:
    """One device a DRA ResourceSlice should publish.

    A whole GPU has its exact name (``gpu-<minor>``). A MIG device's name carries ids the expectation
    cannot know (NVML's GPU-instance profile id, the placement NVML chose), so ``name`` is its fixed
    prefix ``gpu-<minor>-mig-<profile>`` and ``starts``/``slices`` say which placements are valid.
    """

    name: str
    type: str  # "gpu" or "mig"
    gpu: int
    product_name: str
    memory_bytes: int
    profile: str | None = None
    starts: tuple[int, ...] = ()
    slices: int = 0
    #: Dynamic MIG (partitionable devices): the device is one possible placement (MIG) or the whole GPU,
    #: and consumes the memory slices ``starts[0] .. starts[0]+slices-1`` of ``gpu-<minor>-counter-set``.
    dynamic: bool = False
    #: ``resource.kubernetes.io/pciBusID`` and ``pcieRoot`` of the device's GPU (a MIG device's are its
    #: parent's) where the catalog cites the platform's layout (:func:`gpu_topology`); None: not predicted.
    pci_bus_id: str | None = None
    pcie_root: str | None = None


@dataclass(frozen=True)
class Sharing:
    """How a node's GPUs are shared, as plain values (a pool's, from :func:`gpucluster.spec.capacity.sharing`)."""

    mode: str = "exclusive"
    replicas: int = 1
    rename_by_default: bool = False
    #: The MIG layout per GPU (profile -> instances) when ``mode`` is ``mig``.
    mig: dict[str, int] | None = None
    mig_strategy: str = "mixed"


def advertised_resources(count: int, sharing: Sharing) -> dict[str, int]:
    """What the NVIDIA device plugin advertises on one node (capacity and allocatable)."""
    s = sharing
    if s.mode == "mig":
        layout = s.mig or {}
        if s.mig_strategy == "single":
            return {"nvidia.com/gpu": count * sum(layout.values())}
        return {mig_resource(p): count * c for p, c in sorted(layout.items()) if c}
    if shares_gpus(s.mode, s.replicas):
        name = "nvidia.com/gpu.shared" if s.rename_by_default else "nvidia.com/gpu"
        return {name: count * s.replicas}
    return {"nvidia.com/gpu": count}


def gfd_labels(model: GpuModel, count: int, sharing: Sharing) -> dict[str, str]:
    """The labels GPU Feature Discovery puts on a node."""
    s = sharing
    mode, replicas, mig, mig_strategy = s.mode, s.replicas, s.mig, s.mig_strategy
    shared = shares_gpus(mode, replicas)
    product = model.product_label
    memory = model.memory_mib
    labels = {
        L.GPU_PRESENT: "true",
        L.GPU_COUNT: str(count),
        L.GPU_FAMILY: model.family,
        L.GPU_COMPUTE_MAJOR: str(model.compute_major),
        L.GPU_COMPUTE_MINOR: str(model.compute_minor),
        L.GPU_REPLICAS: str(replicas if shared else 1),
        L.GPU_SHARING_STRATEGY: mode if shared else "none",
        L.MIG_CAPABLE: str(model.mig_capable).lower(),
    }
    if model.mig_capable:
        labels[L.MIG_STRATEGY] = mig_strategy
    if mode == "mig" and model.mig:
        layout = mig or {}
        labels[L.MIG_CONFIG_STATE] = "success"
        if mig_strategy == "single" and len(layout) == 1:
            (profile, per_gpu), = layout.items()
            product = f"{product}-MIG-{profile}"
            memory = model.mig.profiles[profile].memory_mib
            labels[L.GPU_COUNT] = str(count * per_gpu)
        else:
            # No full GPU is left to advertise under nvidia.com/gpu: GFD labels its replicas 0
            # (k8s-device-plugin v0.19.0 internal/lm/resource.go, fact gfd-label-replicas-sharing-disabled).
            labels[L.GPU_REPLICAS] = "0"
            for profile, per_gpu in sorted(layout.items()):
                labels[L.mig_count(profile)] = str(count * per_gpu)
                labels[L.mig_memory(profile)] = str(model.mig.profiles[profile].memory_mib)
    if shared and not s.rename_by_default:
        product += "-SHARED"
    labels[L.GPU_PRODUCT] = product
    labels[L.GPU_MEMORY] = str(memory)
    return labels


def dynamic_full_gpu_bytes(model: GpuModel) -> int:
    """The ``memory`` a whole GPU reports under DynamicMIG: the largest over its MIG profiles (the driver's
    maxCapacities, partitions.go:55), not the board's total."""
    assert model.mig is not None
    return max(p.memory_mib for p in model.mig.profiles.values()) * 2**20


def dra_counter_sets(model: GpuModel, count: int) -> dict[str, dict[str, int]]:
    """Under DynamicMIG: per GPU, the counters verification checks (memory and one per memory slice)."""
    assert model.mig is not None
    counters = {"memory": dynamic_full_gpu_bytes(model),
                **{f"memory-slice-{i}": 1 for i in range(model.mig.memory_slices)}}
    return {counter_set_name(i): dict(counters) for i in range(count)}


def gpu_topology(platform_key: str | None, count: int) -> list[tuple[str | None, str | None]]:
    """Per GPU of a node with ``count`` GPUs on platform ``platform_key`` (the pool's ``gpu.platform``): the
    (pciBusID, pcieRoot) the DRA driver publishes, from the platform layout the catalog cites
    (data/platforms.yaml), or (None, None) without a platform or with more GPUs than it holds. GPU ``i`` is
    the platform's slot ``i`` (NVML orders GPUs by bus ID, and the cited slots are in that order)."""
    platform = catalog.platform(platform_key)
    if platform is None or count > len(platform.gpus):
        return [(None, None)] * count
    return [(g.pci_bus_id, g.pcie_root) for g in platform.gpus[:count]]


def dra_devices(model: GpuModel, count: int, mig: dict[str, int] | None = None,
                dynamic: bool = False, platform: str | None = None) -> list[Device]:
    """The devices the DRA driver publishes for one node: whole GPUs, or (static MIG) only the MIG
    devices on them (fact mig-static-parent-not-published); with ``dynamic`` (DynamicMIG on a GPU that
    toggles MIG mode itself) the whole GPU and one device per placement of every profile (fact
    dynamic-mig-publishes)."""
    out: list[Device] = []
    if dynamic and model.mig:
        for i in range(count):
            out.append(Device(name=f"gpu-{i}", type="gpu", gpu=i, product_name=model.product_name,
                              memory_bytes=dynamic_full_gpu_bytes(model), starts=(0,),
                              slices=model.mig.memory_slices, dynamic=True))
            for profile, p in sorted(model.mig.profiles.items()):
                out.extend(Device(name=f"gpu-{i}-mig-{mig_name_part(profile)}", type="mig", gpu=i,
                                  product_name=model.product_name, memory_bytes=p.memory_mib * 2**20,
                                  profile=profile, starts=(start,), slices=p.memory, dynamic=True)
                           for start in p.starts)
        return _placed(out, gpu_topology(platform, count))
    for i in range(count):
        if mig and model.mig:
            for profile, n in sorted(mig.items()):
                p = model.mig.profiles[profile]
                out.extend(Device(name=f"gpu-{i}-mig-{mig_name_part(profile)}", type="mig", gpu=i,
                                  product_name=model.product_name, memory_bytes=p.memory_mib * 2**20,
                                  profile=profile, starts=p.starts, slices=p.memory) for _ in range(n))
        else:
            out.append(Device(name=f"gpu-{i}", type="gpu", gpu=i, product_name=model.product_name,
                              memory_bytes=model.memory_bytes))
    return _placed(out, gpu_topology(platform, count))


def _placed(devs: list[Device], topology: list[tuple[str | None, str | None]]) -> list[Device]:
    """The devices with their GPU's PCI attributes (MIG devices take the parent's, mig.go:176-182)."""
    return [replace(d, pci_bus_id=topology[d.gpu][0], pcie_root=topology[d.gpu][1]) for d in devs]
