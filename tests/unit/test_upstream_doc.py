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


def rows() -> list[list[str]]:
    return [[cell.strip() for cell in line.split("|")[1:-1]] for line in DOC.read_text().splitlines()
            if line.startswith("| ") and not line.startswith("|--")]


def test_every_pinned_chart_has_a_row() -> None:
    missing = [c.chart.name for c in components.with_charts() if c.chart and not named(c.chart.name)]
    assert missing == [], f"docs/upstream.md lacks rows for charts {missing}"


def test_each_charts_row_names_the_version_the_registry_pins() -> None:
    # The "pinned" column is the version the chart's facts were read at: a bump re-reads them and this row.
    wrong = []
    for c in components.with_charts():
        assert c.chart is not None
        (row,) = [r for r in rows() if r[0].startswith(f"`{c.chart.name}`")]
        if not row[1].startswith(c.chart.version):
            wrong.append(f"{c.chart.name}: {row[1]!r}, registry {c.chart.version}")
    assert wrong == [], f"docs/upstream.md names other versions than src/gpucluster/components.py: {wrong}"


def test_every_tool_has_a_row() -> None:
    missing = [name for name in TOOLS if not named(name)]
    assert missing == [], f"docs/upstream.md lacks rows for tools {missing}"


def test_the_check_fails_for_a_name_without_a_row() -> None:
    assert not named("no-such-chart")
