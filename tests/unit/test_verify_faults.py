"""The recorded healthy snapshots pass, and each named fault's row says which object differs and how.

The recordings come from the local world (tests/data/verify/record.py); which rows a fault fails, and
that nothing else changes, is tests/unit/test_check_coverage.py's to prove. Here: the healthy states,
and the messages a user reads.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from verify_faults import FAULTS, read, recorded, recorded_rows, run

from gpucluster.verify import checks
from gpucluster.verify.model import Verdict

RECORDER = Path(__file__).resolve().parents[1] / "data" / "verify" / "record.py"


@pytest.mark.parametrize("base", ["real-cluster", "local-world"])
def test_the_recordings_rows_read_as_recorded(base: str) -> None:
    now = read(run(recorded(base), base))
    assert now == recorded_rows(base, now), f"{base}: rows differ from tests/data/verify/rows.json"


def test_a_real_cluster_shape_passes_every_row_with_nothing_unmeasured() -> None:
    rows = run(recorded("real-cluster"), "real-cluster")
    assert {(r.check, r.subject, r.verdict.value) for r in rows if r.verdict is not Verdict.passed} == set()
    # the GPU Operator, its DCGM exporter and the DRA driver are there, and their rows are measured
    checked = {r.check for r in rows}
    assert {"daemonsets-ready", "charts-installed", "gpu-health", "dra-slices", "deviceclass-matches",
            "dra-extended-resource", "alert-rules", "tenant-queue", "tenant-rbac"} <= checked


def test_the_local_world_passes_leaving_unmeasured_only_what_it_allows() -> None:
    rows = run(recorded("local-world"), "local-world")
    assert [r for r in rows if r.verdict is Verdict.failed] == []
    unmeasured = {r.check for r in rows if r.verdict is Verdict.skipped}
    assert unmeasured == set(checks.LOCAL_WORLD)
    # GPU health is measured there, from the simulated exporter
    health = [r for r in rows if r.check == "gpu-health"]
    assert health and all(r.verdict is Verdict.passed and "SIMULATED DCGM exporter" in r.actual for r in health)


def test_the_recorder_asks_no_expectation_code_what_a_healthy_cluster_holds() -> None:
    imported = {alias.name if isinstance(n, ast.Import) else n.module
                for n in ast.walk(ast.parse(RECORDER.read_text())) if isinstance(n, ast.Import | ast.ImportFrom)
                for alias in (n.names if isinstance(n, ast.Import) else [n])}
    assert not {m for m in imported if m and m.startswith(("gpucluster.expected", "gpucluster.devices"))}


@pytest.mark.parametrize("fault, words", [
    ("gpus-published-twice-device-plugin", ["nvidia.com/gpu=8"]),
    ("gpus-published-twice-dra", ["its kubelet plugin runs on a node outside the DRA pools"]),
    ("stale-static-mig-layout", ["gpu-0-mig-3g40gb-*: 0 devices (want 1)", "enumerates MIG devices once",
                                 "delete its pod on this node"]),
    ("validator-2550-on-a-device-plugin-node", ["plugin-validation failed (exit 1"]),
    ("validator-driver-fails-on-a-dra-only-node", ["driver-validation failed (exit 1"]),
    ("class-selector-widened", ["spec.selectors[0].cel.expression", "device.driver == 'gpu.nvidia.com'"]),
    ("class-selectors-deleted", ["spec.selectors"]),
    ("daemonset-status-stale", ["observedGeneration", "behind generation"]),
    ("daemonset-not-ready", ["pods not available, ready"]),
    ("deletecollection-on-quotas", ["group inference-admins may deletecollection resourcequotas in inference"]),
    ("reads-another-tenants-secrets", ["group inference may get secrets in ml-research"]),
    ("execs-into-operator-pods", ["group ml-research-admins may create pods/exec in gpu-operator"]),
    ("queue-weight-changed", ["weight:"]),
    ("queue-reclaimable-flipped", ["reclaimable: True != False"]),
    ("queue-guarantee-added", ["guarantee: unexpected", "deserved: unexpected"]),
    ("priority-class-made-global-default", ["globalDefault: False != True"]),
    ("another-global-default", ["globalDefault=true", "every pod that names no PriorityClass"]),
    ("alert-neutered", ["expr:", "vector(0) > 1"]),
    ("alert-delayed", ["for:", "8760h"]),
    ("alert-downgraded", ["labels.severity: 'critical' != 'info'"]),
    ("rules-unselected", ["the rules are not loaded"]),
    ("chart-values-changed", ["values.dcgmExporter.enabled: True != False"]),
    ("newer-revision-of-another-chart", ["0.1.0", "revision 7"]),
    ("forged-record-in-a-tenant-namespace", ["not installed"]),
])
def test_a_failing_row_names_the_object_and_the_difference(fault: str, words: list[str]) -> None:
    f = FAULTS[fault]
    snap = recorded(f.base)
    f.mutate(snap)
    rows = {(r.check, r.subject): r for r in run(snap, f.base)}
    text = " | ".join(f"{rows[k].subject}: {rows[k].expected} / {rows[k].actual} ({rows[k].reason})"
                      for k in sorted(f.fails))
    assert all(w in text for w in words), text


def test_an_older_deployed_revision_is_not_the_release() -> None:
    # two records say deployed and the OLDER one holds another version: Helm takes the newer, so does verify
    from verify_faults import helm_record, release

    snap = recorded("real-cluster")
    rel = release("dra-driver")
    assert snap.helm_releases is not None
    for r in snap.helm_releases:  # the recorded release becomes revision 3
        if r["metadata"]["labels"]["name"] == rel.name:
            from verify_faults import reencode

            reencode(r, lambda b: b.update(version=3))
    snap.helm_releases.append(helm_record(rel.name, rel.namespace, rel.chart, "0.1.0", rel.values, revision=2))
    row = next(r for r in run(snap, "real-cluster") if r.subject == "release/dra-driver")
    assert row.verdict is Verdict.passed and "revision 3" in row.actual

