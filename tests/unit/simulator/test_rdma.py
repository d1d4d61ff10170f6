"""The RDMA shared device plugin and the NIC labels NFD and the network operator publish (simulated).

The agent follows the deployed NicClusterPolicy (tests/upstream/test_network_upstream.py holds the
upstream facts); GPU nodes go through nvidia-oracle for their GPU agents, so these need the tool.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from sim_helpers import deployed, extended, publish

from gpucluster import expected
from gpucluster import labels as L
from gpucluster.render import network_operator as network
from gpucluster.render.nodes import node_config
from gpucluster.spec.model import ClusterSpec, Taint


def test_rdma_follows_the_nic_cluster_policy(local, oracle) -> None:
    view = deployed(local)
    assert "rdma/rdma_shared_device_a" in publish(local, "h100-1", view, oracle).capacity
    without = publish(local, "h100-1", dataclasses.replace(view, nic_policy=None), oracle)
    assert "rdma/rdma_shared_device_a" not in without.capacity
    assert "rdma/rdma_shared_device_a" not in publish(local, "l4-1", view, oracle).capacity  # no such NIC


def policy_with(spec: ClusterSpec, config: dict | None = None, **extra) -> dict:
    """The rendered NicClusterPolicy with another RDMA config and/or other spec keys."""
    ncp = network.nic_cluster_policy(spec)
    if config is not None:
        ncp["spec"]["rdmaSharedDevicePlugin"]["config"] = json.dumps(config)
    ncp["spec"].update(extra)
    return ncp


def entry(name: str, **kw) -> dict:
    return {"resourceName": name, **kw}


def test_nic_labels_come_before_the_rdma_plugin(local, oracle) -> None:
    view = deployed(local)
    h100 = publish(local, "h100-1", view, oracle)
    # NFD's Mellanox NIC label and the operator's OFED wait: what the plugin's DaemonSet selects on
    assert h100.labels[L.MELLANOX_NIC] == "true" and h100.labels[L.MOFED_WAIT] == "false"
    assert L.MELLANOX_NIC not in publish(local, "l4-1", view, oracle).labels  # no NVIDIA NIC there
    # no policy: NFD still labels the NIC, but the operator sets no wait label and no plugin runs
    bare = publish(local, "h100-1", dataclasses.replace(view, nic_policy=None), oracle)
    assert bare.labels.get(L.MELLANOX_NIC) == "true" and L.MOFED_WAIT not in bare.labels
    # an OFED driver requested: the node waits for it (none is simulated), so no RDMA resources
    ofed = publish(local, "h100-1", deployed(local, nic_policy=policy_with(local, ofedDriver={"version": "x"})), oracle)
    assert ofed.labels[L.MOFED_WAIT] == "true"
    assert not [k for k in ofed.capacity if k.startswith("rdma/")]


def test_render_sets_none_of_the_nic_labels(local) -> None:
    # Decided: NFD and the operator own them (the simulator stands in); a label of ours would fake hardware.
    assert not [k for n in node_config(local).values() for k in n["labels"] if k in L.NIC_AGENT_LABELS]


def test_rdma_selectors_are_anded_and_unmatched_entries_show_zero(local, oracle) -> None:
    config = {"configList": [
        entry("ib", rdmaHcaMax=5, selectors={"ifNames": ["ibp12s0"], "linkTypes": ["infiniband"]}),
        entry("roce", rdmaHcaMax=5, selectors={"ifNames": ["ibp12s0"], "linkTypes": ["ether"]}),
        entry("other", rdmaHcaMax=5, selectors={"ifNames": ["ens9"]}),
        entry("nvidia", rdmaHcaMax=7, resourcePrefix="nvidia.com", selectors={"vendors": ["15b3"]}),
        entry("nodefault", selectors={"drivers": ["mlx5_core"]}),
    ]}
    got = extended(publish(local, "h100-1", deployed(local, nic_policy=policy_with(local, config)), oracle).capacity)
    assert got == {
        "rdma/ib": 5,
        "rdma/roce": 0,  # name matches, link type does not: an empty resource still registers
        "rdma/other": 0,
        "nvidia.com/nvidia": 7,  # resourcePrefix
        "rdma/nodefault": 0,  # rdmaHcaMax missing: Go's zero, not 1
    }


@pytest.mark.parametrize("config, problem", [
    ({"configList": []}, "no resources configuration"),
    ({"configList": [entry("a", rdmaHcaMax=1, devices=["x"]), entry("a", rdmaHcaMax=1, devices=["y"])]},
     "already exists"),
    ({"configList": [entry("a-b", rdmaHcaMax=1, devices=["x"])]}, "invalid characters"),
    ({"configList": [entry("a", rdmaHcaMax=-1, devices=["x"])]}, "rdmaHcaMax < 0"),
    ({"configList": [entry("a", rdmaHcaMax=1)]}, "neither"),
    ({"configList": [entry("a", rdmaHcaMax=1, devices=["x"], selectors={"ifNames": ["x"]})]}, "both"),
])
def test_a_config_the_plugin_refuses_advertises_nothing(local, oracle, config, problem) -> None:
    got = publish(local, "h100-1", deployed(local, nic_policy=policy_with(local, config)), oracle)
    assert not [k for k in got.capacity if "/" in k and not k.startswith("nvidia.com/gpu")]
    assert any(problem in n for n in got.notes), got.notes


def test_deprecated_devices_field_selects_by_interface_name(local, oracle) -> None:
    config = {"configList": [entry("old", rdmaHcaMax=3, devices=["ibp75s0"])]}
    got = publish(local, "h100-1", deployed(local, nic_policy=policy_with(local, config)), oracle)
    assert extended(got.capacity) == {"rdma/old": 3}


def test_rdma_plugin_needs_tolerations_for_custom_taints(local, oracle) -> None:
    # A pool with a taint of its own: the operator's DaemonSets tolerate only nvidia.com/gpu unless the
    # NicClusterPolicy lists the others, so without them the node has no rdma/* resource at all.
    pool = next(p for p in local.node_pools if p.name == "h100-train")
    pool.taints = [Taint(key="dedicated", value="training", effect="NoExecute")]
    view = deployed(local)
    assert extended(publish(local, "h100-1", view, oracle).capacity) == {"rdma/rdma_shared_device_a": 63}
    untolerated = policy_with(local)
    del untolerated["spec"]["tolerations"]
    got = publish(local, "h100-1", dataclasses.replace(view, nic_policy=untolerated), oracle)
    assert not [k for k in got.capacity if k.startswith("rdma/")]


@pytest.mark.parametrize("resource_name", ["rdma_shared_device_a", "roce"])
def test_ib_and_roce_pools_agree_with_expected(lab, resource_name, oracle) -> None:
    # An InfiniBand pool and a RoCE pool, sharing the default resource name or not: the deployed policy
    # must give every RDMA host what verification expects (the old render kept only the first pool's
    # link type in a shared entry, so the RoCE hosts got rdma/*: 0).
    from gpucluster.spec.model import Rdma

    pool = next(p for p in lab.node_pools if p.name == "l40s-infer")
    pool.rdma = Rdma(interfaces=["ens1f0np0"], link_type="ether", resource_name=resource_name)
    view = deployed(lab)
    states = expected.host_states(lab)
    for host in ("gpu-h100-01", "gpu-l40s-01"):
        got = publish(lab, host, view, oracle)
        assert extended(got.capacity) == states[host].resources, host
        assert got.labels[L.MOFED_WAIT] == states[host].labels[L.MOFED_WAIT] == "false"
    assert states["gpu-l40s-01"].resources[f"rdma/{resource_name}"] == 63
