"""Fabric topology: the spec's rules, what it renders for Volcano, and how verify and doctor judge it.

Spec: tests/data/topology (leaf-a: a-1, a-2; leaf-b: b-1, b-2; both under spine-1; 8 H100 per host).
tests/integration/test_topology_live.py runs the rendered objects through the real Volcano scheduler.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from testkit import by_kind, find, host, problems

from gpucluster.doctor import diagnose_pod
from gpucluster.doctor.model import View
from gpucluster.render import render, volcano
from gpucluster.render.nodes import node_config
from gpucluster.spec import load_spec
from gpucluster.verify.snapshot import Snapshot
from gpucluster.verify.topology import membership, topology_checks

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"
RAW = yaml.safe_load((DATA / "cluster.yaml").read_text())
SPEC = load_spec(DATA)
HOSTS = ("a-1", "a-2", "b-1", "b-2")


@pytest.fixture
def raw() -> dict:
    return copy.deepcopy(RAW)


# -- the spec's rules ----------------------------------------------------------------------------
def test_the_topology_spec_is_valid_and_a_spec_without_one_renders_no_topology(base, write_spec) -> None:
    assert SPEC.topology.tiers == ["leaf", "spine"] and not SPEC.warnings
    plain = load_spec(write_spec(base))
    assert not volcano.topology.hypernodes(plain)
    assert "network-topology-aware" not in volcano.scheduler_conf_text(plain)
    assert not any(k.startswith("gpucluster.dev/topology-") for c in node_config(plain).values() for k in c["labels"])


def test_a_gpu_host_missing_a_tier_is_refused(raw, write_spec) -> None:
    del host(raw, "b-2")["topology"]["spine"]
    p = find(problems(write_spec, raw), "hosts[4].topology")
    assert "b-2 is a GPU host without a domain for tier(s) spine" in p.message
    assert "topology: {leaf: <leaf-name>, spine: <spine-name>}" in p.hint


def test_a_control_plane_host_may_stay_outside_the_fabric_but_not_half_in_it(raw, write_spec) -> None:
    assert load_spec(DATA).hosts[0].topology == {}  # cp-1 has none: valid
    host(raw, "cp-1")["topology"] = {"leaf": "leaf-a"}
    p = find(problems(write_spec, raw), "hosts[0].topology")
    assert "a host with a topology without a domain for tier(s) spine" in p.message


def test_an_unknown_tier_on_a_host_suggests_the_declared_one(raw, write_spec) -> None:
    host(raw, "a-1")["topology"]["leef"] = "x"
    p = find(problems(write_spec, raw), "hosts[1].topology.leef")
    assert "'leef' is not a tier of topology.tiers" in p.message and "leaf" in p.hint


def test_host_topology_without_declared_tiers_says_to_declare_them(raw, write_spec) -> None:
    del raw["topology"]
    p = find(problems(write_spec, raw), "hosts[1].topology.leaf")
    assert "topology: {tiers: [leaf, spine]}" in p.hint


def test_a_domain_with_two_parents_is_refused_naming_both_hosts(raw, write_spec) -> None:
    host(raw, "a-2")["topology"]["spine"] = "spine-2"
    p = find(problems(write_spec, raw), "hosts[2].topology.spine")
    assert "leaf 'leaf-a' is in spine 'spine-2' here but in spine 'spine-1' on a-1" in p.message


def test_a_gang_no_leaf_can_hold_is_refused_with_each_leafs_size(raw, write_spec) -> None:
    raw["topology"]["gangs"] = [{"name": "llm-24", "gpus": 24, "within": "leaf"}]
    p = find(problems(write_spec, raw), "topology.gangs[0].gpus")
    assert "needs 24 GPUs inside one leaf, but the largest leaf holds 16 (GPUs per leaf: leaf-a: 16, leaf-b: 16)" \
        in p.message
    assert "within: spine" in p.hint
    raw["topology"]["gangs"] = [{"name": "llm-24", "gpus": 24, "within": "spine"}]
    assert load_spec(write_spec(raw)).topology.gangs[0].gpus == 24  # the spine holds 32


def test_a_gang_within_an_unknown_tier_is_refused(raw, write_spec) -> None:
    raw["topology"]["gangs"] = [{"name": "g", "gpus": 8, "within": "rack"}]
    p = find(problems(write_spec, raw), "topology.gangs[0].within")
    assert "'rack' is not a tier" in p.message


def test_topology_without_volcano_warns_that_nothing_enforces_it(raw, write_spec) -> None:
    raw["scheduling"] = {"volcano": {"enabled": False}}
    del raw["tenants"][0]["queue"]
    spec = load_spec(write_spec(raw))
    assert [w.path for w in spec.warnings] == ["topology.tiers"]
    assert not volcano.topology.hypernodes(spec)
    assert node_config(spec)["a-1"]["labels"]["gpucluster.dev/topology-leaf"] == "leaf-a"  # labels still


# -- what it renders ---------------------------------------------------------------------------------
def test_every_host_is_labelled_with_its_domain_per_tier() -> None:
    labels = {h: c["labels"] for h, c in node_config(SPEC).items()}
    assert labels["b-1"]["gpucluster.dev/topology-leaf"] == "leaf-b"
    assert labels["b-1"]["gpucluster.dev/topology-spine"] == "spine-1"
    assert not any(k.startswith("gpucluster.dev/topology-") for k in labels["cp-1"])


def test_hypernodes_form_the_tree_tier_one_by_label_wider_tiers_by_name() -> None:
    hns = {h["metadata"]["name"]: h["spec"] for h in by_kind(render(SPEC).objects(), "HyperNode")}
    assert hns["leaf.leaf-a"] == {"tier": 1, "tierName": "leaf", "members": [
        {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"gpucluster.dev/topology-leaf": "leaf-a"}}}}]}
    assert hns["spine.spine-1"] == {"tier": 2, "tierName": "spine", "members": [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf.leaf-a"}}},
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf.leaf-b"}}}]}
    assert set(hns) == {"leaf.leaf-a", "leaf.leaf-b", "spine.spine-1"}


def test_the_scheduler_gets_the_topology_plugin_only_with_tiers() -> None:
    placement = volcano.scheduler_conf(SPEC)["tiers"][1]["plugins"]
    plugin = next(p for p in placement if p["name"] == "network-topology-aware")
    assert plugin["arguments"]["hypernode.binpack.resources"] == "nvidia.com/gpu"


# -- verify: membership judged from the live objects ------------------------------------------------
def live_nodes() -> list[dict]:
    return [{"metadata": {"name": h, "labels": dict(node_config(SPEC)[h]["labels"])}} for h in HOSTS]


def rows(snap: Snapshot) -> dict[str, tuple[str, str]]:
    return {r.subject: (r.verdict.value, r.actual) for r in topology_checks(SPEC, snap)}


def test_verify_passes_the_rendered_tree_and_fails_exactly_the_node_moved_out_of_its_leaf() -> None:
    hns = by_kind(render(SPEC).objects(), "HyperNode")
    assert {v for v, _ in rows(Snapshot(nodes=live_nodes(), hypernodes=hns)).values()} == {"pass"}
    nodes = live_nodes()
    nodes[3]["metadata"]["labels"]["gpucluster.dev/topology-leaf"] = "leaf-a"  # b-2 relabelled
    got = rows(Snapshot(nodes=nodes, hypernodes=hns))
    assert {h for h, (v, _) in got.items() if v == "fail"} == {"b-2"}
    assert got["b-2"][1] == "tier 1 held by leaf.leaf-a"


def test_verify_fails_a_deleted_or_retiered_hypernode_and_skips_without_the_crd() -> None:
    hns = by_kind(render(SPEC).objects(), "HyperNode")
    without_b = [h for h in hns if h["metadata"]["name"] != "leaf.leaf-b"]
    got = rows(Snapshot(nodes=live_nodes(), hypernodes=without_b))
    # the spine names leaf.leaf-b as its member: without it, b-1 is in no domain at either tier
    assert got["b-1"] == ("fail", "HyperNode leaf.leaf-b does not exist; tier 1 held by no HyperNode; "
                                  "tier 2 held by no HyperNode")
    assert got["a-1"][0] == "pass"
    retiered = copy.deepcopy(hns)
    next(h for h in retiered if h["metadata"]["name"] == "spine.spine-1")["spec"]["tier"] = 3
    assert {h: v for h, (v, _) in rows(Snapshot(nodes=live_nodes(), hypernodes=retiered)).items()} == dict.fromkeys(
        HOSTS, "fail")
    assert {v for v, _ in rows(Snapshot(nodes=live_nodes(), hypernodes=None)).values()} == {"not-measured"}


def test_membership_follows_exact_and_regex_members_and_hypernode_members_by_exact_name_only() -> None:
    node = {"metadata": {"name": "gpu-17", "labels": {}}}
    hns = [{"metadata": {"name": "r"}, "spec": {"tier": 1, "members": [
               {"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-1[0-9]$"}}}]}},
           {"metadata": {"name": "e"}, "spec": {"tier": 1, "members": [
               {"type": "Node", "selector": {"exactMatch": {"name": "gpu-18"}}}]}},
           {"metadata": {"name": "up"}, "spec": {"tier": 2, "members": [
               {"type": "HyperNode", "selector": {"exactMatch": {"name": "r"}}}]}},
           {"metadata": {"name": "by-regex"}, "spec": {"tier": 2, "members": [
               {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "r"}}}]}}]
    assert membership(hns, node) == {1: ["r"], 2: ["up"]}


# -- doctor: the topology reason for a waiting gang -----------------------------------------------
def gpu_node(name: str) -> dict:
    n = live_nodes()[HOSTS.index(name)]
    n["spec"] = {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}
    n["status"] = {"allocatable": {"nvidia.com/gpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]}
    return n


def worker(name: str, *, node: str = "", ns: str = "research", group: str = "in-leaf") -> dict:
    spec: dict = {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
                  "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": ns, "uid": name,
                         "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


def gang_view(highest_tier: int | None, mode: str = "hard") -> tuple[dict, View]:
    nt: dict = {"mode": mode} | ({} if highest_tier is None else {"highestTierAllowed": highest_tier})
    group = {"metadata": {"name": "in-leaf", "namespace": "research"},
             "spec": {"minMember": 2, "queue": "research", "networkTopology": nt}, "status": {"phase": "Pending"}}
    pods = [worker("w-0"), worker("w-1"), worker("block-a", node="a-1", ns="blockers", group=""),
            worker("block-b", node="b-1", ns="blockers", group="")]
    v = View(spec=SPEC, nodes=[gpu_node(h) for h in HOSTS], pods=pods, podgroups=[group], queues=None,
             hypernodes=by_kind(render(SPEC).objects(), "HyperNode"))
    return pods[0], v


def test_doctor_names_the_leaf_a_hard_gang_cannot_find_and_the_wider_tier() -> None:
    pod, v = gang_view(1)
    d = diagnose_pod(pod, v)
    assert d.cause.cause == "gang-topology", d.to_dict()
    assert ("must be placed inside one leaf (networkTopology hard, highestTierAllowed 1) and needs 2 more pods at "
            "once; the free nodes that fit hold 2 in the cluster but at most 1 in any one leaf "
            "(leaf.leaf-a: 1, leaf.leaf-b: 1)") in d.cause.summary
    assert "highestTierAllowed: 2" in d.cause.fix


@pytest.mark.parametrize("tier, mode", [(2, "hard"), (None, "hard"), (1, "soft")])
def test_doctor_does_not_blame_topology_where_volcano_does_not_enforce_a_leaf(tier, mode) -> None:
    pod, v = gang_view(tier, mode)
    assert diagnose_pod(pod, v).cause.cause == "schedulable"
