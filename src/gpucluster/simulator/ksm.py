"""A SIMULATED kube-state-metrics: the few series gpucluster's rules read, computed from real API objects.

kube-state-metrics is not served as a Go module here, so the local world's monitoring add-on serves
this instead. Series and label names follow kube-state-metrics v2.20.0 (facts ``ksm-*`` in
``tests/upstream/facts/dcgm-exporter.yaml``):

- ``kube_pod_container_resource_requests{namespace, pod, uid, container, node, resource, unit}``: the
  requests of ``spec.containers`` (not init containers); ``cpu`` in ``core``, ``memory`` in ``byte``,
  other resources with every character outside ``[a-zA-Z0-9_]`` turned into ``_`` and unit ``integer``;
- ``kube_pod_status_phase{namespace, pod, uid, phase}``: 1 for the pod's phase, 0 for the four others;
- ``kube_resourcequota{namespace, resourcequota, resource, type}``: ``hard`` and ``used`` per key,
  the key unchanged (``requests.nvidia.com/gpu``);
- ``kube_node_info{node, ...}``: 1 per node.

Everything else kube-state-metrics serves is left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from gpucluster.quantity import parse_quantity

PHASES = ("Pending", "Succeeded", "Failed", "Unknown", "Running")
NODE_INFO_LABELS = ("kernel_version", "os_image", "container_runtime_version", "kubelet_version",
                    "kubeproxy_version", "pod_cidr", "provider_id", "system_uuid", "internal_ip")


def resource_label(name: str) -> str:
    """kube-state-metrics' ``resource`` value of a container request (``nvidia.com/gpu`` → ``nvidia_com_gpu``)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _unit(name: str) -> str:
    return {"cpu": "core", "memory": "byte", "ephemeral-storage": "byte"}.get(name, "integer")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _line(name: str, labels: Iterable[tuple[str, str]], value: float) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return f"{name}{{{body}}} {value:g}"


def exposition(pods: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]],
               quotas: Iterable[Mapping[str, Any]]) -> str:
    """The text exposition for these objects (lists as the API server returns them)."""
    requests, phases, quota_rows, node_rows = [], [], [], []
    for p in pods:
        meta, spec = p["metadata"], p.get("spec") or {}
        base = [("namespace", meta["namespace"]), ("pod", meta["name"]), ("uid", meta.get("uid", ""))]
        for c in spec.get("containers") or []:
            for res, qty in sorted(((c.get("resources") or {}).get("requests") or {}).items()):
                labels = [*base, ("container", c["name"]), ("node", spec.get("nodeName", "")),
                          ("resource", resource_label(res)), ("unit", _unit(res))]
                requests.append(_line("kube_pod_container_resource_requests", labels, float(parse_quantity(str(qty)))))
        phase = (p.get("status") or {}).get("phase", "Unknown")
        phases += [_line("kube_pod_status_phase", [*base, ("phase", ph)], 1 if ph == phase else 0) for ph in PHASES]
    for q in quotas:
        meta, status = q["metadata"], q.get("status") or {}
        for kind in ("hard", "used"):
            for res, qty in sorted((status.get(kind) or {}).items()):
                labels = [("namespace", meta["namespace"]), ("resourcequota", meta["name"]), ("resource", res),
                          ("type", kind)]
                quota_rows.append(_line("kube_resourcequota", labels, float(parse_quantity(str(qty)))))
    for n in nodes:
        info = (n.get("status") or {}).get("nodeInfo") or {}
        addresses = {a.get("type"): a.get("address", "") for a in (n.get("status") or {}).get("addresses") or []}
        values = {"kernel_version": info.get("kernelVersion", ""), "os_image": info.get("osImage", ""),
                  "container_runtime_version": info.get("containerRuntimeVersion", ""),
                  "kubelet_version": info.get("kubeletVersion", ""),
                  "kubeproxy_version": info.get("kubeProxyVersion", ""),
                  "pod_cidr": (n.get("spec") or {}).get("podCIDR", ""),
                  "provider_id": (n.get("spec") or {}).get("providerID", ""),
                  "system_uuid": info.get("systemUUID", ""), "internal_ip": addresses.get("InternalIP", "")}
        node_rows.append(_line("kube_node_info", [("node", n["metadata"]["name"]),
                                                  *((k, values[k]) for k in NODE_INFO_LABELS)], 1))
    out = []
    for name, kind, help_, rows in (
        ("kube_pod_container_resource_requests", "gauge",
         "The number of requested request resource by a container.", requests),
        ("kube_pod_status_phase", "gauge", "The pods current phase.", phases),
        ("kube_resourcequota", "gauge", "Information about resource quota.", quota_rows),
        ("kube_node_info", "gauge", "Information about a cluster node.", node_rows),
    ):
        out += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}", *rows]
    return "\n".join(out) + "\n"
