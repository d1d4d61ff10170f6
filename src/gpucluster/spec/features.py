"""The DRA features gpucluster sets up, per Kubernetes version: derived in one place.

For every feature: the feature gate that guards it and its state in each minor version we accept
(from ``pkg/features/kube_features.go`` at each release; cited in
tests/upstream/facts/host-config.yaml ``fg-*``), plus the API version its objects use. From that:

- :func:`gates` — the gates a cluster needs set for the features a spec uses (nothing on 1.37, where
  they are GA or beta-on; explicit ``true`` on older versions where they are beta-off);
- :func:`unservable` — features a version cannot serve (absent, or alpha: we never turn alpha on);
- :func:`volcano_gates` — the gates Volcano's scheduler needs for them, as its own libraries are older.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

#: Minor versions of Kubernetes 1.x the spec accepts.
SUPPORTED_MINORS = (36, 37)


class Stage(str, Enum):
    ABSENT = "absent"
    ALPHA = "alpha"  # default off; never enabled by us
    BETA_OFF = "beta, default off"  # we set the gate
    BETA_ON = "beta, default on"
    GA = "GA"  # on; possibly locked


@dataclass(frozen=True)
class Feature:
    """One DRA feature: its gate, its stage per minor, and the API its objects need (if any)."""

    name: str
    gate: str
    stages: dict[int, Stage]
    #: Extra API versions the feature's objects use per minor (``--runtime-config`` when not on by default).
    apis: dict[int, str]
    what: str

    def stage(self, minor: int) -> Stage:
        return self.stages.get(minor, Stage.ABSENT if minor < min(self.stages) else Stage.GA)


FEATURES: dict[str, Feature] = {f.name: f for f in (
    Feature("extended-resource", "DRAExtendedResource",
            {34: Stage.ALPHA, 35: Stage.ALPHA, 36: Stage.BETA_ON, 37: Stage.GA}, {},
            "DeviceClass.spec.extendedResourceName: plain nvidia.com/gpu requests served through DRA"),
    Feature("partitionable-devices", "DRAPartitionableDevices",
            {34: Stage.ALPHA, 35: Stage.ALPHA, 36: Stage.BETA_ON, 37: Stage.BETA_ON}, {},
            "shared counters and devices that consume them (dynamic MIG)"),
    Feature("prioritized-list", "DRAPrioritizedList",
            {34: Stage.BETA_ON, 35: Stage.BETA_ON, 36: Stage.GA, 37: Stage.GA}, {},
            "claim requests with firstAvailable alternatives"),
    Feature("device-taints", "DRADeviceTaints",
            {34: Stage.ALPHA, 35: Stage.ALPHA, 36: Stage.BETA_ON, 37: Stage.GA}, {},
            "taints on devices (quarantine one GPU)"),
    Feature("device-taint-rules", "DRADeviceTaintRules",
            {35: Stage.ALPHA, 36: Stage.BETA_OFF, 37: Stage.GA}, {36: "resource.k8s.io/v1beta2"},
            "DeviceTaintRule objects (resource.k8s.io/v1 from 1.37, v1beta2 before)"),
    Feature("claim-device-status", "DRAResourceClaimDeviceStatus",
            {34: Stage.BETA_ON, 35: Stage.BETA_ON, 36: Stage.BETA_ON, 37: Stage.GA}, {},
            "ResourceClaim status.devices"),
)}

#: Gates locked on per minor: the components refuse to start when one is set to false
#: (tests/upstream/facts/host-config.yaml fg-locked-true-1-36, fg-locked-true-1-37).
LOCKED_ON: dict[int, tuple[str, ...]] = {
    36: ("DynamicResourceAllocation", "DRAAdminAccess", "KubeletCgroupDriverFromCRI"),
    37: ("DynamicResourceAllocation", "DRAAdminAccess", "DRAPrioritizedList", "DRAResourceClaimDeviceStatus",
         "DRAExtendedResource", "KubeletCgroupDriverFromCRI"),
}

#: The API group/version a DeviceTaintRule is served in, per minor.
DEVICE_TAINT_RULE_API = {36: "resource.k8s.io/v1beta2", 37: "resource.k8s.io/v1"}


def gates(minor: int, features: list[str]) -> dict[str, bool]:
    """Feature gates to set on every component for ``features`` on Kubernetes 1.``minor``."""
    out: dict[str, bool] = {}
    for name in features:
        f = FEATURES[name]
        if f.stage(minor) is Stage.BETA_OFF:
            out[f.gate] = True
    return dict(sorted(out.items()))


def runtime_config(minor: int, features: list[str]) -> list[str]:
    """API versions to turn on (``--runtime-config``) for ``features`` on Kubernetes 1.``minor``."""
    return sorted({f"{FEATURES[n].apis[minor]}=true" for n in features if minor in FEATURES[n].apis})


def unservable(minor: int, features: list[str]) -> dict[str, str]:
    """Feature → why Kubernetes 1.``minor`` cannot serve it (absent, or only alpha)."""
    out = {}
    for name in features:
        f = FEATURES[name]
        stage = f.stage(minor)
        if stage in (Stage.ABSENT, Stage.ALPHA):
            first = min(m for m, s in f.stages.items() if s not in (Stage.ABSENT, Stage.ALPHA))
            out[name] = (f"{f.what} is {stage.value} in Kubernetes 1.{minor} (gate {f.gate}); it needs "
                         f"Kubernetes >= 1.{first}")
    return out


#: The DRA features Volcano's scheduler reads through feature gates of its own process (v1.14.1
#: ``pkg/scheduler/plugins/predicates/predicates.go`` New() and ``pkg/scheduler/cache/cache.go``; v1.15.1
#: the same; tests/upstream/facts/volcano.yaml ``scheduler-reads-*``).
VOLCANO_READS = ("extended-resource", "partitionable-devices", "prioritized-list", "device-taints",
                 "claim-device-status")
#: The Kubernetes minors of Volcano's libraries: v1.14.1 (the local world) builds on k8s.io/kubernetes
#: v1.34.1, v1.15.1 (the chart real clusters install) on v1.35.3 (their go.mod; facts volcano.yaml).
VOLCANO_LIBRARY_MINORS = (34, 35)
#: Volcano's scheduler with ``DRADeviceTaints`` on watches DeviceTaintRules at ``resource.k8s.io/v1alpha3``
#: (its libraries' version; v1.14.1 and v1.15.1 ``pkg/scheduler/cache/cache.go``): an API server that does
#: not serve them leaves that informer unsynced, and the scheduler never schedules (seen on the local
#: world). That version is alpha, off by default on 1.36 and 1.37 (deprecated from 1.36, gone in 1.39).
VOLCANO_TAINT_RULES_API = "resource.k8s.io/v1alpha3/devicetaintrules"


def volcano_gates(used: list[str]) -> list[str]:
    """The DRA gates (beyond ``DynamicResourceAllocation``) Volcano's scheduler needs on for ``used`` features.

    Volcano decides with its own copy of Kubernetes' feature table, the one of its libraries
    (:data:`VOLCANO_LIBRARY_MINORS`), where partitionable devices (dynamic MIG), device taints (quarantine)
    and extended resources through DRA are alpha, i.e. off: without these gates it allocates no device of
    a dynamic-MIG pool and ignores DeviceTaintRules while the cluster's own scheduler does not. A gate is
    passed when a used feature is off in either library and known to both (a gate a binary does not know
    stops it at start).
    """
    out = []
    for name in used:
        if name not in VOLCANO_READS:
            continue
        f = FEATURES[name]
        stages = [f.stage(m) for m in VOLCANO_LIBRARY_MINORS]
        if Stage.ABSENT not in stages and any(s in (Stage.ALPHA, Stage.BETA_OFF) for s in stages):
            out.append(f.gate)
    return sorted(out)
#: The DCGM exporter with ``KUBERNETES_ENABLE_DRA`` watches ResourceSlices at ``resource.k8s.io/v1beta1`` only
#: (dcgm-exporter 4.5.1-4.8.0 ``internal/pkg/transformation/dra.go:43``), and waits for that informer before it
#: serves anything (``server.go:70``). Kubernetes 1.37 keeps that version but off by default
#: (k8s.io/kubernetes v1.37.2 ``pkg/controlplane/instance.go``, betaAPIGroupVersionsDisabledByDefault).
DCGM_EXPORTER_SLICES_API = "resource.k8s.io/v1beta1/resourceslices"
