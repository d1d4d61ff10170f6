"""What NVML reports for each catalog GPU model (``data/nvml.yaml``), as nvidia-oracle requests.

The facts come from upstream (NVIDIA's real-hardware nvidia-smi captures and go-nvml's mock GPUs),
each with its source in the file; a field no upstream source gives is marked ``unsourced`` there and
holds the catalog's value. Real hardware outranks mocks: the real-board captures of
``gpucluster/data/captures.yaml`` (GFD label sets, ``nvidia-smi``, ``nvidia-smi mig -lgip``) replace
the product name, the memory and each captured MIG profile's memory, multiprocessors, engines, id and
instance count. This module reads that file itself (the catalog has its own reader): both sides take
the same upstream data, neither takes the other's arithmetic. :func:`gpu_request` turns a model into an
:class:`~gpucluster.simulator.oracle.GpuRequest`; nothing here computes labels or resource names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

import yaml

from gpucluster.errors import SimulatorError
from gpucluster.simulator.oracle import GpuRequest, MigProfile

#: PyYAML's C parser where it is built (the wheels ship it): the same safe loading, ~10x faster on
#: the packaged data files that every command reads.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class MigTable:
    """A model's GPU-instance profiles and the GPU memory total they were written for.

    ``placements`` maps a profile name to (memory-slice starts, size); empty when unsourced and not
    borrowed from a model with the same geometry. ``info_ids`` maps a profile name to the id NVML's
    GetGpuInstanceProfileInfo reports (nvidia-smi's ID column); empty when unsourced.
    """

    device_memory_mib: int
    profiles: tuple[MigProfile, ...]
    placements: dict[str, tuple[tuple[int, ...], int]]
    info_ids: dict[str, int]
    borrow_placements: str = ""

    def profile(self, name: str) -> MigProfile:
        for p in self.profiles:
            if p.name == name:
                return p
        raise KeyError(name)


@dataclass(frozen=True)
class NvmlModel:
    """One GPU model as NVML reports it. ``unsourced`` names the fields no upstream source gives."""

    name: str
    product_name: str
    memory_mib: int
    compute_capability: str
    architecture: str
    mig_capable: bool
    pci_device_id: str
    mig: MigTable | None
    unsourced: tuple[str, ...]
    #: Fields a real-board capture gave (``productName``, ``memoryMiB``, ``mig.<profile>``), by capture id.
    captured: tuple[tuple[str, str], ...] = ()


def _field(model: str, data: dict[str, Any], key: str, unsourced: list[str]) -> Any:
    entry = data[key]
    if "unsourced" in entry:
        unsourced.append(key)
    elif "source" not in entry:
        raise ValueError(f"nvml.yaml {model}.{key}: neither source nor unsourced")
    return entry["value"]


def _mig(model: str, data: dict[str, Any] | None, unsourced: list[str]) -> MigTable | None:
    if data is None:
        return None
    if "unsourced" in data:
        unsourced.append("mig")
        return None
    placements: dict[str, tuple[tuple[int, ...], int]] = {}
    if "unsourced" in data["placementsSource"]:
        unsourced.append("mig.placements")
    ids = data.get("infoIds") or {"unsourced": "not recorded"}
    if "unsourced" in ids:
        unsourced.append("mig.infoIds")
    profiles = []
    for p in data["profiles"]:
        profiles.append(MigProfile(
            name=p["name"], gi_profile_id=p["giProfileId"], memory_mib=p["memoryMiB"], instances=p["instances"],
            multiprocessors=p["multiprocessors"], copy_engines=p["copyEngines"], decoders=p["decoders"],
            encoders=p["encoders"], jpegs=p["jpegs"], ofas=p["ofas"],
        ))
        if "starts" in p:
            placements[p["name"]] = (tuple(p["starts"]), p["size"])
    total = _field(model, data, "deviceMemoryMiB", unsourced)
    return MigTable(device_memory_mib=total, profiles=tuple(profiles), placements=placements,
                    info_ids=dict(ids.get("ids") or {}), borrow_placements=data["placementsSource"].get("borrow", ""))


#: Captured MIG profile fields (data/captures.yaml) -> the oracle's MigProfile fields.
_CAPTURED_PROFILE_FIELDS = {"memoryMiB": "memory_mib", "multiprocessors": "multiprocessors",
                            "copyEngines": "copy_engines", "decoders": "decoders", "encoders": "encoders",
                            "jpegs": "jpegs", "ofas": "ofas", "instances": "instances"}


def _with_captures(m: NvmlModel, captured: dict[str, Any]) -> NvmlModel:
    """``m`` with every value a real board reported (captures.yaml ``models.<name>``) in place of its own."""
    taken: list[tuple[str, str]] = []
    fields: dict[str, Any] = {}
    for key, attr in (("productName", "product_name"), ("memoryMiB", "memory_mib")):
        if key in captured:
            fields[attr] = captured[key]["value"]
            taken.append((key, captured[key]["capture"]))
    unsourced = tuple(u for u in m.unsourced if u not in fields and u not in {k for k, _ in taken})
    mig = m.mig
    if mig is not None:
        profiles, ids = [], dict(mig.info_ids)
        for p in mig.profiles:
            c = (captured.get("mig") or {}).get(p.name)
            if c is None:
                profiles.append(p)
                continue
            profiles.append(replace(p, **{attr: c[key] for key, attr in _CAPTURED_PROFILE_FIELDS.items() if key in c}))
            if "id" in c:
                ids[p.name] = c["id"]
            taken.append((f"mig.{p.name}", c["capture"]))
        # A table written for a nominal total (go-nvlib names profiles by their share of it) is used with
        # the board's real total once every profile's memory is the real board's.
        real = {p.name for p in mig.profiles} <= set((captured.get("mig") or {}))
        total = fields.get("memory_mib", m.memory_mib) if real else mig.device_memory_mib
        mig = replace(mig, profiles=tuple(profiles), info_ids=ids, device_memory_mib=total)
    return replace(m, **fields, mig=mig, unsourced=unsourced, captured=tuple(taken))


@cache
def models() -> dict[str, NvmlModel]:
    """Every model of ``data/nvml.yaml`` by catalog name, captured values first."""
    raw = _raw()
    captures = _captures()["models"]
    out: dict[str, NvmlModel] = {}
    for name, data in raw["models"].items():
        unsourced: list[str] = []
        out[name] = _with_captures(NvmlModel(
            name=name,
            product_name=_field(name, data, "productName", unsourced),
            memory_mib=_field(name, data, "memoryMiB", unsourced),
            compute_capability=_field(name, data, "computeCapability", unsourced),
            architecture=_field(name, data, "architecture", unsourced),
            mig_capable=_field(name, data, "migCapable", unsourced),
            pci_device_id=_field(name, data, "pciDeviceId", unsourced) if "pciDeviceId" in data else "",
            mig=_mig(name, data.get("mig"), unsourced),
            unsourced=tuple(unsourced),
        ), captures.get(name) or {})
    for m in out.values():  # placements borrowed from a model with the same memory-slice geometry
        if m.mig and m.mig.borrow_placements:
            lender = out[m.mig.borrow_placements].mig
            assert lender is not None, m.mig.borrow_placements
            m.mig.placements.update({n: pl for n, pl in lender.placements.items()
                                     if any(p.name == n for p in m.mig.profiles)})
    return out


@cache
def _raw() -> dict[str, Any]:
    text = resources.files("gpucluster.simulator").joinpath("data/nvml.yaml").read_text()
    return dict(yaml.load(text, Loader=_LOADER))


@cache
def _captures() -> dict[str, Any]:
    """The real-board captures (``gpucluster/data/captures.yaml``), read here, not through the catalog."""
    return dict(yaml.load(resources.files("gpucluster").joinpath("data/captures.yaml").read_text(), Loader=_LOADER))


def cuda_driver_version(driver_version: str) -> int:
    """NVML's CUDA driver version (13000 = 13.0) for a driver version such as ``580.95.05``."""
    branch = driver_version.split(".")[0]
    table = _raw()["cudaDriverVersions"]["byBranch"]
    if branch not in table:
        raise SimulatorError(f"driver {driver_version}: no CUDA version recorded for branch {branch} "
                             f"in simulator/data/nvml.yaml (known: {', '.join(sorted(table))})")
    return int(table[branch])


def model(name: str) -> NvmlModel:
    """The NVML facts of catalog model ``name``."""
    try:
        return models()[name]
    except KeyError:
        raise SimulatorError(f"no NVML facts for GPU model {name!r} in simulator/data/nvml.yaml") from None


def gpu_request(name: str, count: int = 1, mig_devices: tuple[str, ...] = (),
                mig_enabled: bool | None = None, *, fabric: tuple[str, int] | None = None) -> GpuRequest:
    """``count`` GPUs of model ``name`` with ``mig_devices`` configured on each.

    MIG is enabled when ``mig_devices`` is non-empty unless ``mig_enabled`` says otherwise. With MIG
    enabled the request carries the model's MIG table and, as NVML memory, the total that table was
    written for (see nvml.yaml: for H100 it is go-nvml's nominal 81920 MiB, not the real 81559). With
    MIG disabled the whole-GPU memory is used and the profiles are left out: a MIG-disabled GPU
    publishes nothing about them, and some models have no usable table.

    ``fabric`` is the NVLink fabric every GPU reports, (cluster UUID, clique ID), as a GB200 NVL72
    node's GPUs do; None: none (NVML answers NOT_SUPPORTED).
    """
    m = model(name)
    enabled = bool(mig_devices) if mig_enabled is None else mig_enabled
    cluster_uuid, clique_id = fabric or ("", 0)
    if not enabled:
        if mig_devices:
            raise SimulatorError(f"{name}: MIG devices {list(mig_devices)} need MIG enabled")
        return GpuRequest(
            product_name=m.product_name, memory_mib=m.memory_mib, compute_capability=m.compute_capability,
            architecture=m.architecture, count=count, mig_capable=m.mig_capable, pci_device_id=m.pci_device_id,
            fabric_cluster_uuid=cluster_uuid, fabric_clique_id=clique_id,
        )
    if not m.mig_capable:
        raise SimulatorError(f"{name} is not MIG-capable")
    if m.mig is None:
        raise SimulatorError(f"{name}: no upstream MIG profile table (simulator/data/nvml.yaml says why)")
    known = {p.name for p in m.mig.profiles}
    unknown = sorted(set(mig_devices) - known)
    if unknown:
        raise SimulatorError(f"{name}: MIG profiles {unknown} are not among NVML's {sorted(known)}")
    return GpuRequest(
        product_name=m.product_name, memory_mib=m.mig.device_memory_mib, compute_capability=m.compute_capability,
        architecture=m.architecture, count=count, mig_capable=True, mig_profiles=m.mig.profiles,
        mig_enabled=True, mig_devices=tuple(mig_devices), pci_device_id=m.pci_device_id,
        fabric_cluster_uuid=cluster_uuid, fabric_clique_id=clique_id,
    )
