"""The operators' CRDs for the local world: generated where the Go API module is served, else stand-ins.

Generated (``gpucluster tools install crds``: controller-gen over the pinned upstream API types):
prometheus-operator's monitoring.coreos.com group (ServiceMonitor, PrometheusRule, …). Not served as
Go modules here, so small structural stand-ins written by this project take their place:
NicClusterPolicy and MacvlanNetwork (network-operator), NetworkAttachmentDefinition (Multus/NAD),
nv-ipam's IPPool (github.com/Mellanox/nvidia-k8s-ipam is not served either) and the GPU Operator's
ClusterPolicy. A stand-in validates what our renderer relies on and keeps the rest with
``x-kubernetes-preserve-unknown-fields``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpucluster import kube
from gpucluster import labels as L
from gpucluster.errors import LocalWorldError
from gpucluster.poll import wait_for
from gpucluster.toolchain import path_of
from gpucluster.toolchain.versions import PROMETHEUS_OPERATOR

#: libyaml's loader where PyYAML has it (about 8 times faster on these files), else the pure-Python one.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPEN: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
#: Generated CRDs installed by default: the kinds our bundle uses. The prometheus-operator's own
#: workloads (Prometheus, Alertmanager, ThanosRuler, Probe) are huge schemas nothing here creates;
#: ``install_crds(..., everything=True)`` adds them.
DEFAULT_GENERATED = (
    "servicemonitors.monitoring.coreos.com",
    "podmonitors.monitoring.coreos.com",
    "prometheusrules.monitoring.coreos.com",
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
        _crd("nv-ipam.nvidia.com", "IPPool", "ippools", "v1alpha1", "Namespaced", ip_pool_spec()),
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


#: An IP address as text; the length bounds keep the CEL rules' cost within the API server's budget.
_IP: dict[str, Any] = {"type": "string", "maxLength": 45}


def ip_pool_spec() -> dict[str, Any]:
    """nv-ipam's IPPool spec as far as we rely on it: field names and types of ``api/v1alpha1/ippool_type.go``
    (network-operator-v26.4.1) and the checks its controller runs before it uses a pool
    (``ippool_validate.go``: a subnet, a block of at least 1 address that fits it, a gateway and
    exclusions inside it), written as CEL so the API server refuses what nv-ipam would ignore."""
    ip_range = {
        "type": "object",
        "required": ["startIP", "endIP"],
        "properties": {"startIP": _IP, "endIP": _IP},
        "x-kubernetes-validations": [
            {"rule": "isIP(self.startIP) && isIP(self.endIP)", "message": "startIP and endIP must be IP addresses"},
        ],
    }
    # Usable IPv4 addresses by host bits, as nv-ipam counts them (helpers.go GetPossibleIPCount); CEL has
    # no power operator, so the table is spelled out.
    usable_v4 = [1, 2] + [2**n - 2 for n in range(2, 33)]
    fits = (f"!isCIDR(self.subnet) || cidr(self.subnet).ip().family() != 4 || self.perNodeBlockSize <= "
            f"{usable_v4}[32 - cidr(self.subnet).prefixLength()]")
    return {
        "type": "object",
        "required": ["subnet", "perNodeBlockSize"],
        "properties": {
            "subnet": {"type": "string", "maxLength": 49, "x-kubernetes-validations": [
                {"rule": "isCIDR(self)", "message": "subnet must be a CIDR"}]},
            "perNodeBlockSize": {"type": "integer", "minimum": 1},
            "gateway": _IP,
            "exclusions": {"type": "array", "maxItems": 256, "items": ip_range},
            "perNodeExclusions": {"type": "array", "items": _OPEN},
            "nodeSelector": {
                "type": "object",
                "required": ["nodeSelectorTerms"],
                "properties": {"nodeSelectorTerms": {"type": "array", "items": _OPEN}},
            },
            "defaultGateway": {"type": "boolean"},
            "routes": {"type": "array", "items": {
                "type": "object", "required": ["dst"], "properties": {"dst": {"type": "string"}}}},
        },
        "x-kubernetes-validations": [
            {"rule": "!has(self.gateway) || !isCIDR(self.subnet) || "
                     "(isIP(self.gateway) && cidr(self.subnet).containsIP(self.gateway))",
             "message": "gateway must be an address inside subnet"},
            {"rule": "!has(self.exclusions) || !isCIDR(self.subnet) || self.exclusions.all(e, "
                     "!isIP(e.startIP) || !isIP(e.endIP) || "
                     "(cidr(self.subnet).containsIP(e.startIP) && cidr(self.subnet).containsIP(e.endIP)))",
             "message": "exclusions must lie inside subnet"},
            {"rule": "!has(self.defaultGateway) || !self.defaultGateway || has(self.gateway)",
             "message": "defaultGateway needs gateway"},
            {"rule": fits, "message": "perNodeBlockSize is larger than the addresses subnet holds"},
        ],
    }


def read_generated(folder: Path, wanted: Collection[str] | None = None) -> list[dict[str, Any]]:
    """The CRDs controller-gen wrote into ``folder``; only those named in ``wanted`` when given.

    controller-gen names each file ``<group>_<plural>.yaml`` (controller-tools v0.20.0 ``pkg/crd/gen.go``),
    so files of other CRDs are not even parsed (the prometheus-operator's workload CRDs are hundreds of kB).
    """
    docs = []
    for path in sorted(folder.glob("*.yaml")):
        group, _, plural = path.stem.partition("_")
        if wanted is not None and f"{plural}.{group}" not in wanted:
            continue
        docs += [d for d in yaml.load_all(path.read_text(), Loader=_LOADER)
                 if d and d.get("kind") == "CustomResourceDefinition"
                 and (wanted is None or d["metadata"]["name"] in wanted)]
    return docs


def generated_dir() -> Path:
    """The folder of controller-gen output in the toolchain cache (ToolMissing when not built)."""
    return path_of("crds")


def all_crds(everything: bool = False) -> tuple[list[dict[str, Any]], list[CrdSource]]:
    """The CRDs to install and, for the report, where each one came from.

    Generated ones are limited to :data:`DEFAULT_GENERATED` unless ``everything`` is set.
    """
    docs = read_generated(generated_dir(), None if everything else DEFAULT_GENERATED)
    sources: list[CrdSource] = []
    for doc in docs:
        group = doc["spec"]["group"]
        module = f"prometheus-operator {PROMETHEUS_OPERATOR}" if "coreos" in group else group
        sources.append(CrdSource(doc["metadata"]["name"], "generated", f"controller-gen from {module}"))
    for doc in stand_ins():
        docs.append(doc)
        sources.append(CrdSource(doc["metadata"]["name"], "stand-in", "Go API module not served; structural CRD"))
    return docs, sources


def apply_crds(kubeconfig: Path, docs: list[dict[str, Any]], *, timeout: float = 120) -> list[str]:
    """Server-side apply CRD documents through the API and wait until every one is Established; their names.

    Established is read from each CRD's ``status.conditions`` (the API server sets it once the new
    resource is served), polled every half second up to ``timeout``.
    """
    names = sorted(d["metadata"]["name"] for d in docs)
    with kube.Kube(kubeconfig, timeout=timeout) as client:
        for doc in docs:
            client.apply(f"{kube.CRDS}/{doc['metadata']['name']}", doc)

        def pending() -> list[str]:
            return [name for name in names if not _established(client.get(f"{kube.CRDS}/{name}"))]

        wait_for("the CRDs to be Established", pending, timeout=timeout, every=0.5, error=LocalWorldError,
                 done=lambda left: not left, detail=lambda left: "not yet: " + ", ".join(left))
    return names


def _established(crd: dict[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def install_crds(kubeconfig: Path, *, timeout: float = 120, everything: bool = False) -> list[CrdSource]:
    """Server-side apply the operators' CRDs and wait until all are Established; returns their sources."""
    docs, sources = all_crds(everything)
    apply_crds(kubeconfig, docs, timeout=timeout)
    return sources
