"""``kubernetes``: the version, feature gates and networks; the DRA features a spec relies on."""

from __future__ import annotations

import ipaddress

from gpucluster import versions
from gpucluster.spec import features
from gpucluster.spec.model import ClusterSpec, SharingMode
from gpucluster.spec.validate.common import Collector


def check(spec: ClusterSpec, c: Collector) -> None:
    k = spec.kubernetes
    major, minor = k.minor
    supported = ", ".join(f"1.{m}" for m in features.SUPPORTED_MINORS)
    if major != 1 or minor not in features.SUPPORTED_MINORS:
        c.error("kubernetes.version", f"Kubernetes {k.version} is not supported (supported: {supported})",
                f"use {versions.KUBERNETES}")
        return
    for gate, value in k.feature_gates.items():
        if value is False and gate in features.LOCKED_ON.get(minor, ()):
            c.error(f"kubernetes.featureGates.{gate}", f"{gate} is locked on in Kubernetes 1.{minor}: every "
                    "component refuses to start with it set to false", "remove the override")
    for name, why in features.unservable(minor, used_features(spec)).items():
        c.error("kubernetes.version", f"the spec uses {name}: {why}", f"use Kubernetes {versions.KUBERNETES}")
    nets = {"kubernetes.podSubnet": k.pod_subnet, "kubernetes.serviceSubnet": k.service_subnet}
    for i, n in enumerate(spec.networking.secondary_networks):
        nets[f"networking.secondaryNetworks[{i}].cidr"] = n.cidr
    parsed = {}
    for path, cidr in nets.items():
        try:
            parsed[path] = ipaddress.ip_network(cidr, strict=True)
        except ValueError as err:
            c.error(path, f"invalid CIDR {cidr!r}: {err}", "write it like 10.244.0.0/16 (host bits zero)")
    items = list(parsed.items())
    for i, (pa, na) in enumerate(items):
        for pb, nb in items[i + 1:]:
            if na.version == nb.version and na.overlaps(nb):
                c.error(pb, f"{nb} overlaps {pa} ({na})", "give every network its own address range")


def component_feature_gates(spec: ClusterSpec) -> dict[str, bool]:
    """The feature gates every component (API server, controller manager, scheduler, kubelet) runs with:
    those the spec's DRA features need on its Kubernetes version, then the spec's own
    ``kubernetes.featureGates`` over them (an explicit setting wins)."""
    derived = features.gates(spec.kubernetes.minor[1], used_features(spec))
    return dict(sorted({**derived, **spec.kubernetes.feature_gates}.items()))


def api_runtime_config(spec: ClusterSpec) -> list[str]:
    """The API versions the API server must serve for the spec's DRA features (``--runtime-config``),
    Volcano's view of DeviceTaintRules included when Volcano schedules with device taints on, and the DCGM
    exporter's view of ResourceSlices when it attributes DRA GPUs."""
    used = used_features(spec)
    out = features.runtime_config(spec.kubernetes.minor[1], used)
    if spec.scheduling.volcano.enabled and "DRADeviceTaints" in features.volcano_gates(used):
        out = sorted({*out, f"{features.VOLCANO_TAINT_RULES_API}=true"})
    if spec.dcgm_dra_attribution:
        out = sorted({*out, f"{features.DCGM_EXPORTER_SLICES_API}=true"})
    return out


def used_features(spec: ClusterSpec) -> list[str]:
    """The DRA features (:data:`gpucluster.spec.features.FEATURES`) the spec's objects rely on."""
    out: list[str] = []
    if spec.dra.enabled and any(p.uses_dra for p in spec.node_pools):
        out.append("claim-device-status")  # verify and cost read which devices a claim holds
        # The class dra-nvidia-gpu (extendedResourceName) is rendered whenever the DRA chart is.
        out.append("extended-resource")
        # `gpucluster quarantine` taints one GPU with a DeviceTaintRule instead of cordoning its node.
        out += ["device-taints", "device-taint-rules"]
    if any(p.uses_dra and p.sharing.mode is SharingMode.dynamic_mig for p in spec.gpu_pools):
        out.append("partitionable-devices")
    if spec.dra.enabled and any(t.first_available for t in spec.dra.claim_templates):
        out.append("prioritized-list")
    return out
