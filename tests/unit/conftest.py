"""Unit-test fixtures: a fresh copy of the local and lab specs per test (tests may change them)."""

from __future__ import annotations

import pytest

from gpucluster.spec.model import ClusterSpec


@pytest.fixture
def local(local_spec: ClusterSpec) -> ClusterSpec:
    return local_spec.model_copy(deep=True)


@pytest.fixture
def lab(lab_spec: ClusterSpec) -> ClusterSpec:
    return lab_spec.model_copy(deep=True)


@pytest.fixture(autouse=True)
def _pinned_rows_count_from_one() -> None:
    """Each test numbers its pinned row sets from 1 (tests/unit/pinned_rows.py)."""
    import pinned_rows

    pinned_rows.reset()
