"""The simulated DCGM exporter: one endpoint per node, knobs in a real HTTP scrape, faults on their GPU."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gpucluster.promtext import Sample, parse, scrape
from gpucluster.render import monitoring
from gpucluster.simulator.dcgm import KNOBS, Fleet, NodeExporter, devices_for, faults, parse_csv
from gpucluster.simulator.silicon import gpu_uuid
from gpucluster.spec import load_spec

LOCAL = Path(__file__).resolve().parents[2] / "inventories" / "local"
DEVICES = {
    "node-a": [{"index": i, "uuid": f"GPU-a{i}", "model": "NVIDIA H100 80GB HBM3", "memory_mib": 81920}
               for i in range(2)],
    "node-b": [{"index": i, "uuid": f"GPU-b{i}", "model": "NVIDIA L4", "memory_mib": 23034} for i in range(2)],
}


@pytest.fixture
def fleet():
    f = Fleet(DEVICES).start()
    yield f
    f.stop()


def _value(samples: list[Sample], name: str, gpu: int) -> float:
    found = [s.value for s in samples if s.name == name and s.labels["gpu"] == str(gpu)]
    assert len(found) == 1, (name, gpu, found)
    return found[0]


def test_one_endpoint_per_node_serving_every_field_for_its_gpus_on_loopback(fleet):
    urls = fleet.urls
    assert set(urls) == {"node-a", "node-b"} and len(set(urls.values())) == 2
    assert all(u.startswith("http://127.0.0.1:") for u in urls.values())
    samples = scrape(urls["node-b"])
    assert {s.name for s in samples} == set(monitoring.exporter_metrics())
    assert {s.labels["Hostname"] for s in samples} == {"node-b"}
    for name in monitoring.exporter_metrics():
        assert len([s for s in samples if s.name == name]) == 2
    s = next(x for x in samples if x.labels["UUID"] == "GPU-b1")
    assert s.labels["modelName"] == "NVIDIA L4" and s.labels["device"] == "nvidia1"
    assert "node" not in s.labels  # the ServiceMonitor adds it


def test_knobs_change_what_a_scrape_sees(fleet):
    url = fleet.urls["node-a"]
    before = scrape(url)
    fleet.set("node-a", 1, utilization=87, fb_used=80000, temperature=91, power=650, tensor_active=0.6,
              gr_engine_active=0.75)
    after = scrape(url)
    assert _value(before, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1) == 0
    assert _value(after, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1) == 0.75
    assert _value(after, "DCGM_FI_DEV_GPU_UTIL", 1) == 87
    assert _value(after, "DCGM_FI_DEV_FB_USED", 1) == 80000
    assert _value(after, "DCGM_FI_DEV_FB_FREE", 1) == 81920 - 80000
    assert _value(after, "DCGM_FI_DEV_GPU_TEMP", 1) == 91
    assert _value(after, "DCGM_FI_DEV_POWER_USAGE", 1) == 650
    assert _value(after, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 1) == 0.6
    # The neighbour GPU is untouched.
    assert _value(after, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0) == 0
    assert _value(after, "DCGM_FI_DEV_GPU_TEMP", 0) == _value(before, "DCGM_FI_DEV_GPU_TEMP", 0)


def test_values_are_printed_as_the_exporter_prints_them():
    e = NodeExporter("n", DEVICES["node-a"])
    e.set(0, power=61.5, temperature=40, gr_engine_active=0.5)
    text = e.exposition()
    lines = text.splitlines()
    assert any(line.startswith("DCGM_FI_DEV_POWER_USAGE{") and line.endswith(" 61.500000") for line in lines)
    assert any(line.startswith("DCGM_FI_DEV_GPU_TEMP{") and line.endswith(" 40") for line in lines)
    assert any(line.startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE{") and line.endswith(" 0.500000") for line in lines)


def test_injected_xid_and_ecc_show_on_that_node_and_gpu_only(fleet):
    fleet.inject_xid("node-b", 1, 79)
    fleet.inject_ecc("node-a", 0, double_bit=2, single_bit=5)
    fleet.inject_ecc("node-a", 0, double_bit=1)  # counters only grow
    samples = [s for url in fleet.urls.values() for s in scrape(url)]
    xids = {(s.labels["Hostname"], s.labels["gpu"]): (s.value, s.labels["err_code"])
            for s in samples if s.name == "DCGM_FI_DEV_XID_ERRORS"}
    assert xids == {("node-a", "0"): (0, "0"), ("node-a", "1"): (0, "0"), ("node-b", "0"): (0, "0"),
                    ("node-b", "1"): (79, "79")}
    dbe = {(s.labels["Hostname"], s.labels["gpu"]): s.value for s in samples
           if s.name == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"}
    assert dbe == {("node-a", "0"): 3, ("node-a", "1"): 0, ("node-b", "0"): 0, ("node-b", "1"): 0}
    # The health reading names exactly those two GPUs; single-bit errors are not a fault.
    assert [str(f) for f in faults(samples)] == ["node-a GPU 0 (GPU-a0): 3 double-bit ECC errors",
                                                 "node-b GPU 1 (GPU-b1): XID 79"]


def test_pod_attribution_labels_appear_while_a_pod_holds_the_gpu(fleet):
    fleet.set("node-a", 0, namespace="ml-research", pod="train-0", container="main", gr_engine_active=0.5)
    held = [s for s in scrape(fleet.urls["node-a"]) if s.name == monitoring.ACTIVITY and s.labels.get("pod")]
    assert [(s.labels["namespace"], s.labels["pod"], s.labels["container"], s.labels["gpu"]) for s in held] == \
        [("ml-research", "train-0", "main", "0")]
    fleet["node-a"].attribute(0, None, None)
    assert not [s for s in scrape(fleet.urls["node-a"]) if s.labels.get("pod")]


def test_mig_instances_are_separate_series_with_their_own_activity_and_holder():
    gpus = [{"index": 0, "uuid": "GPU-m0", "model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559,
             "instances": [{"gi": 1, "profile": "1g.10gb", "memory_mib": 10240},
                           {"gi": 2, "profile": "3g.40gb", "memory_mib": 40960}]}]
    e = NodeExporter("mig-node", gpus)
    e.set(0, instance=2, gr_engine_active=0.4, fb_used=1000)
    e.attribute(0, 2, {"namespace": "inf", "pod": "srv", "container": "c"})
    e.set(0, temperature=55)
    samples = parse(e.exposition())
    act = {s.labels["GPU_I_ID"]: (s.value, s.labels.get("pod")) for s in samples if s.name == monitoring.ACTIVITY}
    assert act == {"1": (0.0, None), "2": (0.4, "srv")}
    free = {s.labels["GPU_I_ID"]: s.value for s in samples if s.name == "DCGM_FI_DEV_FB_FREE"}
    assert free == {"1": 10240, "2": 40960 - 1000}
    # device-level fields read the parent GPU on every instance
    assert {s.value for s in samples if s.name == "DCGM_FI_DEV_GPU_TEMP"} == {55}
    assert not [s for s in samples if s.name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL")]


def test_knobs_from_a_mapping_replace_all_previous_ones():
    e = NodeExporter("n", DEVICES["node-a"])
    e.load_knobs({"0": {"xid": 79, "gr_engine_active": 0.1}})
    e.load_knobs({"1": {"temperature": 70}})
    samples = parse(e.exposition())
    assert _value(samples, "DCGM_FI_DEV_XID_ERRORS", 0) == 0  # gone with the second mapping
    assert _value(samples, "DCGM_FI_DEV_GPU_TEMP", 1) == 70
    with pytest.raises(ValueError, match="unknown metric knob"):
        e.load_knobs({"0": {"utilisation": 1}})
    with pytest.raises(ValueError, match="no simulated GPU 9"):
        e.load_knobs({"9": {"xid": 1}})
    with pytest.raises(ValueError, match="GPU or GPU/instance"):
        e.load_knobs({"zero": {"xid": 1}})
    assert _value(parse(e.exposition()), "DCGM_FI_DEV_GPU_TEMP", 1) == 70  # nothing changed on error


def test_the_csv_decides_the_series_as_the_exporter_reads_it():
    csv = "# comment\nDCGM_FI_DEV_GPU_TEMP, gauge, Temperature.\nDCGM_FI_DRIVER_VERSION, label, Driver Version\n"
    e = NodeExporter("n", DEVICES["node-a"], csv=csv)
    samples = parse(e.exposition())
    assert {s.name for s in samples} == {"DCGM_FI_DEV_GPU_TEMP"}
    assert all(s.labels["DCGM_FI_DRIVER_VERSION"] for s in samples)
    with pytest.raises(ValueError, match="line 1: 2 fields"):
        parse_csv("DCGM_FI_DEV_GPU_TEMP, gauge\n")
    with pytest.raises(ValueError, match="unknown type 'gage'"):
        parse_csv("DCGM_FI_DEV_GPU_TEMP, gage, x\n")


def test_an_exporter_without_its_csv_answers_503():
    e = NodeExporter("n", DEVICES["node-a"]).start()
    try:
        e.unavailable = "ConfigMap missing"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(e.url, timeout=5)
        assert err.value.code == 503
    finally:
        e.stop()


def test_a_healthy_fleet_has_no_faults(fleet):
    fleet.set("node-a", 0, utilization=100, temperature=90)
    fleet.inject_ecc("node-b", 0, double_bit=0, single_bit=12)
    assert faults([s for url in fleet.urls.values() for s in scrape(url)]) == []


def test_only_metrics_is_served(fleet):
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(fleet.urls["node-a"].replace("/metrics", "/other"), timeout=5)
    assert err.value.code == 404


def test_exposition_has_help_and_type_from_the_csv(fleet):
    text = fleet["node-a"].exposition()
    assert "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter" in text
    assert "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %)." in text


def test_bad_knobs_and_gpus_are_named(fleet):
    with pytest.raises(ValueError, match=r"unknown metric knob\(s\) \['utilisation'\]"):
        fleet.set("node-a", 0, utilisation=5)
    with pytest.raises(ValueError, match="no simulated GPU 7 on node 'node-a'"):
        fleet.set("node-a", 7, utilization=5)
    with pytest.raises(ValueError, match="no simulated exporter on node 'node-z'"):
        fleet.set("node-z", 0, utilization=5)
    with pytest.raises(ValueError, match="loopback"):
        NodeExporter("n", DEVICES["node-a"], host="0.0.0.0")


def test_stop_closes_the_port():
    f = Fleet(DEVICES).start()
    url = f.urls["node-a"]
    f.stop()
    f.stop()  # twice is fine
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
    assert devices["l4-1"][1]["uuid"] == gpu_uuid(spec.metadata.name, "l4-1", 1)
    assert len({d["uuid"] for gpus in devices.values() for d in gpus}) == sum(len(g) for g in devices.values())
    assert set(KNOBS.values()) <= set(monitoring.exporter_metrics())
