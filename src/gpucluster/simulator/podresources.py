"""The kubelet's pod-resources view of one SIMULATED node: which pod holds which GPU or MIG instance.

The DCGM exporter attributes a GPU to a pod from the kubelet's pod-resources API, which lists the
device IDs the device plugin handed each container. The local world has no kubelet and no device
plugin, so this module plays the plugin's Allocate: every running pod bound to the node gets, per
container, as many devices as it asks for of ``nvidia.com/gpu`` (``nvidia.com/gpu.shared`` when
renamed) or ``nvidia.com/mig-<profile>``, lowest index first, and keeps them while it runs.

On a time-sliced or MPS node a GPU is ``replicas`` devices (``<uuid>::<n>``); the exporter collapses
them to the GPU and names whichever holder the kubelet lists last, so here the holder that sorts
last (namespace, pod, container) wins: arbitrary, as upstream. Pods whose GPUs come from DRA
ResourceClaims hold nothing here: the exporter attributes those only with ``KUBERNETES_ENABLE_DRA``,
which gpucluster does not set.
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
