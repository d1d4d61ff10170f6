"""The nvidia-oracle client (gpucluster.simulator.oracle) against a stand-in tool: batching, caching, errors.

The stand-in is a small script that answers ``batch`` the way the real tool's protocol says and logs
every run; the real tool's answers are tested in tests/upstream/test_device_plugin_upstream.py.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from gpucluster.errors import OracleFailed, SimulatorError, ToolMissing
from gpucluster.simulator import nvml, oracle

# Answers every item: a node gets one label per GPU request and resource nvidia.com/gpu = total GPUs;
# a config is valid unless it contains "bad". FAKE_MODE: fail (exit 1 + stderr), garbage, short,
# refuse (per-item error for GPUs named "refused"), sleep.
FAKE = """#!{python}
import json, os, sys, time
mode = os.environ.get("FAKE_MODE", "")
req = json.load(sys.stdin)
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({{"args": sys.argv[1:], "items": req["items"]}}) + "\\n")
if mode == "fail":
    print("nvidia-oracle: cannot give upstream code a simulated /proc/driver", file=sys.stderr)
    sys.exit(1)
if mode == "garbage":
    print("not json")
    sys.exit(0)
if mode == "sleep":
    time.sleep(5)
results = []
for item in req["items"]:
    if "node" in item:
        gpus = item["node"]["gpus"]
        if any(g["productName"] == "refused" for g in gpus):
            results.append({{"error": "MIG profile \\"1g.6gb\\" ... which NVIDIA names \\"1g.5gb\\""}})
            continue
        labels = {{"gpu.%d" % i: g["productName"] for i, g in enumerate(gpus)}}
        total = sum(g.get("count", 1) for g in gpus)
        results.append({{"node": {{"labels": labels, "resources": {{"nvidia.com/gpu": total}},
                                  "errors": {{}}, "warnings": []}}}})
    else:
        ok = "bad" not in item["validateConfig"]["config"]
        results.append({{"validateConfig": {{"valid": ok, "upstreamAccepts": ok, "problems": [],
                        "warnings": [], "error": "" if ok else "unknown field"}}}})
if mode == "short":
    results = results[:-1]
print(json.dumps({{"results": results}}))
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "nvidia-oracle"
    script.write_text(FAKE.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "log"))
    monkeypatch.delenv("FAKE_MODE", raising=False)
    return script


def runs(fake: Path) -> list[dict]:
    log = fake.parent / "log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def node(product: str, count: int = 1) -> oracle.NodeRequest:
    gpu = oracle.GpuRequest(product_name=product, memory_mib=1024, compute_capability="9.0", count=count)
    return oracle.NodeRequest(gpus=(gpu,), driver_version="580.95.05", cuda_driver_version=13000)


def test_many_nodes_are_one_process_start(fake: Path) -> None:
    client = oracle.Oracle(fake)
    answers = client.nodes([node("a", 2), node("b", 3), node("c")])
    assert [a.resources["nvidia.com/gpu"] for a in answers] == [2, 3, 1]
    assert [a.labels["gpu.0"] for a in answers] == ["a", "b", "c"]
    assert client.calls == 1
    [run] = runs(fake)
    assert run["args"] == ["batch"]
    assert [i["node"]["gpus"][0]["productName"] for i in run["items"]] == ["a", "b", "c"]


def test_answers_are_cached_by_request_content(fake: Path) -> None:
    client = oracle.Oracle(fake)
    first = client.nodes([node("a"), node("b")])
    assert client.nodes([node("b"), node("a")]) == [first[1], first[0]]  # equal content: no new run
    assert client.calls == 1
    client.nodes([node("a"), node("new"), node("new")])
    assert client.calls == 2
    # only the unseen request went to the tool, once although asked twice
    assert [i["node"]["gpus"][0]["productName"] for i in runs(fake)[-1]["items"]] == ["new"]
    client.nodes([node("a", count=2)])  # different content, different answer
    assert client.calls == 3


def test_nodes_and_configs_share_the_protocol(fake: Path) -> None:
    client = oracle.Oracle(fake)
    good, bad = client.validate_configs([("version: v1\n", ["--mig-strategy=mixed"]), ("bad: 1\n", [])])
    assert good.valid and good.upstream_accepts
    assert not bad.valid and bad.error == "unknown field"
    [run] = runs(fake)
    assert run["items"][0] == {"validateConfig": {"config": "version: v1\n", "pluginArgs": ["--mig-strategy=mixed"]}}
    assert client.validate_config("version: v1\n", ["--mig-strategy=mixed"]) == good
    assert client.calls == 1


def test_request_json_is_what_the_tool_reads() -> None:
    profile = oracle.MigProfile(name="1g.10gb", memory_mib=9856, instances=7, multiprocessors=14, copy_engines=1,
                                gi_profile_id=0)
    gpu = oracle.GpuRequest(product_name="NVIDIA A100-SXM4-80GB", memory_mib=81920, compute_capability="8.0",
                            architecture="ampere", count=8, mig_profiles=(profile,), mig_enabled=True,
                            mig_devices=("1g.10gb",) * 2)
    req = oracle.NodeRequest(gpus=(gpu,), driver_version="580.95.05", cuda_driver_version=13000,
                             config="version: v1\n", mig_strategy="mixed", plugin_args=("--mps-root=/x",))
    assert req.to_json() == {
        "gpus": [{
            "productName": "NVIDIA A100-SXM4-80GB", "memoryMiB": 81920, "computeMajor": 8, "computeMinor": 0,
            "count": 8, "arch": "ampere", "migEnabled": True, "migDevices": ["1g.10gb", "1g.10gb"],
            "migProfiles": [{"name": "1g.10gb", "memoryMiB": 9856, "instanceCount": 7, "multiprocessors": 14,
                             "copyEngines": 1, "decoders": 0, "encoders": 0, "jpegs": 0, "ofas": 0,
                             "giProfileId": 0}],
        }],
        "driverVersion": "580.95.05", "cudaDriverVersion": 13000, "config": "version: v1\n",
        "migStrategy": "mixed", "pluginArgs": ["--mps-root=/x"],
    }
    with pytest.raises(ValueError, match=r"not <major>\.<minor>"):
        oracle.GpuRequest(product_name="x", memory_mib=1, compute_capability="9").to_json()


def test_tool_not_built_is_tool_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCLUSTER_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", "/nonexistent")
    client = oracle.Oracle()
    with pytest.raises(ToolMissing, match="gpucluster tools install nvidia-oracle"):
        client.nodes([node("a")])


def test_failing_tool_is_a_simulator_error_with_its_stderr(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MODE", "fail")
    with pytest.raises(OracleFailed, match=r"exit 1\): nvidia-oracle: cannot give upstream") as err:
        oracle.Oracle(fake).nodes([node("a")])
    assert isinstance(err.value, SimulatorError)
    assert "simulated /proc/driver" in err.value.stderr


@pytest.mark.parametrize(("mode", "message"), [("garbage", "printed no batch answer"), ("short", "answered 1 of 2")])
def test_unreadable_answers_are_errors(fake: Path, monkeypatch: pytest.MonkeyPatch, mode: str, message: str) -> None:
    monkeypatch.setenv("FAKE_MODE", mode)
    client = oracle.Oracle(fake)
    with pytest.raises(OracleFailed, match=message):
        client.nodes([node("a"), node("b")])
    monkeypatch.delenv("FAKE_MODE")
    assert len(client.nodes([node("a"), node("b")])) == 2  # nothing wrong was cached


def test_refused_request_names_it_and_keeps_the_others(fake: Path) -> None:
    client = oracle.Oracle(fake)
    with pytest.raises(OracleFailed, match=r"refused 1 request\(s\): node \(1 x refused\): MIG profile"):
        client.nodes([node("a"), node("refused")])
    client.node(node("a"))
    assert client.calls == 1  # the good answer of the failed batch was kept


def test_timeout_is_an_error(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MODE", "sleep")
    with pytest.raises(OracleFailed, match="did not answer 1 request"):
        oracle.Oracle(fake, timeout=0.5).nodes([node("a")])


def test_shared_client_is_one_per_process() -> None:
    assert oracle.shared() is oracle.shared()


# -- nvml.gpu_request: the simulator's requests from data/nvml.yaml -------------------------------


def test_gpu_request_without_mig_uses_the_whole_gpu() -> None:
    req = nvml.gpu_request("H100-SXM5-80GB", count=8)
    assert (req.product_name, req.memory_mib, req.compute_capability, req.count) == (
        "NVIDIA H100 80GB HBM3", 81559, "9.0", 8)
    assert req.mig_capable and not req.mig_enabled and req.mig_profiles == ()
    assert not nvml.gpu_request("L4").mig_capable


def test_gpu_request_with_mig_carries_the_table_and_its_total() -> None:
    req = nvml.gpu_request("H100-SXM5-80GB", count=8, mig_devices=("1g.10gb", "3g.40gb"))
    # Every H100 profile's memory is a real board's (data/captures.yaml), so the board's real total goes
    # with it: go-nvlib names the profiles by their share of it, and names them right
    # (tests/upstream/test_captures_upstream.py runs that naming against the real board's GFD labels).
    assert req.memory_mib == 81559 and req.mig_enabled
    assert {p.name for p in req.mig_profiles} >= {"1g.10gb", "3g.40gb", "1g.10gb+me"}
    assert req.mig_devices == ("1g.10gb", "3g.40gb")


@pytest.mark.parametrize(("model", "devices", "message"), [
    ("B200", ("1g.23gb",), "no upstream MIG profile table"),
    ("L4", ("1g.6gb",), "not MIG-capable"),
    ("A100-80GB", ("1g.5gb",), r"MIG profiles \['1g.5gb'\] are not among"),
    ("A100-X", (), "no NVML facts for GPU model 'A100-X'"),
])
def test_gpu_request_refuses_what_upstream_facts_do_not_cover(model: str, devices: tuple[str, ...],
                                                              message: str) -> None:
    with pytest.raises(SimulatorError, match=message):
        nvml.gpu_request(model, mig_devices=devices)

