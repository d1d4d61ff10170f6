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

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import yaml

from gpucluster import expected
from gpucluster.catalog import GpuModel
from gpucluster.spec import mig as miglib

#: Every node the simulator creates carries this (label and annotation, value "true").
SIMULATED = "gpucluster.dev/simulated"
#: Faults, set as node annotations (``kubectl annotate node NAME KEY=VALUE`` works too).
FAULT_UNHEALTHY = "gpucluster.dev/simulate-unhealthy-gpus"  # GPU indices, "0,3"
FAULT_MISSING = "gpucluster.dev/simulate-missing-devices"  # DRA device names, "gpu-2,gpu-5"
FAULT_PRODUCT = "gpucluster.dev/simulate-product"  # the value GFD's product label shows
#: Human-readable summary of what the agents derived for the node (for debugging).
DERIVED = "gpucluster.dev/simulator-derived"

DEFAULT_KEY = "default"
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


@dataclass(frozen=True)
class Sharing:
    """One device-plugin config: how GPUs are shared and the MIG strategy."""

    mode: str = "exclusive"  # exclusive | time-slicing | mps
    replicas: int = 1
    rename_by_default: bool = False
    mig_strategy: str = "none"


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


# -- device plugin config ---------------------------------------------------------------------


@lru_cache(maxsize=256)
def _load(text: str) -> Any:
    """Parsed YAML, cached: a sync reads the same few config texts for every node (do not mutate)."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@lru_cache(maxsize=256)
def parse_sharing(text: str) -> Sharing:
    """One device-plugin config file (``version: v1``); raises ValueError like the plugin would."""
    doc = _load(text) or {}
    if not isinstance(doc, dict):
        raise ValueError("config is not a mapping")
    if doc.get("version") != "v1":
        raise ValueError(f"unsupported version {doc.get('version')!r} (want v1)")
    strategy = str((doc.get("flags") or {}).get("migStrategy") or "none")
    if strategy not in ("none", "single", "mixed"):
        raise ValueError(f"unknown flags.migStrategy {strategy!r}")
    sharing = doc.get("sharing") or {}
    sections = [s for s in ("timeSlicing", "mps") if sharing.get(s)]
    if len(sections) > 1:
        raise ValueError("sharing sets both timeSlicing and mps")
    if not sections:
        return Sharing(mig_strategy=strategy)
    section = sharing[sections[0]]
    replicas = 1
    for res in section.get("resources") or []:
        if res.get("name") == "nvidia.com/gpu":
            replicas = res.get("replicas")
            if not isinstance(replicas, int) or replicas < 1:
                raise ValueError(f"replicas must be an integer >= 1, got {replicas!r}")
    mode = "time-slicing" if sections[0] == "timeSlicing" else "mps"
    return Sharing(mode, replicas, bool(section.get("renameByDefault", False)), strategy)


def select_sharing(data: dict[str, str] | None, key: str | None, notes: list[str]) -> Sharing:
    """The config the device plugin on a node uses: its label's key, else ``default``, else none.

    A missing ConfigMap or key falls back (and says so in ``notes``); a config that does not parse
    is what makes the real plugin crash-loop, so the caller advertises nothing for it.
    """
    if data is None:
        notes.append("device-plugin ConfigMap not found: no sharing")
        return Sharing()
    chosen = key or DEFAULT_KEY
    if chosen not in data:
        notes.append(f"device-plugin config {chosen!r} not in ConfigMap: using {DEFAULT_KEY!r}")
        chosen = DEFAULT_KEY
        if chosen not in data:
            notes.append(f"no {DEFAULT_KEY!r} key either: no sharing")
            return Sharing()
    return parse_sharing(data[chosen])


# -- mig-parted config ------------------------------------------------------------------------


def parse_mig_configs(data: dict[str, str] | None) -> dict[str, list[dict[str, Any]]] | None:
    """``mig-configs`` of the mig-parted ConfigMap's ``config.yaml``; None when there is none."""
    if data is None or "config.yaml" not in data:
        return None
    doc = _load(data["config.yaml"]) or {}
    if not isinstance(doc, dict) or doc.get("version") != "v1":
        raise ValueError("config.yaml must be a mapping with version: v1")
    configs = doc.get("mig-configs") or {}
    if not isinstance(configs, dict):
        raise ValueError("mig-configs must be a mapping of name -> list of device entries")
    return configs


def mig_layout(
    configs: dict[str, list[dict[str, Any]]] | None, name: str | None, model: GpuModel, count: int
) -> tuple[dict[str, int] | None, str]:
    """(per-GPU layout or None when MIG is off, state) the MIG manager reaches for ``name``.

    State is what ``nvidia.com/mig.config.state`` shows: ``success`` or ``failed``. Only layouts that
    are the same on every GPU are supported (ours always are).
    """
    if not name:
        return None, ""
    if configs is None or name not in configs:
        return None, "failed"
    per_gpu: list[dict[str, int] | None] = [None] * count
    for entry in configs[name] or []:
        devices = entry.get("devices", "all")
        indices = range(count) if devices == "all" else [int(i) for i in devices if int(i) < count]
        layout = {str(p): int(n) for p, n in (entry.get("mig-devices") or {}).items() if n}
        for i in indices:
            per_gpu[i] = layout if entry.get("mig-enabled") and layout else None
    if any(p is not None and p != per_gpu[0] for p in per_gpu):
        return None, "failed"
    layout = per_gpu[0] if per_gpu else None
    if layout is None:
        return None, "success"
    if model.mig is None:
        return None, "failed"
    try:
        miglib.check_fits(model, layout)
    except (miglib.LayoutError, KeyError):
        return None, "failed"
    return layout, "success"


# -- RDMA shared device plugin ----------------------------------------------------------------


def rdma_resources(nic_policy: dict[str, Any] | None, silicon: Silicon) -> dict[str, int]:
    """``rdma/<name>: rdmaHcaMax`` for every configList entry whose selectors match the host's NICs."""
    plugin = ((nic_policy or {}).get("spec") or {}).get("rdmaSharedDevicePlugin") or {}
    if not plugin.get("config") or not silicon.nics:
        return {}
    config = json.loads(plugin["config"])
    out: dict[str, int] = {}
    for entry in config.get("configList") or []:
        sel = entry.get("selectors") or {}
        names, links = sel.get("ifNames") or [], sel.get("linkTypes") or []
        if names and not set(names) & set(silicon.nics):
            continue
        if links and silicon.link_type not in links:
            continue
        out[f"rdma/{entry['resourceName']}"] = int(entry.get("rdmaHcaMax", 1))
    return out


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
    for name, n in rdma_resources(nic_policy, silicon).items():
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
