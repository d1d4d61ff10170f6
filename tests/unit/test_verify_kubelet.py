"""verify's ``kubelet-resource-managers`` rows, over a real kubelet's captured /configz.

The captures (tests/data/verify/kubelet-configz/) are what kubelet v1.37.2 answered in the Molecule site
scenario: ``tuned.json`` from the GPU stand-in whose pool sets restricted/pod, static with CPU 0 reserved and
Static with 256Mi, ``defaults.json`` from a GPU worker whose pool sets nothing. Expected values below are
written out, not computed by verify. The fault matrix (verify_faults.py) runs three more faults against the
recorded real-cluster snapshot.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpucluster.errors import ApiError
from gpucluster.spec.model import ClusterSpec
from gpucluster.verify import kubelet
from gpucluster.verify.model import Verdict
from gpucluster.verify.snapshot import Snapshot

DATA = Path(__file__).resolve().parents[1] / "data" / "verify" / "kubelet-configz"
TUNED = {"topologyManagerPolicy": "restricted", "topologyManagerScope": "pod", "cpuManagerPolicy": "static",
         "reservedSystemCPUs": "0", "memoryManagerPolicy": "Static", "reservedMemoryPerNumaNode": "256Mi"}


def _capture(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())["kubeletconfig"]


def _spec(base: dict, platform: str | None = None, **rm: str) -> ClusterSpec:
    data = copy.deepcopy(base)
    pool = data["nodePools"][0]  # h100 on host g1
    pool["resourceManagers"] = {**TUNED, **rm}
    if platform:
        pool["gpu"]["platform"] = platform
    return ClusterSpec.model_validate(data)


def _rows(spec: ClusterSpec, configs: dict | None, nodes=("cp", "g1", "g2"), **kw) -> dict:
    snap = Snapshot(nodes=[{"metadata": {"name": n}} for n in nodes], kubelet_configs=configs)
    return {r.subject: r for r in kubelet.kubelet_checks(spec, snap, **kw)}


def test_the_captures_are_what_the_site_scenario_set():
    tuned, defaults = _capture("tuned"), _capture("defaults")
    assert {k: tuned[k] for k in ("topologyManagerPolicy", "topologyManagerScope", "cpuManagerPolicy",
                                  "reservedSystemCPUs", "memoryManagerPolicy")} == {
        "topologyManagerPolicy": "restricted", "topologyManagerScope": "pod", "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0", "memoryManagerPolicy": "Static"}
    assert tuned["reservedMemory"] == [{"numaNode": 0, "limits": {"memory": "256Mi"}}]
    assert "reservedSystemCPUs" not in defaults and not defaults.get("reservedMemory")


def test_the_tuned_kubelet_passes_and_only_the_tuned_pools_hosts_have_a_row(base):
    rows = _rows(_spec(base), {"g1": _capture("tuned")})
    assert list(rows) == ["g1"] and rows["g1"].verdict is Verdict.passed
    assert rows["g1"].expected == "pool h100: topology restricted/pod, CPU static (reserved 0), memory Static " \
                                  "(256Mi per NUMA node)"


def test_a_kubelet_on_the_defaults_fails_naming_every_field_with_both_values(base):
    row = _rows(_spec(base), {"g1": _capture("defaults")})["g1"]
    assert row.verdict is Verdict.failed
    assert row.actual.split("; ") == [
        "topologyManagerPolicy: runs 'none', spec 'restricted'",
        "topologyManagerScope: runs 'container', spec 'pod'",
        "cpuManagerPolicy: runs 'none', spec 'static'",
        "memoryManagerPolicy: runs 'None', spec 'Static'",
        "reservedSystemCPUs: runs '(none)', spec '0'",
        "reservedMemory (bytes per NUMA node): runs (none), spec NUMA 0: 268435456",
    ]
    assert "gpucluster node remove" in row.reason


def test_cpus_are_compared_as_sets_and_memory_as_quantities(base):
    running = _capture("tuned") | {"reservedSystemCPUs": "0,1"}
    same = _capture("tuned") | {"reservedMemory": [{"numaNode": 0, "limits": {"memory": "268435456"}}]}
    spec = _spec(base, reservedSystemCPUs="1,0")
    assert _rows(spec, {"g1": running})["g1"].verdict is Verdict.passed  # "1,0" and "0,1": the same CPUs
    assert _rows(_spec(base), {"g1": same})["g1"].verdict is Verdict.passed  # 256Mi in bytes
    assert _rows(spec, {"g1": _capture("tuned")})["g1"].actual == "reservedSystemCPUs: runs '0', spec '1,0'"


def test_a_two_socket_platform_expects_the_reservation_on_both_numa_nodes(base):
    # A DGX H100's GPUs sit on NUMA nodes 0 and 1 (the catalog's cited layout): one reservation each.
    spec = _spec(base, platform="dgx-h100")
    one = _rows(spec, {"g1": _capture("tuned")})["g1"]
    assert one.verdict is Verdict.failed
    assert one.actual == ("reservedMemory (bytes per NUMA node): runs NUMA 0: 268435456, "
                          "spec NUMA 0: 268435456, NUMA 1: 268435456")
    both = _capture("tuned")
    both["reservedMemory"] = [*both["reservedMemory"], {"numaNode": 1, "limits": {"memory": "256Mi"}}]
    assert _rows(spec, {"g1": both})["g1"].verdict is Verdict.passed


@pytest.mark.parametrize(("configs", "nodes", "reason"), [
    (None, ("g1",), "the kubelet's configuration was not read"),
    ({"g1": "GET /api/v1/nodes/g1/proxy/configz: 403 forbidden; it needs get on nodes/proxy"}, ("g1",),
     "the kubelet's running configuration could not be read: GET /api/v1/nodes/g1/proxy/configz: 403 forbidden; "
     "it needs get on nodes/proxy"),
    ({}, ("cp",), "node is missing (see node-ready)"),
])
def test_what_cannot_be_read_is_not_measured_with_the_reason(base, configs, nodes, reason):
    row = _rows(_spec(base), configs, nodes=nodes)["g1"]
    assert row.verdict is Verdict.skipped and row.reason == reason


def test_the_local_world_leaves_the_row_not_measured_and_allows_it(base):
    from gpucluster.verify import checks

    row = _rows(_spec(base), {"g1": _capture("defaults")}, simulated=True)["g1"]
    assert row.verdict is Verdict.skipped and row.reason == kubelet.LOCAL_REASON
    assert checks.LOCAL_WORLD["kubelet-resource-managers"] == kubelet.LOCAL_REASON


class _Api:
    """The kube client's answers per path: an object, None (404) or an ApiError."""

    def __init__(self, answers: dict) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def get(self, path: str):
        self.asked.append(path)
        answer = self.answers[path]
        if isinstance(answer, ApiError):
            raise answer
        return answer


def test_read_configz_asks_each_kubelet_through_the_api_server_and_words_a_refusal(base):
    api = _Api({"/api/v1/nodes/g1/proxy/configz": {"kubeletconfig": _capture("tuned")},
                "/api/v1/nodes/g2/proxy/configz": ApiError("forbidden", 403, "Forbidden")})
    snap = Snapshot()
    kubelet.read_configz(api, snap, ["g1", "g2"])  # type: ignore[arg-type]
    assert sorted(api.asked) == ["/api/v1/nodes/g1/proxy/configz", "/api/v1/nodes/g2/proxy/configz"]
    assert snap.kubelet_configs["g1"] == _capture("tuned")
    assert snap.kubelet_configs["g2"].endswith("; it needs get on nodes/proxy")
    assert kubelet.hosts_to_read(_spec(base)) == ["g1"]
