"""docs/upstream.md stays complete: a row for every pinned chart and every toolchain tool."""

from __future__ import annotations

import re
from pathlib import Path

from gpucluster import components
from gpucluster.toolchain.versions import TOOLS

DOC = Path(__file__).resolve().parents[2] / "docs" / "upstream.md"


def first_cells() -> list[str]:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("| ") and not line.startswith("|--")]
    return [row.split("|")[1] for row in rows]


def named(name: str) -> bool:
    return any(re.search(rf"`{re.escape(name)}`", cell) for cell in first_cells())


def test_every_pinned_chart_has_a_row() -> None:
    missing = [c.chart.name for c in components.with_charts() if c.chart and not named(c.chart.name)]
    assert missing == [], f"docs/upstream.md lacks rows for charts {missing}"


def test_every_tool_has_a_row() -> None:
    missing = [name for name in TOOLS if not named(name)]
    assert missing == [], f"docs/upstream.md lacks rows for tools {missing}"


def test_the_check_fails_for_a_name_without_a_row() -> None:
    assert not named("no-such-chart")
