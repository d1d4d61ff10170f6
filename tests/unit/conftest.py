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
