"""Verification output: a readable table, a JSON report and JUnit XML for CI."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from xml.etree import ElementTree as ET

from rich.console import Console
from rich.table import Table

from gpucluster.verify.model import Result, Verdict

STYLE = {Verdict.passed: "green", Verdict.failed: "bold red", Verdict.skipped: "yellow"}


def counts(results: list[Result]) -> dict[str, int]:
    """Rows per verdict: ``pass``, ``fail`` and ``not-measured``."""
    c = Counter(r.verdict for r in results)
    return {"pass": c[Verdict.passed], "fail": c[Verdict.failed], "not-measured": c[Verdict.skipped]}


def summary_line(c: dict[str, int]) -> str:
    return f"{c['pass']} passed, {c['fail']} failed, {c['not-measured']} not measured"


def table(results: list[Result], console: Console, *, only_problems: bool = False) -> None:
    t = Table(title="gpucluster verify", show_lines=False)
    for col in ("check", "node/object", "expected", "actual", "verdict"):
        t.add_column(col, overflow="fold")
    for r in results:
        if only_problems and r.verdict is Verdict.passed:
            continue
        detail = r.actual if not r.reason else f"{r.actual} ({r.reason})" if r.actual else r.reason
        word = "not measured" if r.verdict is Verdict.skipped else r.verdict.value
        t.add_row(r.check, r.subject, r.expected, detail, f"[{STYLE[r.verdict]}]{word}[/]")
    console.print(t)
    console.print(summary_line(counts(results)))


def to_json(results: list[Result], meta: dict) -> str:
    return json.dumps({**meta, "summary": counts(results), "results": [r.to_dict() for r in results]},
                      indent=2, sort_keys=False)


def to_junit(results: list[Result], name: str = "gpucluster-verify") -> str:
    c = counts(results)
    suite = ET.Element("testsuite", name=name, tests=str(len(results)), failures=str(c["fail"]),
                       skipped=str(c["not-measured"]), errors="0")
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=r.check, name=r.subject)
        if r.verdict is Verdict.failed:
            f = ET.SubElement(case, "failure", message=r.reason or "mismatch")
            f.text = f"expected: {r.expected}\nactual: {r.actual}"
        elif r.verdict is Verdict.skipped:
            ET.SubElement(case, "skipped", message=f"not measured: {r.reason}")
    return ET.tostring(suite, encoding="unicode")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
