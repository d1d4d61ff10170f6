"""Helpers the unit and upstream tests share: one copy, imported by name (``from testkit import by_kind``).

``tests/`` is on ``sys.path`` because the top-level conftest lives there (pytest's rootdir-less import), as
``ci_timing`` is; a helper pasted into several test files drifts apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpucluster.errors import Problem, SpecError
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec, NodePool


def pool(spec: ClusterSpec, name: str) -> NodePool:
    """The node pool ``name`` of ``spec``."""
    return next(p for p in spec.node_pools if p.name == name)


def by_kind(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    """The objects of ``kind`` (named ``name``, if given); at least one, or the test fails naming what is missing."""
    hits = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert hits, f"no {kind} {name or ''}"
    return hits


def problems(write_spec: Any, spec: dict[str, Any] | str) -> list[Problem]:
    """Every problem loading ``spec`` reports; the spec must be refused."""
    folder: Path = write_spec(spec)
    with pytest.raises(SpecError) as info:
        load_spec(folder)
    return info.value.problems


def find(probs: list[Problem], path: str) -> Problem:
    """The first problem at ``path``; the test fails listing them all when there is none."""
    hits = [p for p in probs if p.path == path]
    assert hits, f"no problem at {path}; got {[str(p) for p in probs]}"
    return hits[0]
