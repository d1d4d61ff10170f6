"""The GPU simulator's agents offline: what each node publishes from the deployed objects.

GFD's labels and the device plugin's resources come from NVIDIA's own code (nvidia-oracle); these
tests need the built tool (skipped without it, failing under GPUCLUSTER_REQUIRE_TOOLS=1). The first
test is the cross-check of the two independent sides: fed with the rendered objects, the simulator
(upstream code over NVML facts) must publish what verification expects (the spec over the catalog).
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml
from sim_helpers import deployed, extended, publish

from gpucluster import catalog, expected
from gpucluster import labels as L
from gpucluster.simulator import agents
from gpucluster.simulator.agents.operator import Operator
from gpucluster.simulator.silicon import gpu_uuid
from gpucluster.verify.cluster import device_problems


@pytest.mark.parametrize("inventory", ["local", "lab"])
def test_rendered_objects_give_the_nodes_verification_expects(inventory, request, oracle) -> None:
    spec = request.getfixturevalue(inventory)
    view = deployed(spec)
    for host, state in expected.host_states(spec).items():
        got = publish(spec, host, view, oracle)
        want = {k: v for k, v in state.labels.items() if L.is_agent_label(k)}
        assert {k: got.labels.get(k, "(missing)") for k in want} == want, host
        assert extended(got.capacity) == state.resources, host
        assert extended(got.allocatable) == state.resources, host
        assert got.notes == [], (host, got.notes)
        assert (got.devices is None) == (not state.devices), host
        if state.devices:  # verify's own DRA check finds nothing to object to
            assert device_problems(state.devices, got.devices or []) == [], host


def test_local_inventory_numbers(local, oracle) -> None:
    view = deployed(local)
    assert extended(publish(local, "l4-1", view, oracle).allocatable) == {"nvidia.com/gpu": 16}
    assert extended(publish(local, "h200-1", view, oracle).allocatable) == {"nvidia.com/gpu": 8}
    a100 = publish(local, "a100-1", view, oracle)
    assert extended(a100.allocatable) == {"nvidia.com/mig-1g.10gb": 56}
    assert a100.labels[L.GPU_REPLICAS] == "0"  # upstream: no full GPU left under mixed MIG
    assert a100.labels["nvidia.com/mig-1g.10gb.memory"] == "9856"  # NVML's size, not 10 x 1024
    h100 = publish(local, "h100-1", view, oracle)
    assert extended(h100.allocatable) == {"rdma/rdma_shared_device_a": local.networking.rdma_hca_max}
    assert len(h100.devices or []) == 8
    cp = publish(local, "cp-1", view, oracle)
    assert cp.labels == {} and cp.devices is None and extended(cp.capacity) == {}


# -- the GPU Operator and its config manager -----------------------------------------------------


def test_before_the_operator_is_installed_nothing_is_advertised(local, oracle) -> None:
    view = deployed(local, operator=dataclasses.replace(deployed(local).operator, installed=False))
    got = publish(local, "l4-1", view, oracle)
    assert extended(got.capacity) == {}
    assert got.labels == {L.NFD_NVIDIA_PCI: "true"}  # NFD's PCI label only; no gpu.present yet


def test_operator_adds_missing_deploy_labels_and_keeps_ours(local, oracle) -> None:
    history: list[agents.Desired] = []
    got = publish(local, "h100-1", deployed(local), oracle, history=history)
    assert got.labels[L.GPU_PRESENT] == "true"
    assert got.labels[L.DEPLOY_DEVICE_PLUGIN] == "false"  # rendered for the DRA pool, honoured
    assert got.labels[L.DEPLOY_GFD] == "true"
    # MIG-capable and the MIG manager is on: the operator sets its all-disabled default once
    assert history[0].labels[L.MIG_CONFIG] == "all-disabled" and L.MIG_CONFIG not in got.labels
    assert got.labels[L.MIG_CONFIG_STATE] == "success"


def test_changing_replicas_in_the_configmap_changes_allocatable(local, oracle) -> None:
    view = deployed(local)
    data = dict(view.device_plugin_data or {})
    doc = yaml.safe_load(data["l4-infer"])
    doc["sharing"]["timeSlicing"]["resources"][0]["replicas"] = 2
    data["l4-infer"] = yaml.safe_dump(doc)
    got = publish(local, "l4-1", dataclasses.replace(view, device_plugin_data=data), oracle)
    assert extended(got.allocatable) == {"nvidia.com/gpu": 8}
    assert got.labels[L.GPU_REPLICAS] == "2" and got.labels[L.GPU_PRODUCT] == "NVIDIA-L4-SHARED"


def test_a_label_naming_a_missing_key_stops_both_agents(local, oracle) -> None:
    # k8s-device-plugin cmd/config-manager/main.go:354: an error, not a fallback to the default.
    got = publish(local, "l4-1", deployed(local), oracle, labels={L.DEVICE_PLUGIN_CONFIG: "nope"})
    assert extended(got.capacity) == {} and L.GPU_PRODUCT not in got.labels
    assert any("specified config nope does not exist" in n for n in got.notes)


def test_no_label_uses_the_operators_default_key(local, oracle) -> None:
    view = deployed(local)
    data = dict(view.device_plugin_data or {})
    data["default"] = data["l4-infer"]  # make the default visibly different: time-slicing x4
    got = publish(local, "l4-3", dataclasses.replace(view, device_plugin_data=data), oracle, labels={L.DRA: "false"})
    assert got.labels[L.GPU_SHARING_STRATEGY] == "time-slicing"


def test_missing_configmap_keeps_the_agents_from_starting(local, oracle) -> None:
    got = publish(local, "l4-1", deployed(local, device_plugin_data=None), oracle)
    assert extended(got.capacity) == {}
    assert any("cannot mount" in n for n in got.notes)


def test_a_config_upstream_refuses_starts_neither_agent(local, oracle) -> None:
    view = deployed(local)
    data = dict(view.device_plugin_data or {})
    data["l4-infer"] = "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: -1}]}}"
    got = publish(local, "l4-1", dataclasses.replace(view, device_plugin_data=data), oracle)
    assert extended(got.capacity) == {}
    assert any("would not start" in n for n in got.notes), got.notes


def test_mps_under_mixed_strategy_is_refused_by_the_plugin(local, oracle) -> None:
    view = deployed(local)
    data = dict(view.device_plugin_data or {})
    doc = yaml.safe_load(data["l4-infer"])
    sharing = doc["sharing"].pop("timeSlicing")
    sharing.pop("failRequestsGreaterThanOne", None)
    doc["sharing"]["mps"] = sharing
    data["l4-infer"] = yaml.safe_dump(doc)
    op = dataclasses.replace(view.operator, mig_strategy="mixed")
    got = publish(local, "l4-1", dataclasses.replace(view, device_plugin_data=data, operator=op), oracle)
    assert extended(got.capacity) == {}
    assert any("mixed is not supported with MPS" in n for n in got.notes), got.notes


def test_rename_by_default_drops_the_shared_suffix(local, oracle) -> None:
    view = deployed(local)
    data = dict(view.device_plugin_data or {})
    data["l4-infer"] = data["l4-infer"].replace("renameByDefault: false", "renameByDefault: true")
    got = publish(local, "l4-1", dataclasses.replace(view, device_plugin_data=data), oracle)
    assert extended(got.capacity) == {"nvidia.com/gpu.shared": 16}
    assert got.labels[L.GPU_PRODUCT] == "NVIDIA-L4"


def test_chart_defaults_fill_unset_values() -> None:
    op = Operator.from_values({}, installed=True)
    assert (op.mig_strategy, op.device_plugin, op.gfd, op.mig_default) == ("single", True, True, "all-disabled")


# -- the MIG manager in sequence -----------------------------------------------------------------


def test_a_mig_change_goes_pending_then_success_and_pauses_the_clients(local, oracle) -> None:
    history: list[agents.Desired] = []
    final = publish(local, "a100-1", deployed(local), oracle, syncs=3, history=history)
    states = [d.labels.get(L.MIG_CONFIG_STATE) for d in history]
    assert states == ["pending", "success", "success"]
    assert history[0].labels[L.DEPLOY_DEVICE_PLUGIN] == L.DEPLOY_PAUSED
    assert history[0].labels[L.DEPLOY_GFD] == L.DEPLOY_PAUSED
    assert extended(history[0].allocatable) == {}  # the plugin never ran before the change
    assert history[1].labels[L.DEPLOY_DEVICE_PLUGIN] == "true"
    assert extended(final.allocatable) == {"nvidia.com/mig-1g.10gb": 56}


def test_a_wedged_mig_change_stays_pending_with_zero_allocatable(local, oracle) -> None:
    view = deployed(local)
    settled = publish(local, "a100-1", view, oracle)
    # a change of layout with the manager wedged (gpu-operator issue 2833)
    history: list[agents.Desired] = []
    got = publish(local, "a100-1", view, oracle, labels={**settled.labels, L.MIG_CONFIG: "all-disabled"},
                  annotations={**settled.annotations, L.FAULT_MIG_WEDGE: "true"}, syncs=4, history=history)
    assert got.labels[L.MIG_CONFIG_STATE] == "pending"
    assert got.labels[L.DEPLOY_DEVICE_PLUGIN] == L.DEPLOY_PAUSED


def test_a_failed_apply_stays_failed_until_the_label_changes(local, oracle) -> None:
    view = deployed(local)
    got = publish(local, "a100-1", view, oracle, annotations={L.FAULT_MIG_FAIL: "true"}, syncs=4)
    assert got.labels[L.MIG_CONFIG_STATE] == "failed"
    assert got.labels[L.DEPLOY_DEVICE_PLUGIN] == L.DEPLOY_PAUSED  # left paused, as upstream does


def test_a_mode_change_can_need_a_reboot(local, oracle) -> None:
    history: list[agents.Desired] = []
    publish(local, "a100-1", deployed(local), oracle, annotations={L.FAULT_MIG_REBOOT: "true"}, syncs=3,
            history=history)
    assert [d.labels.get(L.MIG_CONFIG_STATE) for d in history] == ["pending", "rebooting", "success"]


def test_an_unknown_config_fails_without_touching_the_gpus(local, oracle) -> None:
    got = publish(local, "a100-1", deployed(local), oracle, labels={L.MIG_CONFIG: "no-such-config"})
    assert got.labels[L.MIG_CONFIG_STATE] == "failed"
    assert extended(got.allocatable) == {"nvidia.com/gpu": 8}  # MIG never enabled: whole GPUs


def test_a_layout_that_does_not_fit_fails(local, oracle) -> None:
    view = deployed(local)
    doc = yaml.safe_load((view.mig_data or {})["config.yaml"])
    doc["mig-configs"]["gpucluster-a100-mig"] = [{"devices": "all", "mig-enabled": True,
                                                  "mig-devices": {"1g.10gb": 9}}]
    got = publish(local, "a100-1", dataclasses.replace(view, mig_data={"config.yaml": yaml.safe_dump(doc)}), oracle)
    assert got.labels[L.MIG_CONFIG_STATE] == "failed"
    assert any("exceeds" in n for n in got.notes)


def test_host_managed_mig_is_applied_without_the_manager(local, oracle) -> None:
    got = publish(local, "a100-1", deployed(local), oracle, labels={L.DEPLOY_MIG_MANAGER: "false"}, syncs=1)
    assert L.MIG_CONFIG_STATE not in got.labels  # no manager, no state label
    assert extended(got.allocatable) == {"nvidia.com/mig-1g.10gb": 56}


# -- DRA ---------------------------------------------------------------------------------------------


def test_dra_whole_gpu_devices(local, oracle) -> None:
    dev = (publish(local, "h100-1", deployed(local), oracle).devices or [])[3]
    assert dev["name"] == "gpu-3"
    attrs = dev["attributes"]
    assert attrs["uuid"] == {"string": gpu_uuid("local", "h100-1", 3)}
    assert attrs["cudaDriverVersion"] == {"version": "13.0.0"}
    assert int(dev["capacity"]["memory"]["value"]) == catalog.get("H100-SXM5-80GB").memory_bytes


def test_dra_static_mig_devices_are_named_by_profile_id_and_placement(local, oracle) -> None:
    devices = publish(local, "a100-2", deployed(local), oracle).devices or []
    names = [d["name"] for d in devices]
    assert len(names) == 8 * 4 and not [n for n in names if re.fullmatch(r"gpu-\d+", n)]
    assert {n for n in names if n.startswith("gpu-0-")} == {
        "gpu-0-mig-3g40gb-9-4", "gpu-0-mig-2g20gb-14-2", "gpu-0-mig-1g10gb-19-1", "gpu-0-mig-1g10gb-19-0"}


def test_dra_needs_the_label_and_the_driver(local, oracle) -> None:
    view = deployed(local)
    assert publish(local, "h200-1", view, oracle).devices is None
    assert len(publish(local, "h200-1", view, oracle, labels={L.DRA: "true"}).devices or []) == 8
    assert publish(local, "h100-1", dataclasses.replace(view, dra=False), oracle).devices is None


# -- faults -----------------------------------------------------------------------------------------


def test_unhealthy_gpu_lowers_allocatable_not_capacity(local, oracle) -> None:
    view = deployed(local)
    got = publish(local, "h200-1", view, oracle, annotations={L.FAULT_UNHEALTHY_GPUS: "2"})
    assert (got.capacity["nvidia.com/gpu"], got.allocatable["nvidia.com/gpu"]) == ("8", "7")
    l4 = publish(local, "l4-1", view, oracle, annotations={L.FAULT_UNHEALTHY_GPUS: "0,9"})  # 9: no such GPU
    assert (l4.capacity["nvidia.com/gpu"], l4.allocatable["nvidia.com/gpu"]) == ("16", "12")
    # The DRA driver keeps unhealthy GPUs published (its health check gate is off by default).
    dra = publish(local, "h100-1", view, oracle, annotations={L.FAULT_UNHEALTHY_GPUS: "1"})
    assert len(dra.devices or []) == 8


def test_missing_device_and_wrong_product(local, oracle) -> None:
    got = publish(local, "h100-2", deployed(local), oracle,
                  annotations={L.FAULT_MISSING_DEVICES: "gpu-5, gpu-7", L.FAULT_PRODUCT: "Tesla-T4"})
    assert [d["name"] for d in got.devices or []] == [f"gpu-{i}" for i in (0, 1, 2, 3, 4, 6)]
    assert got.labels[L.GPU_PRODUCT] == "Tesla-T4"


def test_verify_objects_to_devices_that_break_the_rules(local, oracle) -> None:
    # The dra-slices check is not a rubber stamp: each of these edits of a correct slice is caught.
    want = expected.host_states(local)["a100-2"].devices
    good = publish(local, "a100-2", deployed(local), oracle).devices or []
    assert device_problems(want, good) == []

    def edited(device: str, **attrs: object) -> list[dict]:
        out = [dict(d) for d in good]
        for d in out:
            if d["name"] == device:
                d.update(attrs)
        return out

    overlap = edited("gpu-0-mig-1g10gb-19-0", name="gpu-0-mig-1g10gb-19-4")
    assert any("overlaps" in p for p in device_problems(want, overlap))
    bad_start = edited("gpu-0-mig-3g40gb-9-4", name="gpu-0-mig-3g40gb-9-2")
    assert any("cannot start" in p for p in device_problems(want, bad_start))
    small = edited("gpu-0-mig-2g20gb-14-2", capacity={"memory": {"value": "10Gi"}})
    assert any(".memory=" in p for p in device_problems(want, small))
    assert any("1 devices (want 2)" in p for p in device_problems(
        want, [d for d in good if d["name"] != "gpu-3-mig-1g10gb-19-0"]))
    assert any("unexpected gpu-9" in p for p in device_problems(want, [*good, {"name": "gpu-9"}]))
