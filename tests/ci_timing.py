"""Where a run's time goes: wall time per tier and the slowest tests, from pytest's own reports.

Loaded by tests/conftest.py. Every test report (setup, call, teardown) carries its start and stop
time; a tier's wall time is the union of its tests' intervals (plus any background interval a tier
records itself with :func:`record_interval`, e.g. Molecule scenarios running beside other tiers), so
tiers that run side by side are not counted twice. At the end of the session the figures are printed
and written to ``reports/ci-times.json``; ``scripts/ci-times.py`` turns that file into the committed
record (``tests/ci_times.json``) and the README's table.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REPORT = REPO / "reports" / "ci-times.json"
#: The suite's tiers, by the folder under tests/ that holds them, in the order they are reported.
TIERS = ("unit", "upstream", "promtool", "integration", "molecule")
SLOWEST = 10


def tier_of(nodeid: str) -> str:
    """The tier of a test id such as ``tests/unit/test_x.py::test_y`` (``other`` outside the tiers)."""
    parts = nodeid.split("::", 1)[0].split("/")
    if len(parts) > 1 and parts[0] == "tests" and parts[1] in TIERS:
        return parts[1]
    return "other"


def union_seconds(intervals: list[tuple[float, float]]) -> float:
    """Total length of the union of ``(start, stop)`` intervals."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


@dataclass
class Timings:
    """What the session has seen so far."""

    started: float = field(default_factory=time.time)
    intervals: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    per_test: dict[str, float] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)

    def add(self, tier: str, start: float, stop: float) -> None:
        self.intervals.setdefault(tier, []).append((start, stop))


_TIMINGS = pytest.StashKey[Timings]()
_config: pytest.Config | None = None


def record_interval(tier: str, start: float, stop: float) -> None:
    """Count ``[start, stop]`` (``time.time()`` values) as wall time of ``tier`` (work run in the background)."""
    if _config is not None:
        _config.stash[_TIMINGS].add(tier, start, stop)


def pytest_configure(config: pytest.Config) -> None:
    global _config
    _config = config
    config.stash[_TIMINGS] = Timings()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _config is None:
        return
    timings = _config.stash[_TIMINGS]
    tier = tier_of(report.nodeid)
    timings.add(tier, report.start, report.stop)
    timings.per_test[report.nodeid] = timings.per_test.get(report.nodeid, 0.0) + report.duration
    if report.failed:
        timings.outcomes[report.nodeid] = "failed"
    elif report.when == "call" or report.skipped:
        timings.outcomes.setdefault(report.nodeid, report.outcome)


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=False)
    except OSError:
        return ""
    return out.stdout.strip()


def summary(timings: Timings, whole_suite: bool, exit_status: int) -> dict:
    """The run's figures as the JSON document ``reports/ci-times.json`` holds."""
    tiers = {}
    for tier in (*TIERS, "other"):
        ids = [t for t in timings.per_test if tier_of(t) == tier]
        if not ids and tier not in timings.intervals:
            continue
        tiers[tier] = {
            "wall_s": round(union_seconds(timings.intervals.get(tier, [])), 1),
            "summed_s": round(sum(timings.per_test[t] for t in ids), 1),
            "tests": len(ids),
            "failed": sum(1 for t in ids if timings.outcomes.get(t) == "failed"),
        }
    slowest = sorted(timings.per_test.items(), key=lambda kv: kv[1], reverse=True)[:SLOWEST]
    setup = os.environ.get("GPUCLUSTER_SETUP_SECONDS", "")
    pytest_wall = time.time() - timings.started
    return {
        "date": time.strftime("%Y-%m-%d"),
        "commit": _commit(),
        "whole_suite": whole_suite,
        "exit_status": exit_status,
        "setup_s": round(float(setup), 1) if setup.replace(".", "", 1).isdigit() else None,
        "pytest_wall_s": round(pytest_wall, 1),
        "tiers": tiers,
        "slowest": [{"test": t, "seconds": round(s, 1)} for t, s in slowest],
    }


def _whole_suite(config: pytest.Config) -> bool:
    """True when nothing narrowed the run (no paths, ``-k``, ``-m``, ``--lf``, ``--deselect``)."""
    opt = config.option
    narrowed = (getattr(opt, "keyword", "") or getattr(opt, "markexpr", "") or getattr(opt, "lf", False)
                or getattr(opt, "deselect", None) or getattr(opt, "exitfirst", False))
    return not narrowed and not config.args_source == pytest.Config.ArgsSource.ARGS


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _TIMINGS not in config.stash or hasattr(config, "workerinput"):
        return
    doc = summary(config.stash[_TIMINGS], _whole_suite(config), int(exitstatus))
    config.stash[_SUMMARY] = doc
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(doc, indent=2) + "\n")


_SUMMARY = pytest.StashKey[dict]()


def render_table(doc: dict) -> list[str]:
    """The per-tier table and the slowest tests as text lines (what the run prints at its end)."""
    lines = [f"{'tier':<12} {'wall s':>8} {'summed s':>9} {'tests':>6} {'failed':>6}"]
    for tier, row in doc["tiers"].items():
        lines.append(f"{tier:<12} {row['wall_s']:>8.1f} {row['summed_s']:>9.1f} {row['tests']:>6} {row['failed']:>6}")
    setup = doc.get("setup_s")
    lines.append(f"{'pytest':<12} {doc['pytest_wall_s']:>8.1f}")
    if setup is not None:
        lines.append(f"{'setup':<12} {setup:>8.1f}")
        lines.append(f"{'total':<12} {setup + doc['pytest_wall_s']:>8.1f}")
    lines.append("")
    lines.append(f"the {len(doc['slowest'])} slowest tests (setup + call + teardown):")
    lines += [f"  {row['seconds']:>7.1f} s  {row['test']}" for row in doc["slowest"]]
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    doc = config.stash.get(_SUMMARY, None)
    if doc is None:
        return
    terminalreporter.section("time per tier (reports/ci-times.json)")
    for line in render_table(doc):
        terminalreporter.write_line(line)
