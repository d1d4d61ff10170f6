"""The GPU simulator's agents, offline: ConfigMap parsing and what each node publishes.

Fed with the ConfigMaps the render core produces, the simulator must agree with
:func:`gpucluster.expected.host_states`; fed with changed or broken ConfigMaps it must publish a node
that differs in exactly the way the real NVIDIA agents would.
"""

from __future__ import annotations

import json

import pytest
import yaml

from gpucluster import catalog, devices, expected
from gpucluster import labels as L
from gpucluster.render import gpu_operator
from gpucluster.render import network_operator as network
from gpucluster.render.nodes import node_config
from gpucluster.simulator import agents
from gpucluster.simulator.agents import device_plugin as configs
from gpucluster.simulator.silicon import Silicon, silicon_of
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec, Taint


@pytest.fixture
def spec(local_inventory) -> ClusterSpec:
    return load_spec(local_inventory)


@pytest.fixture
def lab(lab_inventory) -> ClusterSpec:
    return load_spec(lab_inventory)


def deployed(spec: ClusterSpec) -> dict:
    """The inputs the agents read, as the rendered objects would be deployed."""
    objs = {o["metadata"]["name"]: o for o in gpu_operator.objects(spec)}
    mig = objs.get(gpu_operator.MIG_CONFIGMAP)
    return dict(
        device_plugin_data=dict(objs[gpu_operator.DEVICE_PLUGIN_CONFIGMAP]["data"]),
        mig_data=dict(mig["data"]) if mig else None,
        nic_policy=network.nic_cluster_policy(spec),
        cluster=spec.metadata.name,
        driver_version=spec.gpu_operator.driver.version,
    )


def agents_for(
    spec: ClusterSpec, host: str, inputs: dict, annotations: dict | None = None, labels: dict | None = None
) -> agents.Desired:
    node = node_config(spec)[host]
    node_labels = {**node["labels"], **(labels or {})}
    return agents.node_agents(silicon_of(spec)[host], node_labels, annotations or {}, taints=node["taints"],
                              **inputs)


def extended(resources: dict[str, str]) -> dict[str, int]:
    return {k: int(v) for k, v in resources.items() if "/" in k}


# -- agreement with the spec when the rendered objects are deployed ----------------------------


@pytest.mark.parametrize("inventory", ["spec", "lab"])
def test_rendered_configmaps_give_the_expected_nodes(inventory, request) -> None:
    spec = request.getfixturevalue(inventory)
    inputs = deployed(spec)
    for host, state in expected.host_states(spec).items():
        got = agents_for(spec, host, inputs)
        want_agents = {k: v for k, v in state.labels.items() if L.is_agent_label(k)}
        assert got.labels == want_agents, host
        assert extended(got.capacity) == state.resources, host
        assert extended(got.allocatable) == state.resources, host
        assert got.notes == [], (host, got.notes)
        if state.devices:
            assert [d["name"] for d in got.devices] == [d.name for d in state.devices], host
            assert [int(d["capacity"]["memory"]["value"]) for d in got.devices] == [
                d.memory_bytes for d in state.devices
            ]
        else:
            assert got.devices is None, host


def test_local_inventory_numbers(spec) -> None:
    inputs = deployed(spec)
    assert extended(agents_for(spec, "l4-1", inputs).allocatable) == {"nvidia.com/gpu": 16}
    assert extended(agents_for(spec, "h200-1", inputs).allocatable) == {"nvidia.com/gpu": 8}
    assert extended(agents_for(spec, "a100-1", inputs).allocatable) == {"nvidia.com/mig-1g.10gb": 56}
    h100 = agents_for(spec, "h100-1", inputs)
    assert extended(h100.allocatable) == {"rdma/rdma_shared_device_a": spec.networking.rdma_hca_max}
    assert len(h100.devices) == 8
    cp = agents_for(spec, "cp-1", inputs)
    assert cp.labels == {} and cp.devices is None and extended(cp.capacity) == {}


# -- the device plugin follows the deployed ConfigMap ------------------------------------------


def test_changing_replicas_in_the_configmap_changes_allocatable(spec) -> None:
    inputs = deployed(spec)
    doc = yaml.safe_load(inputs["device_plugin_data"]["l4-infer"])
    assert doc["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 4
    doc["sharing"]["timeSlicing"]["resources"][0]["replicas"] = 2
    inputs["device_plugin_data"]["l4-infer"] = yaml.safe_dump(doc)
    got = agents_for(spec, "l4-1", inputs)
    assert extended(got.allocatable) == {"nvidia.com/gpu": 8}
    assert got.labels["nvidia.com/gpu.replicas"] == "2"
    assert got.labels["nvidia.com/gpu.product"] == "NVIDIA-L4-SHARED"


def test_missing_key_falls_back_to_default(spec) -> None:
    inputs = deployed(spec)
    del inputs["device_plugin_data"]["l4-infer"]
    got = agents_for(spec, "l4-1", inputs)
    assert extended(got.allocatable) == {"nvidia.com/gpu": 4}
    assert got.labels["nvidia.com/gpu.sharing-strategy"] == "none"
    assert any("'l4-infer' not in ConfigMap" in n for n in got.notes)


def test_label_naming_an_unknown_key_falls_back_to_default(spec) -> None:
    got = agents_for(spec, "l4-1", deployed(spec), labels={L.DEVICE_PLUGIN_CONFIG: "nope"})
    assert extended(got.allocatable) == {"nvidia.com/gpu": 4}
    assert "using 'default'" in agents.describe(got, got.labels)


def test_missing_configmap_means_no_sharing(spec) -> None:
    inputs = {**deployed(spec), "device_plugin_data": None}
    got = agents_for(spec, "l4-1", inputs)
    assert extended(got.allocatable) == {"nvidia.com/gpu": 4}
    assert got.notes == ["device-plugin ConfigMap not found: no sharing"]


def test_rename_by_default_and_mps() -> None:
    assert configs.parse_sharing(
        "version: v1\nsharing:\n  mps:\n    renameByDefault: true\n    resources:\n"
        "    - {name: nvidia.com/gpu, replicas: 3}\n"
    ) == configs.Sharing("mps", 3, True, "none")
    model = catalog.get("L4")
    data = {
        "default": "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
        "    - {name: nvidia.com/gpu, replicas: 4}\n"
    }
    got = agents.node_agents(Silicon("n", model, 2), {}, {}, device_plugin_data=data, mig_data=None)
    assert extended(got.capacity) == {"nvidia.com/gpu.shared": 8}
    assert got.labels["nvidia.com/gpu.product"] == "NVIDIA-L4"  # no -SHARED suffix when renamed


@pytest.mark.parametrize(
    "text, error",
    [
        ("version: v2\n", "unsupported version"),
        (
            "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 0}]\n",
            "replicas",
        ),
        ("version: v1\nflags: {migStrategy: weird}\n", "migStrategy"),
        ("version: v1\nsharing: {timeSlicing: {resources: []}, mps: {resources: []}}\n", "both"),
    ],
)
def test_invalid_configs_are_refused(text, error) -> None:
    with pytest.raises(ValueError, match=error):
        configs.parse_sharing(text)


def test_invalid_config_advertises_no_gpus(spec) -> None:
    inputs = deployed(spec)
    inputs["device_plugin_data"]["l4-infer"] = (
        "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: -1}]}}"
    )
    got = agents_for(spec, "l4-1", inputs)
    assert "nvidia.com/gpu" not in got.capacity
    assert any("crash-loop" in n for n in got.notes)


# -- MIG manager --------------------------------------------------------------------------------


def test_mig_config_change_and_failure(spec) -> None:
    inputs = deployed(spec)
    doc = yaml.safe_load(inputs["mig_data"]["config.yaml"])
    doc["mig-configs"]["gpucluster-a100-mig"] = [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}
    ]
    inputs["mig_data"] = {"config.yaml": yaml.safe_dump(doc)}
    got = agents_for(spec, "a100-1", inputs)
    assert extended(got.allocatable) == {"nvidia.com/mig-3g.40gb": 16}
    assert got.labels["nvidia.com/mig.config.state"] == "success"

    missing = agents_for(spec, "a100-1", deployed(spec), labels={L.MIG_CONFIG: "no-such-config"})
    assert missing.labels["nvidia.com/mig.config.state"] == "failed"
    assert extended(missing.allocatable) == {"nvidia.com/gpu": 8}

    too_many = {
        "config.yaml": yaml.safe_dump(
            {
                "version": "v1",
                "mig-configs": {
                    "gpucluster-a100-mig": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 9}}]
                },
            }
        )
    }
    bad = agents_for(spec, "a100-1", {**deployed(spec), "mig_data": too_many})
    assert bad.labels["nvidia.com/mig.config.state"] == "failed"


def test_mig_devices_in_a_resource_slice() -> None:
    model = catalog.get("A100-80GB")
    mig_data = {
        "config.yaml": yaml.safe_dump(
            {
                "version": "v1",
                "mig-configs": {
                    "m": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]
                },
            }
        )
    }
    labels = {
        L.MIG_CONFIG: "m",
        L.DRA: "true",
        L.DEPLOY_DEVICE_PLUGIN: "false",
    }
    got = agents.node_agents(
        Silicon("n", model, 2), labels, {}, device_plugin_data=None, mig_data=mig_data
    )
    assert len(got.devices) == 14 and extended(got.capacity) == {}
    d = got.devices[0]["attributes"]
    assert d["type"] == {"string": "mig"} and d["profile"] == {"string": "1g.10gb"}
    assert d["parentUUID"]["string"].startswith("GPU-") and d["uuid"]["string"].startswith("MIG-")


# -- DRA driver ---------------------------------------------------------------------------------


def test_slice_device_shape(spec) -> None:
    dev = agents_for(spec, "h100-1", deployed(spec)).devices[3]
    assert dev["name"] == "gpu-3"
    attrs = dev["attributes"]
    assert attrs["type"] == {"string": "gpu"}
    assert attrs["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert attrs["brand"] == {"string": "Nvidia"}
    assert attrs["architecture"] == {"string": "Hopper"}
    assert attrs["cudaComputeCapability"] == {"version": "9.0.0"}
    assert attrs["driverVersion"] == {"version": "580.95.5"}  # semver: no leading zero
    assert attrs["resource.kubernetes.io/pciBusID"]["string"].startswith("0000:")
    assert attrs["uuid"]["string"] == devices.device_uuid("local", "h100-1", 3)
    assert int(dev["capacity"]["memory"]["value"]) == catalog.get("H100-SXM5-80GB").memory_bytes


def test_dra_label_decides_which_nodes_get_slices(spec) -> None:
    inputs = deployed(spec)
    assert agents_for(spec, "h200-1", inputs).devices is None
    assert len(agents_for(spec, "h200-1", inputs, labels={L.DRA: "true"}).devices) == 8
    off = agents_for(spec, "h100-1", inputs, labels={L.DRA: "false"})
    assert off.devices is None
    # The device plugin is still off there (deploy label false), so nothing is advertised at all.
    assert "nvidia.com/gpu" not in off.capacity


# -- faults -------------------------------------------------------------------------------------


def test_unhealthy_gpu_lowers_allocatable_not_capacity(spec) -> None:
    inputs = deployed(spec)
    got = agents_for(spec, "h200-1", inputs, annotations={L.FAULT_UNHEALTHY_GPUS: "2"})
    assert got.capacity["nvidia.com/gpu"] == "8" and got.allocatable["nvidia.com/gpu"] == "7"
    # A time-sliced GPU takes all of its replicas with it, as the device plugin reports them.
    l4 = agents_for(spec, "l4-1", inputs, annotations={L.FAULT_UNHEALTHY_GPUS: "0,9"})  # 9: no such GPU
    assert (l4.capacity["nvidia.com/gpu"], l4.allocatable["nvidia.com/gpu"]) == ("16", "12")
    dra = agents_for(spec, "h100-1", inputs, annotations={L.FAULT_UNHEALTHY_GPUS: "1"})
    assert "gpu-1" not in [d["name"] for d in dra.devices] and len(dra.devices) == 7


def test_missing_device_and_wrong_product(spec) -> None:
    inputs = deployed(spec)
    got = agents_for(
        spec,
        "h100-2",
        inputs,
        annotations={L.FAULT_MISSING_DEVICES: "gpu-5, gpu-7", L.FAULT_PRODUCT: "Tesla-T4"},
    )
    assert [d["name"] for d in got.devices] == [f"gpu-{i}" for i in (0, 1, 2, 3, 4, 6)]
    assert got.labels["nvidia.com/gpu.product"] == "Tesla-T4"


def test_gfd_label_ownership() -> None:
    assert L.is_gfd_label("nvidia.com/gpu.product")
    assert L.is_gfd_label("nvidia.com/mig.config.state")
    assert L.is_gfd_label("nvidia.com/mig-1g.10gb.count")
    assert not L.is_gfd_label(L.MIG_CONFIG)
    assert not L.is_gfd_label(L.DEVICE_PLUGIN_CONFIG)
    assert not L.is_gfd_label(L.DEPLOY_DEVICE_PLUGIN)
    assert not L.is_gfd_label("gpucluster.dev/pool")


def test_rdma_follows_the_nic_cluster_policy(spec) -> None:
    inputs = deployed(spec)
    assert "rdma/rdma_shared_device_a" in agents_for(spec, "h100-1", inputs).capacity
    assert (
        "rdma/rdma_shared_device_a" not in agents_for(spec, "h100-1", {**inputs, "nic_policy": None}).capacity
    )
    assert "rdma/rdma_shared_device_a" not in agents_for(spec, "l4-1", inputs).capacity  # no such NIC


def policy_with(spec: ClusterSpec, config: dict | None = None, **extra) -> dict:
    """The rendered NicClusterPolicy with another RDMA config and/or other spec keys."""
    ncp = network.nic_cluster_policy(spec)
    if config is not None:
        ncp["spec"]["rdmaSharedDevicePlugin"]["config"] = json.dumps(config)
    ncp["spec"].update(extra)
    return ncp


def entry(name: str, **kw) -> dict:
    return {"resourceName": name, **kw}


def test_nic_labels_come_before_the_rdma_plugin(spec) -> None:
    inputs = deployed(spec)
    h100 = agents_for(spec, "h100-1", inputs)
    # NFD's Mellanox NIC label and the operator's OFED wait: what the plugin's DaemonSet selects on
    assert h100.labels[L.MELLANOX_NIC] == "true" and h100.labels[L.MOFED_WAIT] == "false"
    assert L.MELLANOX_NIC not in agents_for(spec, "l4-1", inputs).labels  # no NVIDIA NIC there
    # no policy: NFD still labels the NIC, but the operator sets no wait label and no plugin runs
    bare = agents_for(spec, "h100-1", {**inputs, "nic_policy": None})
    assert bare.labels.get(L.MELLANOX_NIC) == "true" and L.MOFED_WAIT not in bare.labels
    # an OFED driver requested: the node waits for it (none is simulated), so no RDMA resources
    ofed = agents_for(spec, "h100-1", {**inputs, "nic_policy": policy_with(spec, ofedDriver={"version": "x"})})
    assert ofed.labels[L.MOFED_WAIT] == "true"
    assert not [k for k in ofed.capacity if k.startswith("rdma/")]


def test_render_sets_none_of_the_nic_labels(spec) -> None:
    # Decided: NFD and the operator own them (the simulator stands in); a label of ours would fake hardware.
    assert not [k for n in node_config(spec).values() for k in n["labels"] if k in L.NIC_AGENT_LABELS]


def test_rdma_selectors_are_anded_and_unmatched_entries_show_zero(spec) -> None:
    config = {"configList": [
        entry("ib", rdmaHcaMax=5, selectors={"ifNames": ["ibp12s0"], "linkTypes": ["infiniband"]}),
        entry("roce", rdmaHcaMax=5, selectors={"ifNames": ["ibp12s0"], "linkTypes": ["ether"]}),
        entry("other", rdmaHcaMax=5, selectors={"ifNames": ["ens9"]}),
        entry("nvidia", rdmaHcaMax=7, resourcePrefix="nvidia.com", selectors={"vendors": ["15b3"]}),
        entry("nodefault", selectors={"drivers": ["mlx5_core"]}),
    ]}
    got = extended(agents_for(spec, "h100-1", {**deployed(spec), "nic_policy": policy_with(spec, config)}).capacity)
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
def test_a_config_the_plugin_refuses_advertises_nothing(spec, config, problem) -> None:
    got = agents_for(spec, "h100-1", {**deployed(spec), "nic_policy": policy_with(spec, config)})
    assert not [k for k in got.capacity if "/" in k and not k.startswith("nvidia.com/gpu")]
    assert any(problem in n for n in got.notes), got.notes


def test_deprecated_devices_field_selects_by_interface_name(spec) -> None:
    config = {"configList": [entry("old", rdmaHcaMax=3, devices=["ibp75s0"])]}
    got = agents_for(spec, "h100-1", {**deployed(spec), "nic_policy": policy_with(spec, config)})
    assert extended(got.capacity) == {"rdma/old": 3}


def test_rdma_plugin_needs_tolerations_for_custom_taints(spec) -> None:
    # A pool with a taint of its own: the operator's DaemonSets tolerate only nvidia.com/gpu unless the
    # NicClusterPolicy lists the others, so without them the node has no rdma/* resource at all.
    pool = next(p for p in spec.node_pools if p.name == "h100-train")
    pool.taints = [Taint(key="dedicated", value="training", effect="NoExecute")]
    inputs = deployed(spec)
    assert extended(agents_for(spec, "h100-1", inputs).capacity) == {"rdma/rdma_shared_device_a": 63}
    untolerated = policy_with(spec)
    del untolerated["spec"]["tolerations"]
    got = agents_for(spec, "h100-1", {**inputs, "nic_policy": untolerated})
    assert not [k for k in got.capacity if k.startswith("rdma/")]


def test_rdma_agent_never_imports_the_expectation_side() -> None:
    # The agent computes what nodes publish; verification (expected.rdma_resources) what it expects.
    import ast
    from pathlib import Path

    from gpucluster.simulator.agents import rdma_plugin

    forbidden = ("gpucluster.expected", "gpucluster.devices", "gpucluster.verify", "gpucluster.render")
    for path in [Path(rdma_plugin.__file__)]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                if isinstance(node, ast.ImportFrom) else [])
            bad = [n for n in names if n.startswith(forbidden)]
            assert not bad, f"{path.name} imports {bad}"


# -- command line, offline -------------------------------------------------------------------------


def test_cli_errors_are_one_clear_line(tmp_path, cli) -> None:
    # A kubeconfig the user names is input: exit 2 (it was 1 before the errors were unified).
    out = cli("local", "gpus", "sync", "--kubeconfig", str(tmp_path / "nope"))
    assert out.exit_code == 2 and "kubeconfig" in out.output and "local up" in out.output
    assert "Traceback" not in out.output
    bad = tmp_path / "kubeconfig"
    bad.write_text("this: is: not a kubeconfig")
    out = cli("local", "gpus", "sync", "--kubeconfig", str(bad))
    assert out.exit_code == 2 and "not usable" in out.output
    out = cli("local", "gpus", "fault", "l4-1", "melted", "--kubeconfig", str(bad))
    assert out.exit_code == 2 and "melted" in out.output


def test_stopping_the_simulator_never_kills_a_process_that_is_not_ours(tmp_path) -> None:
    import os
    import sys
    import time

    import pytest

    from gpucluster.addons import gpu_simulator
    from gpucluster.errors import LocalWorldError
    from gpucluster.local import addons
    from gpucluster.procs import Component

    # A record whose pid now belongs to another process (this test run): not ours, never signalled.
    addons.record(tmp_path, gpu_simulator.NAME, {gpu_simulator.NAME: Component(
        gpu_simulator.NAME, os.getpid(), sys.executable, ["-m", "gpucluster"], "", time.time())})
    assert addons.stop(tmp_path, gpu_simulator.NAME) == []
    assert addons.load(tmp_path, gpu_simulator.NAME) == {}  # the stale record is gone
    (addons.folder(tmp_path, gpu_simulator.NAME) / addons.RECORD).write_text("garbage")
    with pytest.raises(LocalWorldError, match="corrupt"):
        addons.stop(tmp_path, gpu_simulator.NAME)


@pytest.mark.parametrize("resource_name", ["rdma_shared_device_a", "roce"])
def test_ib_and_roce_pools_agree_with_expected(lab, resource_name) -> None:
    # An InfiniBand pool and a RoCE pool, sharing the default resource name or not: the deployed policy
    # must give every RDMA host what verification expects (the old render kept only the first pool's
    # link type in a shared entry, so the RoCE hosts got rdma/*: 0).
    from gpucluster.spec.model import Rdma

    pool = next(p for p in lab.node_pools if p.name == "l40s-infer")
    pool.rdma = Rdma(interfaces=["ens1f0np0"], link_type="ether", resource_name=resource_name)
    inputs = deployed(lab)
    states = expected.host_states(lab)
    for host in ("gpu-h100-01", "gpu-l40s-01"):
        got = agents_for(lab, host, inputs)
        assert extended(got.capacity) == states[host].resources, host
        assert got.labels[L.MOFED_WAIT] == states[host].labels[L.MOFED_WAIT] == "false"
    assert states["gpu-l40s-01"].resources[f"rdma/{resource_name}"] == 63
