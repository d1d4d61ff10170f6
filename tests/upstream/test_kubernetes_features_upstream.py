"""The DRA feature table (spec/features.py) against the gates Kubernetes declares at each release."""

from __future__ import annotations

import pytest
from upstream_facts import fact

from gpucluster.spec import features

FACT_OF_GATE = {
    "DRAExtendedResource": "fg-dra-extended-resource", "DRAPartitionableDevices": "fg-dra-partitionable-devices",
    "DRAPrioritizedList": "fg-dra-prioritized-list", "DRADeviceTaints": "fg-dra-device-taints",
    "DRADeviceTaintRules": "fg-dra-device-taint-rules", "DRAResourceClaimDeviceStatus":
        "fg-dra-resource-claim-device-status",
}


def stage_of(text: str) -> features.Stage:
    if text.startswith("GA"):
        return features.Stage.GA
    if text.startswith("beta"):
        return features.Stage.BETA_ON if "default true" in text else features.Stage.BETA_OFF
    return features.Stage.ALPHA


@pytest.mark.parametrize("feature", sorted(features.FEATURES))
def test_stages_are_kubernetes_own(feature: str) -> None:
    f = features.FEATURES[feature]
    upstream = fact("host-config", FACT_OF_GATE[f.gate])
    for minor in features.SUPPORTED_MINORS:
        assert f.stage(minor) is stage_of(upstream[f"1.{minor}"]), (f.gate, minor, upstream)


def test_locked_gates_are_kubernetes_own() -> None:
    assert set(features.LOCKED_ON[36]) == set(fact("host-config", "fg-locked-true-1-36"))
    assert set(features.LOCKED_ON[37]) == set(fact("host-config", "fg-locked-true-1-37"))


def test_nothing_to_set_on_137_and_explicit_gates_on_136() -> None:
    every = sorted(features.FEATURES)
    assert features.gates(37, every) == {} and features.runtime_config(37, every) == []
    assert features.gates(36, every) == {"DRADeviceTaintRules": True}
    assert features.runtime_config(36, ["device-taint-rules"]) == ["resource.k8s.io/v1beta2=true"]


def test_a_version_that_cannot_serve_a_feature_says_which_can() -> None:
    why = features.unservable(35, ["extended-resource"])["extended-resource"]
    assert "alpha in Kubernetes 1.35" in why and ">= 1.36" in why
    assert features.unservable(36, ["extended-resource", "device-taints"]) == {}
