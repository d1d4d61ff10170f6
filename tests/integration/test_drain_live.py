"""`gpucluster drain` against a real API server: PodDisruptionBudgets and gangs decide, evictions are real.

Real: kube-apiserver (the Eviction subresource enforces PDBs), kube-controller-manager (the disruption
controller computes what each PDB allows, the Deployment/ReplicaSet and DaemonSet controllers, the
garbage collector), kube-scheduler, kwok. The gang is a Volcano PodGroup and a Volcano Job's pods
(the Volcano CRDs are installed; no Volcano controller is needed to drain). Spec: tests/data/doctor.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import Cluster, wait_for

from gpucluster.addons import volcano as local_volcano
from gpucluster.cli.main import entrypoint
from gpucluster.simulator import attach
from gpucluster.spec import load_spec

pytestmark = [pytest.mark.integration]
DATA = Path(__file__).resolve().parents[1] / "data" / "doctor"
NS = "maint"
LOCAL_WORLD = {"crds": False, "tools": ("controller-gen",)}
TOLERATE_ALL = [{"operator": "Exists"}]  # DaemonSet pods only: it also tolerates the cordon's taint
GPU_TAINT = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
RESOURCES = {"requests": {"cpu": "10m", "memory": "16Mi"}}


@pytest.fixture(scope="module")
def world(lw: Cluster) -> Iterator[Cluster]:
    spec = load_spec(DATA)
    local_volcano.install_crds(lw.kubeconfig)
    attach(lw.kubeconfig, spec).close()
    wait_for("nodes Ready", lambda: sum(
        any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
        for n in lw.get("nodes")["items"]) == len(spec.hosts))
    lw.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
             {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": NS},
              "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
                  "metadata": {"labels": {"app": "agent"}},
                  "spec": {"tolerations": TOLERATE_ALL, "containers": [
                      {"name": "a", "image": "example/agent:1", "resources": RESOURCES}]}}}})
    wait_for("agent on every node", lambda: len(pods(lw, "app=agent")) == len(spec.hosts))
    yield lw


@pytest.fixture(autouse=True)
def uncordon(world: Cluster) -> Iterator[None]:
    yield
    world.kubectl("delete", "deployments,poddisruptionbudgets,jobs.batch.volcano.sh,podgroups,pods", "-n", NS,
                  "-l", "app!=agent", "--wait=false")
    for node in ("l4-1", "l4-2"):
        world.kubectl("uncordon", node)
    wait_for("test pods gone", lambda: not pods(world, "app!=agent"), timeout=90)


def pods(world: Cluster, selector: str) -> list[dict]:
    return [p for p in world.get("pods", "-n", NS, "-l", selector)["items"] if not p["metadata"].get(
        "deletionTimestamp")]


def deployment(name: str, replicas: int, *, node: str = "", spread: bool = False) -> dict:
    spec: dict = {"tolerations": GPU_TAINT, "containers": [{"name": "c", "image": "example/web:1",
                                                               "resources": RESOURCES}]}
    spec["nodeSelector"] = {"kubernetes.io/hostname": node} if node else {"gpucluster.dev/pool": "l4"}
    if spread:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": name}}, "topologyKey": "kubernetes.io/hostname"}]}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def pdb(name: str, min_available: int) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": NS},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": name}}}}


def running_on(world: Cluster, selector: str) -> dict[str, str]:
    """node -> uid of the selected Running pods."""
    return {p["spec"]["nodeName"]: p["metadata"]["uid"] for p in pods(world, selector)
            if p["spec"].get("nodeName") and p["status"].get("phase") == "Running"}


def drain(world: Cluster, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = entrypoint(["drain", *args, "-i", str(DATA), "--kubeconfig", str(world.kubeconfig)])
    out = capsys.readouterr()
    return rc, out.out + out.err


def cordoned(world: Cluster, node: str) -> bool:
    return bool(world.get("node", node)["spec"].get("unschedulable"))


def test_a_pdb_that_allows_no_disruption_stops_the_drain_and_one_that_allows_it_does_not(
        world: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    world.apply(deployment("web", 2, spread=True), pdb("web", 2))
    before = wait_for("web on both L4 nodes", lambda: (r := running_on(world, "app=web")) and len(r) == 2 and r)
    wait_for("PDB computed", lambda: world.get("pdb", "-n", NS, "web").get("status", {}).get("currentHealthy") == 2)
    agents = running_on(world, "app=agent")
    rc, out = drain(world, capsys, "l4-1", "--timeout", "6")
    assert rc == 1, out
    assert "disruption budget" in out and f"PodDisruptionBudget {NS}/web" in out and "stays cordoned" in out, out
    assert running_on(world, "app=web") == before and cordoned(world, "l4-1")
    # the same drain once the budget allows one disruption: the l4-1 replica goes, l4-2's stays
    world.apply(pdb("web", 1))
    wait_for("PDB allows 1", lambda: world.get("pdb", "-n", NS, "web")["status"].get("disruptionsAllowed") == 1)
    rc, out = drain(world, capsys, "l4-1", "--timeout", "60")
    assert rc == 0, out
    now = running_on(world, "app=web")
    assert "l4-1" not in now and now.get("l4-2") == before["l4-2"], now
    assert running_on(world, "app=agent") == agents  # DaemonSet pods are left where they are
    assert "left alone" in out and "DaemonSet agent" in out


def test_a_running_gang_is_never_split_and_is_evicted_whole_when_asked(
        world: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    job = world.kubectl("apply", "--server-side", "-o", "jsonpath={.metadata.uid}", "-f", "-", stdin=(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: train, namespace: maint}\n"
        "spec: {schedulerName: volcano, minAvailable: 2, tasks: [{name: w, replicas: 2, template: "
        "{spec: {containers: [{name: c, image: example/train:1}]}}}]}\n"))
    owner = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train", "uid": job,
             "controller": True}
    world.apply({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": "train", "namespace": NS}, "spec": {"minMember": 2}},
                *[{"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"train-w-{i}", "namespace": NS, "labels": {"app": "train"},
                                "annotations": {"scheduling.k8s.io/group-name": "train"}, "ownerReferences": [owner]},
                   "spec": {"nodeName": f"l4-{i + 1}", "tolerations": GPU_TAINT,
                            "containers": [{"name": "c", "image": "example/train:1", "resources": RESOURCES}]}}
                  for i in range(2)],
                deployment("solo", 1, node="l4-1"))
    gang = wait_for("gang running on l4-1 and l4-2", lambda: (r := running_on(world, "app=train")) and len(r) == 2
                    and r)
    solo = wait_for("solo running", lambda: running_on(world, "app=solo"))
    rc, out = drain(world, capsys, "l4-1", "--timeout", "30")
    assert rc == 1 and "belongs to the running gang maint/train" in out and "--evict-gangs" in out, out
    assert running_on(world, "app=train") == gang and running_on(world, "app=solo") == solo  # nothing evicted
    rc, out = drain(world, capsys, "l4-1", "--timeout", "60", "--evict-gangs")
    assert rc == 0, out
    assert running_on(world, "app=train") == {}  # both members, on both nodes, went together
    assert solo["l4-1"] not in running_on(world, "app=solo").values()


def test_dry_run_changes_nothing_and_an_unknown_node_is_exit_2(world: Cluster,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    world.apply(deployment("solo", 1, node="l4-2"))
    solo = wait_for("solo running", lambda: running_on(world, "app=solo"))
    rc, out = drain(world, capsys, "l4-2", "--dry-run")
    assert rc == 0 and "would evict 1 pod(s)" in out, out
    assert not cordoned(world, "l4-2") and running_on(world, "app=solo") == solo
    rc, out = drain(world, capsys, "nope")
    assert rc == 2 and "node nope does not exist" in out, out
