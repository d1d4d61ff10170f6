"""The simulated DRA kubelet plugin's NVML health monitor (dra-driver-nvidia-gpu 0.4.1, NVMLDeviceHealthCheck).

An XID the GPU reports while the plugin runs taints its device in the ResourceSlice: NoSchedule for a
fatal XID, None for the application errors the driver skips; one taint per key, replaced by the next XID;
nothing lifts it but a new plugin pod. The XIDs come from the simulated DCGM exporter's knobs, so one
injection reaches both agents. Offline: the agents' plan fed back sync after sync, as the API server
keeps the node's annotations.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from sim_helpers import Node, deployed

from gpucluster import labels as L
from gpucluster.render import dra_driver
from gpucluster.simulator import agents
from gpucluster.simulator.agents import dra_plugin
from gpucluster.simulator.objects import content_key
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec

LOCAL = Path(__file__).resolve().parents[3] / "inventories" / "local"
WHOLE = "h100-1"  # pool h100-train: 8 x H100, whole GPUs served by the DRA driver
MIG = "a100-2"  # pool a100-dra: 8 x A100-80GB split into static MIG devices, served by the DRA driver


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return load_spec(LOCAL)


def xids(node: Node, **by_gpu: int) -> None:
    """Set the DCGM knobs' XIDs (``g0=79``): what each GPU reports now."""
    node.annotations[L.SIMULATE_DCGM] = json.dumps({k[1:]: {"xid": v} for k, v in by_gpu.items()})


def taints(desired: agents.Desired) -> dict[str, list[dict]]:
    return {d["name"]: d["taints"] for d in desired.devices or [] if d.get("taints")}


def test_the_gate_is_on_unless_dynamic_mig_excludes_it(spec: ClusterSpec) -> None:
    assert dra_driver.values(spec)["featureGates"] == {"NVMLDeviceHealthCheck": True}
    off = spec.model_copy(update={"dra": spec.dra.model_copy(update={"device_health_check": False})})
    assert "featureGates" not in dra_driver.values(off)


def test_a_fatal_xid_taints_the_gpu_noschedule_and_an_application_xid_with_effect_none(spec: ClusterSpec) -> None:
    view, node = deployed(spec), Node(spec, WHOLE)
    assert taints(node.sync(view, syncs=3)) == {}
    xids(node, g0=79, g3=13)
    got = taints(node.sync(view))
    assert got == {"gpu-0": [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}],
                   "gpu-3": [{"key": "gpu.nvidia.com/xid", "value": "13", "effect": "None"}]}
    xids(node)  # the knobs cleared: no event, the plugin keeps what it set
    assert taints(node.sync(view, syncs=2)) == got


def test_a_later_xid_replaces_the_earlier_taint_of_its_key(spec: ClusterSpec) -> None:
    view, node = deployed(spec), Node(spec, WHOLE)
    node.sync(view)
    xids(node, g0=79)
    node.sync(view)
    xids(node, g0=31)  # an application error after the fatal one: upstream downgrades the effect
    assert taints(node.sync(view)) == {"gpu-0": [{"key": "gpu.nvidia.com/xid", "value": "31", "effect": "None"}]}


def test_xids_reported_before_the_plugin_started_are_no_event(spec: ClusterSpec) -> None:
    view, node = deployed(spec), Node(spec, WHOLE)
    xids(node, g1=79)
    assert taints(node.sync(view, syncs=2)) == {}
    xids(node, g1=48)  # a new XID on the same GPU is one
    assert taints(node.sync(view)) == {"gpu-1": [{"key": "gpu.nvidia.com/xid", "value": "48",
                                                  "effect": "NoSchedule"}]}


def test_only_a_new_plugin_pod_lifts_a_taint(spec: ClusterSpec) -> None:
    view, node = deployed(spec), Node(spec, WHOLE)
    node.sync(view)
    xids(node, g2=79)
    assert "gpu-2" in taints(node.sync(view))
    rolled = dataclasses.replace(view, driver_version="580.95.06")  # a new release replaces every pod
    assert taints(node.sync(rolled, syncs=2)) == {}


def test_without_the_gate_nothing_is_tainted(spec: ClusterSpec) -> None:
    view, node = deployed(spec, dra_gates={}), Node(spec, WHOLE)
    node.sync(view)
    xids(node, g0=79)
    assert taints(node.sync(view)) == {}


def test_a_gpu_wide_xid_on_a_mig_gpu_matches_no_device(spec: ClusterSpec) -> None:
    view, node = deployed(spec), Node(spec, MIG)
    first = node.sync(view, syncs=3)
    assert first.devices and all("profile" in d["attributes"] for d in first.devices)
    xids(node, g0=79)
    desired = node.sync(view)
    assert taints(desired) == {}
    assert any("ignored XID 79 of GPU 0" in n for n in desired.notes)


def test_the_plugins_memory_survives_a_round_trip_and_an_older_record_reads() -> None:
    started = dra_plugin.Started(((), ()), "t1", {"gpu-0": ({"key": "k", "value": "1", "effect": "None"},)}, {0: 1})
    assert dra_plugin.Started.from_json(started.to_json()) == started
    old = json.dumps({"layout": [[], []], "template": "t1"})  # written before taints were kept
    assert dra_plugin.Started.from_json(old) == dra_plugin.Started(((), ()), "t1")


def test_the_slice_compare_sees_a_taint_but_not_the_time_the_api_server_stamps() -> None:
    published = {"devices": [{"name": "gpu-0", "taints": [{"key": "gpu.nvidia.com/xid", "value": "79",
                                                            "effect": "NoSchedule"}]}]}
    stored = {"devices": [{"name": "gpu-0", "taints": [{"key": "gpu.nvidia.com/xid", "value": "79",
                                                         "effect": "NoSchedule",
                                                         "timeAdded": "2026-12-03T14:00:00Z"}]}]}
    assert content_key(published) == content_key(stored)
    assert content_key(published) != content_key({"devices": [{"name": "gpu-0"}]})
