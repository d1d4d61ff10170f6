"""`gpucluster node remove` on real kubelets: the site scenario's cluster loses a worker for good.

The hosts are the ones the site scenario's `molecule test` left converged and verified (conftest's
``scenario_runs`` keeps them for this test, which destroys them); run alone, the test converges the
scenario first. From the controller, as an operator would:

1. a control-plane node is refused (exit 2) and left as it was; so is a remove without --yes on a
   stdin that is not a terminal;
2. with the worker taken out of a copy of the inventory, `verify` fails `node-known` for its Node;
3. `node remove` drains it, resets its host through playbooks/remove-node.yml (`kubeadm reset`: the
   kubelet's configuration gone, the kubelet stopped and disabled), deletes its Node, which stays
   deleted (nothing registers it again), and drops the Node's label patch from the platform stack's
   state;
4. a second `node remove` changes nothing and says so;
5. `up --skip-hosts` with the trimmed inventory (a copy in another folder, with a copy of the stack
   state) converges the stacks and its verify passes: the cluster without the worker is what the spec
   says, and the Node did not come back (before the patch was dropped, this `up` created it again).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from molecule_helpers import (
    NODE_REMOVAL_TEST,
    after_scenario_run,
    left_created,
    molecule,
    scenario_env,
    state_dir,
    tail,
)

from gpucluster.toolchain import path_of

pytestmark = [pytest.mark.molecule, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "molecule" / "site" / "inventory"
WORKER = "gpuc-site-h100"   # its pool (h100-train) holds no other host; no tenant's quota names its devices
CONTROL_PLANE = "gpuc-site-cp"
# What the site's own converge passes (molecule/site/converge.yml): no chart repositories here, and an
# enforcer the spec brings that verify cannot measure.
ALLOW = ("--no-chart-repositories", "--allow-not-measured", "network-policy-enforcer")


def _trimmed(tmp: Path) -> Path:
    """A copy of the site inventory without WORKER and its pool."""
    out = tmp / "inventory"
    shutil.copytree(INVENTORY, out)
    spec = yaml.safe_load((out / "cluster.yaml").read_text())
    spec["hosts"] = [h for h in spec["hosts"] if h["name"] != WORKER]
    spec["nodePools"] = [p for p in spec["nodePools"] if WORKER not in p["hosts"]]
    (out / "cluster.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return out


def _run(env: dict[str, str], *args: str, stdin: str = "", timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["gpucluster", *args], env=env, input=stdin, capture_output=True, text=True,
                          timeout=timeout, check=False)


def _podman(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", "exec", WORKER, *args], env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def test_a_removed_worker_is_drained_reset_and_deleted_and_the_cluster_verifies_without_it(
        molecule_env, scenario_runs, request, tmp_path):
    assert request.node.originalname == NODE_REMOVAL_TEST  # conftest keeps the site's hosts for it by this name
    env = scenario_env("site", molecule_env, request)
    after_scenario_run(scenario_runs, "site")
    try:
        if not left_created("site"):  # run alone, or the scenario's own run failed: converge it as it is
            first = molecule(env, "site", "converge", timeout=2400)
            assert first.returncode == 0, tail(first)
        state = state_dir("site") / "gpucluster"
        kubeconfig = state / "admin.conf"
        env = {**env, "GPUCLUSTER_STATE": str(tmp_path / "state")}  # nothing lands in the user's state folder

        def kubectl(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([str(path_of("kubectl")), f"--kubeconfig={kubeconfig}", *args], env=env,
                                  capture_output=True, text=True, timeout=120, check=False)

        base = ("-i", str(INVENTORY), "--state-dir", str(state))
        # 1. Refusals, before any change.
        refused = _run(env, "node", "remove", CONTROL_PLANE, *base, "--yes")
        assert refused.returncode == 2 and "control-plane node" in refused.stderr, refused.stderr
        unasked = _run(env, "node", "remove", WORKER, *base)
        assert unasked.returncode == 2 and "--yes" in unasked.stderr, unasked.stderr
        for name in (CONTROL_PLANE, WORKER):
            node = json.loads(kubectl("get", "node", name, "-o", "json").stdout)
            assert not node["spec"].get("unschedulable"), f"{name} was cordoned by a refused remove"

        # 2. The worker out of the spec but still in the cluster: verify names it.
        trimmed = _trimmed(tmp_path)
        before = _run(env, "verify", "-i", str(trimmed), "--kubeconfig", str(kubeconfig), *ALLOW, "-o", "json")
        rows = {(r["check"], r["subject"]): r for r in json.loads(before.stdout)["results"]}
        assert before.returncode != 0
        assert rows[("node-known", WORKER)]["verdict"] == "fail", rows.get(("node-known", WORKER))

        # 3. Removed: drained, reset, deleted.
        done = _run(env, "node", "remove", WORKER, *base, "--yes", "-o", "json")
        assert done.returncode == 0, done.stderr[-4000:]
        report = json.loads(done.stdout)
        assert report["deleted"] is True and report["reset"] is True, report
        # its labels' patch left the platform stack's state, so no later `up` relinquishes it by an apply
        # that would create the Node again (noderemove.py)
        assert [u.rsplit("::", 1)[1] for u in report["forgotten"]] == [f"node/{WORKER}"], report
        assert "still a host of cluster.yaml" in " ".join(report["notes"]), report
        gone = kubectl("get", "node", WORKER)
        assert gone.returncode != 0 and "NotFound" in gone.stderr, gone.stdout + gone.stderr
        assert _podman(env, "test", "-e", "/etc/kubernetes/kubelet.conf").returncode == 1  # kubeadm reset's work
        assert _podman(env, "systemctl", "is-active", "kubelet").stdout.strip() == "inactive"
        assert _podman(env, "systemctl", "is-enabled", "kubelet").stdout.strip() == "disabled"
        # Nothing registers it again: its kubelet is stopped, so the Node is still gone now.
        assert kubectl("get", "node", WORKER).returncode != 0

        # 4. Again: nothing left to do, nothing changed.
        again = _run(env, "node", "remove", WORKER, *base, "--yes", "-o", "json")
        assert again.returncode == 0, again.stderr[-4000:]
        assert json.loads(again.stdout) | {"notes": []} == {
            "node": WORKER, "dryRun": False, "drained": None, "reset": False, "deleted": False, "forgotten": [],
            "notes": []}

        # 5. The stacks converge on the trimmed spec, and its verify (part of `up`) passes. The trimmed
        # inventory is a copy in another folder, as an inventory moved there: its state goes with it (a copy
        # of the scenario's, without the record of the folder it belonged to).
        moved = tmp_path / "state"
        shutil.copytree(state, moved)
        (moved / "inventory.json").unlink()
        up = _run(env, "up", "-i", str(trimmed), "--skip-hosts", "--state-dir", str(moved), *ALLOW, "-o", "json")
        report = json.loads(up.stdout)
        failed = [r for r in (report.get("verify") or {}).get("problems", []) if r["verdict"] == "fail"]
        assert up.returncode == 0, (failed, up.stderr[-3000:])
        assert report["verify"]["summary"]["fail"] == 0, failed
        assert kubectl("get", "node", WORKER).returncode != 0  # and the Node did not come back
    finally:
        molecule(env, "site", "destroy")
