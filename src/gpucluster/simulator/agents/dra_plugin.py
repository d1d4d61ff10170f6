"""The DRA GPU kubelet plugin: the devices one node's ResourceSlice lists, with the driver's attributes."""

from __future__ import annotations

import re
from typing import Any

from gpucluster import devices
from gpucluster.catalog import GpuModel

BRAND = "Nvidia"


def semver(version: str) -> str:
    """A driver or compute-capability version as semver (no leading zeros, three parts)."""
    parts = [str(int(p)) for p in re.findall(r"\d+", version)][:3]
    return ".".join(parts + ["0"] * (3 - len(parts)))


def slice_device(d: devices.Device, driver_version: str) -> dict[str, Any]:
    """One ResourceSlice device (resource.k8s.io/v1 shape) with the DRA driver's attributes."""
    attrs: dict[str, Any] = {
        "type": {"string": d.type},
        "uuid": {"string": d.uuid},
        "productName": {"string": d.product_name},
        "brand": {"string": BRAND},
        "architecture": {"string": d.architecture},
        "cudaComputeCapability": {"version": semver(d.compute_capability)},
        "driverVersion": {"version": semver(driver_version)},
        "resource.kubernetes.io/pciBusID": {"string": d.pci_bus_id},
    }
    if d.type == "mig":
        attrs["profile"] = {"string": d.profile}
        attrs["parentUUID"] = {"string": d.parent_uuid}
    return {"name": d.name, "attributes": attrs, "capacity": {"memory": {"value": str(d.memory_bytes)}}}


def published(
    cluster: str,
    node: str,
    model: GpuModel,
    count: int,
    layout: dict[str, int] | None,
    driver_version: str,
    *,
    missing: set[str],
    unhealthy: set[int],
) -> list[dict[str, Any]]:
    """What the plugin publishes: every healthy device, MIG devices when a layout is applied."""
    gone = {f"gpu-{i}" for i in unhealthy}
    return [
        slice_device(d, driver_version)
        for d in devices.dra_devices(cluster, node, model, count, layout)
        if d.name not in missing and d.name.split("-mig-")[0] not in gone
    ]
