"""The operators' CRDs for the local world: generated where the Go API module is served, else stand-ins.

Generated (``gpucluster tools install crds``: controller-gen over the pinned upstream API types):
prometheus-operator's monitoring.coreos.com group (ServiceMonitor, PrometheusRule, …) and
whereabouts' IPPool family. Not served as Go modules here, so small structural stand-ins written by
this project take their place: NicClusterPolicy and MacvlanNetwork (network-operator),
NetworkAttachmentDefinition (Multus/NAD) and the GPU Operator's ClusterPolicy. A stand-in validates
what our renderer relies on and keeps the rest with ``x-kubernetes-preserve-unknown-fields``.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpucluster import labels as L
from gpucluster.errors import LocalWorldError
from gpucluster.toolchain import path_of
from gpucluster.toolchain.versions import PROMETHEUS_OPERATOR, WHEREABOUTS

_OPEN: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
#: Generated CRDs installed by default: the kinds our bundle uses. The prometheus-operator's own
#: workloads (Prometheus, Alertmanager, ThanosRuler, Probe) are huge schemas nothing here creates;
#: ``install_crds(..., everything=True)`` adds them.
DEFAULT_GENERATED = (
    "servicemonitors.monitoring.coreos.com",
    "podmonitors.monitoring.coreos.com",
    "prometheusrules.monitoring.coreos.com",
    "ippools.whereabouts.cni.cncf.io",
    "nodeslicepools.whereabouts.cni.cncf.io",
    "overlappingrangeipreservations.whereabouts.cni.cncf.io",
)


@dataclass(frozen=True)
class CrdSource:
    """One installed CRD and where it came from."""

    name: str
    origin: str  # "generated" or "stand-in"
    detail: str


def _crd(
    group: str,
    kind: str,
    plural: str,
    version: str,
    scope: str,
    spec: dict[str, Any],
    short: list[str] | None = None,
    status: bool = True,
) -> dict[str, Any]:
    props: dict[str, Any] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": spec,
    }
    ver: dict[str, Any] = {
        "name": version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": props}},
    }
    if status:
        props["status"] = _OPEN
        ver["subresources"] = {"status": {}}
    names: dict[str, Any] = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
    }
    if short:
        names["shortNames"] = short
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "annotations": {L.STAND_IN: "true"}},
        "spec": {"group": group, "scope": scope, "names": names, "versions": [ver]},
    }


def stand_ins() -> list[dict[str, Any]]:
    """The structural stand-in CRDs, as Python data."""
    macvlan_spec = {
        "type": "object",
        "required": ["master"],
        "properties": {
            "networkNamespace": {"type": "string"},
            "master": {"type": "string", "minLength": 1},
            "mode": {"type": "string", "enum": ["bridge", "private", "vepa", "passthru", "source"]},
            "mtu": {"type": "integer", "minimum": 0},
            "ipam": {"type": "string"},  # JSON text of the CNI ipam section
        },
    }
    nad_spec = {"type": "object", "properties": {"config": {"type": "string"}}}
    return [
        _crd("mellanox.com", "NicClusterPolicy", "nicclusterpolicies", "v1alpha1", "Cluster", _OPEN, ["ncp"]),
        _crd("mellanox.com", "MacvlanNetwork", "macvlannetworks", "v1alpha1", "Cluster", macvlan_spec),
        _crd(
            "k8s.cni.cncf.io",
            "NetworkAttachmentDefinition",
            "network-attachment-definitions",
            "v1",
            "Namespaced",
            nad_spec,
            ["net-attach-def"],
            status=False,
        ),
        _crd("nvidia.com", "ClusterPolicy", "clusterpolicies", "v1", "Cluster", _OPEN),
    ]


def generated_dir() -> Path:
    """The folder of controller-gen output in the toolchain cache (ToolMissing when not built)."""
    return path_of("crds")


def all_crds(everything: bool = False) -> tuple[list[dict[str, Any]], list[CrdSource]]:
    """The CRDs to install and, for the report, where each one came from.

    Generated ones are limited to :data:`DEFAULT_GENERATED` unless ``everything`` is set.
    """
    docs: list[dict[str, Any]] = []
    sources: list[CrdSource] = []
    for path in sorted(generated_dir().glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            if everything or doc["metadata"]["name"] in DEFAULT_GENERATED:
                docs.append(doc)
                group = doc["spec"]["group"]
                module = (
                    f"prometheus-operator {PROMETHEUS_OPERATOR}" if "coreos" in group else f"whereabouts {WHEREABOUTS}"
                )
                sources.append(CrdSource(doc["metadata"]["name"], "generated", f"controller-gen from {module}"))
    for doc in stand_ins():
        docs.append(doc)
        sources.append(CrdSource(doc["metadata"]["name"], "stand-in", "Go API module not served; structural CRD"))
    return docs, sources


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
    """Run the toolchain's kubectl against ``kubeconfig``; its stdout, or LocalWorldError with stderr."""
    cmd = [str(path_of("kubectl")), f"--kubeconfig={kubeconfig}", *args]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise LocalWorldError(f"kubectl {' '.join(args[:3])} failed: {proc.stderr.strip()[:2000]}")
    return proc.stdout


def apply_crds(kubeconfig: Path, docs: list[dict[str, Any]], *, timeout: float = 120) -> list[str]:
    """Server-side apply CRD documents and wait until every one is Established; returns their names."""
    text = yaml.safe_dump_all(docs, sort_keys=False)
    kubectl(
        kubeconfig, "apply", "--server-side", "--force-conflicts", "--field-manager=gpucluster-local",
        "-f", "-", stdin=text, timeout=timeout,
    )  # fmt: skip
    # Not `kubectl wait`: it fails outright on a CRD whose status has no conditions yet.
    names = {d["metadata"]["name"] for d in docs}
    deadline = time.monotonic() + timeout
    pending = names
    while time.monotonic() < deadline:
        listing = json.loads(kubectl(kubeconfig, "get", "crd", "-o", "json", timeout=timeout))
        established = {
            item["metadata"]["name"]
            for item in listing["items"]
            for cond in item.get("status", {}).get("conditions") or []
            if cond.get("type") == "Established" and cond.get("status") == "True"
        }
        pending = names - established
        if not pending:
            return sorted(names)
        time.sleep(0.5)
    raise LocalWorldError(f"CRDs not Established after {timeout:.0f} s: {', '.join(sorted(pending))}")


def install_crds(kubeconfig: Path, *, timeout: float = 120, everything: bool = False) -> list[CrdSource]:
    """Server-side apply the operators' CRDs and wait until all are Established; returns their sources."""
    docs, sources = all_crds(everything)
    apply_crds(kubeconfig, docs, timeout=timeout)
    return sources
