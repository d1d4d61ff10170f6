"""The DRA GPU kubelet plugin (dra-driver-nvidia-gpu 0.4.1): the devices of one node's ResourceSlice.

Computed from what NVML reports for the node's GPUs (simulator/data/nvml.yaml) and the MIG devices
the MIG manager created, with the driver's naming and attributes as tests/upstream/facts/dra-driver.yaml
records them (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1):

- a whole GPU is ``gpu-<minor>`` (deviceinfo.go:107); with MIG enabled (static MIG) only its MIG
  devices are published (nvlib.go:302), named ``gpu-<minor>-mig-<profile without dots, RFC 1123>-
  <GI profile id>-<placement start>`` (mig.go:113,247);
- attributes: type, uuid, productName, brand, architecture, cudaComputeCapability, driverVersion,
  cudaDriverVersion, ``resource.kubernetes.io/pciBusID`` and ``pcieRoot`` (deviceinfo.go:152); MIG
  devices add parentUUID and profile and carry the parent's identity (mig.go:139);
- capacity: ``memory`` in bytes from NVML (the GPU's total; a MIG profile's memorySizeMB x 2^20), and
  for MIG devices multiprocessors, copyEngines, decoders, encoders, jpegEngines, ofaEngines and one
  ``memorySlice<i>`` per memory slice of the placement (mig.go:120, deviceinfo.go:225);
- versions go through semver: ``580.95.05`` -> ``580.95.5``, CUDA 13000 -> ``13.0.0``.

Unhealthy GPUs stay published: the driver taints devices only with its NVMLDeviceHealthCheck gate,
which is off by default (device_health.go:36).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from gpucluster.simulator import placement
from gpucluster.simulator.nvml import NvmlModel
from gpucluster.simulator.silicon import gpu_uuid, pci_bus_id, pcie_root

#: The driver's name (cmd/gpu-kubelet-plugin/main.go:42): the attribute domain and the slice's driver.
DRIVER = "gpu.nvidia.com"
#: go-nvlib's brand string for NVML's BRAND_NVIDIA (device.go:143).
BRAND = "Nvidia"
#: go-nvlib's architecture strings by NVML architecture (device.go:90).
ARCHITECTURES = {"ampere": "Ampere", "ada-lovelace": "Ada Lovelace", "hopper": "Hopper", "blackwell": "Blackwell"}


def semver(version: str) -> str:
    """Masterminds semver's coercion: numeric parts without leading zeros, three of them."""
    parts = [str(int(p)) for p in re.findall(r"\d+", version)][:3]
    return ".".join(parts + ["0"] * (3 - len(parts)))


def cuda_semver(encoded: int) -> str:
    """NVML's CUDA driver version (13000) as the driver formats it (nvlib.go:610): 13.0.0."""
    return f"{encoded // 1000}.{(encoded % 1000) // 10}.0"


def rfc1123(text: str) -> str:
    """toRFC1123Compliant (mig.go:247): lower case, characters outside [a-z0-9-.] become '-'."""
    return re.sub(r"[^a-z0-9.-]", "-", text.lower())


def _string(value: str) -> dict[str, str]:
    return {"string": value}


def published(
    cluster: str,
    node: str,
    model: NvmlModel,
    layout: Sequence[Sequence[str]],
    *,
    driver_version: str,
    cuda_driver_version: int,
    missing: set[str],
) -> list[dict[str, Any]]:
    """The devices (resource.k8s.io/v1 shape) the plugin publishes for GPUs with MIG ``layout`` per GPU."""
    out: list[dict[str, Any]] = []
    for minor, mig_devices in enumerate(layout):
        parent = gpu_uuid(cluster, node, minor)
        common = {
            "productName": _string(model.product_name),
            "brand": _string(BRAND),
            "architecture": _string(ARCHITECTURES.get(model.architecture, model.architecture)),
            "cudaComputeCapability": {"version": semver(model.compute_capability)},
            "driverVersion": {"version": semver(driver_version)},
            "cudaDriverVersion": {"version": cuda_semver(cuda_driver_version)},
            "resource.kubernetes.io/pciBusID": _string(pci_bus_id(minor)),
            "resource.kubernetes.io/pcieRoot": _string(pcie_root(minor)),
        }
        if not mig_devices:
            out.append({
                "name": f"gpu-{minor}",
                "attributes": {"type": _string("gpu"), "uuid": _string(parent), **common},
                "capacity": {"memory": {"value": str(model.memory_mib * 2**20)}},
            })
            continue
        assert model.mig is not None
        for slot, inst in enumerate(placement.place(model, mig_devices)):
            prof = model.mig.profile(inst.profile)
            info_id = model.mig.info_ids.get(inst.profile, prof.gi_profile_id or 0)
            capacity = {
                "multiprocessors": prof.multiprocessors, "copyEngines": prof.copy_engines,
                "decoders": prof.decoders, "encoders": prof.encoders, "jpegEngines": prof.jpegs,
                "ofaEngines": prof.ofas, "memory": prof.memory_mib * 2**20,
                **{f"memorySlice{i}": 1 for i in range(inst.start, inst.start + inst.size)},
            }
            out.append({
                "name": f"gpu-{minor}-mig-{rfc1123(inst.profile.replace('.', ''))}-{info_id}-{inst.start}",
                "attributes": {
                    "type": _string("mig"), "uuid": _string(gpu_uuid(cluster, node, minor, str(slot))),
                    "parentUUID": _string(parent), "profile": _string(inst.profile), **common,
                },
                "capacity": {k: {"value": str(v)} for k, v in capacity.items()},
            })
    return [d for d in out if d["name"] not in missing]
