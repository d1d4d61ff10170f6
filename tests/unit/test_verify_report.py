"""What verify prints and writes: the table, JSON and JUnit XML, with allowances; the row model underneath."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from rich.console import Console

from gpucluster.errors import InputError
from gpucluster.verify import checks, report
from gpucluster.verify.model import Result, Verdict, compare, differences, fail, ok, problems, skip, unallowed, warn

ROWS = [
    ok("node-ready", "l4-1", "True", "True"),
    fail("node-taints", "l4-1", ["a:NoSchedule"], [], "missing a:NoSchedule"),
    skip("charts-installed", "release/volcano", "not installed here"),
    skip("tenant-queue", "tenants/inference", "Volcano's Queue CRD is not installed"),
]
ALLOWED = {"charts-installed": "the local world installs no chart"}


def test_the_row_model_renders_values_as_a_reader_sees_them() -> None:
    assert ok("c-x", "s", {"b": 2, "a": 1}, {}).expected == "a=1, b=2"
    assert ok("c-x", "s", {"b": 2, "a": 1}, {}).actual == "(none)"
    assert fail("c-x", "s", ["z", "y"], (), "why").expected == "y, z"
    assert fail("c-x", "s", ["z", "y"], (), "why").actual == "(none)"
    assert ok("c-x", "s", 3, True) == Result("c-x", "s", Verdict.passed, "3", "True", "")
    assert compare("c-x", "s", 1, 1, "r") == Result("c-x", "s", Verdict.passed, "1", "1", "")
    assert compare("c-x", "s", 1, 2, "r") == Result("c-x", "s", Verdict.failed, "1", "2", "r")
    assert compare("c-x", "s", 1, 2) == Result("c-x", "s", Verdict.failed, "1", "2", "")
    with pytest.raises(ValueError, match="skip of c-x/s without a reason"):
        Result("c-x", "s", Verdict.skipped)


def test_a_row_survives_its_dict_form() -> None:
    row = fail("node-taints", "l4-1", "a", "b", "why")
    d = row.to_dict()
    assert d == {"check": "node-taints", "subject": "l4-1", "verdict": "fail", "expected": "a", "actual": "b",
                 "reason": "why"}
    assert Result.from_dict({**d, "allowed": "by someone"}) == row
    assert Result.from_dict({"check": "c-x", "subject": "s", "verdict": "pass"}) == Result("c-x", "s", Verdict.passed)


def test_differences_name_every_differing_leaf_by_its_path() -> None:
    want = {"a": {"b": [1, {"c": "x"}], "d": 1}, "e": 2}
    got = {"a": {"b": [1, {"c": "y"}], "f": 3}, "g": 4}
    assert differences(want, got) == ["a.b[1].c: 'x' != 'y'", "a.d: missing", "a.f: unexpected 3", "e: missing",
                                      "g: unexpected 4"]
    assert differences([1, 2], [1], "list") == ["list: [1, 2] != [1]"]
    assert differences(1, 2) == ["(value): 1 != 2"]
    assert differences({"a": 1}, {"a": 1}, "p") == []


def test_a_run_fails_on_failures_and_on_unmeasured_rows_nobody_allowed() -> None:
    assert problems(ROWS, ALLOWED) == ("1 check(s) failed; 1 row(s) not measured (tenant-queue; each row says why): "
                                       "`--allow-not-measured tenant-queue` accepts them")
    assert problems(ROWS[:1], {}) == ""
    assert [r.subject for r in unallowed(ROWS, ALLOWED)] == ["tenants/inference"]
    two = [skip("b-c", "x", "r"), skip("a-c", "y", "r")]
    assert problems(two, {}) == ("2 row(s) not measured (a-c,b-c; each row says why): "
                                 "`--allow-not-measured a-c,b-c` accepts them")


def test_allowances_are_parsed_by_check_id_and_say_who_allowed_them() -> None:
    assert checks.parse([" gpu-health ,tenant-queue", "gpu-health", ""]) == {
        "gpu-health": checks.BY_USER, "tenant-queue": checks.BY_USER}
    unknown = r"--allow-not-measured: unknown check id\(s\) nope, zz-top \(known: alert-rules,"
    with pytest.raises(InputError, match=unknown):
        checks.parse(["nope,gpu-health", "zz-top"])
    with pytest.raises(InputError, match=r"^--gpucluster-allow-not-measured: unknown"):
        checks.parse(["nope"], "--gpucluster-allow-not-measured")
    assert checks.allowed() == {}
    assert checks.allowed(["gpu-health"]) == {"gpu-health": checks.BY_USER}
    assert checks.allowed(chart_repositories=False) == checks.NO_CHART_REPOSITORIES
    # a user's own allowance is named as theirs, over the local world's
    mine = checks.allowed({"charts-installed": checks.BY_USER}, local_world=True)
    assert mine == {**checks.LOCAL_WORLD, "charts-installed": checks.BY_USER}


def test_the_table_marks_allowed_rows_and_lists_the_allowances() -> None:
    console = Console(width=200, record=True, color_system=None)
    report.table(ROWS, console, allowed=ALLOWED)
    text = console.export_text()
    lines = [line for line in text.splitlines() if "│" in line]
    by_check = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[1:-1]] for line in lines}
    assert by_check["node-ready"] == ["node-ready", "l4-1", "True", "True", "pass"]
    assert by_check["node-taints"] == ["node-taints", "l4-1", "a:NoSchedule", "(none) (missing a:NoSchedule)", "fail"]
    assert by_check["charts-installed"] == ["charts-installed", "release/volcano", "", "not installed here",
                                            "not measured (allowed)"]
    assert by_check["tenant-queue"][-1] == "not measured"
    assert "1 passed, 1 failed, 2 not measured" in text
    assert "allowed not measured: charts-installed (1 row not measured): the local world installs no chart" in text
    problems_only = Console(width=200, record=True, color_system=None)
    report.table(ROWS, problems_only, only_problems=True, allowed={})
    shown = problems_only.export_text()
    assert "node-taints" in shown and "│ node-ready" not in shown and "allowed not measured" not in shown


def test_allowance_lines_count_each_allowed_checks_unmeasured_rows() -> None:
    rows = [*ROWS, skip("charts-installed", "release/x", "r")]
    assert report.allowance_lines(rows, {**ALLOWED, "gpu-health": "g"}) == [
        "allowed not measured: charts-installed (2 rows not measured): the local world installs no chart",
        "allowed not measured: gpu-health (no rows not measured): g"]
    assert report.word(ROWS[2], ALLOWED) == "not measured (allowed)"
    assert report.word(ROWS[3], ALLOWED) == "not measured"
    assert report.word(ROWS[1], ALLOWED) == "fail"


def test_json_carries_the_counts_the_allowances_and_who_allowed_each_row() -> None:
    data = json.loads(report.to_json(ROWS, {"cluster": "local"}, ALLOWED))
    assert data["cluster"] == "local"
    assert data["summary"] == {"pass": 1, "fail": 1, "not-measured": 2, "warn": 0}
    assert data["allowedNotMeasured"] == ALLOWED
    assert [r.get("allowed") for r in data["results"]] == [None, None, ALLOWED["charts-installed"], None]
    assert data["results"][1] == ROWS[1].to_dict()
    assert json.loads(report.to_json(ROWS, {}))["allowedNotMeasured"] == {}


def test_junit_fails_unallowed_unmeasured_rows_and_skips_allowed_ones() -> None:
    suite = ET.fromstring(report.to_junit(ROWS, allowed=ALLOWED))
    assert (suite.get("name"), suite.get("tests"), suite.get("failures"), suite.get("skipped"), suite.get("errors")) \
        == ("gpucluster-verify", "4", "2", "1", "0")
    cases = {c.get("classname"): c for c in suite}
    assert cases["node-ready"].get("name") == "l4-1" and list(cases["node-ready"]) == []
    taint = cases["node-taints"].find("failure")
    assert taint is not None and taint.get("message") == "missing a:NoSchedule"
    assert taint.text == "expected: a:NoSchedule\nactual: (none)"
    skipped = cases["charts-installed"].find("skipped")
    assert skipped is not None
    assert skipped.get("message") == "not measured (the local world installs no chart): not installed here"
    queue = cases["tenant-queue"].find("failure")
    assert queue is not None and queue.get("message") == "not measured: Volcano's Queue CRD is not installed"
    assert queue.text == "not measured, and tenant-queue is not allowed to be (--allow-not-measured tenant-queue)"
    assert ET.fromstring(report.to_junit([fail("c-x", "s", "a", "b")], "other")).find("testcase/failure").get(
        "message") == "mismatch"
    assert ET.fromstring(report.to_junit([fail("c-x", "s", "a", "b")], "other")).get("name") == "other"


def test_reports_are_written_where_asked(tmp_path) -> None:
    target = tmp_path / "a" / "b" / "verify.json"
    report.write(target, "{}")
    assert target.read_text() == "{}"


def test_a_warning_is_shown_and_counted_but_never_fails_a_run() -> None:
    rows = [ok("node-ready", "l4-1", "True", "True"),
            warn("control-plane-certificates", "apiserver/x:6443", "valid for 30+ days", "expires soon", "renew: do X")]
    assert problems(rows, {}) == ""
    assert report.counts(rows) == {"pass": 1, "fail": 0, "not-measured": 0, "warn": 1}
    assert report.summary_line(report.counts(rows)) == "1 passed, 0 failed, 0 not measured, 1 warning"
    console = Console(width=200, record=True, color_system=None)
    report.table(rows, console, only_problems=True)
    text = console.export_text()
    assert "expires soon (renew: do X)" in text and "│ warn" in text and "node-ready" not in text
    suite = ET.fromstring(report.to_junit(rows))
    assert suite.get("failures") == "0" and suite.get("skipped") == "0"
    out = suite[1].find("system-out")
    assert out is not None and out.text is not None and out.text.startswith("warning: renew: do X")
    with pytest.raises(ValueError, match="warning of c-x/s without a reason"):
        warn("c-x", "s", "", "", "")
