"""NVIDIA device arithmetic: what a GPU model and a sharing setting make a node advertise and publish.

Pure functions of plain values (a catalog model, a GPU count, a sharing mode, a MIG layout), named
after the agent whose behaviour they describe: the device plugin's advertised resources, GPU Feature
Discovery's labels, the DRA driver's devices. Verification's expectations (:mod:`gpucluster.expected`)
and spec validation's capacity sums are built on them. The GPU simulator does NOT use them: it derives
what it publishes from upstream facts and code, so the two sides of a check never share arithmetic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpucluster import labels as L
from gpucluster.catalog import GpuModel

#: Sharing modes in which several workloads share one GPU (the device plugin's replicas).
SHARED_MODES = ("time-slicing", "mps")
#: The DRA driver's name: ResourceSlices, DeviceClass selectors and attribute domains use it.
DRA_DRIVER = "gpu.nvidia.com"
#: DeviceClasses the DRA driver's chart creates itself when it serves GPUs (dra-driver 0.4.1,
#: tests/upstream/facts/dra-driver.yaml chart-deviceclasses-gpus); ``gpu.nvidia.com`` also names
#: ``nvidia.com/gpu`` as its extended resource (deviceclass-gpu-extended-resource-name).
DRA_CHART_DEVICE_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com")


def mig_resource(profile: str) -> str:
    """The device plugin's resource for a MIG profile under the mixed strategy.

    A ``+`` in a profile (``1g.10gb+me``) is not allowed in a resource name; the plugin writes it as
    ``.`` (``nvidia.com/mig-1g.10gb.me``; tests/upstream/facts/device-plugin.yaml resource-mig-mixed).
    """
    return "nvidia.com/mig-" + profile.replace("+", ".")


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


#: A static-MIG device name of the DRA driver: gpu-<minor>-mig-<profile>-<GI profile id>-<placement start>
#: (dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/mig.go:113, fact mig-device-name-regex).
MIG_DEVICE_NAME = re.compile(r"^gpu-(\d+)-mig-(.+)-(\d+)-(\d+)$")


def mig_name_part(profile: str) -> str:
    """The profile as it appears in a MIG device name: dots dropped, then RFC 1123 (1g.10gb+me -> 1g10gb-me)."""
    return re.sub(r"[^a-z0-9.-]", "-", profile.replace(".", "").lower())


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
    if mode == "mig":
        layout = mig or {}
        if mig_strategy == "single":
            return {"nvidia.com/gpu": count * sum(layout.values())}
        return {mig_resource(p): count * c for p, c in sorted(layout.items()) if c}
    if mode in SHARED_MODES and replicas > 1:
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
    shared = mode in SHARED_MODES and replicas > 1
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
    if shared and not rename_by_default:
        product += "-SHARED"
    labels[L.GPU_PRODUCT] = product
    labels[L.GPU_MEMORY] = str(memory)
    return labels


def dra_devices(model: GpuModel, count: int, mig: dict[str, int] | None = None) -> list[Device]:
    """The devices the DRA driver publishes for one node: whole GPUs, or (static MIG) only the MIG
    devices on them (fact mig-static-parent-not-published)."""
    out: list[Device] = []
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
    return out
