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

Unhealthy GPUs stay published: the driver taints devices only with its NVMLDeviceHealthCheck gate
(alpha, off by default; gpucluster turns it on unless DynamicMIG is on, which the driver refuses next to
it, pkg/featuregates/featuregates.go:205). With the gate (:func:`health_events`, facts ``health-*``):

- the plugin registers for NVML XID events when it starts and, for each critical XID event, taints the
  device it names: key ``gpu.nvidia.com/xid``, value the XID in decimal, effect ``NoSchedule``, or
  ``None`` for the XIDs it deems application errors (13, 31, 43, 45, 68, 109; device_health.go:68,421);
- a device has one taint per key: a later XID replaces the value and effect of the earlier one
  (allocatable.go:328); taints live in the plugin's memory only, so nothing lifts one but a new pod;
- an event names a GPU and, on a MIG GPU, a GPU/compute instance; a GPU-wide event matches a published
  whole GPU only, so on a GPU split into static MIG devices it is ignored (device_health.go:258).

The simulator's XID events are the GPU-wide XIDs of the simulated DCGM exporter's knobs (the node
annotation ``gpucluster.dev/simulate-dcgm``, ``{"0": {"xid": 79}}``): one injection reaches both agents,
as one NVML event does. A GPU's XID that changes to another non-zero value while the plugin runs is an
event; values already set when the plugin starts are not (NVML does not replay them). XIDs of MIG
instances are not simulated for the DRA driver.

When it runs and what it reads (:func:`scheduled`, :class:`Started`):

- the plugin's pods run where the chart's DaemonSet places them: ``kubeletPlugin.nodeSelector`` (chart
  default ``{}``, values.yaml:261) and ``kubeletPlugin.affinity`` (chart default: NFD's NVIDIA PCI labels or
  ``nvidia.com/gpu.present``, values.yaml:288-321; templates/kubeletplugin.yaml:372-379), read from the
  release's values as the DaemonSet controller would apply them;
- it enumerates the node's GPUs and MIG devices once, when it starts (``NewDriver`` -> ``NewDeviceState``
  -> ``enumerateAllPossibleDevices``, driver.go:71, device_state.go:96) and publishes from that state
  (driver.go:475, and 206/262 for partitionable devices; the health path republishes the same state,
  driver.go:523-563): a static MIG layout applied later is not seen until the pod restarts. A restart is
  a pod that stops running on the node (the DaemonSet's placement stops matching it) or a new pod template
  (the release's values, gates or driver change; RollingUpdate with maxUnavailable 100%, values.yaml:255-258);
- a plugin that stops running leaves its ResourceSlices to the kubelet, which deletes them once the
  driver has had no registered plugin for 30 s (kubernetes v1.37.2 ``pkg/kubelet/cm/dra/manager.go:75``
  defaultWipingDelay, ``plugin/dra_plugin_manager.go:533``); the simulator deletes them on its next sync.

With the driver's ``DynamicMIG`` gate (:func:`slices`), a MIG-capable GPU is published as partitionable
devices (KEP 4815; partitions.go, nvlib.go:196-290, driver.go:188-290, facts ``dynamic-mig-*``):

- one shared counter set per GPU, ``gpu-<minor>-counter-set``: one counter per capacity dimension
  (the capacity name through camelToDNSName: ``copyEngines`` -> ``copy-engines``) holding the largest
  value any profile placement has, plus ``memory-slice-<i>`` = 1 for each memory slice;
- every (profile, placement) as a device ``gpu-<minor>-mig-<profile>-<info id>-<start>`` with the MIG
  attributes but no uuid (no instance exists until a claim is prepared), the profile's capacities
  without memory slices, consuming its capacities and ``memory-slice-<start..start+size-1>``;
- on GPUs that switch MIG mode without a reset (Hopper and newer) also the whole GPU ``gpu-<minor>``,
  whose capacity is the counter set's maxima and which consumes every counter; an Ampere GPU is
  partitionable only with MIG mode already enabled, and then without its whole device; with MIG off
  it is published as without the gate;
- from Kubernetes 1.35 on (split-slices-threshold) the pool has G+1 slices: the counter sets first,
  then one slice of devices per GPU; before, one slice per GPU with its counter set.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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


#: The chart's default placement of the kubelet plugin (dra-driver-nvidia-gpu 0.4.1 values.yaml:288-321):
#: any of NFD's NVIDIA PCI or CPU-vendor labels, or the GPU Operator's ``nvidia.com/gpu.present``.
CHART_AFFINITY: dict[str, Any] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
                          for key, value in (("feature.node.kubernetes.io/pci-10de.present", "true"),
                                             ("feature.node.kubernetes.io/pci-0302_10de.present", "true"),
                                             ("feature.node.kubernetes.io/pci-0300_10de.present", "true"),
                                             ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
                                             ("nvidia.com/gpu.present", "true"))]}}}


def _expression_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """One node selector requirement as the scheduler reads it (k8s.io/component-helpers nodeaffinity)."""
    key, op, values = expr.get("key", ""), expr.get("operator", ""), [str(v) for v in expr.get("values") or []]
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values  # an absent label is not in the set
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and len(values) == 1:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def scheduled(plugin_values: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether the kubelet plugin's DaemonSet runs a pod on a node with ``labels``.

    ``plugin_values`` is the release's ``kubeletPlugin`` value; keys left out take the chart's defaults
    (an ``affinity`` given replaces the default terms: Helm replaces lists). The node selector must match
    and, for the required node affinity, any one term with all of its expressions (no terms: no node).
    """
    selector = plugin_values.get("nodeSelector") or {}
    if any(labels.get(k) != str(v) for k, v in selector.items()):
        return False
    affinity = plugin_values.get("affinity", CHART_AFFINITY) or {}
    required = ((affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is None:
        return True
    return any(all(_expression_matches(e, labels) for e in term.get("matchExpressions") or [])
               for term in required.get("nodeSelectorTerms") or [])


def template_key(plugin_values: Mapping[str, Any], gates: Mapping[str, bool], driver_version: str) -> str:
    """What the plugin's pod template is made from: a change rolls every pod (a restart)."""
    text = json.dumps({"kubeletPlugin": plugin_values, "featureGates": gates, "driver": driver_version},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Started:
    """What a running kubelet plugin holds in memory: the MIG layout and pod template it started with, the
    health taints it has set since (device name -> taints), and the XID each GPU last reported (GPU index ->
    XID, 0: none), from which the next event is told apart."""

    layout: tuple[tuple[str, ...], ...]
    template: str
    taints: Mapping[str, tuple[Mapping[str, str], ...]] = field(default_factory=dict)
    xids: Mapping[int, int] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"layout": [list(g) for g in self.layout], "template": self.template,
                           "taints": {d: list(t) for d, t in sorted(self.taints.items())},
                           "xids": {str(g): x for g, x in sorted(self.xids.items())}})

    @classmethod
    def from_json(cls, text: str | None) -> Started | None:
        if not text:
            return None
        try:
            doc = json.loads(text)
            taints = {str(d): tuple({k: str(v) for k, v in t.items()} for t in ts)
                      for d, ts in (doc.get("taints") or {}).items()}
            xids = {int(g): int(x) for g, x in (doc.get("xids") or {}).items()}
            return cls(tuple(tuple(str(p) for p in g) for g in doc["layout"]), str(doc["template"]), taints, xids)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None  # not ours or damaged: the plugin counts as starting now


#: The driver's feature gate for its NVML health monitor (pkg/featuregates/featuregates.go:61).
HEALTH_GATE = "NVMLDeviceHealthCheck"
#: The taint key of an XID event (cmd/gpu-kubelet-plugin/device_health.go:36).
XID_TAINT = f"{DRIVER}/xid"
#: XIDs the driver deems application errors: their taint's effect is None (device_health.go:421 xidsToSkip;
#: the kubelet plugin's --additional-xids-to-ignore adds more, which the chart does not set).
NON_FATAL_XIDS = frozenset({13, 31, 43, 45, 68, 109})


def gpu_xids(knobs_json: str | None) -> dict[int, int]:
    """GPU index -> XID from the DCGM knobs annotation (GPU-wide keys only); unreadable: none."""
    try:
        knobs = json.loads(knobs_json) if knobs_json else {}
        return {int(k): int(v.get("xid") or 0) for k, v in knobs.items()
                if "/" not in str(k) and isinstance(v, dict)} if isinstance(knobs, dict) else {}
    except (ValueError, TypeError):
        return {}


def health_events(started: Started, xids: Mapping[int, int], notes: list[str]) -> Started:
    """The plugin after the XID events since its last state: ``xids`` is what each GPU reports now.

    A GPU whose XID changed to a non-zero value raised an event; it taints the whole GPU's device when that
    is published, and is ignored on a GPU split into MIG devices (see the module docstring).
    """
    taints = {d: tuple(t) for d, t in started.taints.items()}
    for gpu, xid in sorted(xids.items()):
        if not xid or xid == started.xids.get(gpu, 0) or gpu >= len(started.layout):
            continue
        if started.layout[gpu]:
            notes.append(f"DRA kubelet plugin ignored XID {xid} of GPU {gpu}: a GPU-wide event matches no "
                         "published device of a GPU split into MIG devices")
            continue
        device = f"gpu-{gpu}"
        taint = {"key": XID_TAINT, "value": str(xid), "effect": "None" if xid in NON_FATAL_XIDS else "NoSchedule"}
        taints[device] = (*(t for t in taints.get(device, ()) if t["key"] != XID_TAINT), taint)
    seen = {g: x for g, x in xids.items() if g < len(started.layout)}
    return Started(started.layout, started.template, taints, seen)


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
    taints: Mapping[str, Sequence[Mapping[str, str]]] | None = None,
    platform: str | None = None,
) -> list[dict[str, Any]]:
    """The devices (resource.k8s.io/v1 shape) the plugin publishes for GPUs with MIG ``layout`` per GPU,
    with the health ``taints`` it set (device name -> taints)."""
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
            **_topology(platform, len(layout), minor),
        }
        if not mig_devices:
            out.append({
                "name": f"gpu-{minor}",
                "attributes": _with(common, type=_string("gpu"), uuid=_string(parent)),
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
    for d in out:
        if (taints or {}).get(d["name"]):
            d["taints"] = [dict(t) for t in (taints or {})[d["name"]]]
    return [d for d in out if d["name"] not in missing]


#: The driver's feature gate for partitionable MIG (pkg/featuregates/featuregates.go, fact driver-feature-gates).
DYNAMIC_MIG = "DynamicMIG"
#: Architectures (go-nvlib's strings) whose GPUs toggle MIG mode without a reset (nvlib.go:1461:
#: arch >= DEVICE_ARCH_HOPPER).
MIG_TOGGLE = ("hopper", "blackwell")
#: Kubernetes minor from which the driver splits counters and devices into separate slices (driver.go:580).
SPLIT_FROM_MINOR = 35
#: A MIG profile's capacities as the driver names them (mig.go:120 CommonCapacitiesMig), by profile field.
_MIG_CAPACITIES = (("multiprocessors", "multiprocessors"), ("copyEngines", "copy_engines"),
                   ("decoders", "decoders"), ("encoders", "encoders"), ("jpegEngines", "jpegs"),
                   ("ofaEngines", "ofas"))


def camel_to_dns(name: str) -> str:
    """camelToDNSName (mig.go:262): ``copyEngines`` -> ``copy-engines``."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", name)
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1-\2", name)
    return rfc1123(name).strip("-")


def _quantities(values: dict[str, int]) -> dict[str, dict[str, str]]:
    return {k: {"value": str(v)} for k, v in values.items()}


def _gpu_attributes(model: NvmlModel, count: int, minor: int, driver_version: str,
                    cuda_driver_version: int, platform: str | None) -> dict[str, Any]:
    return {
        "productName": _string(model.product_name),
        "brand": _string(BRAND),
        "architecture": _string(ARCHITECTURES.get(model.architecture, model.architecture)),
        "cudaComputeCapability": {"version": semver(model.compute_capability)},
        "driverVersion": {"version": semver(driver_version)},
        "cudaDriverVersion": {"version": cuda_semver(cuda_driver_version)},
        **_topology(platform, count, minor),
    }


def _topology(platform: str | None, count: int, minor: int) -> dict[str, Any]:
    """The GPU's PCI attributes (deviceinfo.go:180-185), which its MIG devices take too (mig.go:176-182):
    ``pciBusID`` always (discovery fails without one, nvlib.go:532-537), ``pcieRoot`` only where the layout
    is cited (the driver omits it when sysfs cannot resolve it, nvlib.go:539-544; silicon.pcie_root)."""
    out = {"resource.kubernetes.io/pciBusID": _string(pci_bus_id(platform, count, minor))}
    root = pcie_root(platform, count, minor)
    if root is not None:
        out["resource.kubernetes.io/pcieRoot"] = _string(root)
    return out


def _with(common: dict[str, Any], **first: Any) -> dict[str, Any]:
    """Attributes: ``first`` (in order), then the GPU's common ones."""
    return {**first, **common}


def _partitions(cluster: str, node: str, model: NvmlModel, count: int, minor: int, *, whole: bool,
                driver_version: str, cuda_driver_version: int,
                platform: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One GPU under DynamicMIG: its devices (sorted by name, as the driver announces them) and counter set."""
    assert model.mig is not None
    counter_set = f"gpu-{minor}-counter-set"
    common = _gpu_attributes(model, count, minor, driver_version, cuda_driver_version, platform)
    parent = gpu_uuid(cluster, node, minor)
    maxima: dict[str, int] = {}
    slices = 0
    specs = []
    for prof in model.mig.profiles:
        if prof.name not in model.mig.placements:
            continue  # NVML lists no placements: the driver finds none to publish
        starts, size = model.mig.placements[prof.name]
        caps = {name: int(getattr(prof, attr)) for name, attr in _MIG_CAPACITIES}
        caps["memory"] = prof.memory_mib * 2**20
        for name, value in caps.items():
            maxima[name] = max(maxima.get(name, 0), value)
        slices = max(slices, size)
        info_id = model.mig.info_ids.get(prof.name, prof.gi_profile_id or 0)
        for start in starts:
            specs.append({
                "name": f"gpu-{minor}-mig-{rfc1123(prof.name.replace('.', ''))}-{info_id}-{start}",
                "attributes": _with(common, type=_string("mig"), parentUUID=_string(parent),
                                    profile=_string(prof.name)),
                "capacity": _quantities(caps),
                "consumesCounters": [{"counterSet": counter_set, "counters": _quantities(
                    {**{camel_to_dns(k): v for k, v in caps.items()},
                     **{f"memory-slice-{i}": 1 for i in range(start, start + size)}})}],
            })
    counters = {**{camel_to_dns(k): v for k, v in maxima.items()}, **{f"memory-slice-{i}": 1 for i in range(slices)}}
    if whole:
        specs.append({
            "name": f"gpu-{minor}",
            "attributes": _with(common, type=_string("gpu"), uuid=_string(parent)),
            "capacity": _quantities(maxima),
            "consumesCounters": [{"counterSet": counter_set, "counters": _quantities(counters)}],
        })
    return sorted(specs, key=lambda d: d["name"]), {"name": counter_set, "counters": _quantities(counters)}


def slices(
    cluster: str,
    node: str,
    model: NvmlModel,
    layout: Sequence[Sequence[str]],
    *,
    driver_version: str,
    cuda_driver_version: int,
    missing: set[str],
    dynamic_mig: bool = False,
    server_minor: int = 37,
    notes: list[str] | None = None,
    taints: Mapping[str, Sequence[Mapping[str, str]]] | None = None,
    platform: str | None = None,
) -> list[dict[str, Any]]:
    """The node's pool as slice contents (``{"devices": ...}`` and/or ``{"sharedCounters": ...}``).

    Without ``dynamic_mig`` (or on GPUs it does not apply to) one slice holds every device, as
    :func:`published` gives them. With it, see the module docstring.
    """
    def static(gpus: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
        return published(cluster, node, model, gpus, driver_version=driver_version,
                         cuda_driver_version=cuda_driver_version, missing=missing, taints=taints, platform=platform)

    if not (dynamic_mig and model.mig_capable):
        return [{"devices": static(layout)}]
    if model.mig is None or not model.mig.placements:
        if notes is not None:
            notes.append(f"DynamicMIG: no MIG profile table with placements for {model.name} in "
                         "simulator/data/nvml.yaml; its GPUs are published whole, without partitions")
        return [{"devices": static(layout)}]
    per_gpu: list[tuple[list[dict[str, Any]], dict[str, Any] | None]] = []
    for minor, mig_devices in enumerate(layout):
        toggles = model.architecture in MIG_TOGGLE
        if toggles or mig_devices:  # isDynamicMIGCapable (nvlib.go:1472)
            devs, counters = _partitions(cluster, node, model, len(layout), minor, whole=toggles,
                                         driver_version=driver_version, cuda_driver_version=cuda_driver_version,
                                         platform=platform)
            per_gpu.append(([d for d in devs if d["name"] not in missing], counters))
        else:  # Ampere with MIG off: the GPU as without the gate
            whole = static([()] * len(layout))
            per_gpu.append(([d for d in whole if d["name"] == f"gpu-{minor}"], None))
    if server_minor >= SPLIT_FROM_MINOR:
        shared = [c for _, c in per_gpu if c is not None]
        return [{"sharedCounters": shared} if shared else {}] + [{"devices": devs} for devs, _ in per_gpu]
    return [{"devices": devs, **({"sharedCounters": [c]} if c else {})} for devs, c in per_gpu]
