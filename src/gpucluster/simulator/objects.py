"""The Kubernetes objects the GPU simulator writes, as plain data (pure).

A Node as kubelet would register it (plus GFD's labels and the simulated marker), the DRA driver's
ResourceSlice for one node, and comparisons that ignore how the API server rewrites quantities
(bytes come back as ``80Gi``).
"""

from __future__ import annotations

from typing import Any

from gpucluster import labels as L
from gpucluster.quantity import parse_quantity
from gpucluster.simulator.agents import Desired, describe
from gpucluster.simulator.agents.dra_plugin import DRIVER as DRA_DRIVER


def slice_name(node: str, index: int = 0) -> str:
    """A node's ResourceSlices of the driver, named after both (and the index after the first)."""
    return f"{node}-{DRA_DRIVER}" if index == 0 else f"{node}-{DRA_DRIVER}-{index}"


def node_object(
    name: str, registration: dict[str, Any], desired: Desired, *, control_plane: bool
) -> dict[str, Any]:
    """The Node as kubelet would register it (labels, taints, capacity), plus GFD's labels.

    ``registration`` is the host's entry of :func:`gpucluster.render.nodes.node_config`.
    """
    labels = {
        L.HOSTNAME: name,
        L.OS: "linux",
        L.ARCH: "amd64",
        L.SIMULATED: "true",
        **registration["labels"],
        **desired.labels,
    }
    if control_plane:
        labels[L.CONTROL_PLANE] = ""  # kubeadm's label; no taint, as host_states expects
    annotations = {L.KWOK_NODE: "fake", L.SIMULATED: "true",
                   **{k: v for k, v in desired.annotations.items() if v is not None},
                   L.SIMULATOR_DERIVED: describe(desired, desired.labels)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"taints": registration["taints"]} if registration["taints"] else {},
        # The API server keeps status on create, as it does for a kubelet's registration.
        "status": {"capacity": desired.capacity, "allocatable": desired.allocatable},
    }


def slice_spec(node: str, devices: list[dict[str, Any]] | dict[str, Any], generation: int,
               count: int = 1) -> dict[str, Any]:
    """The spec of one of a node's ResourceSlices: the pool named after the node (``count`` slices at
    ``generation``), with ``devices`` (a list) or a slice's content (``devices`` and/or ``sharedCounters``)."""
    content = {"devices": devices} if isinstance(devices, list) else dict(devices)
    return {
        "driver": DRA_DRIVER,
        "nodeName": node,
        "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
        **content,
    }


def slice_object(node: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """A new ResourceSlice, owned by its Node (deleted with it, as the kubelet arranges)."""
    meta = node["metadata"]
    owner = {"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"]}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": slice_name(meta["name"]),
            "labels": {L.SIMULATED: "true"},
            "ownerReferences": [owner],
        },
        "spec": spec,
    }


def quantities(values: dict[str, Any] | None) -> dict[str, Any]:
    """Resource quantities by value, so ``"16"`` and ``16`` (or 1024Mi and 1Gi) compare equal."""
    return {k: parse_quantity(v) for k, v in (values or {}).items()}


def _counters(counters: dict[str, Any] | None) -> dict[str, Any]:
    return {k: parse_quantity(v["value"]) for k, v in (counters or {}).items()}


def devices_key(devices: list[dict[str, Any]] | None) -> list[Any]:
    """Devices in a comparable form (the API server rewrites quantities, e.g. bytes -> 80Gi)."""
    return [
        (
            d["name"],
            d.get("attributes") or {},
            {k: parse_quantity(v["value"]) for k, v in (d.get("capacity") or {}).items()},
            [(c["counterSet"], _counters(c.get("counters"))) for c in d.get("consumesCounters") or []],
            # the API server stamps timeAdded on a taint that has none: not part of what was published
            [(t.get("key"), t.get("value", ""), t.get("effect")) for t in d.get("taints") or []],
        )
        for d in devices or []
    ]


def content_key(spec: dict[str, Any]) -> tuple[Any, Any]:
    """A slice's devices and shared counters in a comparable form."""
    shared = [(c["name"], _counters(c.get("counters"))) for c in spec.get("sharedCounters") or []]
    return devices_key(spec.get("devices")), shared
