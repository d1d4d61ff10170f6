"""The GPU catalog: memory, architecture, compute capability and MIG profiles per supported model.

The data lives in ``data/gpus.yaml``; this module gives it types. Validation, the render core and the
GPU simulator all read the catalog, so a model's facts are written exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml


@dataclass(frozen=True)
class MigProfile:
    name: str
    compute: int
    memory: int  # memory slices
    max: int
    memory_gib: int
    starts: tuple[int, ...]
    nvml_mib: int = 0  # what NVML reports for one instance, when known

    @property
    def memory_mib(self) -> int:
        """One instance's memory as NVML reports it (the nominal GiB when no source gives it)."""
        return self.nvml_mib or self.memory_gib * 1024


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


def _parse(key: str, raw: dict) -> GpuModel:
    mig = None
    if raw.get("mig"):
        m = raw["mig"]
        profiles = {
            name: MigProfile(
                name=name,
                compute=p["compute"],
                memory=p["memory"],
                max=p["max"],
                memory_gib=p["memoryGiB"],
                starts=tuple(p["starts"]),
                nvml_mib=int(p.get("memoryMiB", 0)),
            )
            for name, p in m["profiles"].items()
        }
        mig = MigSpec(m["computeSlices"], m["memorySlices"], profiles, dict(m.get("balanced", {})))
    return GpuModel(
        key=key,
        product_name=raw["productName"],
        memory_mib=raw["memoryMiB"],
        family=raw["family"],
        architecture=raw["architecture"],
        compute_capability=str(raw["computeCapability"]),
        mig=mig,
    )


@cache
def catalog() -> dict[str, GpuModel]:
    """All known GPU models, keyed by the name a spec uses (``H100-SXM5-80GB``)."""
    text = resources.files("gpucluster").joinpath("data/gpus.yaml").read_text()
    return {key: _parse(key, raw) for key, raw in yaml.safe_load(text).items()}


def get(model: str) -> GpuModel:
    return catalog()[model]
