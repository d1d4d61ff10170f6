"""playbooks/upgrade.yml: it parses against a real inventory, and its per-node order and stop rule hold.

The per-node flow against real hosts (kubeadm upgrade, reboot into the new driver) is proven by Molecule
on the site scenario once kubeadm runs there (issue 15); tests/integration/test_upgrade_playbook_live.py
runs the flow's cluster side (drain, wait for the node's checks, stop at the first node that does not
come back, uncordon) against kwok nodes. ansible-lint's production profile covers it in test_lint.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLAYBOOK = REPO / "playbooks" / "upgrade.yml"
NODE_TASKS = REPO / "playbooks" / "tasks" / "upgrade-node.yml"


def ansible(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    return subprocess.run([str(BIN / "ansible-playbook"), *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_syntax_against_the_lab_inventory_and_the_task_order() -> None:
    assert ansible("--syntax-check", "-i", "inventories/lab", str(PLAYBOOK)).returncode == 0
    proc = ansible("--list-tasks", "-i", "inventories/lab", str(PLAYBOOK))
    assert proc.returncode == 0, proc.stderr
    plays = proc.stdout.split("play #")[2:]
    assert len(plays) == 2 and plays[0].startswith("2 (control_plane)") and "(workers:!control_plane)" in plays[1]
    for play in plays:
        order = [line.strip().split("\t")[0] for line in play.splitlines()[2:] if line.strip()]
        steps = [next(i for i, t in enumerate(order) if t.startswith(prefix)) for prefix in (
            "Cordon and drain", "Upgrade the host-managed NVIDIA driver", "Upgrade the NVIDIA Container Toolkit",
            "Install the pinned kubeadm", "Reboot into the new driver", "Wait until the node is Ready",
            "Stop the rollout", "Uncordon")]
        assert steps == sorted(steps), order


def test_one_node_at_a_time_and_the_first_failure_stops_the_run() -> None:
    plays = yaml.safe_load(PLAYBOOK.read_text())
    upgrades = [p for p in plays if "hosts" in p]
    assert [p["serial"] for p in upgrades] == [1, "{{ upgrade_serial | default(1) }}"]
    assert all(p["any_errors_fatal"] is True and p["max_fail_percentage"] == 0 for p in upgrades)
    tasks = {t["name"]: t for t in yaml.safe_load(NODE_TASKS.read_text())}
    drain = tasks["Cordon and drain through the Eviction API (PodDisruptionBudgets honoured, running gangs kept whole)"]
    assert "'drain'" in drain["ansible.builtin.command"]["argv"] and drain["delegate_to"] == "localhost"
    wait = tasks["Wait until the node is Ready with its GPUs advertised and its own checks pass"]
    assert "'--node'" in wait["ansible.builtin.command"]["argv"] and wait["until"] == "upgrade_verify.rc == 0"
    stop = tasks["Stop the rollout at the first node that does not come back"]
    assert stop["when"] == "upgrade_verify.rc != 0" and "stays cordoned" in stop["ansible.builtin.fail"]["msg"]
