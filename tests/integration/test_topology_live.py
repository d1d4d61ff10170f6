"""Topology-aware gangs through the real Volcano scheduler, on the HyperNodes and node labels we render.

Real: etcd, kube-apiserver, kube-scheduler, kwok, vc-scheduler, vc-controller-manager and
vc-webhook-manager (built from volcano.sh/volcano v1.14.1), the HyperNode CRD generated from
volcano.sh/apis. SIMULATED: the GPUs and kubelets. Spec: tests/data/topology (two leaves of two
8-GPU hosts under one spine). Blocker pods standing for other users' GPUs name their node directly.

A 16-GPU gang (2 workers x 8 GPUs) with ``networkTopology {mode: hard, highestTierAllowed: 1}`` waits,
nothing bound, while 16 GPUs are free but split over both leaves; the doctor names the topology as the
reason; it lands inside one leaf as soon as that leaf has room. The same gang allowed the spine
(tier 2) takes the split GPUs at once: the leaf constraint, not a shortage, held the first one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import (
    RESTRICTED,
    RESTRICTED_POD,
    Cluster,
    delete_volcano_jobs_and_pods,
    free_gpus,
    volcano_world,
    wait_for,
)

from gpucluster.doctor import pending_in
from gpucluster.kube import Kube
from gpucluster.render import render
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec
from gpucluster.verify import snapshot
from gpucluster.verify.topology import membership, topology_checks

pytestmark = [pytest.mark.integration, pytest.mark.slow]
DATA = Path(__file__).resolve().parents[1] / "data" / "topology"
NS = "research"
LOCAL_WORLD = {"crds": False, "tools": ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager",
                                        "controller-gen")}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return load_spec(DATA)


@pytest.fixture(scope="module")
def kube(lw: Cluster, spec: ClusterSpec) -> Iterator[Kube]:
    rendered = render(spec).components
    objs = [*rendered["namespaces"], *rendered["gpu-operator"], *rendered["volcano"],
            *[o for o in rendered["tenants"] if o["kind"] == "Namespace"],
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "blockers"}}]
    with volcano_world(lw, spec, objs, gpus=32) as client:
        yield client


@pytest.fixture(autouse=True)
def clean(kube: Kube, lw: Cluster) -> Iterator[None]:
    yield
    delete_volcano_jobs_and_pods(lw, kube, (NS, "blockers"))


def pod_spec(gpus: int, scheduler: str = "volcano") -> dict:
    return {"schedulerName": scheduler, "restartPolicy": "Never", "tolerations": [GPU_TOLERATION],
            "securityContext": RESTRICTED_POD,
            "containers": [{"name": "main", "image": "example/worker:1", "securityContext": RESTRICTED,
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                          "limits": {"nvidia.com/gpu": str(gpus)}}}]}


def block(lw: Cluster, nodes: list[str]) -> None:
    """Take all 8 GPUs of each named node with a pod bound there directly (another user's job)."""
    lw.apply(*[{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"block-{n}", "namespace": "blockers"},
                "spec": {**pod_spec(8, "default-scheduler"), "nodeName": n}} for n in nodes])


def gang(name: str, highest_tier: int) -> dict:
    """A Volcano Job of 2 workers x 8 GPUs, all or nothing, inside one domain of ``highest_tier``."""
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"schedulerName": "volcano", "queue": NS, "minAvailable": 2, "maxRetry": 3,
                     "priorityClassName": "training",
                     "networkTopology": {"mode": "hard", "highestTierAllowed": highest_tier},
                     "tasks": [{"name": "worker", "replicas": 2, "minAvailable": 2, "maxRetry": 3,
                                "template": {"metadata": {"labels": {"job": name}}, "spec": pod_spec(8)}}]}}


def workers(kube: Kube, name: str) -> list[dict]:
    return [p for p in kube.items(f"/api/v1/namespaces/{NS}/pods?labelSelector=job={name}")
            if not p["metadata"].get("deletionTimestamp")]


def leaves_of(kube: Kube, nodes: set[str]) -> set[str]:
    """The tier-1 HyperNodes holding ``nodes``, resolved from the live objects as the scheduler does."""
    hns = kube.items("/apis/topology.volcano.sh/v1alpha1/hypernodes")
    live = {n["metadata"]["name"]: n for n in kube.items("/api/v1/nodes")}
    return {h for n in nodes for h in membership(hns, live[n]).get(1, [])}


def test_rendered_hypernodes_hold_every_node_where_the_spec_places_it(kube: Kube, lw: Cluster,
                                                                      spec: ClusterSpec) -> None:
    snap = snapshot.fetch(lw.kubeconfig)
    assert snap.hypernodes is not None and {h["metadata"]["name"] for h in snap.hypernodes} == {
        "leaf.leaf-a", "leaf.leaf-b", "spine.spine-1"}
    rows = list(topology_checks(spec, snap))
    assert [(r.subject, r.verdict.value) for r in rows] == [(h, "pass") for h in ("a-1", "a-2", "b-1", "b-2")]
    assert leaves_of(kube, {"a-1", "a-2"}) == {"leaf.leaf-a"} and leaves_of(kube, {"b-2"}) == {"leaf.leaf-b"}


def test_hard_leaf_gang_waits_while_no_leaf_has_room_then_lands_in_one_leaf(kube: Kube, lw: Cluster,
                                                                            spec: ClusterSpec) -> None:
    block(lw, ["a-1", "b-1"])
    wait_for("16 free GPUs, 8 in each leaf", lambda: free_gpus(kube) == 16)
    lw.apply(gang("in-leaf", highest_tier=1))
    wait_for("2 workers created", lambda: len(workers(kube, "in-leaf")) == 2)

    def unschedulable() -> bool:
        groups = kube.items(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups")
        return any(c.get("type") == "Unschedulable" and c.get("status") == "True"
                   for g in groups for c in (g.get("status") or {}).get("conditions") or [])
    # Volcano records its verdict on the PodGroup after a session that tried the gang: an event, not a sleep.
    wait_for("the gang's PodGroup marked Unschedulable", unschedulable, timeout=60)
    end = time.monotonic() + 5  # and it stays so for several 1-second sessions with 16 GPUs free
    while time.monotonic() < end:
        assert not [p for p in workers(kube, "in-leaf") if p["spec"].get("nodeName")], "a worker was bound"
        time.sleep(0.5)
    assert free_gpus(kube) == 16
    diagnoses = pending_in(kube, spec, NS)
    assert {d.cause.cause for d in diagnoses} == {"gang-topology"}, [d.to_dict() for d in diagnoses]
    said = diagnoses[0].cause.summary
    assert "inside one leaf" in said and "hold 2 in the cluster but at most 1 in any one leaf" in said, said

    lw.kubectl("delete", "pod", "block-b-1", "-n", "blockers", "--wait=false")
    wait_for("both workers bound", lambda: all(p["spec"].get("nodeName") for p in workers(kube, "in-leaf")),
             timeout=60)
    nodes = {p["spec"]["nodeName"] for p in workers(kube, "in-leaf")}
    assert nodes == {"b-1", "b-2"} and leaves_of(kube, nodes) == {"leaf.leaf-b"}


def test_same_gang_allowed_the_spine_takes_gpus_split_over_two_leaves(kube: Kube, lw: Cluster) -> None:
    block(lw, ["a-1", "b-1"])
    wait_for("16 free GPUs, 8 in each leaf", lambda: free_gpus(kube) == 16)
    lw.apply(gang("in-spine", highest_tier=2))
    wait_for("both workers bound", lambda: len([p for p in workers(kube, "in-spine") if p["spec"].get("nodeName")])
             == 2, timeout=60)
    nodes = {p["spec"]["nodeName"] for p in workers(kube, "in-spine")}
    assert nodes == {"a-2", "b-2"} and leaves_of(kube, nodes) == {"leaf.leaf-a", "leaf.leaf-b"}
