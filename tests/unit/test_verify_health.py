"""DCGM health checks on recorded exporter text: a fault fails, and a series that is absent is not
measured (never a pass)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster import expected
from gpucluster.verify import health
from gpucluster.verify.model import Verdict


def exporter_text(node: str, gpus: int, *, xid: dict[int, int] | None = None, fields: tuple[str, ...] = (
        health.XID, health.ECC_DBE)) -> str:
    lines = []
    for g in range(gpus):
        for field in fields:
            value = (xid or {}).get(g, 0) if field == health.XID else 0
            lines.append(f'{field}{{gpu="{g}",node="{node}",modelName="NVIDIA H200"}} {value}')
    return "\n".join(lines) + "\n"


@pytest.fixture
def states(local):
    return {"h200-1": expected.host_states(local)["h200-1"]}


def run(states, tmp_path: Path, text: str) -> dict[str, tuple[Verdict, str]]:
    page = tmp_path / "metrics"
    page.write_text(text)
    return {r.check: (r.verdict, r.actual or r.reason) for r in health.metric_checks(states, [page.as_uri()])}


def test_healthy_node_passes(states, tmp_path) -> None:
    got = run(states, tmp_path, exporter_text("h200-1", 8))
    assert {k: v for k, (v, _) in got.items()} == {
        "gpu-count-metrics": Verdict.passed, "gpu-xid": Verdict.passed, "gpu-ecc": Verdict.passed}


def test_an_xid_fails_naming_the_gpu(states, tmp_path) -> None:
    got = run(states, tmp_path, exporter_text("h200-1", 8, xid={3: 79}))
    assert got["gpu-xid"] == (Verdict.failed, "GPU 3: XID 79")


def test_a_field_the_exporter_does_not_report_is_not_measured(states, tmp_path) -> None:
    got = run(states, tmp_path, exporter_text("h200-1", 8, fields=(health.ECC_DBE,)))
    assert got["gpu-xid"][0] is Verdict.skipped and health.XID in got["gpu-xid"][1]
    assert got["gpu-ecc"][0] is Verdict.passed


def test_a_silent_node_fails_the_count_and_measures_nothing_else(states, tmp_path) -> None:
    got = run(states, tmp_path, exporter_text("other-node", 8))
    assert got["gpu-count-metrics"][0] is Verdict.failed
    assert got["gpu-xid"][0] is got["gpu-ecc"][0] is Verdict.skipped


def test_no_endpoint_means_not_measured(states) -> None:
    rows = list(health.metric_checks(states, []))
    assert rows and all(r.verdict is Verdict.skipped for r in rows)
