"""The Kubernetes objects the GPU simulator writes, as plain data (pure).

A Node as kubelet would register it (plus GFD's labels and the simulated marker), the DRA driver's
ResourceSlice for one node, the silicon each host has, and comparisons that ignore how the API
server rewrites quantities (bytes come back as ``80Gi``).
"""

from __future__ import annotations

from typing import Any

from kubernetes.utils import parse_quantity

from gpucluster import catalog
from gpucluster.expected import DRA_DRIVER
from gpucluster.local.simulator_agents import DERIVED, SIMULATED, Desired, Silicon, describe
from gpucluster.local.stages import MANAGE_ANNOTATION
from gpucluster.spec.model import ClusterSpec

CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"


def silicon_of(spec: ClusterSpec) -> dict[str, Silicon]:
    """What each host physically has (the only facts the simulator takes from the spec)."""
    out: dict[str, Silicon] = {}
    for host in spec.hosts:
        pool = spec.pool_of(host.name)
        gpu = pool.gpu if pool else None
        rdma = pool.rdma if pool else None
        out[host.name] = Silicon(
            node=host.name,
            model=catalog.get(gpu.model) if gpu else None,
            count=gpu.count if gpu else 0,
            nics=tuple(rdma.interfaces) if rdma else (),
            link_type=rdma.link_type if rdma else "infiniband",
        )
    return out


def slice_name(node: str) -> str:
    """One ResourceSlice per node and driver, named after both."""
    return f"{node}-{DRA_DRIVER}"


def node_object(
    name: str, registration: dict[str, Any], desired: Desired, *, control_plane: bool
) -> dict[str, Any]:
    """The Node as kubelet would register it (labels, taints, capacity), plus GFD's labels.

    ``registration`` is the host's entry of :func:`gpucluster.render.nodes.node_config`.
    """
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        SIMULATED: "true",
        **registration["labels"],
        **desired.labels,
    }
    if control_plane:
        labels[CONTROL_PLANE_LABEL] = ""  # kubeadm's label; no taint, as host_states expects
    annotations = {MANAGE_ANNOTATION: "fake", SIMULATED: "true", DERIVED: describe(desired, desired.labels)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"taints": registration["taints"]} if registration["taints"] else {},
        # The API server keeps status on create, as it does for a kubelet's registration.
        "status": {"capacity": desired.capacity, "allocatable": desired.allocatable},
    }


def slice_spec(node: str, devices: list[dict[str, Any]], generation: int) -> dict[str, Any]:
    """The spec of a node's ResourceSlice: one pool named after the node, all devices in it."""
    return {
        "driver": DRA_DRIVER,
        "nodeName": node,
        "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
        "devices": devices,
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
            "labels": {SIMULATED: "true"},
            "ownerReferences": [owner],
        },
        "spec": spec,
    }


def quantities(values: dict[str, Any] | None) -> dict[str, Any]:
    """Resource quantities by value, so ``"16"`` and ``16`` (or 1024Mi and 1Gi) compare equal."""
    return {k: parse_quantity(v) for k, v in (values or {}).items()}


def devices_key(devices: list[dict[str, Any]] | None) -> list[Any]:
    """Devices in a comparable form (the API server rewrites quantities, e.g. bytes -> 80Gi)."""
    return [
        (
            d["name"],
            d.get("attributes") or {},
            {k: parse_quantity(v["value"]) for k, v in (d.get("capacity") or {}).items()},
        )
        for d in devices or []
    ]
