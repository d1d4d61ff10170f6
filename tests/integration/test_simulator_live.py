"""The GPU simulator against the real local control plane (kube-apiserver, kwok, scheduler).

The rendered gpu-operator objects for ``inventories/local`` are applied with ``kubectl apply
--server-side``; the simulator then creates the kwok nodes and must publish exactly what
:func:`gpucluster.expected.host_states` says, react to edits of the deployed ConfigMap, and show
every fault. Tests run in file order and share one world for the module.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cluster_helpers import Cluster, wait_for

from gpucluster import catalog, expected
from gpucluster import labels as L
from gpucluster.addons import gpu_simulator
from gpucluster.labels import SIMULATED
from gpucluster.quantity import parse_quantity
from gpucluster.render import dra_driver, gpu_operator, render
from gpucluster.render import network_operator as network
from gpucluster.simulator import Simulator, attach
from gpucluster.simulator.objects import slice_name
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec
from gpucluster.upstream import DRA_DRIVER
from gpucluster.verify.cluster import device_problems

pytestmark = pytest.mark.integration
LOCAL = Path(__file__).resolve().parents[2] / "inventories" / "local"


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return load_spec(LOCAL)


def ready(node: dict) -> str:
    return {c["type"]: c["status"] for c in node.get("status", {}).get("conditions") or []}.get("Ready", "")


def set_replicas(lw: Cluster, spec: ClusterSpec, replicas: int) -> None:
    cm = lw.get("configmap", gpu_operator.DEVICE_PLUGIN_CONFIGMAP, "-n", spec.gpu_operator.namespace)
    doc = yaml.safe_load(cm["data"]["l4-infer"])
    doc["sharing"]["timeSlicing"]["resources"][0]["replicas"] = replicas
    patch = json.dumps({"data": {"l4-infer": yaml.safe_dump(doc)}})
    lw.kubectl(
        "patch",
        "configmap",
        gpu_operator.DEVICE_PLUGIN_CONFIGMAP,
        "-n",
        spec.gpu_operator.namespace,
        "--type=merge",
        "-p",
        patch,
    )


@pytest.fixture(scope="module")
def sim(lw: Cluster, spec: ClusterSpec) -> Iterator[Simulator]:
    rendered = render(spec)
    objs = [
        *rendered.components["namespaces"],
        *rendered.components["gpu-operator"],
        network.nic_cluster_policy(spec),
    ]
    lw.kubectl(
        "apply",
        "--server-side",
        "--field-manager=gpucluster-test",
        "-f",
        "-",
        stdin=yaml.safe_dump_all(objs),
    )
    simulator = attach(lw.kubeconfig, spec)
    yield simulator
    simulator.close()


# -- the nodes the spec implies -----------------------------------------------------------------


def test_every_host_is_a_ready_simulated_node_as_expected(lw: Cluster, spec: ClusterSpec, sim: Simulator) -> None:
    states = expected.host_states(spec)

    def all_ready():  # type: ignore[no-untyped-def]
        nodes = {n["metadata"]["name"]: n for n in lw.get("nodes")["items"]}
        return nodes if set(nodes) == set(states) and all(ready(n) == "True" for n in nodes.values()) else None

    nodes = wait_for("every host Ready", all_ready)
    for name, state in states.items():
        node = nodes[name]
        labels = node["metadata"]["labels"]
        assert {k: labels.get(k) for k in state.labels} == state.labels, name
        assert node["metadata"]["annotations"][SIMULATED] == "true"
        taints = sorted(
            f"{t['key']}={t.get('value', '')}:{t['effect']}".replace("=:", ":")
            for t in node["spec"].get("taints") or []
            if not t["key"].startswith("node.kubernetes.io/")
        )
        assert taints == sorted(state.taints), name
        for field in ("capacity", "allocatable"):
            got = {k: int(v) for k, v in node["status"][field].items() if "/" in k}
            assert got == state.resources, (name, field)
    assert nodes["l4-1"]["status"]["allocatable"]["nvidia.com/gpu"] == "16"


def test_dra_nodes_publish_resource_slices(lw: Cluster, spec: ClusterSpec, sim: Simulator) -> None:
    states = expected.host_states(spec)
    slices = {s["spec"]["nodeName"]: s for s in lw.get("resourceslices.resource.k8s.io")["items"]}
    assert set(slices) == {h for h, s in states.items() if s.devices}
    for host, rslice in slices.items():
        assert rslice["metadata"]["name"] == slice_name(host)
        assert rslice["spec"]["driver"] == DRA_DRIVER and rslice["spec"]["pool"]["name"] == host
        devices = rslice["spec"]["devices"]
        # verify's own comparison (names or profile/placement, attributes, memory) finds nothing
        assert device_problems(states[host].devices, devices) == [], host
        assert len({d["attributes"]["uuid"]["string"] for d in devices}) == len(devices)
        memory = sorted(int(parse_quantity(d["capacity"]["memory"]["value"])) for d in devices)
        assert memory == sorted(d.memory_bytes for d in states[host].devices)
        model = catalog.get(states[host].gpu_model)
        assert devices[0]["attributes"]["cudaComputeCapability"] == {"version": f"{model.compute_capability}.0"}
        assert {a["string"] for d in devices for k, a in d["attributes"].items() if k == "architecture"} == {
            model.architecture}
        assert devices[0]["attributes"]["productName"] == {"string": model.product_name}


def test_second_sync_writes_nothing(sim: Simulator) -> None:
    sim.sync()  # settle anything kwok raced with
    report = sim.sync()
    assert report.writes == 0, report
    assert report.created == [] and report.updated == []


def test_a_sync_that_lost_the_race_to_register_converges(lw: Cluster, spec: ClusterSpec, sim: Simulator) -> None:
    """Two simulators (the world's daemon and a foreground `up`) list, then both create: the loser's
    create answers 409 and it must judge what the winner published instead of failing the run."""
    other = Simulator(spec, lw.kubeconfig)
    try:
        real_items = other.kube.items
        other.kube.items = lambda path: [] if "/nodes" in path or "resourceslices" in path else real_items(path)
        report = other.sync()  # believes nothing is registered: every create collides
    finally:
        other.close()
    assert report.created == [] and report.nodes == len(sim.silicon), report
    # The loser published from a node it believed new (its MIG manager restarted its sequence); the next
    # syncs walk it back, and the cluster ends where the agents say, then quiet.
    sim.settle()
    assert sim.sync().writes == 0
    slices = {s["spec"]["nodeName"]: s for s in lw.get("resourceslices.resource.k8s.io")["items"]}
    for host, state in expected.host_states(spec).items():
        if state.devices:
            assert device_problems(state.devices, slices[host]["spec"]["devices"]) == [], host


# -- derived from the deployed objects ----------------------------------------------------------


def test_replicas_change_in_the_configmap_changes_allocatable(
    lw: Cluster, spec: ClusterSpec, sim: Simulator
) -> None:
    set_replicas(lw, spec, 2)
    try:
        report = sim.sync()
        assert sorted(report.updated) == ["l4-1", "l4-2"]
        node = lw.get("node", "l4-1")
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        assert node["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "2"
    finally:
        set_replicas(lw, spec, 4)
        sim.sync()
    assert lw.get("node", "l4-2")["status"]["allocatable"]["nvidia.com/gpu"] == "16"


def test_a_node_label_pointing_at_a_missing_key_stops_the_agents(lw: Cluster, sim: Simulator) -> None:
    # The config manager errors out (no fallback): the plugin's pod is gone, the kubelet keeps the
    # resource in capacity with nothing allocatable (k8s-device-plugin cmd/config-manager/main.go:354).
    lw.kubectl("label", "node", "l4-2", "--overwrite", f"{L.DEVICE_PLUGIN_CONFIG}=no-such-key")
    try:
        sim.sync()
        node = lw.get("node", "l4-2")
        assert node["status"]["capacity"]["nvidia.com/gpu"] == "16"
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "0"
        assert "specified config no-such-key does not exist" in node["metadata"]["annotations"][L.SIMULATOR_DERIVED]
    finally:
        lw.kubectl("label", "node", "l4-2", "--overwrite", f"{L.DEVICE_PLUGIN_CONFIG}=l4-infer")
        sim.sync()
    assert lw.get("node", "l4-2")["status"]["allocatable"]["nvidia.com/gpu"] == "16"


# -- faults -------------------------------------------------------------------------------------


def test_a_wedged_mig_change_then_its_recovery(lw: Cluster, spec: ClusterSpec, sim: Simulator) -> None:
    # gpu-operator issue 2833: the manager waits for GPU client pods that never go away, leaving
    # state pending, the clients' deploy labels paused and the node advertising 0 of its MIG devices.
    def node() -> dict:
        return lw.get("node", "a100-1")

    mig = "nvidia.com/mig-1g.10gb"
    assert node()["status"]["allocatable"][mig] == "56"
    sim.inject("a100-1", "mig-wedge")
    lw.kubectl("label", "node", "a100-1", "--overwrite", f"{L.MIG_CONFIG}=all-disabled")
    try:
        sim.sync()
        sim.sync()
        labels = node()["metadata"]["labels"]
        assert labels[L.MIG_CONFIG_STATE] == "pending"
        assert labels[L.DEPLOY_DEVICE_PLUGIN] == labels[L.DEPLOY_GFD] == L.DEPLOY_PAUSED
        assert (node()["status"]["capacity"][mig], node()["status"]["allocatable"][mig]) == ("56", "0")
        sim.clear("a100-1", "mig-wedge")  # the pods finally go: the change completes
        sim.sync()
        labels = node()["metadata"]["labels"]
        assert labels[L.MIG_CONFIG_STATE] == "success" and labels[L.DEPLOY_DEVICE_PLUGIN] == "true"
        status = node()["status"]
        assert status["allocatable"].get("nvidia.com/gpu") == "8" and mig not in status["capacity"]
    finally:
        sim.clear("a100-1", "mig-wedge")
        pool = next(p for p in spec.node_pools if p.name == "a100-mig")
        lw.kubectl("label", "node", "a100-1", "--overwrite", f"{L.MIG_CONFIG}={gpu_operator.mig_config_name(pool)}")
        sim.settle()
    assert node()["status"]["allocatable"][mig] == "56"



def _published_profiles(lw: Cluster, host: str) -> list[str] | None:
    """The MIG profiles in the host's ResourceSlices (None: the host has no slice)."""
    slices = [s for s in lw.get("resourceslices.resource.k8s.io")["items"] if s["spec"].get("nodeName") == host]
    if not slices:
        return None
    return sorted(d["attributes"]["profile"]["string"] for s in slices for d in s["spec"].get("devices") or []
                  if "profile" in d["attributes"])


@pytest.mark.parametrize("placement", ["gpucluster's values", "the chart's default affinity"])
def test_a_static_mig_layout_change_on_a_dra_pool(lw: Cluster, spec: ClusterSpec, sim: Simulator,
                                                   monkeypatch: pytest.MonkeyPatch, placement: str) -> None:
    # dra-driver-nvidia-gpu v0.4.1 reads its devices once at start: the new layout reaches the slice only
    # through a new plugin pod, which our kubeletPlugin.affinity makes the MIG manager's pause cause.
    if placement != "gpucluster's values":
        rendered = dra_driver.values

        def plain(s: ClusterSpec) -> dict:
            v = rendered(s)
            return {**v, "kubeletPlugin": {k: x for k, x in v["kubeletPlugin"].items() if k != "affinity"}}

        monkeypatch.setattr(dra_driver, "values", plain)
    pools = {p.name: p for p in spec.node_pools}
    before = _published_profiles(lw, "a100-2")
    assert before and "3g.40gb" in before
    lw.kubectl("label", "node", "a100-2", "--overwrite",
               f"{L.MIG_CONFIG}={gpu_operator.mig_config_name(pools['a100-mig'])}")
    try:
        sim.sync()
        labels = lw.get("node", "a100-2")["metadata"]["labels"]
        assert labels[L.MIG_CONFIG_STATE] == "pending" and labels[L.DEPLOY_GFD] == L.DEPLOY_PAUSED
        during = _published_profiles(lw, "a100-2")
        sim.sync()
        assert lw.get("node", "a100-2")["metadata"]["labels"][L.MIG_CONFIG_STATE] == "success"
        after = _published_profiles(lw, "a100-2")
        if placement == "gpucluster's values":
            assert during is None  # the plugin stopped for the change; its slices went with it
            assert after == ["1g.10gb"] * 56
        else:
            assert during == before and after == before  # the plugin never restarted
            annotations = lw.get("node", "a100-2")["metadata"]["annotations"]
            assert "MIG layout it read at start" in annotations[L.SIMULATOR_DERIVED]
    finally:
        monkeypatch.undo()
        lw.kubectl("label", "node", "a100-2", "--overwrite",
                   f"{L.MIG_CONFIG}={gpu_operator.mig_config_name(pools['a100-dra'])}")
        sim.settle()
    assert _published_profiles(lw, "a100-2") == before


def _xid_claim(name: str, uuid: str) -> dict:
    only = {"cel": {"expression": f"device.attributes['{DRA_DRIVER}'].uuid == '{uuid}'"}}
    request = {"name": "gpu", "exactly": {"deviceClassName": XID_CLASS, "count": 1, "selectors": [only]}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": XID_NS}, "spec": {"devices": {"requests": [request]}}}


def _xid_pod(name: str, claim: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": XID_NS}, "spec": {
        "containers": [{"name": "main", "image": "registry.invalid/none:0",
                        "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}], "tolerations": [{"operator": "Exists"}]}}


XID_NS, XID_CLASS = "xid-test", "xid-any-gpu"


def test_a_fatal_xid_isolates_the_gpu_without_a_person(lw: Cluster, sim: Simulator, cli) -> None:
    """One XID injected (the DCGM knobs, as one NVML event reaches both agents): the DRA driver's health
    monitor taints the device in its slice; the next claim for it is refused while a running pod stays
    (NoSchedule), an application XID's taint (None) blocks nothing, `quarantine --list` shows the driver's
    taint beside ours, lifting ours leaves it, and only a new plugin pod clears it."""
    base = ["--kubeconfig", str(lw.kubeconfig), "-i", str(LOCAL)]
    node = "h100-1"
    uuids = {d["name"]: d["attributes"]["uuid"]["string"]
             for d in lw.get("resourceslice", slice_name(node))["spec"]["devices"]}
    lw.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": XID_NS}},
             {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": XID_CLASS},
              "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRA_DRIVER}'"}}]}})
    lw.apply(_xid_claim("hold-0", uuids["gpu-0"]), _xid_pod("hold-0", "hold-0"))
    wait_for("hold-0 bound", lambda: lw.get("pod", "-n", XID_NS, "hold-0")["spec"].get("nodeName"))
    try:
        lw.kubectl("annotate", "--overwrite", "node", node,
                   f"{L.SIMULATE_DCGM}={json.dumps({'0': {'xid': 79}, '1': {'xid': 13}})}")
        sim.sync()
        devices = {d["name"]: d for d in lw.get("resourceslice", slice_name(node))["spec"]["devices"]}
        taint = {k: devices["gpu-0"]["taints"][0][k] for k in ("key", "value", "effect")}
        assert taint == {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
        assert devices["gpu-0"]["taints"][0]["timeAdded"]  # the API server took the taint
        assert [(t["value"], t["effect"]) for t in devices["gpu-1"]["taints"]] == [("13", "None")]
        assert not any(devices[f"gpu-{i}"].get("taints") for i in range(2, 8))
        assert sim.sync().writes == 0  # the stamped time is no difference to publish again

        lw.apply(_xid_claim("want-0", uuids["gpu-0"]), _xid_pod("want-0", "want-0"),
                 _xid_claim("want-1", uuids["gpu-1"]), _xid_pod("want-1", "want-1"))
        wait_for("want-1 bound (an application XID blocks nothing)",
                 lambda: lw.get("pod", "-n", XID_NS, "want-1")["spec"].get("nodeName"))
        wait_for("want-0 refused by the scheduler", lambda: [
            e for e in lw.get("events", "-n", XID_NS, "--field-selector", "involvedObject.name=want-0")["items"]
            if e.get("reason") == "FailedScheduling"])
        assert not lw.get("pod", "-n", XID_NS, "want-0")["spec"].get("nodeName")
        held = lw.get("pod", "-n", XID_NS, "hold-0")
        assert held["spec"]["nodeName"] == node and "deletionTimestamp" not in held["metadata"]  # NoSchedule

        listed = cli("quarantine", "--list", *base)
        assert listed.exit_code == 0, listed.output
        assert f"{node}/gpu-0  NoSchedule  since " in listed.output and "gpu.nvidia.com/xid=79  (the DRA driver's " \
            "health monitor; a new kubelet plugin pod lifts it)" in listed.output
        ours = cli("quarantine", node, "gpu-0", "--reason", "XID 79", "--effect", "NoSchedule", *base)
        assert ours.exit_code == 0, ours.output
        assert "(gpucluster quarantine)" in cli("quarantine", "--list", *base).output
        lifted = cli("quarantine", node, "gpu-0", "--lift", *base)
        assert lifted.exit_code == 0, lifted.output
        assert "still tainted by the DRA driver's health monitor: gpu.nvidia.com/xid=79:NoSchedule" in lifted.output
        assert lw.get("resourceslice", slice_name(node))["spec"]["devices"][0]["taints"]

        lw.kubectl("annotate", "node", node, f"{L.SIMULATE_DCGM}-")
        sim.sync()  # the knobs cleared: no event, the plugin keeps its taints
        assert lw.get("resourceslice", slice_name(node))["spec"]["devices"][0]["taints"]
    finally:
        lw.kubectl("annotate", "node", node, f"{L.SIMULATE_DCGM}-", f"{L.SIMULATED_DRA_PLUGIN}-")  # a new plugin pod
        sim.sync()
        lw.run("delete", "namespace", XID_NS, "--wait=false")
        lw.run("delete", "deviceclass", XID_CLASS)
    assert not any(d.get("taints") for d in lw.get("resourceslice", slice_name(node))["spec"]["devices"])


def test_unhealthy_gpu(lw: Cluster, sim: Simulator) -> None:
    sim.inject("h200-1", "unhealthy-gpus", "3")
    sim.sync()
    status = lw.get("node", "h200-1")["status"]
    assert (status["capacity"]["nvidia.com/gpu"], status["allocatable"]["nvidia.com/gpu"]) == ("8", "7")
    sim.clear("h200-1")
    sim.sync()
    assert lw.get("node", "h200-1")["status"]["allocatable"]["nvidia.com/gpu"] == "8"


def test_device_missing_from_the_resource_slice(lw: Cluster, sim: Simulator) -> None:
    before = lw.get("resourceslice", slice_name("h100-1"))["spec"]["pool"]["generation"]
    sim.inject("h100-1", "missing-devices", "gpu-3")
    sim.sync()
    rslice = lw.get("resourceslice", slice_name("h100-1"))
    assert [d["name"] for d in rslice["spec"]["devices"]] == [f"gpu-{i}" for i in (0, 1, 2, 4, 5, 6, 7)]
    assert rslice["spec"]["pool"]["generation"] == before + 1
    sim.clear("h100-1")
    sim.sync()
    assert len(lw.get("resourceslice", slice_name("h100-1"))["spec"]["devices"]) == 8


def test_wrong_product_label(lw: Cluster, sim: Simulator) -> None:
    sim.inject("l4-2", "product", "Tesla-T4")
    sim.sync()
    assert lw.get("node", "l4-2")["metadata"]["labels"]["nvidia.com/gpu.product"] == "Tesla-T4"
    sim.clear("l4-2", "product")
    sim.sync()
    assert lw.get("node", "l4-2")["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-L4-SHARED"


def test_node_not_ready_sticks_until_cleared(lw: Cluster, sim: Simulator) -> None:
    sim.inject("h200-1", "not-ready")
    wait_for("h200-1 NotReady", lambda: ready(lw.get("node", "h200-1")) == "False")
    sim.sync()  # the simulator must not undo it
    time.sleep(2)
    assert ready(lw.get("node", "h200-1")) == "False"
    sim.clear("h200-1", "not-ready")
    wait_for("h200-1 Ready again", lambda: ready(lw.get("node", "h200-1")) == "True")


def test_rdma_plugin_needs_the_policy_to_tolerate_the_nodes_taints(lw: Cluster, spec: ClusterSpec,
                                                                     sim: Simulator) -> None:
    # The operator's DaemonSets tolerate only nvidia.com/gpu of their own: a node with another taint
    # loses its rdma/* resource until the NicClusterPolicy's spec.tolerations covers that taint.
    rdma = "rdma/rdma_shared_device_a"

    def node() -> dict:
        return lw.get("node", "h100-2")

    assert node()["status"]["allocatable"][rdma] == str(spec.networking.rdma_hca_max)
    assert node()["metadata"]["labels"][L.MOFED_WAIT] == "false"
    lw.kubectl("taint", "node", "h100-2", "dedicated=storage:NoExecute")
    try:
        sim.sync()
        assert rdma not in node()["status"]["allocatable"]
        tolerations = [*network.tolerations(spec), {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]
        lw.kubectl("patch", "nicclusterpolicy", network.NIC_POLICY_NAME, "--type=merge",
                   "-p", json.dumps({"spec": {"tolerations": tolerations}}))
        sim.sync()
        assert node()["status"]["allocatable"][rdma] == str(spec.networking.rdma_hca_max)
    finally:
        lw.kubectl("taint", "node", "h100-2", "dedicated-")
        lw.kubectl("patch", "nicclusterpolicy", network.NIC_POLICY_NAME, "--type=merge",
                   "-p", json.dumps({"spec": {"tolerations": network.tolerations(spec)}}))
        sim.sync()
    assert node()["status"]["allocatable"][rdma] == str(spec.networking.rdma_hca_max)


def test_a_deleted_node_is_registered_again(lw: Cluster, sim: Simulator) -> None:
    lw.kubectl("delete", "node", "h200-1", "--wait=true")
    report = sim.sync()
    assert report.created == ["h200-1"]
    wait_for("h200-1 Ready", lambda: ready(lw.get("node", "h200-1")) == "True")


# -- command line and background loop ------------------------------------------------------------


def test_cli_fault_and_show(lw: Cluster, sim: Simulator, cli) -> None:
    base = ["--kubeconfig", str(lw.kubeconfig), "-i", str(LOCAL)]
    out = cli("local", "gpus", "fault", "h200-1", "unhealthy-gpus", "0,1", *base)
    assert out.exit_code == 0, out.output
    shown = cli("local", "gpus", "show", *base)
    assert shown.exit_code == 0, shown.output
    line = next(ln for ln in shown.output.splitlines() if ln.startswith("h200-1"))
    assert "nvidia.com/gpu=6/8" in line and "unhealthy-gpus=0,1" in line
    assert "SIMULATED" in shown.output
    out = cli("local", "gpus", "fault", "h200-1", "unhealthy-gpus", "--clear", *base)
    assert out.exit_code == 0, out.output
    again = cli("local", "gpus", "sync", *base)
    assert "nothing changed" in again.output
    bad = cli("local", "gpus", "fault", "nope", "product", "X", *base)
    assert bad.exit_code == 1 and "not a simulated node" in bad.output and "Traceback" not in bad.output


def test_background_loop_follows_the_configmap(lw: Cluster, spec: ClusterSpec) -> None:
    comp = gpu_simulator.spawn(lw.state_dir, lw.kubeconfig, LOCAL, interval=0.5)
    try:
        set_replicas(lw, spec, 3)
        wait_for(
            "background sync to 12",
            lambda: lw.get("node", "l4-1")["status"]["allocatable"]["nvidia.com/gpu"] == "12",
            timeout=30,
        )
    finally:
        assert gpu_simulator.stop(lw.state_dir) == [gpu_simulator.NAME]
        set_replicas(lw, spec, 4)
    assert not comp.ours()  # gone (or its pid reused by another process)
    log = Path(comp.log).read_text()
    assert "SIMULATED" in log
