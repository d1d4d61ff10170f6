"""Cluster checks through the Kubernetes API, one test per check row: ``test_cluster[check[subject]]``."""

from __future__ import annotations

import warnings

import pytest

from gpucluster.verify.model import Result, Verdict
from gpucluster.verify.pytest_plugin import cluster_results, unmeasured


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    __tracebackhide__ = True
    if "row" in metafunc.fixturenames:
        rows = cluster_results(metafunc.config)
        metafunc.parametrize("row", rows, ids=[f"{r.check}[{r.subject}]" for r in rows])


def test_cluster(row: Result, pytestconfig: pytest.Config) -> None:
    if row.verdict is Verdict.skipped:
        unmeasured(pytestconfig, row.check, row.reason)
    if row.verdict is Verdict.warned:  # passes, and pytest's warnings summary says what to do
        warnings.warn(f"{row.check} {row.subject}: {row.reason}", UserWarning, stacklevel=1)
        return
    assert row.verdict is Verdict.passed, (
        f"{row.check} {row.subject}: expected {row.expected}, actual {row.actual}"
        + (f" ({row.reason})" if row.reason else ""))
