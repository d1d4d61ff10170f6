"""The GPU catalog: memory, architecture, compute capability and MIG profiles per supported model.

The data lives in ``data/gpus.yaml``; this module gives it types. Validation, the render core and the
expectations read the catalog, so a model's facts are written exactly once.

Real hardware outranks mocks: a value ``data/captures.yaml`` read from a real board (a GFD label set,
``nvidia-smi``, ``nvidia-smi mig -lgip``) replaces the one in ``gpus.yaml``. Every value says where it
came from (:attr:`GpuModel.sources`, :attr:`MigProfile.memory_source`): a capture, go-nvml's mock GPUs,
or the profile's nominal size.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

#: PyYAML's C parser where it is built (the wheels ship it): the same safe loading, ~10x faster on
#: the packaged data files that every command reads.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Where a value without a capture comes from.
MOCK = "mock: go-nvml pkg/nvml/mock/gpus (gpus.yaml)"
NOMINAL = "nominal: the profile's GiB x 1024 (no capture, no mock)"


@dataclass(frozen=True)
class MigProfile:
    name: str
    compute: int
    memory: int  # memory slices
    max: int
    memory_gib: int
    starts: tuple[int, ...]
    nvml_mib: int = 0  # what NVML reports for one instance, when known
    #: Where :attr:`memory_mib` comes from: ``capture: <id>`` (data/captures.yaml), :data:`MOCK` or :data:`NOMINAL`.
    memory_source: str = NOMINAL

    @property
    def memory_mib(self) -> int:
        """One instance's memory as NVML reports it (the nominal GiB when no source gives it)."""
        return self.nvml_mib or self.memory_gib * 1024

    @property
    def captured(self) -> bool:
        """Whether a real board reported :attr:`memory_mib` (not a mock or a nominal size)."""
        return self.memory_source.startswith("capture:")


@dataclass(frozen=True)
class MigSpec:
    compute_slices: int
    memory_slices: int
    profiles: dict[str, MigProfile]
    balanced: dict[str, int]


@dataclass(frozen=True)
class GpuModel:
    key: str
    product_name: str
    memory_mib: int
    family: str
    architecture: str
    compute_capability: str
    mig: MigSpec | None
    #: Where ``product_name`` and ``memory_mib`` come from, when a capture gives them (``capture: <id>``).
    sources: tuple[tuple[str, str], ...] = ()

    @property
    def mig_capable(self) -> bool:
        return self.mig is not None

    @property
    def product_label(self) -> str:
        """The value GFD puts in ``nvidia.com/gpu.product`` (spaces become dashes)."""
        return self.product_name.replace(" ", "-")

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * 1024 * 1024

    @property
    def compute_major(self) -> int:
        return int(self.compute_capability.split(".")[0])

    @property
    def compute_minor(self) -> int:
        return int(self.compute_capability.split(".")[1])


def _profile(name: str, p: dict, captured: dict | None) -> MigProfile:
    if captured is not None:
        mib, source = int(captured["memoryMiB"]), f"capture: {captured['capture']}"
    elif "memoryMiB" in p:
        mib, source = int(p["memoryMiB"]), MOCK
    else:
        mib, source = 0, NOMINAL
    return MigProfile(name=name, compute=p["compute"], memory=p["memory"], max=p["max"], memory_gib=p["memoryGiB"],
                      starts=tuple(p["starts"]), nvml_mib=mib, memory_source=source)


def _parse(key: str, raw: dict, captured: dict) -> GpuModel:
    mig = None
    if raw.get("mig"):
        m = raw["mig"]
        taken = captured.get("mig") or {}
        profiles = {name: _profile(name, p, taken.get(name)) for name, p in m["profiles"].items()}
        mig = MigSpec(m["computeSlices"], m["memorySlices"], profiles, dict(m.get("balanced", {})))
    whole = {k: captured[k] for k in ("productName", "memoryMiB") if k in captured}
    return GpuModel(
        key=key,
        product_name=whole["productName"]["value"] if "productName" in whole else raw["productName"],
        memory_mib=int(whole["memoryMiB"]["value"]) if "memoryMiB" in whole else raw["memoryMiB"],
        family=raw["family"],
        architecture=raw["architecture"],
        compute_capability=str(raw["computeCapability"]),
        mig=mig,
        sources=tuple((k, f"capture: {v['capture']}") for k, v in sorted(whole.items())),
    )


def _data(name: str) -> dict:
    return dict(yaml.load(resources.files("gpucluster").joinpath(f"data/{name}").read_text(), Loader=_LOADER))


@cache
def catalog() -> dict[str, GpuModel]:
    """All known GPU models, keyed by the name a spec uses (``H100-SXM5-80GB``), captured values first."""
    captured = _data("captures.yaml")["models"]
    return {key: _parse(key, raw, captured.get(key) or {}) for key, raw in _data("gpus.yaml").items()}


def get(model: str) -> GpuModel:
    return catalog()[model]


# -- server platforms: where each GPU sits on PCIe (data/platforms.yaml) -------------------------------


@dataclass(frozen=True)
class PlatformGpu:
    """One GPU slot of a platform, as the NVIDIA DRA driver would see it (values cited in platforms.yaml).

    ``pci_bus_id``, ``pcie_root`` and ``rail_nic`` are None where no citation fixes them for every system
    of the platform (GB200 trays report other bus IDs bare-metal than as cloud instances): verification
    then compares none, and the simulator publishes a generic bus ID and no root."""

    numa_node: int
    pci_bus_id: str | None = None  # resource.kubernetes.io/pciBusID
    pcie_root: str | None = None  # resource.kubernetes.io/pcieRoot
    rail_nic: str | None = None  # the ConnectX device under the same host bridge (mlx5_N)


@dataclass(frozen=True)
class NvlinkDomain:
    """A multi-node NVLink system's domain (GB200 NVL72: 18 trays of 4 GPUs behind one NVLink switch fabric).

    Its hosts share one NVLink fabric: NVML reports one cluster UUID and clique ID on all their GPUs, GPU
    Feature Discovery labels ``nvidia.com/gpu.clique``, and the DRA driver's ComputeDomains (IMEX) span it.
    """

    hosts: int  # trays (Kubernetes nodes) in one domain
    gpus: int  # GPUs in one domain


@dataclass(frozen=True)
class Platform:
    """A server platform's cited PCIe/NUMA layout: GPU ``i`` (NVML index and DRA minor) is ``gpus[i]``."""

    key: str
    description: str
    models: tuple[str, ...]
    gpus: tuple[PlatformGpu, ...]
    nic_roots: dict[str, str]
    #: Where each kind of value comes from (pciBusID, numaNode, railNic, pcieRoot, nvlink).
    sources: tuple[tuple[str, str], ...] = ()
    #: The multi-node NVLink domain the platform's hosts form, None for a single-node system (DGX H100:
    #: NVLink inside the box only; its fabric reports a zero cluster UUID).
    nvlink_domain: NvlinkDomain | None = None

    @property
    def multi_node_nvlink(self) -> bool:
        """Whether hosts of this platform share NVLink with other hosts (ComputeDomains and IMEX apply)."""
        return self.nvlink_domain is not None


@cache
def platforms() -> dict[str, Platform]:
    """Every platform with a cited layout, by key (``dgx-h100``)."""
    out = {}
    for key, raw in _data("platforms.yaml")["platforms"].items():
        gpus = tuple(PlatformGpu(numa_node=int(g["numaNode"]), pci_bus_id=g.get("pciBusID"),
                                 pcie_root=g.get("pcieRoot"), rail_nic=(g.get("railNic") or {}).get("name"))
                     for g in raw["gpus"])
        nvlink = raw.get("nvlinkDomain")
        out[key] = Platform(key=key, description=raw["description"], models=tuple(raw["models"]), gpus=gpus,
                            nic_roots=dict(raw.get("nicRoots") or {}),
                            sources=tuple(sorted((k, str(v)) for k, v in (raw.get("sources") or {}).items())),
                            nvlink_domain=NvlinkDomain(hosts=int(nvlink["hosts"]), gpus=int(nvlink["gpus"]))
                            if nvlink else None)
    return out


def platform(key: str | None) -> Platform | None:
    """The platform ``key`` (a pool's ``gpu.platform``), or None for none or an unknown key (validation refuses
    those). A GPU model alone implies no layout: boards of one GPU differ between vendors."""
    return platforms().get(key) if key else None
