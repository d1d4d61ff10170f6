"""The simulated MIG manager: mig-parted's config checks and its label sequence, without a cluster."""

from __future__ import annotations

import pytest
import yaml

from gpucluster import labels as L
from gpucluster.simulator import nvml
from gpucluster.simulator.agents import mig_manager as mm

A100 = nvml.model("A100-80GB")
SEVEN = ("1g.10gb",) * 7


def data(configs: dict) -> dict[str, str]:
    return {"config.yaml": yaml.safe_dump({"version": "v1", "mig-configs": configs})}


CONFIGS = mm.parse_configs(data({
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
    "seven": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
}))
LABELS = {L.MIG_CONFIG: "seven", L.DEPLOY_DEVICE_PLUGIN: "true", L.DEPLOY_GFD: "true",
          "nvidia.com/gpu.deploy.dcgm": "false"}


@pytest.mark.parametrize("doc, problem", [
    ({"version": "v2", "mig-configs": {}}, "unsupported version"),
    ({"version": "v1", "mig-configs": {}, "extra": 1}, "unknown top-level keys"),
    ({"version": "v1", "mig-configs": {"x": [{"devices": "all"}]}}, "missing mig-enabled"),
    ({"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True}]}}, "mig-devices required"),
    ({"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": False,
                                              "mig-devices": {"1g.10gb": 1}}]}}, "not allowed"),
    ({"version": "v1", "mig-configs": {"x": [{"devices": "some", "mig-enabled": False}]}}, "devices must be"),
    ({"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": False, "gpus": 1}]}}, "unknown keys"),
])
def test_configs_mig_parted_refuses(doc, problem) -> None:
    with pytest.raises(ValueError, match=problem):
        mm.parse_configs({"config.yaml": yaml.safe_dump(doc)})


def test_device_filter_selects_gpus_by_pci_id() -> None:
    entries = [{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.80gb": 1}, "device-filter": "0x20B210DE"},
               {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}, "device-filter": ["0x233010DE"]}]
    assert mm.layout_of(entries, A100, 2) == (("7g.80gb",), ("7g.80gb",))
    assert mm.layout_of(entries, nvml.model("H100-SXM5-80GB"), 1) == (SEVEN,)


def test_per_index_entries() -> None:
    entries = [{"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
               {"devices": [1, 5], "mig-enabled": False}]
    assert mm.layout_of(entries, A100, 2) == (("3g.40gb", "3g.40gb"), ())


def test_the_sequence_pending_then_success() -> None:
    state = mm.MigState.from_json(None, 2)
    assert state.applied == ((), ())
    first = mm.step(state, LABELS, {}, CONFIGS, "", A100)
    assert first.labels == {L.MIG_CONFIG_STATE: "pending", L.DEPLOY_DEVICE_PLUGIN: L.DEPLOY_PAUSED,
                            L.DEPLOY_GFD: L.DEPLOY_PAUSED}  # dcgm was false and stays false
    assert first.state.applied == ((), ())
    paused = {**LABELS, **first.labels}
    second = mm.step(first.state, paused, {}, CONFIGS, "", A100)
    assert second.labels == {L.MIG_CONFIG_STATE: "success", L.DEPLOY_DEVICE_PLUGIN: "true", L.DEPLOY_GFD: "true"}
    assert second.state.applied == (SEVEN, SEVEN)
    third = mm.step(second.state, {**paused, **second.labels}, {}, CONFIGS, "", A100)
    assert third.labels == {L.MIG_CONFIG_STATE: "success"} and third.state == second.state


def test_state_survives_its_annotation() -> None:
    state = mm.MigState((SEVEN, ()), "seven", "pending", "x", "")
    assert mm.MigState.from_json(state.to_json(), 2) == state
    assert mm.MigState.from_json("{broken", 2) == mm.MigState(((), ()))
    assert mm.MigState.from_json(state.to_json(), 3).applied == ((), (), ())  # silicon changed: start over


def test_wedge_fail_and_reboot() -> None:
    first = mm.step(mm.MigState.from_json(None, 1), LABELS, {}, CONFIGS, "", A100)
    paused = {**LABELS, **first.labels}
    wedged = mm.step(first.state, paused, {L.FAULT_MIG_WEDGE: "true"}, CONFIGS, "", A100)
    assert wedged.labels == {L.MIG_CONFIG_STATE: "pending"} and wedged.state.step == "pending"
    failed = mm.step(first.state, paused, {L.FAULT_MIG_FAIL: "true"}, CONFIGS, "", A100)
    assert failed.labels == {L.MIG_CONFIG_STATE: "failed"}  # clients stay paused
    again = mm.step(failed.state, paused, {}, CONFIGS, "", A100)
    assert again.labels == {L.MIG_CONFIG_STATE: "failed"}  # no retry until the label changes
    moved = mm.step(failed.state, {**paused, L.MIG_CONFIG: "all-disabled"}, {}, CONFIGS, "", A100)
    assert moved.labels[L.MIG_CONFIG_STATE] == "success"  # nothing to change: MIG is off already
    reboot = mm.step(first.state, paused, {L.FAULT_MIG_REBOOT: "true"}, CONFIGS, "", A100)
    assert reboot.labels == {L.MIG_CONFIG_STATE: "rebooting"}
    done = mm.step(reboot.state, paused, {L.FAULT_MIG_REBOOT: "true"}, CONFIGS, "", A100)
    assert done.labels[L.MIG_CONFIG_STATE] == "success" and done.state.applied == (SEVEN,)


def test_invalid_or_unknown_config_fails_before_pausing_anything() -> None:
    state = mm.MigState.from_json(None, 1)
    unknown = mm.step(state, {**LABELS, L.MIG_CONFIG: "nope"}, {}, CONFIGS, "", A100)
    assert unknown.labels == {L.MIG_CONFIG_STATE: "failed"} and "nope" in unknown.notes[0]
    broken = mm.step(state, LABELS, {}, None, "config.yaml not found", A100)
    assert broken.labels == {L.MIG_CONFIG_STATE: "failed"} and "config.yaml" in broken.notes[0]
    no_label = mm.step(state, {}, {}, CONFIGS, "", A100)
    assert no_label.labels == {}
