"""The kubelet's pod-resources view of one SIMULATED node: which pod holds which GPU or MIG instance.

The DCGM exporter attributes a GPU to a pod from the kubelet's pod-resources API, which lists the
device IDs the device plugin handed each container. The local world has no kubelet and no device
plugin, so this module plays the plugin's Allocate: every running pod bound to the node gets, per
container, as many devices as it asks for of ``nvidia.com/gpu`` (``nvidia.com/gpu.shared`` when
renamed) or ``nvidia.com/mig-<profile>``, lowest index first, and keeps them while it runs.

On a time-sliced or MPS node a GPU is ``replicas`` devices (``<uuid>::<n>``); the exporter collapses
them to the GPU and names whichever holder the kubelet lists last, so here the holder that sorts
last (namespace, pod, container) wins: arbitrary, as upstream.

Pods whose GPUs come from DRA ResourceClaims hold no plugin device; the kubelet lists their claims'
devices as ``DynamicResources`` instead, which the exporter reads only with ``KUBERNETES_ENABLE_DRA``:
:func:`dra_holders` plays both (the kubelet's list, the exporter's ResourceSlice lookup).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
MIG_PREFIX = "nvidia.com/mig-"

#: (GPU index, MIG GPU-instance id or None for a whole GPU)
Device = tuple[int, int | None]


@dataclass(frozen=True)
class Holder:
    """A container that holds devices."""

    namespace: str
    pod: str
    container: str

    def labels(self) -> dict[str, str]:
        return {"namespace": self.namespace, "pod": self.pod, "container": self.container}


@dataclass(frozen=True)
class Unit:
    """One allocatable device as the plugin advertises it: a device, or a replica of one."""

    device: Device
    replica: int
    resource: str


def units(gpus: Iterable[Mapping[str, Any]], *, replicas: int = 1, mig_strategy: str = "mixed") -> list[Unit]:
    """What the device plugin advertises on a node with these GPUs (``instances`` for MIG GPUs)."""
    out: list[Unit] = []
    for g in sorted(gpus, key=lambda g: int(g["index"])):
        index = int(g["index"])
        instances = g.get("instances") or []
        if instances:
            for inst in instances:
                resource = "nvidia.com/gpu" if mig_strategy == "single" else f"{MIG_PREFIX}{inst['profile']}"
                out.append(Unit((index, int(inst["gi"])), 0, resource))
        else:
            out += [Unit((index, None), r, "nvidia.com/gpu") for r in range(max(replicas, 1))]
    return out


def _wants(pod: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """(container, resource, count) of the pod's device-plugin requests (limits, else requests)."""
    out = []
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        asked = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        for name, qty in sorted(asked.items()):
            if name in GPU_RESOURCES or name.startswith(MIG_PREFIX):
                out.append((c["name"], name, int(str(qty))))
    return out


def _matches(unit: Unit, resource: str) -> bool:
    if resource in GPU_RESOURCES:
        return unit.resource == "nvidia.com/gpu"
    return unit.resource == resource


def allocate(node: str, pods: Iterable[Mapping[str, Any]], available: list[Unit],
             held: Mapping[str, list[tuple[Holder, Unit]]]) -> dict[str, list[tuple[Holder, Unit]]]:
    """Pod uid → its (holder, unit) pairs: earlier allocations kept, new running pods served in order.

    ``held`` is the previous result; pods that are gone or no longer running on ``node`` give their
    units back. A pod asking for more than is free gets nothing (the real plugin's Allocate fails
    and the kubelet rejects the pod).
    """
    running = [p for p in pods if (p.get("spec") or {}).get("nodeName") == node
               and (p.get("status") or {}).get("phase") == "Running"
               and not (p.get("metadata") or {}).get("deletionTimestamp")]
    running.sort(key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["namespace"],
                                p["metadata"]["name"]))
    out = {p["metadata"]["uid"]: list(held[p["metadata"]["uid"]]) for p in running if p["metadata"]["uid"] in held}
    taken = {u for pairs in out.values() for _, u in pairs}
    for p in running:
        meta = p["metadata"]
        if meta["uid"] in out:
            continue
        pairs: list[tuple[Holder, Unit]] = []
        free = [u for u in available if u not in taken]
        for container, resource, count in _wants(p):
            fitting = [u for u in free if _matches(u, resource) and u not in {x for _, x in pairs}]
            if len(fitting) < count:
                pairs = []
                break
            pairs += [(Holder(meta["namespace"], meta["name"], container), u) for u in fitting[:count]]
        if pairs:
            out[meta["uid"]] = pairs
            taken |= {u for _, u in pairs}
    return out


def attribution(allocations: Mapping[str, list[tuple[Holder, Unit]]]) -> dict[Device, Holder]:
    """Device → the holder the exporter names: one per device, the one that sorts last when shared."""
    out: dict[Device, Holder] = {}
    for pairs in allocations.values():
        for holder, unit in pairs:
            current = out.get(unit.device)
            if current is None or (holder.namespace, holder.pod, holder.container) > (
                    current.namespace, current.pod, current.container):
                out[unit.device] = holder
    return out


#: The driver whose devices the exporter attributes (dcgm-exporter 4.5.1-4.8.0 ``transformation/const.go``
#: DRAGPUDriverName; ``kubernetes.go:463`` skips every other driver).
DRA_GPU_DRIVER = "gpu.nvidia.com"


def _running(pod: Mapping[str, Any], node: str) -> bool:
    return ((pod.get("spec") or {}).get("nodeName") == node and (pod.get("status") or {}).get("phase") == "Running"
            and not (pod.get("metadata") or {}).get("deletionTimestamp"))


def _string_attr(attrs: Mapping[str, Any], key: str) -> str:
    value = (attrs.get(key) or {}).get("string")
    return value if isinstance(value, str) else ""


def slice_devices(slices: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], tuple[str, dict[str, str]]]:
    """(pool, device) -> (UUID the exporter keys it by, MIG labels), from ``resource.k8s.io/v1beta1`` slices.

    As the exporter's informer (dcgm-exporter 4.5.1-4.8.0 ``internal/pkg/transformation/dra.go``
    onAddOrUpdate): slices of ``gpu.nvidia.com`` only; a device without ``basic`` attributes is skipped;
    ``type`` ``gpu`` maps to its ``uuid``, ``mig`` to its ``parentUUID`` (with ``profile`` and its own
    ``uuid``) and only when the parent is named; any other type is skipped.
    """
    out: dict[tuple[str, str], tuple[str, dict[str, str]]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") != DRA_GPU_DRIVER:
            continue
        pool = (spec.get("pool") or {}).get("name", "")
        for dev in spec.get("devices") or []:
            attrs = (dev.get("basic") or {}).get("attributes")
            if not attrs:
                continue
            kind = _string_attr(attrs, "type")
            if kind == "gpu" and _string_attr(attrs, "uuid"):
                out[(pool, dev["name"])] = (_string_attr(attrs, "uuid"), {})
            elif kind == "mig" and _string_attr(attrs, "parentUUID"):
                out[(pool, dev["name"])] = (_string_attr(attrs, "parentUUID"), {
                    "dra_mig_profile": _string_attr(attrs, "profile"),
                    "dra_mig_device_uuid": _string_attr(attrs, "uuid")})
    return out


def _container_claims(pod: Mapping[str, Any], container: Mapping[str, Any]) -> list[str]:
    """Names of the ResourceClaims one container uses, as the kubelet resolves them
    (k8s.io/kubernetes v1.37.2 ``pkg/kubelet/cm/dra/manager.go`` GetContainerClaimInfos): the pod's claims
    the container names (a template's claim through ``status.resourceClaimStatuses``), then the pod's
    extended-resource claim when one of its request mappings names the container."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    used = {c.get("name") for c in (container.get("resources") or {}).get("claims") or []}
    generated = {c.get("name"): c.get("resourceClaimName") for c in status.get("resourceClaimStatuses") or []}
    out = []
    for rc in spec.get("resourceClaims") or []:
        if rc.get("name") not in used:
            continue
        name = rc.get("resourceClaimName") or generated.get(rc.get("name"))
        if name:
            out.append(name)
    extended = status.get("extendedResourceClaimStatus") or {}
    if any(m.get("containerName") == container.get("name") for m in extended.get("requestMappings") or []):
        if extended.get("resourceClaimName"):
            out.append(extended["resourceClaimName"])
    return out


def dra_holders(node: str, pods: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]],
                devices: Mapping[tuple[str, str], tuple[str, dict[str, str]]]) -> dict[str, list[dict[str, str]]]:
    """GPU UUID -> one label set per container whose claims hold a device of that GPU on ``node``.

    The kubelet lists, per container of a running pod, every device its claims were prepared with
    (``pkg/kubelet/cm/container_manager_linux.go`` GetDynamicResources: all results of a claim, whichever
    request); the exporter keeps ``gpu.nvidia.com`` devices it can find in ResourceSlices, once per
    (pod, namespace, container) and GPU (``kubernetes.go:442-520``) with the labels of ``const.go:32-39``.
    """
    by_name = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}
    out: dict[str, list[dict[str, str]]] = {}
    seen: set[tuple[str, str, str, str]] = set()
    running = sorted((p for p in pods if _running(p, node)),
                     key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))
    for pod in running:
        meta = pod["metadata"]
        for container in (pod.get("spec") or {}).get("containers") or []:
            for claim_name in _container_claims(pod, container):
                claim = by_name.get((meta["namespace"], claim_name))
                results = ((((claim or {}).get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                    "results") or []
                for r in results:
                    if r.get("driver") != DRA_GPU_DRIVER:
                        continue
                    found = devices.get((r.get("pool", ""), r.get("device", "")))
                    if found is None:
                        continue  # "No UUID for pool/device": not attributed
                    uuid, mig = found
                    key = (uuid, meta["name"], meta["namespace"], container["name"])
                    if key in seen:
                        continue
                    seen.add(key)
                    out.setdefault(uuid, []).append({
                        "pod": meta["name"], "namespace": meta["namespace"], "container": container["name"],
                        "dra_claim_name": claim_name, "dra_claim_namespace": meta["namespace"],
                        "dra_driver_name": DRA_GPU_DRIVER, "dra_pool_name": r.get("pool", ""),
                        "dra_device_name": r.get("device", ""), **mig})
    return out
