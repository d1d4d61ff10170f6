"""Verification output: a readable table, a JSON report and JUnit XML for CI."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from xml.etree import ElementTree as ET

from rich.console import Console
from rich.table import Table

from gpucluster.verify.model import Result, Verdict

STYLE = {Verdict.passed: "green", Verdict.warned: "bold yellow", Verdict.failed: "bold red", Verdict.skipped: "yellow"}


def counts(results: list[Result]) -> dict[str, int]:
    """Rows per verdict: ``pass``, ``fail``, ``not-measured`` and ``warn`` (passing, but act soon)."""
    c = Counter(r.verdict for r in results)
    return {"pass": c[Verdict.passed], "fail": c[Verdict.failed], "not-measured": c[Verdict.skipped],
            "warn": c[Verdict.warned]}


def summary_line(c: dict[str, int]) -> str:
    """The counts in words; warnings are named only when there are some (a summary from before they existed
    has no ``warn``)."""
    warned = c.get("warn", 0)
    return (f"{c['pass']} passed, {c['fail']} failed, {c['not-measured']} not measured"
            + (f", {warned} warning{'' if warned == 1 else 's'}" if warned else ""))


def word(r: Result, allowed: Mapping[str, str]) -> str:
    """A row's verdict as shown: a row not measured says whether it was allowed to be."""
    if r.verdict is not Verdict.skipped:
        return r.verdict.value
    return "not measured (allowed)" if r.check in allowed else "not measured"


def allowance_lines(results: list[Result], allowed: Mapping[str, str]) -> list[str]:
    """One line per check allowed to be unmeasured: who allowed it and how many of its rows were not measured."""
    n = Counter(r.check for r in results if r.verdict is Verdict.skipped)
    return [f"allowed not measured: {check} ({n[check] or 'no'} row{'' if n[check] == 1 else 's'} not measured): "
            f"{why}" for check, why in sorted(allowed.items())]


def table(results: list[Result], console: Console, *, only_problems: bool = False,
          allowed: Mapping[str, str] | None = None) -> None:
    t = Table(title="gpucluster verify", show_lines=False)
    for col in ("check", "node/object", "expected", "actual", "verdict"):
        t.add_column(col, overflow="fold")
    for r in results:
        if only_problems and r.verdict is Verdict.passed:
            continue
        detail = r.actual if not r.reason else f"{r.actual} ({r.reason})" if r.actual else r.reason
        t.add_row(r.check, r.subject, r.expected, detail, f"[{STYLE[r.verdict]}]{word(r, allowed or {})}[/]")
    console.print(t)
    console.print(summary_line(counts(results)))
    for line in allowance_lines(results, allowed or {}):
        console.print(line, soft_wrap=True)


def to_json(results: list[Result], meta: dict, allowed: Mapping[str, str] | None = None) -> str:
    """The report: ``meta``, the counts, every row; an unmeasured row that was allowed says who allowed it."""
    allowed = allowed or {}
    rows = [r.to_dict() | ({"allowed": allowed[r.check]} if r.verdict is Verdict.skipped and r.check in allowed
                           else {}) for r in results]
    return json.dumps({**meta, "summary": counts(results), "allowedNotMeasured": dict(sorted(allowed.items())),
                       "results": rows}, indent=2, sort_keys=False)


def to_junit(results: list[Result], name: str = "gpucluster-verify", allowed: Mapping[str, str] | None = None) -> str:
    """JUnit XML: a failed row is a failure; a row not measured is a failure too unless allowed (then a skip); a
    warning passes, with what to do in its ``system-out``."""
    allowed = allowed or {}
    failures = sum(r.verdict is Verdict.failed or (r.verdict is Verdict.skipped and r.check not in allowed)
                   for r in results)
    skipped = sum(r.verdict is Verdict.skipped and r.check in allowed for r in results)
    suite = ET.Element("testsuite", name=name, tests=str(len(results)), failures=str(failures),
                       skipped=str(skipped), errors="0")
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=r.check, name=r.subject)
        if r.verdict is Verdict.failed:
            f = ET.SubElement(case, "failure", message=r.reason or "mismatch")
            f.text = f"expected: {r.expected}\nactual: {r.actual}"
        elif r.verdict is Verdict.warned:
            ET.SubElement(case, "system-out").text = f"warning: {r.reason}\nexpected: {r.expected}\nactual: {r.actual}"
        elif r.verdict is Verdict.skipped and r.check in allowed:
            ET.SubElement(case, "skipped", message=f"not measured ({allowed[r.check]}): {r.reason}")
        elif r.verdict is Verdict.skipped:
            f = ET.SubElement(case, "failure", message=f"not measured: {r.reason}")
            f.text = f"not measured, and {r.check} is not allowed to be (--allow-not-measured {r.check})"
    return ET.tostring(suite, encoding="unicode")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
