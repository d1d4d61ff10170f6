"""The simulated DCGM metrics server: knobs show up in a real HTTP scrape, faults stay on their GPU."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gpucluster.promtext import Sample, parse, scrape
from gpucluster.render import monitoring
from gpucluster.simulator.dcgm import KNOBS, MetricsServer, devices_for, faults
from gpucluster.spec import load_spec

LOCAL = Path(__file__).resolve().parents[2] / "inventories" / "local"
DEVICES = {
    "node-a": [{"index": i, "uuid": f"GPU-a{i}", "model": "NVIDIA H100 80GB HBM3", "memory_mib": 81920}
               for i in range(2)],
    "node-b": [{"index": i, "uuid": f"GPU-b{i}", "model": "NVIDIA L4", "memory_mib": 23034} for i in range(2)],
}


@pytest.fixture
def server():
    srv = MetricsServer(DEVICES).start()
    yield srv
    srv.stop()


def _value(samples: list[Sample], name: str, node: str, gpu: int) -> float:
    found = [s.value for s in samples if s.name == name and s.labels["node"] == node and s.labels["gpu"] == str(gpu)]
    assert len(found) == 1, (name, node, gpu, found)
    return found[0]


def test_serves_every_exporter_series_for_every_gpu_on_loopback(server):
    assert server.url.startswith("http://127.0.0.1:")
    samples = scrape(server.url)
    names = {s.name for s in samples}
    assert names == set(monitoring.exporter_metrics())
    for name in names:
        assert len([s for s in samples if s.name == name]) == 4
    s = next(x for x in samples if x.labels["UUID"] == "GPU-b1")
    assert s.labels["node"] == s.labels["Hostname"] == "node-b"
    assert s.labels["modelName"] == "NVIDIA L4" and s.labels["device"] == "nvidia1"


def test_knobs_change_what_a_scrape_sees(server):
    before = scrape(server.url)
    server.set("node-a", 1, utilization=87, fb_used=80000, temperature=91, power=650, tensor_active=0.6)
    after = scrape(server.url)
    assert _value(before, "DCGM_FI_DEV_GPU_UTIL", "node-a", 1) == 0
    assert _value(after, "DCGM_FI_DEV_GPU_UTIL", "node-a", 1) == 87
    assert _value(after, "DCGM_FI_DEV_FB_USED", "node-a", 1) == 80000
    assert _value(after, "DCGM_FI_DEV_FB_FREE", "node-a", 1) == 81920 - 80000
    assert _value(after, "DCGM_FI_DEV_GPU_TEMP", "node-a", 1) == 91
    assert _value(after, "DCGM_FI_DEV_POWER_USAGE", "node-a", 1) == 650
    assert _value(after, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "node-a", 1) == 0.6
    # The neighbour GPU is untouched.
    assert _value(after, "DCGM_FI_DEV_GPU_UTIL", "node-a", 0) == 0
    assert _value(after, "DCGM_FI_DEV_GPU_TEMP", "node-a", 0) == _value(before, "DCGM_FI_DEV_GPU_TEMP", "node-a", 0)


def test_injected_xid_and_ecc_show_on_that_node_and_gpu_only(server):
    server.inject_xid("node-b", 1, 79)
    server.inject_ecc("node-a", 0, double_bit=2, single_bit=5)
    server.inject_ecc("node-a", 0, double_bit=1)  # counters only grow
    samples = scrape(server.url)
    xids = {(s.labels["node"], s.labels["gpu"]): s.value for s in samples if s.name == "DCGM_FI_DEV_XID_ERRORS"}
    assert xids == {("node-a", "0"): 0, ("node-a", "1"): 0, ("node-b", "0"): 0, ("node-b", "1"): 79}
    dbe = {(s.labels["node"], s.labels["gpu"]): s.value for s in samples if s.name == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"}
    assert dbe == {("node-a", "0"): 3, ("node-a", "1"): 0, ("node-b", "0"): 0, ("node-b", "1"): 0}
    assert _value(samples, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "node-a", 0) == 5
    # The health reading names exactly those two GPUs; single-bit errors are not a fault.
    assert [str(f) for f in faults(samples)] == ["node-a GPU 0 (GPU-a0): 3 double-bit ECC errors",
                                                 "node-b GPU 1 (GPU-b1): XID 79"]
    assert faults(scrape(server.url + "?node=node-a"))[0].node == "node-a"


def test_pod_attribution_labels_appear_while_a_pod_holds_the_gpu(server):
    server.set("node-a", 0, namespace="ml-research", pod="train-0", container="main", utilization=50)
    held = [s for s in scrape(server.url) if s.name == "DCGM_FI_DEV_GPU_UTIL" and s.labels.get("pod")]
    assert [(s.labels["namespace"], s.labels["pod"], s.labels["node"], s.labels["gpu"]) for s in held] == \
        [("ml-research", "train-0", "node-a", "0")]
    server.set("node-a", 0, namespace="", pod="", container="")
    assert not [s for s in scrape(server.url) if s.labels.get("pod")]


def test_a_healthy_fleet_has_no_faults(server):
    server.set("node-a", 0, utilization=100, temperature=90)
    server.inject_ecc("node-b", 0, double_bit=0, single_bit=12)
    assert faults(scrape(server.url)) == []


def test_per_node_endpoint_serves_one_node(server):
    samples = scrape(server.url + "?node=node-b")
    assert {s.labels["node"] for s in samples} == {"node-b"}
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(server.url.replace("/metrics", "/other"), timeout=5)
    assert err.value.code == 404


def test_exposition_has_help_and_type_from_the_csv(server):
    text = server.exposition()
    assert "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter" in text
    assert "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %)." in text


def test_bad_knobs_and_gpus_are_named(server):
    with pytest.raises(ValueError, match=r"unknown metric knob\(s\) \['utilisation'\]"):
        server.set("node-a", 0, utilisation=5)
    with pytest.raises(ValueError, match="no simulated GPU 7 on node 'node-a'"):
        server.set("node-a", 7, utilization=5)
    with pytest.raises(ValueError, match="loopback"):
        MetricsServer(DEVICES, host="0.0.0.0")


def test_stop_closes_the_port():
    srv = MetricsServer(DEVICES).start()
    url = srv.url
    srv.stop()
    srv.stop()  # twice is fine
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=2)


def test_parse_handles_escapes_and_timestamps():
    text = '# HELP x y\nx{a="q\\"uote",b="back\\\\slash"} 1.5 1700000000000\ny 2\n'
    assert parse(text) == [Sample("x", {"a": 'q"uote', "b": "back\\slash"}, 1.5), Sample("y", {}, 2.0)]


def test_devices_for_the_local_inventory_match_its_pools():
    spec = load_spec(LOCAL)
    devices = devices_for(spec)
    assert {n: len(g) for n, g in devices.items()} == {h: p.gpu.count for p in spec.gpu_pools for h in p.hosts}
    assert devices["l4-1"][0]["model"] == "NVIDIA L4"
    assert len({d["uuid"] for gpus in devices.values() for d in gpus}) == sum(len(g) for g in devices.values())
    assert set(KNOBS.values()) <= set(monitoring.exporter_metrics())
