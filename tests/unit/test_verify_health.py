"""``gpu-health`` on the recorded real-cluster snapshot: what each source says, and where a source proves
nothing (an application XID, a field the exporter does not report, an exporter verify may not read)."""

from __future__ import annotations

import pytest
from verify_faults import FAULTS, exporter, recorded, set_series, spec

from gpucluster.verify import cluster, health
from gpucluster.verify.model import Verdict


def rows(snap) -> dict[str, object]:
    return {r.subject: r for r in cluster.run(spec(), snap) if r.check == "gpu-health"}


def test_every_gpu_node_is_healthy_per_its_exporter_and_validator() -> None:
    got = rows(recorded("real-cluster"))
    assert got and all(r.verdict is Verdict.passed for r in got.values())
    for r in got.values():
        assert "DCGM exporter pod gpu-operator/nvidia-dcgm-exporter-" in r.actual
        assert "GPU Operator validator pod gpu-operator/nvidia-operator-validator-" in r.actual


@pytest.mark.parametrize("fault, words", [
    ("xid-79", ["GPU 3: XID 79 (GPU has fallen off the bus)", "DCGM exporter pod"]),
    ("double-bit-ecc", ["GPU 1: 2 double-bit ECC errors"]),
    ("row-remap-failed", ["GPU 0: row remapping failed"]),
    ("gpu-off-the-bus", ["7 of 8 GPUs report DCGM metrics"]),
    ("exporter-down", ["does not answer", "HTTP 503"]),
    ("validator-failed", ["cuda-validation failed (exit 1, CrashLoopBackOff)"]),
    ("dra-device-tainted", ["DRA device gpu-0 tainted gpu.nvidia.com/xid=79:NoSchedule"]),
    ("npd-gpu-condition", ["condition GpuUnhealthy=True: XID 79 on GPU 3", "node-problem-detector conditions"]),
])
def test_a_failing_row_names_the_gpu_and_the_source(fault: str, words: list[str]) -> None:
    snap = recorded(FAULTS[fault].base)
    FAULTS[fault].mutate(snap)
    (node,) = {n for c, n in FAULTS[fault].fails if c == "gpu-health"}
    row = rows(snap)[node]
    assert row.verdict is Verdict.failed
    text = f"{row.actual} ({row.reason})"
    assert all(w in text for w in words), text


def test_an_application_xid_leaves_the_gpu_healthy() -> None:
    # XID 13 (graphics engine exception) is the application's fault: the device plugin ignores it too
    snap = recorded("real-cluster")
    e = exporter(snap, "h200-1")
    e["text"] = set_series(e["text"], health.XID, 3, 13, err_code="13", err_msg="Graphics Engine Exception")
    assert rows(snap)["h200-1"].verdict is Verdict.passed


def test_an_application_xids_driver_taint_leaves_the_gpu_healthy() -> None:
    # the DRA driver taints it with effect None: informational, the device stays in service
    snap = recorded(FAULTS["dra-device-tainted"].base)
    FAULTS["dra-device-tainted"].mutate(snap)
    sl = next(x for x in snap.resource_slices or [] if x["spec"]["nodeName"] == "h100-1")
    sl["spec"]["devices"][0]["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "13", "effect": "None"}]
    assert rows(snap)["h100-1"].verdict is Verdict.passed


@pytest.mark.parametrize("pages, verdict", [(63, Verdict.passed), (64, Verdict.failed)])
def test_retired_pages_fail_at_the_limit(pages: int, verdict: Verdict) -> None:
    snap = recorded("real-cluster")
    e = exporter(snap, "l4-2")
    e["text"] = set_series(set_series(e["text"], health.RETIRED_SBE, 0, pages - 1), health.RETIRED_DBE, 0, 1)
    assert rows(snap)["l4-2"].verdict is verdict


def test_an_exporter_without_the_health_fields_fails_naming_them() -> None:
    snap = recorded("real-cluster")
    e = exporter(snap, "h100-1")
    e["text"] = "\n".join(line for line in e["text"].splitlines() if health.XID not in line) + "\n"
    row = rows(snap)["h100-1"]
    assert row.verdict is Verdict.failed and f"the exporter reports no {health.XID}" in row.actual


def test_an_exporter_verify_may_not_read_is_no_source() -> None:
    snap = recorded("real-cluster")
    # h200-1 is a device-plugin node: no DRA taints to read there either (a DRA node's driver taints are
    # a source of their own with the driver's health monitor on)
    snap.operator_pods = [p for p in snap.operator_pods or [] if p["spec"].get("nodeName") != "h200-1"]
    e = exporter(snap, "h200-1")
    e.update(text="", status=403, error="GET .../proxy/metrics: HTTP 403 Forbidden")
    row = rows(snap)["h200-1"]
    assert row.verdict is Verdict.skipped and "needs get on pods/proxy" in row.reason


def test_an_endpoint_of_many_nodes_covers_those_it_has_series_of() -> None:
    snap = recorded("real-cluster")
    text = exporter(snap, "l4-1")["text"].replace('Hostname="l4-1"', 'Hostname="l4-1",node="l4-1"')
    snap.dcgm = [{"source": "http://federate/", "node": "", "text": text, "error": "", "url": True}]
    snap.operator_pods = []
    got = rows(snap)
    assert got["l4-1"].verdict is Verdict.passed and "http://federate/" in got["l4-1"].actual
    assert got["l4-2"].verdict is Verdict.skipped  # the endpoint says nothing about it
