"""The drain's decisions on recorded pods: what is evicted alone, with its gang, left alone, or blocks.

The calls themselves (cordon, dry-run and real evictions against PodDisruptionBudgets) are proven on
the local world: tests/integration/test_drain_live.py.
"""

from __future__ import annotations

from gpucluster.drain import plan


def pod(name: str, node: str, *, owner: str = "ReplicaSet", group: str = "", phase: str = "Running",
        ns: str = "ml", mirror: bool = False) -> dict:
    meta: dict = {"name": name, "namespace": ns, "annotations": {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": f"{owner.lower()}-x", "controller": True}]
    if group:
        meta["annotations"]["scheduling.k8s.io/group-name"] = group
    if mirror:
        meta["annotations"]["kubernetes.io/config.mirror"] = "abc"
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def group(name: str, members: int, ns: str = "ml") -> dict:
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"minMember": members}}


def names(pods: list[dict]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_controller_pods_are_evicted_and_daemonset_static_and_finished_pods_left_alone() -> None:
    pods = [pod("web", "n1"), pod("agent", "n1", owner="DaemonSet"), pod("static", "n1", owner="", mirror=True),
            pod("done", "n1", phase="Succeeded"), pod("elsewhere", "n2")]
    p = plan("n1", pods, [])
    assert names(p.evict) == ["web"] and not p.blocked and not p.gangs
    assert [w for _, w in p.skipped] == ["DaemonSet daemonset-x (it would come back on this node)", "finished",
                                         "static pod (the kubelet owns it)"]


def test_an_unmanaged_pod_blocks_unless_forced() -> None:
    pods = [pod("bare", "n1", owner="")]
    p = plan("n1", pods, [])
    assert p.blocked and "no controller" in p.blocked[0] and "--force" in p.blocked[0] and not p.evict
    assert names(plan("n1", pods, [], force=True).evict) == ["bare"]


def test_a_running_gang_blocks_the_drain_and_is_evicted_whole_on_request() -> None:
    pods = [pod("w0", "n1", owner="Job", group="train"), pod("w1", "n2", owner="Job", group="train"),
            pod("solo", "n1")]
    p = plan("n1", pods, [group("train", 2)])
    assert len(p.blocked) == 1 and "running gang ml/train (minMember 2; 2 members on n1, n2)" in p.blocked[0]
    p = plan("n1", pods, [group("train", 2)], evict_gangs=True)
    assert not p.blocked and names(p.gangs["ml/train"]) == ["w0", "w1"] and names(p.evict) == ["solo"]


def test_a_group_of_one_is_no_gang_and_without_podgroups_two_running_members_are() -> None:
    single = [pod("w0", "n1", owner="Job", group="one")]
    assert names(plan("n1", single, [group("one", 1)]).evict) == ["w0"]
    pair = [pod("w0", "n1", owner="Job", group="g"), pod("w1", "n2", owner="Job", group="g")]
    assert plan("n1", pair, None).blocked  # Volcano's CRD not served: two running members make a gang
    finished_peer = [pair[0], pod("w1", "n2", owner="Job", group="g", phase="Succeeded")]
    assert names(plan("n1", finished_peer, None).evict) == ["w0"]
