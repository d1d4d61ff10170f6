"""playbooks/upgrade.yml's per-node flow against kwok nodes: drain, wait for the node's own checks,
uncordon, node after node, and a stop at the first node that does not come back.

Real: ansible-playbook with the gpucluster inventory plugin, the control plane, kwok; the GPU simulator
runs in the background. ``upgrade_components=[]`` leaves the hosts themselves alone (they are this
machine, reached with the local connection): the host side (packages, kubeadm upgrade, reboot) waits
on the Molecule site scenario with kubeadm (issue 15). Spec: tests/data/doctor.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import Cluster, wait_for

from gpucluster.addons import gpu_simulator
from gpucluster.addons import volcano as local_volcano
from gpucluster.render import render
from gpucluster.simulator import attach
from gpucluster.spec import load_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "doctor"
NOT_READY = "gpucluster.dev/simulate-not-ready"


@pytest.fixture(scope="module")
def world(lw: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    inv = tmp_path_factory.mktemp("inventory")
    shutil.copy(DATA / "cluster.yaml", inv / "cluster.yaml")
    shutil.copy(REPO / "inventories" / "local" / "hosts.gpucluster.yml", inv / "hosts.gpucluster.yml")
    spec = load_spec(inv)
    local_volcano.install_crds(lw.kubeconfig)  # the tenants' Queues; no Volcano daemon is needed here
    objs = sorted(render(spec).objects(), key=lambda o: o["kind"] not in ("Namespace", "CustomResourceDefinition"))
    lw.apply(*objs)
    attach(lw.kubeconfig, spec).close()
    gpu_simulator.spawn(lw.state_dir, lw.kubeconfig, inv, interval=1.0)
    wait_for("8 L4 GPUs advertised", lambda: sum(int(n["status"].get("allocatable", {}).get("nvidia.com/gpu", 0))
                                                 for n in lw.get("nodes")["items"]) == 8, timeout=120)
    yield lw, inv
    gpu_simulator.stop(lw.state_dir)


def cordoned(world: Cluster, node: str) -> bool:
    return bool(world.get("node", node)["spec"].get("unschedulable"))


def test_nodes_go_one_by_one_and_the_first_that_does_not_come_back_stops_the_run(
        world: tuple[Cluster, Path]) -> None:
    lw, inv = world
    lw.kubectl("annotate", "node", "l4-2", f"{NOT_READY}=true", "--overwrite")
    wait_for("l4-2 NotReady", lambda: any(c["type"] == "Ready" and c["status"] != "True"
                                          for c in lw.get("node", "l4-2")["status"]["conditions"]), timeout=90)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json",
               PYTHONPATH=str(REPO / "src"))
    extra = {"upgrade_components": [], "upgrade_kubeconfig": str(lw.kubeconfig), "upgrade_wait_timeout": 30,
             "upgrade_drain_timeout": 60, "upgrade_gpucluster": str(Path(sys.executable).parent / "gpucluster"),
             "ansible_python_interpreter": sys.executable}
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv), "-c", "local",
                           "-e", json.dumps(extra), str(REPO / "playbooks" / "upgrade.yml")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode != 0, proc.stdout[-3000:]
    report = json.loads(proc.stdout)
    ran: dict[str, list[str]] = {}
    for play in report["plays"]:
        for task in play["tasks"]:
            for host, result in task["hosts"].items():
                if not result.get("skipped"):
                    ran.setdefault(task["task"]["name"], []).append(host)
    (stop,) = [r for p in report["plays"] for t in p["tasks"] for h, r in t["hosts"].items()
               if t["task"]["name"].startswith("Stop the rollout") and not r.get("skipped")]
    drained = ran["Cordon and drain through the Eviction API (PodDisruptionBudgets honoured, running gangs kept whole)"]
    assert drained == ["cp-1", "l4-1", "l4-2"], stop["msg"]  # in order; a100-1 and h100-1 never reached
    assert ran["Uncordon"] == ["cp-1", "l4-1"], stop["msg"]
    assert "l4-2 did not come back" in stop["msg"] and "node-ready fail" in stop["msg"], stop["msg"]
    assert cordoned(lw, "l4-2") and not cordoned(lw, "l4-1") and not cordoned(lw, "a100-1"), "cordons"
