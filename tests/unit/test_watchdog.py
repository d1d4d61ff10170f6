"""The reconfiguration watchdog and the driver-upgrade check on recorded node objects.

Node objects are written with the labels NVIDIA's agents set, in the order they set them (mig-parted
v0.14.0 reconfigure.go: pending, clients paused, rebooting, success; k8s-operator-libs consts.go: the
upgrade states), and managedFields as the API server records them; the live side is
tests/integration/test_watchdog_live.py. Each path has its failing case next to its passing one.
"""

from __future__ import annotations

import pytest
from pinned_rows import pin

from gpucluster.verify import upgrades, watchdog
from gpucluster.verify.model import Verdict
from gpucluster.verify.nodestate import MIG_PAUSED_LABELS, PAUSED, label_since, mig_change

T0 = "2026-01-01T00:00:00Z"
E0 = 1767225600.0  # T0 in epoch seconds
CONFIGS = {"default": "version: v1\n", "l4-infer": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
           "    - {name: nvidia.com/gpu, replicas: 4}\n"}


def node(name: str, labels: dict[str, str], *, owned: tuple[str, ...] = (), time: str = T0) -> dict:
    fields = [{"manager": "nvidia-mig-manager", "operation": "Update", "time": time,
               "fieldsV1": {"f:metadata": {"f:labels": {f"f:{k}": {} for k in owned}}}}] if owned else []
    return {"metadata": {"name": name, "labels": labels, "managedFields": fields}}


def mig(state: str, *, paused: bool = False, name: str = "a100-1") -> dict:
    labels = {"nvidia.com/mig.config": "gpucluster-a100-mig", "nvidia.com/mig.config.state": state}
    if paused:
        labels |= {k: PAUSED for k in MIG_PAUSED_LABELS[:4]}
    return node(name, labels, owned=("nvidia.com/mig.config.state",))


def one(nodes: list[dict], *, now: float = E0 + 60, deadline: float = 600, configs: dict | None = None,
        watch: watchdog.Watch | None = None) -> list:
    rows = watchdog.checks(nodes, CONFIGS if configs is None else configs, deadline=deadline, now=now, watch=watch)
    pin(rows)
    return rows


def test_managed_fields_give_a_lower_bound_of_a_labels_age() -> None:
    n = mig("pending")
    assert label_since(n, "nvidia.com/mig.config.state") == E0
    assert label_since(n, "nvidia.com/mig.config") is None  # not owned by that entry
    assert mig_change(n, E0 + 30).age == 30  # type: ignore[union-attr]


# -- mig-reconfig ---------------------------------------------------------------------------------
def test_mig_success_passes_and_a_node_without_mig_has_no_row() -> None:
    rows = one([mig("success"), node("l4-1", {"nvidia.com/gpu.present": "true"})])
    assert [(r.check, r.subject, r.verdict) for r in rows] == [("mig-reconfig", "a100-1", Verdict.passed)]


def test_the_2833_wedge_fails_after_the_deadline_with_the_recovery() -> None:
    rows = one([mig("pending", paused=True)], now=E0 + 900)
    r = rows[0]
    assert r.verdict is Verdict.failed and r.actual.startswith("stuck: nvidia.com/mig.config.state=pending")
    assert "gpu-operator issue 2833" in r.reason
    assert "kubectl label node a100-1 nvidia.com/gpu.deploy.dcgm=true nvidia.com/gpu.deploy.dcgm-exporter=true" \
        in r.reason
    assert "nvidia.com/mig.config=gpucluster-a100-mig --overwrite" in r.reason
    # the same labels inside the deadline: in progress, not yet stuck (and not passed either)
    r = one([mig("pending", paused=True)], now=E0 + 60)[0]
    assert r.verdict is Verdict.failed and r.actual.startswith("in progress") and "2833" not in r.reason


def test_failed_and_rebooting() -> None:
    r = one([mig("failed")])[0]
    assert r.verdict is Verdict.failed and "could not apply gpucluster-a100-mig" in r.reason
    r = one([mig("rebooting")], now=E0 + 900)[0]
    assert r.verdict is Verdict.failed and "rebooted" in r.reason


def test_a_new_config_the_manager_has_not_answered_is_not_taken_for_its_success() -> None:
    chosen = node("a100-1", {"nvidia.com/mig.config": "all-disabled", "nvidia.com/mig.config.state": "success"})
    chosen["metadata"]["managedFields"] = [
        {"manager": "nvidia-mig-manager", "time": T0, "fieldsV1": {"f:metadata": {"f:labels": {
            "f:nvidia.com/mig.config.state": {}}}}},
        {"manager": "kubectl-label", "time": "2026-01-01T00:10:00Z", "fieldsV1": {"f:metadata": {"f:labels": {
            "f:nvidia.com/mig.config": {}}}}}]
    r = one([chosen], now=E0 + 605)[0]  # 5 s after the label changed: the success shown is the old config's
    assert r.verdict is Verdict.failed and "has not answered yet" in r.actual
    assert watchdog.unsettled(chosen, CONFIGS, E0 + 605) == "all-disabled chosen"
    r = one([chosen], now=E0 + 700)[0]  # past the grace: success is the manager's answer (already applied)
    assert r.verdict is Verdict.passed


def test_a_config_chosen_in_the_same_second_as_the_last_state_is_not_answered_yet() -> None:
    """managedFields times have one-second resolution: the live watchdog test relabelled a node in the second the
    simulated manager wrote its previous success, and verify took that success for the new config's."""
    def labelled(config_writer: str) -> dict:
        n = node("a100-1", {"nvidia.com/mig.config": "gpucluster-a100-mig", "nvidia.com/mig.config.state": "success"})
        n["metadata"]["managedFields"] = [
            {"manager": "nvidia-mig-manager", "operation": "Update", "time": T0, "fieldsV1": {"f:metadata": {
                "f:labels": {"f:nvidia.com/mig.config.state": {}}}}},
            {"manager": config_writer, "operation": "Update", "time": T0, "fieldsV1": {"f:metadata": {
                "f:labels": {"f:nvidia.com/mig.config": {}}}}}]
        return n
    r = one([labelled("kubectl-label")], now=E0 + 1)[0]
    assert r.verdict is Verdict.failed and "has not answered yet" in r.actual
    # one writer of both labels (its entries merge into one in reality) wrote them together: answered
    assert one([labelled("nvidia-mig-manager")], now=E0 + 1)[0].verdict is Verdict.passed


def test_success_with_clients_left_paused_is_not_done() -> None:
    r = one([mig("success", paused=True)], now=E0 + 900)[0]
    assert r.verdict is Verdict.failed and "never given back" in r.reason
    assert "nvidia.com/gpu.deploy.device-plugin=true" in r.reason


def test_host_managed_mig_has_no_row_but_a_state_the_manager_never_wrote_fails() -> None:
    host = node("a100-1", {"nvidia.com/mig.config": "x", "nvidia.com/gpu.deploy.mig-manager": "false"})
    assert one([host]) == []  # no MIG manager there: node-capacity judges the layout the host applied
    r = one([node("a100-1", {"nvidia.com/mig.config": "x"})])[0]
    assert r.verdict is Verdict.failed and "has not reported a state" in r.reason


def _sequence(states: list[dict]) -> tuple:
    """follow() over recorded snapshots, one per poll, with a fake clock (2 s per poll)."""
    clock = {"t": 0.0}
    polls = iter(states)
    last: dict = {}

    def fetch() -> tuple[list[dict], dict]:
        nonlocal last
        last = next(polls, last)
        return [last], CONFIGS

    def sleep(s: float) -> None:
        clock["t"] += s
    return watchdog.follow(fetch, 20, clock=lambda: clock["t"], wall=lambda: E0 + clock["t"], sleep=sleep)


def test_follow_sees_the_managers_sequence_through_to_success() -> None:
    nodes, configs, watch = _sequence([mig("pending", paused=True), mig("rebooting"), mig("success")])
    assert watch.seen["a100-1"] == ["pending", "rebooting", "success"]
    r = watchdog.checks(nodes, configs, deadline=20, watch=watch, now=E0 + 5)[0]
    assert r.verdict is Verdict.passed and "seen pending -> rebooting -> success" in r.actual


def test_follow_gives_up_on_a_wedged_node_at_the_deadline() -> None:
    nodes, configs, watch = _sequence([mig("pending", paused=True)] * 50)
    assert watch.observed("a100-1") >= 20
    r = watchdog.checks(nodes, configs, deadline=20, watch=watch, now=E0 + 5)[0]
    assert r.verdict is Verdict.failed and "2833" in r.reason


# -- sharing-reconfig ------------------------------------------------------------------------------
def shared(key: str, strategy: str, replicas: str) -> dict:
    return node("l4-1", {"nvidia.com/device-plugin.config": key, "nvidia.com/gpu.sharing-strategy": strategy,
                         "nvidia.com/gpu.replicas": replicas}, owned=("nvidia.com/device-plugin.config",))


def test_sharing_reflected_passes_and_a_stale_gfd_fails() -> None:
    row = one([shared("l4-infer", "time-slicing", "4")])[0]
    assert (row.check, row.verdict) == ("sharing-reconfig", Verdict.passed)
    assert one([shared("default", "none", "1")])[0].verdict is Verdict.passed
    r = one([shared("l4-infer", "none", "1")], now=E0 + 900)[0]
    assert r.verdict is Verdict.failed and r.actual == "stuck: sharing-strategy=none, replicas=1"
    assert "delete pod" in r.reason and "spec.nodeName=l4-1" in r.reason
    r = one([shared("l4-infer", "none", "1")], now=E0 + 10)[0]
    assert r.verdict is Verdict.failed and r.actual.startswith("in progress")


def test_a_label_naming_a_missing_config_fails_at_once() -> None:
    r = one([shared("l4-typo", "none", "1")])[0]
    assert r.verdict is Verdict.failed and "specified config l4-typo does not exist" in r.reason
    assert "default, l4-infer" in r.reason
    assert one([shared("default", "none", "1")], configs=None)[0].verdict is Verdict.passed
    r = watchdog.checks([shared("default", "none", "1")], None, now=E0)[0]
    assert r.verdict is Verdict.failed and r.actual == "missing"


def test_sharing_of_reads_the_device_plugin_config() -> None:
    both = ("version: v1\nsharing:\n  timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2}]}\n"
            "  mps: {resources: [{name: nvidia.com/gpu, replicas: 3}]}\n")
    assert watchdog.sharing_of(both) == ("mps", 3)  # mps wins (device-plugin fact sharing-mps-wins-over-time-slicing)
    assert watchdog.sharing_of("version: v1\n") == ("none", 1)


# -- driver-upgrade ------------------------------------------------------------------------------------
def up_node(state: str, name: str = "h200-1") -> dict:
    return node(name, {upgrades.STATE_LABEL: state})


def moved(name: str, state: str, at: float) -> dict:
    stamp = f"2026-01-01T{int(at // 3600):02d}:{int(at % 3600 // 60):02d}:{int(at % 60):02d}Z"
    return {"involvedObject": {"kind": "Node", "name": name}, "reason": "GPUDriverUpgrade", "type": "Normal",
            "message": f"Successfully updated node state label to {state}", "lastTimestamp": stamp}


def driver(name: str = "h200-1", *, ready: bool = True, revision: str = "abc") -> upgrades.UpgradeInputs:
    ds = {"metadata": {"name": "nvidia-driver-daemonset"}}
    revs = [{"metadata": {"name": "nvidia-driver-daemonset-old"}, "revision": 1},
            {"metadata": {"name": "nvidia-driver-daemonset-abc"}, "revision": 2}]
    pod = {"metadata": {"name": "nvidia-driver-daemonset-x", "labels": {"controller-revision-hash": revision},
                        "ownerReferences": [{"kind": "DaemonSet", "name": "nvidia-driver-daemonset"}]},
           "spec": {"nodeName": name},
           "status": {"phase": "Running", "containerStatuses": [{"ready": ready, "restartCount": 0 if ready else 12}]}}
    return upgrades.UpgradeInputs(daemonsets=[ds], revisions=revs, pods=[pod])


def urows(nodes: list[dict], inputs: upgrades.UpgradeInputs, now: float = E0 + 7200) -> list:
    rows = list(upgrades.rows(nodes, inputs, deadline=3600, now=now))
    pin(rows)
    return rows


def test_done_with_the_driver_in_sync_passes() -> None:
    r = urows([up_node("upgrade-done")], driver())[0]
    assert (r.check, r.verdict) == ("driver-upgrade", Verdict.passed) and "revision abc" in r.actual


def test_done_without_recovery_fails_and_names_the_jump_from_failed() -> None:
    inputs = driver(ready=False)
    inputs.events = [moved("h200-1", "upgrade-failed", 60), moved("h200-1", "upgrade-done", 120)]
    r = urows([up_node("upgrade-done")], inputs)[0]
    assert r.verdict is Verdict.failed and "straight to upgrade-done" in r.reason and "not Ready" in r.actual
    # the same pod at the old revision, after the proper recovery path, still fails (not in sync), without the jump
    inputs = driver(revision="old")
    inputs.events = [moved("h200-1", "upgrade-failed", 60), moved("h200-1", "uncordon-required", 90),
                     moved("h200-1", "upgrade-done", 120)]
    r = urows([up_node("upgrade-done")], inputs)[0]
    assert r.verdict is Verdict.failed and "straight" not in r.reason and "(newest abc)" in r.actual


def test_failed_fails_with_the_driver_pod_and_how_to_recover() -> None:
    r = urows([up_node("upgrade-failed")], driver(ready=False))[0]
    assert r.verdict is Verdict.failed and "12 restarts" in r.actual and "uncordon-required by itself" in r.reason


def test_a_dra_only_node_failing_after_validation_is_upstreams_path_not_a_fault() -> None:
    # NVIDIA/gpu-operator#2550: its validator never gets Ready; the controller fails it after 600 s and recovers it
    def row(inputs: upgrades.UpgradeInputs, before: str, dra_only: set[str], state: str = "upgrade-failed"):
        inputs.events = [moved("h100-1", before, 0)] + ([moved("h100-1", state, 600)] if state != before else [])
        return next(upgrades.rows([up_node(state, "h100-1")], inputs, deadline=3600, now=E0 + 4000,
                                  dra_only=dra_only))

    r = row(driver("h100-1"), "validation-required", {"h100-1"})
    assert r.verdict is Verdict.passed and "gpu-operator#2550" in r.actual and "after validation-required" in r.actual
    # a device-plugin node, a driver pod not Ready, a failure from another step: still failures
    assert row(driver("h100-1"), "validation-required", set()).verdict is Verdict.failed
    assert row(driver("h100-1", ready=False), "validation-required", {"h100-1"}).verdict is Verdict.failed
    assert row(driver("h100-1"), "pod-restart-required", {"h100-1"}).verdict is Verdict.failed
    # stuck at validation-required there names the bug rather than "read its init containers' logs"
    r = row(driver("h100-1"), "validation-required", {"h100-1"}, state="validation-required")
    assert r.verdict is Verdict.failed and "gpu-operator#2550" in r.reason


def test_a_step_past_the_deadline_is_stuck_and_one_inside_is_progress() -> None:
    inputs = driver()
    inputs.events = [moved("h200-1", "drain-required", 0)]
    r = urows([up_node("drain-required")], inputs, now=E0 + 4000)[0]
    assert r.verdict is Verdict.failed and r.actual == "stuck at drain-required for 4000 s"
    assert "PodDisruptionBudget" in r.reason
    r = urows([up_node("drain-required")], inputs, now=E0 + 100)[0]
    assert r.verdict is Verdict.passed and r.actual == "in progress: drain-required for 100 s"


def test_waiting_at_upgrade_required_is_fine_until_the_whole_rollout_stalls() -> None:
    inputs = driver()
    inputs.events = [moved("a", "upgrade-required", 0), moved("b", "upgrade-required", 0),
                     moved("b", "cordon-required", 3000)]
    nodes = [up_node("upgrade-required", "a"), up_node("cordon-required", "b")]
    r = urows(nodes, inputs, now=E0 + 3500)[0]
    assert r.verdict is Verdict.passed and "waiting its turn" in r.actual
    r = urows(nodes, inputs, now=E0 + 9000)[0]
    assert r.verdict is Verdict.failed and "stalled" in r.reason


@pytest.mark.parametrize("state", ["", None])
def test_nodes_the_controller_does_not_track_have_no_row(state: str | None) -> None:
    n = node("x", {} if state is None else {upgrades.STATE_LABEL: state})
    assert urows([n], driver()) == []
