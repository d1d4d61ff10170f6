"""`gpucluster verify`'s watchdog on the local world: MIG and sharing changes followed to the end or
named stuck, and driver upgrades judged by their state label, events and driver pod.

Real: kube-apiserver, kube-controller-manager (the DaemonSet controller writes the ControllerRevisions
and revision hashes the driver-upgrade check compares), kwok. SIMULATED: the GPU agents (the simulator
runs in the background, as in `gpucluster up`); for driver upgrades the test plays the GPU Operator's
upgrade controller (node label and GPUDriverUpgrade events, as k8s-operator-libs writes them) over a
real DaemonSet. Spec: tests/data/watchdog.

The MIG tests need the simulator's MIG-manager sequence (pending -> rebooting -> success) and its
faults gpucluster.dev/simulate-mig-wedge / -fail / -reboot (skipped, saying so, without them).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from cluster_helpers import Cluster, wait_for

from gpucluster import labels
from gpucluster.addons import gpu_simulator
from gpucluster.cli.main import entrypoint
from gpucluster.render import render
from gpucluster.simulator import FAULTS, attach
from gpucluster.spec import load_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]
DATA = Path(__file__).resolve().parents[1] / "data" / "watchdog"
OPERATOR_NS = "gpu-operator"
WEDGE, FAIL = "gpucluster.dev/simulate-mig-wedge", "gpucluster.dev/simulate-mig-fail"
REBOOT = "gpucluster.dev/simulate-mig-reboot"
UPGRADE = "nvidia.com/gpu-driver-upgrade-state"
PAUSED = "paused-for-mig-change"
_known = {*FAULTS.values(), *(v for v in vars(labels).values() if isinstance(v, str))}
needs_mig_sequence = pytest.mark.skipif(
    not {WEDGE, FAIL} <= _known,
    reason="waits on the GPU simulator playing the MIG manager's label sequence and its wedge/fail faults "
           f"({WEDGE}, {FAIL})")


@pytest.fixture(scope="module")
def world(lw: Cluster) -> Iterator[Cluster]:
    spec = load_spec(DATA)
    parts = render(spec).components
    lw.apply(*parts["namespaces"], *parts["gpu-operator"])
    attach(lw.kubeconfig, spec).close()  # the nodes exist from here on
    gpu_simulator.spawn(lw.state_dir, lw.kubeconfig, DATA, interval=1.0)
    wait_for("time-slicing reflected on l4-ts-1", lambda: node_labels(lw, "l4-ts-1").get(
        "nvidia.com/gpu.sharing-strategy") == "time-slicing", timeout=120)
    yield lw
    gpu_simulator.stop(lw.state_dir)


def node_labels(world: Cluster, node: str) -> dict[str, str]:
    return world.get("node", node)["metadata"].get("labels", {})


def verify(world: Cluster, node: str, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, dict]:
    """`gpucluster verify --node NODE -o json`; its rows by check id."""
    capsys.readouterr()
    entrypoint(["verify", "-i", str(DATA), "--kubeconfig", str(world.kubeconfig), "--node", node, "-o", "json",
                *extra])
    out = json.loads(capsys.readouterr().out)
    return {r["check"]: r for r in out["results"]}


# -- sharing -----------------------------------------------------------------------------------------
def test_sharing_change_is_followed_and_a_missing_config_fails(world: Cluster,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    row = verify(world, "l4-ts-1", capsys)["sharing-reconfig"]
    assert row["verdict"] == "pass" and "sharing-strategy=time-slicing, replicas=4" in row["actual"], row
    try:
        world.kubectl("label", "node", "l4-ts-1", "nvidia.com/device-plugin.config=default", "--overwrite")
        row = verify(world, "l4-ts-1", capsys, "--reconfig-deadline", "60")["sharing-reconfig"]
        assert row["verdict"] == "pass" and row["actual"].startswith("sharing-strategy=none"), row
        world.kubectl("label", "node", "l4-ts-1", "nvidia.com/device-plugin.config=l4-typo", "--overwrite")
        row = verify(world, "l4-ts-1", capsys, "--reconfig-deadline", "5")["sharing-reconfig"]
        assert row["verdict"] == "fail" and "specified config l4-typo does not exist" in row["reason"], row
    finally:
        world.kubectl("label", "node", "l4-ts-1", "nvidia.com/device-plugin.config=l4-ts", "--overwrite")


# -- MIG ---------------------------------------------------------------------------------------------
def recover(world: Cluster, fault: str) -> None:
    """The recovery the watchdog prints: drop the fault, give the paused clients back, re-select the layout."""
    world.kubectl("annotate", "node", "a100-1", f"{fault}-")
    paused = [k for k, v in node_labels(world, "a100-1").items() if v == "paused-for-mig-change"]
    if paused:
        world.kubectl("label", "node", "a100-1", *[f"{k}=true" for k in paused], "--overwrite")
    world.kubectl("label", "node", "a100-1", "nvidia.com/mig.config=gpucluster-a100-mig", "--overwrite")
    wait_for("a100-1 back at its layout", lambda: node_labels(world, "a100-1").get(
        "nvidia.com/mig.config.state") == "success" and PAUSED not in node_labels(world, "a100-1").values())


def change_layout(world: Cluster, config: str) -> list[str]:
    """Relabel a100-1's MIG config; the state values it goes through, polled every 0.2 s."""
    seen: list[str] = []
    world.kubectl("label", "node", "a100-1", f"nvidia.com/mig.config={config}", "--overwrite")

    def settled() -> bool:
        state = node_labels(world, "a100-1").get("nvidia.com/mig.config.state", "")
        if not seen or seen[-1] != state:
            seen.append(state)
        return state in ("success", "failed") and len(seen) > 1
    wait_for("a100-1's MIG change to settle", settled, timeout=60, every=0.2)
    return seen


@needs_mig_sequence
def test_a_healthy_mig_change_goes_pending_rebooting_success_and_passes(world: Cluster,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # turning MIG off is a mode change; with a reboot needed the manager shows rebooting in between
    world.kubectl("annotate", "node", "a100-1", f"{REBOOT}=true", "--overwrite")
    try:
        seen = change_layout(world, "all-disabled")
        assert seen[-3:] == ["pending", "rebooting", "success"], seen
        row = verify(world, "a100-1", capsys, "--reconfig-deadline", "60")["mig-reconfig"]
        assert row["verdict"] == "pass" and "success (config all-disabled)" in row["actual"], row
    finally:
        world.kubectl("annotate", "node", "a100-1", f"{REBOOT}-")
    # and back, followed by verify itself from the moment the label changes: pending, then success
    world.kubectl("label", "node", "a100-1", "nvidia.com/mig.config=gpucluster-a100-mig", "--overwrite")
    row = verify(world, "a100-1", capsys, "--reconfig-deadline", "60")["mig-reconfig"]
    assert row["verdict"] == "pass" and "success (config gpucluster-a100-mig)" in row["actual"], row


@needs_mig_sequence
def test_a_wedged_mig_change_fails_as_stuck_with_the_recovery(world: Cluster,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    world.kubectl("annotate", "node", "a100-1", f"{WEDGE}=true", "--overwrite")
    try:
        world.kubectl("label", "node", "a100-1", "nvidia.com/mig.config=all-disabled", "--overwrite")
        wait_for("the manager to start the change", lambda: node_labels(world, "a100-1").get(
            "nvidia.com/mig.config.state") == "pending")
        started = time.monotonic()
        row = verify(world, "a100-1", capsys, "--reconfig-deadline", "15")["mig-reconfig"]
        assert time.monotonic() - started >= 15  # followed for the whole deadline before calling it stuck
        assert row["verdict"] == "fail" and row["actual"].startswith("stuck: nvidia.com/mig.config.state=pending")
        assert "gpu-operator issue 2833" in row["reason"] and "kubectl label node a100-1" in row["reason"], row
        assert int(world.get("node", "a100-1")["status"]["allocatable"].get("nvidia.com/mig-1g.10gb", "0")) == 0
    finally:
        recover(world, WEDGE)
    row = verify(world, "a100-1", capsys, "--reconfig-deadline", "60")["mig-reconfig"]
    assert row["verdict"] == "pass", row  # the recovery the row printed brings the node back


@needs_mig_sequence
def test_a_failed_mig_change_fails_at_once(world: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    world.kubectl("annotate", "node", "a100-1", f"{FAIL}=true", "--overwrite")
    try:
        world.kubectl("label", "node", "a100-1", "nvidia.com/mig.config=all-disabled", "--overwrite")
        wait_for("state failed", lambda: node_labels(world, "a100-1").get("nvidia.com/mig.config.state") == "failed")
        row = verify(world, "a100-1", capsys, "--reconfig-deadline", "60")["mig-reconfig"]
        assert row["verdict"] == "fail" and "could not apply all-disabled" in row["reason"], row
    finally:
        recover(world, FAIL)


# -- driver upgrades -------------------------------------------------------------------------------------
def driver_daemonset(image: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "nvidia-driver-daemonset", "namespace": OPERATOR_NS},
            "spec": {"selector": {"matchLabels": {"app": "nvidia-driver-daemonset"}},
                     "updateStrategy": {"type": "OnDelete"},  # the operator's: its upgrade controller restarts pods
                     "template": {"metadata": {"labels": {"app": "nvidia-driver-daemonset"}},
                                  "spec": {"nodeSelector": {"kubernetes.io/hostname": "l4-1"},
                                           "tolerations": [{"operator": "Exists"}],
                                           "containers": [{"name": "driver", "image": image}]}}}}


def controller_moved(world: Cluster, state: str, seconds_ago: float = 0) -> None:
    """What k8s-operator-libs does on a state change: the node label and a GPUDriverUpgrade event."""
    world.kubectl("label", "node", "l4-1", f"{UPGRADE}={state}", "--overwrite")
    stamp = datetime.fromtimestamp(time.time() - seconds_ago, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    world.apply({"apiVersion": "v1", "kind": "Event",
                 "metadata": {"name": f"l4-1.{uuid.uuid4().hex[:10]}", "namespace": "default"},
                 "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": "l4-1"},
                 "reason": "GPUDriverUpgrade", "type": "Normal", "source": {"component": "gpu-operator"},
                 "message": f"Successfully updated node state label to {state}",
                 "firstTimestamp": stamp, "lastTimestamp": stamp})


def driver_pod(world: Cluster) -> dict:
    pod = driver_pod_now(world)
    assert pod is not None, "no driver pod (not being deleted) in the operator's namespace"
    return pod


def driver_pod_now(world: Cluster) -> dict | None:
    """The driver pod not being deleted, or None between a deleted pod and the one the DaemonSet makes next."""
    pods = world.get("pods", "-n", OPERATOR_NS, "-l", "app=nvidia-driver-daemonset")["items"]
    return next((p for p in pods if not p["metadata"].get("deletionTimestamp")), None)


def test_driver_upgrade_done_failed_jumped_recovered_and_stuck(world: Cluster,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    world.apply(driver_daemonset("nvcr.io/nvidia/driver:580.95.05"))
    wait_for("driver pod Running",
             lambda: (p := driver_pod_now(world)) is not None and p["status"].get("phase") == "Running")
    controller_moved(world, "upgrade-done")
    row = verify(world, "l4-1", capsys)["driver-upgrade"]
    assert row["verdict"] == "pass", row
    # a new driver version: the DaemonSet gets a new revision, the running pod (OnDelete) stays at the old one
    world.apply(driver_daemonset("nvcr.io/nvidia/driver:580.126.20"))
    old = driver_pod(world)["metadata"]["labels"]["controller-revision-hash"]
    wait_for("a new ControllerRevision", lambda: len(world.get("controllerrevisions", "-n", OPERATOR_NS)["items"]) == 2)
    controller_moved(world, "upgrade-failed")
    row = verify(world, "l4-1", capsys)["driver-upgrade"]
    assert row["verdict"] == "fail" and row["actual"].startswith("upgrade-failed") and old in row["actual"], row
    controller_moved(world, "upgrade-done")  # someone relabels it done: nothing recovered
    row = verify(world, "l4-1", capsys)["driver-upgrade"]
    assert row["verdict"] == "fail" and "straight to upgrade-done" in row["reason"], row
    # the recovery: the driver pod restarts at the new revision, the controller goes through uncordon-required
    world.kubectl("delete", "pod", "-n", OPERATOR_NS, driver_pod(world)["metadata"]["name"], "--wait=false")
    wait_for("driver pod at the new revision, Running", lambda: (p := driver_pod_now(world)) is not None and p[
        "metadata"]["labels"].get("controller-revision-hash") != old and p["status"].get("phase") == "Running",
        timeout=120)  # the DaemonSet controller's recreate, on a busy 2-core machine
    controller_moved(world, "uncordon-required")
    controller_moved(world, "upgrade-done")
    row = verify(world, "l4-1", capsys)["driver-upgrade"]
    assert row["verdict"] == "pass", row
    # a step that has not moved for two hours is stuck; the same step inside the deadline is progress
    controller_moved(world, "drain-required", seconds_ago=7200)
    row = verify(world, "l4-1", capsys, "--upgrade-deadline", "3600")["driver-upgrade"]
    assert row["verdict"] == "fail" and row["actual"].startswith("stuck at drain-required"), row
    row = verify(world, "l4-1", capsys, "--upgrade-deadline", "86400")["driver-upgrade"]
    assert row["verdict"] == "pass" and row["actual"].startswith("in progress: drain-required"), row
