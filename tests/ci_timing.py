"""Where a run's time goes: wall time per tier and the slowest tests, from pytest's own reports.

Loaded by tests/conftest.py. Every test report (setup, call, teardown) carries its start and stop
time; a tier's wall time is the union of its tests' intervals (plus any background interval a tier
records itself with :func:`record_interval`, e.g. Molecule scenarios running beside other tiers), so
tiers that run side by side are not counted twice. The machine is shared by the tiers, so the run also
counts CPU seconds: the whole machine's (``/proc/stat``) and the part Podman charged to its containers,
the Molecule tier's hosts (their cgroup, :func:`container_cpu`). At the end of the session the figures
are printed and written to ``reports/ci-times.json``; ``scripts/ci-times.py`` turns that file into the committed
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


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot, from /proc/stat ((0, 0) where unreadable)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


#: Where Podman charges its containers' CPU time, by cgroup version and manager, and the counter's unit:
#: cgroup v1 cpuacct counts nanoseconds (molecule/containers.conf selects the cgroupfs manager, whose
#: parent is libpod_parent), cgroup v2's cpu.stat microseconds. A parent's counter keeps what removed
#: containers used.
CONTAINER_CPU = (
    ("cpuacct/libpod_parent/cpuacct.usage", 1e-9),
    ("cpuacct/machine.slice/cpuacct.usage", 1e-9),
    ("libpod_parent/cpu.stat", 1e-6),
    ("machine.slice/cpu.stat", 1e-6),
)
CGROUP = Path("/sys/fs/cgroup")


def container_cpu(root: Path = CGROUP) -> tuple[str, float] | None:
    """(counter file, CPU seconds) of Podman's containers so far; None where no such cgroup exists (yet)."""
    for rel, unit in CONTAINER_CPU:
        try:
            text = (root / rel).read_text()
        except OSError:
            continue
        if rel.endswith("cpu.stat"):
            text = next((line.split()[1] for line in text.splitlines() if line.startswith("usage_usec ")), "")
        if text.strip().isdigit():
            return rel, int(text) * unit
    return None


def container_cpu_since(start: tuple[str, float] | None, root: Path = CGROUP) -> float | None:
    """Podman's containers' CPU seconds since ``start`` (:func:`container_cpu`'s reading then; None: the
    cgroup did not exist yet, so everything it counts now is new); None when there is no such cgroup."""
    now = container_cpu(root)
    if now is None:
        return None
    if start is None:
        return now[1]
    if start[0] != now[0]:
        return None  # read from another counter: not comparable
    return max(0.0, now[1] - start[1])


@dataclass
class Timings:
    """What the session has seen so far."""

    started: float = field(default_factory=time.time)
    cpu_start: tuple[int, int] = field(default_factory=cpu_ticks)
    containers_start: tuple[str, float] | None = field(default_factory=container_cpu)
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
    ended = time.time()
    busy, total = cpu_ticks()
    spent = total - timings.cpu_start[1]
    return {
        "date": time.strftime("%Y-%m-%d"),
        "commit": _commit(),
        "whole_suite": whole_suite,
        "exit_status": exit_status,
        "setup_s": round(float(setup), 1) if setup.replace(".", "", 1).isdigit() else None,
        "pytest_wall_s": round(ended - timings.started, 1),
        "part": _part(),
        "started_at": round(timings.started, 1),
        "ended_at": round(ended, 1),
        # The machine's CPU use during the run (every process, not only the tests'): how much room is left.
        "cpu_busy_pct": round(100.0 * (busy - timings.cpu_start[0]) / spent, 1) if spent > 0 else None,
        # CPU seconds the machine spent during the run, and of them those of the Molecule tier's hosts.
        "cpu_s": round((busy - timings.cpu_start[0]) / _HZ, 1) if spent > 0 else None,
        "container_cpu_s": _round(container_cpu_since(timings.containers_start)),
        "tiers": tiers,
        "failed_tests": sorted(t for t, outcome in timings.outcomes.items() if outcome == "failed"),
        "slowest": [{"test": t, "seconds": round(s, 1)} for t, s in slowest],
    }


_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


#: scripts/test.sh runs the whole suite as two pytest processes side by side, split by this marker
#: expression; each writes reports/ci-times.<part>.json and ``scripts/ci-times.py merge`` joins them.
#: The unit tier runs in the Molecule part, after the Molecule tests (pytest collects tests/molecule
#: before tests/unit), while the other part is still in its integration tier.
PARTS = {"molecule": "molecule or unit", "rest": "not molecule and not unit"}


def _part() -> str:
    part = os.environ.get("GPUCLUSTER_TIMING_PART", "")
    return part if part in PARTS else ""


def _whole_suite(config: pytest.Config) -> bool:
    """True when nothing narrowed the run (no paths, ``-k``, ``-m``, ``--lf``, ``--deselect``) but the
    split of :data:`PARTS`."""
    opt = config.option
    markexpr = getattr(opt, "markexpr", "")
    split = bool(_part()) and markexpr == PARTS[_part()]
    narrowed = (getattr(opt, "keyword", "") or (markexpr and not split) or getattr(opt, "lf", False)
                or getattr(opt, "deselect", None) or getattr(opt, "exitfirst", False))
    return not narrowed and not config.args_source == pytest.Config.ArgsSource.ARGS


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _TIMINGS not in config.stash or hasattr(config, "workerinput"):
        return
    doc = summary(config.stash[_TIMINGS], _whole_suite(config), int(exitstatus))
    config.stash[_SUMMARY] = doc
    report = REPORT.with_name(f"ci-times.{_part()}.json") if _part() else REPORT
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(doc, indent=2) + "\n")


_SUMMARY = pytest.StashKey[dict]()


def render_table(doc: dict) -> list[str]:
    """The per-tier table and the slowest tests as text lines (what the run prints at its end)."""
    lines = [f"{'tier':<12} {'wall s':>8} {'summed s':>9} {'tests':>6} {'failed':>6}"]
    for tier, row in doc["tiers"].items():
        lines.append(f"{tier:<12} {row['wall_s']:>8.1f} {row['summed_s']:>9.1f} {row['tests']:>6} {row['failed']:>6}")
    setup = doc.get("setup_s")
    cpu = doc.get("cpu_busy_pct")
    lines.append(f"{'pytest':<12} {doc['pytest_wall_s']:>8.1f}" + (f"   (machine CPU busy {cpu:.0f}%)" if cpu else ""))
    cpu_s, hosts = doc.get("cpu_s"), doc.get("container_cpu_s")
    if cpu_s:
        share = f", {hosts:.1f} of them in Podman's containers (the Molecule hosts)" if hosts is not None else ""
        lines.append(f"{'cpu':<12} {cpu_s:>8.1f}   CPU-s of the machine{share}")
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
