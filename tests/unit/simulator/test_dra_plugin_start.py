"""The simulated DRA kubelet plugin reads a static MIG layout once, at start, as dra-driver-nvidia-gpu 0.4.1 does.

A layout change by the MIG manager reaches the ResourceSlice only through a new plugin pod. The DRA
driver's values we render make the DaemonSet stop the plugin while the MIG manager pauses the GPU clients
and start it after (``render.dra_driver.plugin_affinity``); with the chart's default placement the old
layout stays published. Offline: only the agents' plan (no oracle), fed back sync after sync.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from sim_helpers import Node, deployed

from gpucluster import labels as L
from gpucluster.render import dra_driver
from gpucluster.render.gpu_operator import mig_config_name
from gpucluster.simulator import agents
from gpucluster.simulator.agents import dra_plugin
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec

LOCAL = Path(__file__).resolve().parents[3] / "inventories" / "local"
HOST = "a100-2"  # pool a100-dra: 8 x A100-80GB, static MIG all-balanced, served by the DRA driver


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return load_spec(LOCAL)


def profiles(desired: agents.Desired) -> list[str] | None:
    """The MIG profiles the node's slices publish (None: no slice at all)."""
    if desired.devices is None:
        return None
    return sorted(d["attributes"]["profile"]["string"] for d in desired.devices if "profile" in d["attributes"])


def settled(node: Node, view: agents.ClusterView, syncs: int = 3) -> agents.Desired:
    desired = agents.Desired()
    for _ in range(syncs):
        desired = node.sync(view)
    return desired


def relabel_to_seven_1g(spec: ClusterSpec, node: Node) -> None:
    """Point the node at the a100-mig pool's config (every A100 as seven 1g.10gb): a static layout change."""
    node.labels[L.MIG_CONFIG] = mig_config_name(next(p for p in spec.node_pools if p.name == "a100-mig"))


def test_the_values_make_the_plugin_follow_the_mig_managers_pause(spec: ClusterSpec) -> None:
    plugin = dra_driver.values(spec)["kubeletPlugin"]
    terms = plugin["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": L.POOL, "operator": "In", "values": ["a100-dra"]} in terms[1]["matchExpressions"]
    assert {"key": L.DEPLOY_GFD, "operator": "In", "values": ["true"]} in terms[1]["matchExpressions"]
    node = Node(spec, HOST)
    assert dra_plugin.scheduled(plugin, {**node.labels, L.GPU_PRESENT: "true", L.DEPLOY_GFD: "true"})
    assert not dra_plugin.scheduled(plugin, {**node.labels, L.GPU_PRESENT: "true", L.DEPLOY_GFD: L.DEPLOY_PAUSED})
    # the other DRA pools do not follow GFD's label: their plugin runs whatever it says
    h100 = Node(spec, "h100-1").labels
    assert dra_plugin.scheduled(plugin, {**h100, L.GPU_PRESENT: "true", L.DEPLOY_GFD: L.DEPLOY_PAUSED})
    assert not dra_plugin.scheduled(plugin, {**h100, L.DEPLOY_GFD: "true"})  # no GPU: no plugin


def test_a_layout_change_is_published_after_the_pause(spec: ClusterSpec) -> None:
    view = deployed(spec, dra_plugin=dra_driver.values(spec)["kubeletPlugin"])
    node = Node(spec, HOST)
    before = profiles(settled(node, view))
    assert before and "1g.10gb" in before and "3g.40gb" in before  # all-balanced on the A100s
    relabel_to_seven_1g(spec, node)
    paused = node.sync(view)
    assert paused.labels[L.MIG_CONFIG_STATE] == "pending"
    assert node.labels[L.DEPLOY_GFD] == L.DEPLOY_PAUSED
    assert paused.devices is None and L.SIMULATED_DRA_PLUGIN not in node.annotations  # plugin stopped
    after = node.sync(view)
    assert after.labels[L.MIG_CONFIG_STATE] == "success"
    assert profiles(after) == ["1g.10gb"] * 56
    assert not any("read at start" in n for n in after.notes)


def test_with_the_charts_placement_the_old_layout_stays(spec: ClusterSpec) -> None:
    plain = {k: v for k, v in dra_driver.values(spec)["kubeletPlugin"].items() if k != "affinity"}
    view = deployed(spec, dra_plugin=plain)
    node = Node(spec, HOST)
    before = profiles(settled(node, view))
    relabel_to_seven_1g(spec, node)
    history = [node.sync(view) for _ in range(3)]
    assert history[-1].labels.get(L.MIG_CONFIG_STATE, node.labels[L.MIG_CONFIG_STATE]) == "success"
    assert all(profiles(d) == before for d in history)  # the pause did not stop the plugin
    assert any("read at start" in n for n in history[-1].notes)


def test_a_new_pod_template_restarts_the_plugin(spec: ClusterSpec) -> None:
    plain = {k: v for k, v in dra_driver.values(spec)["kubeletPlugin"].items() if k != "affinity"}
    view = deployed(spec, dra_plugin=plain)
    node = Node(spec, HOST)
    settled(node, view)
    relabel_to_seven_1g(spec, node)
    settled(node, view)
    rolled = dataclasses.replace(view, driver_version="580.95.06")  # a new release: every pod replaced
    assert profiles(node.sync(rolled)) == ["1g.10gb"] * 56


@pytest.mark.parametrize("expr, labels, want", [
    ({"key": "a", "operator": "NotIn", "values": ["x"]}, {}, True),  # an absent label is not in the set
    ({"key": "a", "operator": "NotIn", "values": ["x"]}, {"a": "x"}, False),
    ({"key": "a", "operator": "In", "values": ["x"]}, {}, False),
    ({"key": "a", "operator": "Exists"}, {"a": ""}, True),
    ({"key": "a", "operator": "DoesNotExist"}, {"a": ""}, False),
    ({"key": "a", "operator": "Gt", "values": ["3"]}, {"a": "4"}, True),
    ({"key": "a", "operator": "Lt", "values": ["3"]}, {"a": "x"}, False),
])
def test_node_affinity_expressions(expr: dict, labels: dict, want: bool) -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}
    assert dra_plugin.scheduled({"affinity": affinity}, labels) is want


def test_no_terms_place_no_pod_and_the_chart_default_needs_a_gpu() -> None:
    empty = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}
    assert not dra_plugin.scheduled({"affinity": empty}, {"a": "b"})
    assert not dra_plugin.scheduled({}, {"kubernetes.io/os": "linux"})
    assert dra_plugin.scheduled({}, {L.NFD_NVIDIA_PCI: "true"})
    assert not dra_plugin.scheduled({"nodeSelector": {L.DRA: "true"}}, {L.NFD_NVIDIA_PCI: "true"})
