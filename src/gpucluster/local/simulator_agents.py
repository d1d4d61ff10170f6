"""What NVIDIA's node agents would publish for one node, computed from deployed objects (pure).

The GPU simulator stands where GPU Feature Discovery, the device plugin, the MIG manager, the DRA
kubelet plugin and the RDMA shared device plugin would run. Like them, it reads its configuration
from objects in the cluster — the device-plugin sharing ConfigMap (key chosen by the node label
``nvidia.com/device-plugin.config``), the mig-parted ConfigMap (config chosen by
``nvidia.com/mig.config``), the NicClusterPolicy's RDMA config, and the node labels that say which
agent serves the node — so a wrong rendered object shows up as a wrong node. Only the silicon (GPU
model and count, NICs) comes from the spec. The device arithmetic is :mod:`gpucluster.expected`'s.

Nothing here talks to the API server; :mod:`gpucluster.local.simulator` does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpucluster import expected
from gpucluster.catalog import GpuModel
from gpucluster.local.simulator_configs import (
    Sharing,
    mig_layout,
    parse_mig_configs,
    rdma_resources,
    select_sharing,
)

#: Every node the simulator creates carries this (label and annotation, value "true").
SIMULATED = "gpucluster.dev/simulated"
#: Faults, set as node annotations (``kubectl annotate node NAME KEY=VALUE`` works too).
FAULT_UNHEALTHY = "gpucluster.dev/simulate-unhealthy-gpus"  # GPU indices, "0,3"
FAULT_MISSING = "gpucluster.dev/simulate-missing-devices"  # DRA device names, "gpu-2,gpu-5"
FAULT_PRODUCT = "gpucluster.dev/simulate-product"  # the value GFD's product label shows
#: Human-readable summary of what the agents derived for the node (for debugging).
DERIVED = "gpucluster.dev/simulator-derived"

BRAND = "Nvidia"
BASE_GPU_NODE = {"cpu": "128", "memory": "1Ti", "pods": "110", "ephemeral-storage": "3Ti"}
BASE_CPU_NODE = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "1Ti"}


@dataclass(frozen=True)
class Silicon:
    """What a machine physically has: the only facts taken from the spec."""

    node: str
    model: GpuModel | None = None
    count: int = 0
    nics: tuple[str, ...] = ()
    link_type: str = "infiniband"


@dataclass
class Desired:
    """What the agents publish for one node."""

    labels: dict[str, str] = field(default_factory=dict)  # GFD-owned labels only
    capacity: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, str] = field(default_factory=dict)
    devices: list[dict[str, Any]] | None = None  # None: the DRA driver does not serve this node
    notes: list[str] = field(default_factory=list)


def is_gfd_label(key: str) -> bool:
    """Labels GFD / the MIG manager own (the ones kubelet or users set are not ours)."""
    if key in (expected.MIG_CONFIG_LABEL, expected.DEVICE_PLUGIN_CONFIG_LABEL):
        return False
    if key.startswith("nvidia.com/gpu.deploy."):
        return False
    return key.startswith(("nvidia.com/gpu.", "nvidia.com/mig.", "nvidia.com/mig-"))


# -- the node ---------------------------------------------------------------------------------


def _indices(value: str | None) -> set[int]:
    return {int(v) for v in re.findall(r"\d+", value or "")}


def _names(value: str | None) -> set[str]:
    return {v.strip() for v in (value or "").split(",") if v.strip()}


def semver(version: str) -> str:
    """A driver or compute-capability version as semver (no leading zeros, three parts)."""
    parts = [str(int(p)) for p in re.findall(r"\d+", version)][:3]
    return ".".join(parts + ["0"] * (3 - len(parts)))


def slice_device(d: expected.Device, driver_version: str) -> dict[str, Any]:
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


def node_agents(
    silicon: Silicon,
    node_labels: dict[str, str],
    annotations: dict[str, str],
    *,
    device_plugin_data: dict[str, str] | None,
    mig_data: dict[str, str] | None,
    nic_policy: dict[str, Any] | None = None,
    cluster: str = "local",
    driver_version: str = "580.95.05",
) -> Desired:
    """Everything the NVIDIA agents would publish for one node, from what is deployed."""
    base = BASE_GPU_NODE if silicon.model else BASE_CPU_NODE
    out = Desired(capacity=dict(base), allocatable=dict(base))
    for name, n in rdma_resources(nic_policy, silicon.nics, silicon.link_type).items():
        out.capacity[name] = out.allocatable[name] = str(n)
    model, count = silicon.model, silicon.count
    if model is None or count == 0:
        return out
    notes = out.notes
    try:
        sharing = select_sharing(
            device_plugin_data, node_labels.get(expected.DEVICE_PLUGIN_CONFIG_LABEL), notes
        )
        plugin_ok = True
    except (ValueError, yaml.YAMLError) as exc:
        notes.append(f"device-plugin config invalid ({exc}): plugin would crash-loop")
        sharing, plugin_ok = Sharing(), False
    try:
        configs = parse_mig_configs(mig_data)
    except (ValueError, yaml.YAMLError) as exc:
        notes.append(f"mig-parted config invalid ({exc})")
        configs = {}
    mig_name = node_labels.get(expected.MIG_CONFIG_LABEL)
    layout, mig_state = mig_layout(configs, mig_name, model, count)
    if mig_state == "failed":
        notes.append(f"MIG config {mig_name!r} could not be applied: MIG left disabled")
    strategy = sharing.mig_strategy
    mode = "mig" if layout else sharing.mode
    args = dict(
        mode=mode,
        replicas=sharing.replicas,
        rename_by_default=sharing.rename_by_default,
        mig=layout,
        mig_strategy=strategy if strategy != "none" else "mixed",
    )
    labels = expected.gfd_labels(model, count, **args)
    if model.mig_capable:
        labels["nvidia.com/mig.strategy"] = strategy
    if mig_state:
        labels["nvidia.com/mig.config.state"] = mig_state
    product = annotations.get(FAULT_PRODUCT)
    if product:
        labels["nvidia.com/gpu.product"] = product
    out.labels = labels

    unhealthy = {i for i in _indices(annotations.get(FAULT_UNHEALTHY)) if i < count}
    plugin_on = node_labels.get(expected.DEPLOY_DEVICE_PLUGIN_LABEL) != "false"
    if plugin_on and plugin_ok:
        if mode == "mig" and strategy == "none":
            # With migStrategy none the plugin ignores MIG devices and lists whole GPUs.
            args.update(mode="exclusive", mig=None)
        capacity = expected.advertised_resources(model, count, **args)
        allocatable = expected.advertised_resources(model, count - len(unhealthy), **args)
        for name in capacity:
            out.capacity[name] = str(capacity[name])
            out.allocatable[name] = str(allocatable.get(name, 0))
    if node_labels.get(expected.DRA_LABEL) == "true":
        missing = _names(annotations.get(FAULT_MISSING))
        gone = {f"gpu-{i}" for i in unhealthy}
        devices = expected.dra_devices(cluster, silicon.node, model, count, layout)
        out.devices = [
            slice_device(d, driver_version)
            for d in devices
            if d.name not in missing and d.name.split("-mig-")[0] not in gone
        ]
    return out


def describe(desired: Desired, labels: dict[str, str]) -> str:
    """One line for the node's DERIVED annotation: which configs were used and any fallbacks."""
    parts = [
        f"sharing={labels.get('nvidia.com/gpu.sharing-strategy', 'n/a')}",
        f"replicas={labels.get('nvidia.com/gpu.replicas', 'n/a')}",
    ]
    if desired.devices is not None:
        parts.append(f"dra-devices={len(desired.devices)}")
    return "; ".join(parts + desired.notes)
