"""`gpucluster node remove`: what it refuses before any change, the order of its steps, and the playbook's guard.

The whole command on real kubelets (drain, `kubeadm reset` through playbooks/remove-node.yml, the Node
deleted and staying deleted, verify passing on the trimmed spec) is tests/molecule/test_node_remove.py.
Here: the refusals on recorded objects, the order drain → reset → delete against a recording API (a
kubelet that still runs would register the Node again if it were deleted before the reset), and that the
playbook run without --limit stops before touching any host.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpucluster import kube, noderemove
from gpucluster.errors import InputError
from gpucluster.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
LAB = load_spec(REPO / "inventories" / "lab")
WORKER, CONTROL_PLANE, SECOND_CONTROL_PLANE = "gpu-h100-01", "cp-01", "cp-02"


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {}}


@pytest.mark.parametrize(("name", "obj", "reset", "local", "says"), [
    (WORKER, node(WORKER), True, True, "the local world has no hosts to remove"),
    # kubeadm init's host, where every join gets its token
    (CONTROL_PLANE, node(CONTROL_PLANE), True, False, "is the first control-plane host of the spec"),
    # another control plane without its reset: its etcd member would stay
    (SECOND_CONTROL_PLANE, node(SECOND_CONTROL_PLANE), False, False, "Leave out --no-reset"),
    # a Node labelled control-plane by kubeadm that the spec does not list
    ("stray", node("stray", **{"node-role.kubernetes.io/control-plane": ""}), False, False,
     "is a control-plane node that lab's spec does not list"),
    ("gpu-h10-01", None, True, False, "no Node and no host of lab is named gpu-h10-01"),
    ("stray", node("stray"), True, False, "Pass --no-reset"),
])
def test_refusals_name_the_problem_and_the_way_on(name, obj, reset, local, says) -> None:
    with pytest.raises(InputError, match=says.replace("(", r"\(")) as err:
        noderemove.check(LAB, name, obj, reset=reset, local=local)
    assert err.value.exit_code == 2


def test_accepted_a_spec_worker_with_reset_and_a_stray_node_without() -> None:
    noderemove.check(LAB, WORKER, node(WORKER), reset=True, local=False)
    # a control plane other than the first, labelled as kubeadm labels it, with its reset
    second = node(SECOND_CONTROL_PLANE, **{"node-role.kubernetes.io/control-plane": ""})
    noderemove.check(LAB, SECOND_CONTROL_PLANE, second, reset=True, local=False)
    noderemove.check(LAB, WORKER, None, reset=True, local=False)  # a rerun: the Node is gone, the reset is idempotent
    noderemove.check(LAB, "stray", node("stray"), reset=False, local=False)


class RecordingApi:
    """The calls ``remove`` makes on a cluster with one empty worker Node."""

    def __init__(self, nodes: dict[str, dict[str, Any]], calls: list[str]) -> None:
        self.nodes, self.calls = nodes, calls

    def get(self, path: str) -> dict[str, Any] | None:
        return self.nodes.get(path.rsplit("/", 1)[-1]) if path.startswith(kube.NODES) else None

    def patch(self, path: str, body: dict[str, Any]) -> None:
        self.calls.append(f"patch {path} {body}")

    def items(self, path: str) -> list[dict[str, Any]]:
        return []

    def list(self, path: str) -> list[dict[str, Any]]:
        return []

    def delete(self, path: str) -> None:
        self.calls.append(f"delete {path}")
        self.nodes.pop(path.rsplit("/", 1)[-1], None)


def test_drain_then_reset_then_delete_and_a_dry_run_changes_nothing() -> None:
    calls: list[str] = []
    api = RecordingApi({WORKER: node(WORKER)}, calls)

    def reset() -> int:
        calls.append("reset")
        return 3

    done = noderemove.remove(api, LAB, WORKER, reset_host=reset)  # type: ignore[arg-type]
    assert calls == [f"patch {kube.NODES}/{WORKER} {{'spec': {{'unschedulable': True}}}}", "reset",
                     f"delete {kube.NODES}/{WORKER}"]
    assert (done.reset, done.deleted) == (True, True)
    assert any("still a host of cluster.yaml" in n for n in done.notes)

    calls.clear()
    again = noderemove.remove(api, LAB, WORKER, reset_host=lambda: 0)  # type: ignore[arg-type]
    assert calls == [] and (again.drained, again.reset, again.deleted) == (None, False, False)

    calls.clear()
    api.nodes[WORKER] = node(WORKER)
    dry = noderemove.remove(api, LAB, WORKER, reset_host=reset, dry_run=True)  # type: ignore[arg-type]
    assert calls == [] and dry.dry_run and not (dry.reset or dry.deleted)


def test_no_reset_leaves_a_note_that_the_machine_still_needs_one() -> None:
    calls: list[str] = []
    done = noderemove.remove(RecordingApi({"stray": node("stray")}, calls), LAB, "stray",  # type: ignore[arg-type]
                             reset_host=None)
    assert calls[-1] == f"delete {kube.NODES}/stray" and "reset" not in calls
    assert any("kubeadm reset" in n for n in done.notes)


def test_the_playbook_without_limit_stops_on_every_host_before_touching_one() -> None:
    """Run against the lab inventory (whose hosts do not exist): the guard is an assert, which Ansible
    evaluates on the controller, so the run fails on every host without a connection being tried."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "inventories/lab",
                           "playbooks/remove-node.yml"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "name the hosts being removed with --limit" in out, out[-3000:]
    assert all(f"fatal: [{h.name}]" in out for h in LAB.hosts), out[-3000:]
    assert "UNREACHABLE" not in out and "Reset this host" not in out  # no host was contacted


def test_the_playbook_refuses_the_first_control_plane_host_before_touching_it() -> None:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "inventories/lab",
                           "playbooks/remove-node.yml", "--limit", CONTROL_PLANE], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"{CONTROL_PLANE} is the first control-plane host" in out, out[-3000:]
    assert "UNREACHABLE" not in out and "Hand the control-plane endpoint over" not in out, out[-3000:]


def test_only_the_nodes_own_patches_are_found_in_the_stack_state() -> None:
    urn = "urn:pulumi:lab::gpucluster-platform::gpucluster:nodes$kubernetes:core/v1:NodePatch::node/"
    resources = [
        {"type": noderemove.NODE_PATCH, "urn": urn + WORKER, "inputs": {"metadata": {"name": WORKER}}},
        {"type": noderemove.NODE_PATCH, "urn": urn + "gpu-h100-02", "inputs": {"metadata": {"name": "gpu-h100-02"}}},
        # a Node the stack created (not a patch) and a patch of another kind, both named like the node
        {"type": "kubernetes:core/v1:Node", "urn": "urn:x::node/" + WORKER, "inputs": {"metadata": {"name": WORKER}}},
        {"type": "kubernetes:core/v1:ConfigMapPatch", "urn": "urn:y", "inputs": {"metadata": {"name": WORKER}}},
    ]
    assert noderemove.patch_urns(resources, WORKER) == [urn + WORKER]
    assert noderemove.patch_urns([], WORKER) == []


def test_the_patches_are_forgotten_only_once_the_node_is_gone_and_never_on_a_dry_run() -> None:
    calls: list[str] = []

    def forget() -> list[str]:
        calls.append("forget")
        return ["urn:node"]

    api = RecordingApi({WORKER: node(WORKER)}, calls)
    dry = noderemove.remove(api, LAB, WORKER, reset_host=None, forget_patches=forget,  # type: ignore[arg-type]
                            dry_run=True)
    assert "forget" not in calls and dry.forgotten == []
    done = noderemove.remove(api, LAB, WORKER, reset_host=None, forget_patches=forget)  # type: ignore[arg-type]
    assert calls[-2:] == [f"delete {kube.NODES}/{WORKER}", "forget"] and done.forgotten == ["urn:node"]
