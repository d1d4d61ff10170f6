"""The upstream-conformance tier: our render and our expectations against cited upstream facts.

Facts live in ``tests/upstream/facts/<component>.yaml``: each was read from the upstream source at the
tag gpucluster pins (repository, tag, path, line) and holds names, keys and values only — never
upstream code or YAML. ``fact(component, id)`` returns a fact's value; a missing fact is a test
failure naming the file, not a skip.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

FACTS = Path(__file__).resolve().parent / "facts"


@cache
def facts(component: str) -> dict[str, Any]:
    """The whole fact file of ``component`` (``tests/upstream/facts/<component>.yaml``)."""
    path = FACTS / f"{component}.yaml"
    if not path.is_file():
        pytest.fail(f"no upstream fact file {path}")
    return yaml.safe_load(path.read_text())


def chart_fact_files() -> dict[str, str]:
    """The fact file of each registry row with a chart, by row (the file says ``row: <component>``)."""
    out: dict[str, str] = {}
    for path in sorted(FACTS.glob("*.yaml")):
        row = facts(path.stem).get("row")
        if row is not None:
            assert row not in out, f"{path.stem}.yaml and {out[row]}.yaml both claim row {row!r}"
            out[row] = path.stem
    return out


def fact(component: str, fact_id: str) -> Any:
    """The value of one cited fact."""
    found = facts(component)["facts"].get(fact_id)
    if found is None:
        pytest.fail(f"{component}.yaml has no fact {fact_id!r}")
    return found["value"]


def source(component: str, fact_id: str) -> str:
    """Where a fact was read: ``owner/repo@tag:path:line`` (for assertion messages)."""
    doc = facts(component)
    f = doc["facts"][fact_id]
    src = doc["sources"][f["source"]["repo"]]
    return f"{src['repository']}@{src.get('tag') or src.get('commit')}:{f['source']['path']}:{f['source']['line']}"
