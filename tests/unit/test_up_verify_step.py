"""`gpucluster up` ends with the cluster checks: their summary is printed; a failed check exits 1, and so
does a check that could not be measured unless the run is partial."""

from __future__ import annotations

from gpucluster import flow
from gpucluster.cli import entrypoint


def _report(fail: int, partial: bool = False) -> flow.Report:
    report = flow.Report("lab", "up")
    report.stacks = [{"stack": "platform", "created": 0, "updated": 0, "deleted": 0, "same": 12, "seconds": 1.0}]
    problems = [{"check": "node-daemonsets", "subject": "gpu-operator", "verdict": "not-measured", "expected": "",
                 "actual": "", "reason": "the GPU Operator chart is not installed"}] * 2
    problems += [{"check": "deviceclass-matches", "subject": "deviceclass/gpu-1ti", "verdict": "fail",
                  "expected": ">= 1 device", "actual": "0 devices", "reason": ""}] * fail
    report.verify = {"summary": {"pass": 40, "fail": fail, "not-measured": 2}, "problems": problems,
                     "partial": partial}
    return report


def test_failed_check_after_up_is_printed_and_exits_1(monkeypatch, capsys):
    monkeypatch.setattr(flow, "run_up", lambda *a, **k: _report(fail=1))
    assert entrypoint(["up"]) == 1
    out = capsys.readouterr().out
    assert "verify: 40 passed, 1 failed, 2 not measured" in out
    assert "failed deviceclass-matches deviceclass/gpu-1ti: expected >= 1 device, actual 0 devices" in out
    # Repeated unmeasured rows are listed once, with their count and reason.
    assert "not measured node-daemonsets x2: the GPU Operator chart is not installed" in out


def test_unmeasured_checks_exit_1_unless_the_run_is_partial(monkeypatch, capsys):
    seen = {}

    def fake(*a, **k):
        seen.update(k)
        report = _report(fail=0, partial=k["partial"])
        if not k["verify"]:
            report.verify = {}
        return report

    monkeypatch.setattr(flow, "run_up", fake)
    assert entrypoint(["up"]) == 1
    out = capsys.readouterr()
    assert "verify: 40 passed, 0 failed, 2 not measured" in out.out
    assert "2 check(s) not measured" in out.err
    assert entrypoint(["up", "--partial"]) == 0
    assert seen["verify"] is True and seen["partial"] is True
    assert entrypoint(["up", "--no-verify"]) == 0
    assert seen["verify"] is False


def test_a_phase_with_failed_checks_is_marked_failed(capsys):
    run = flow.Runner(flow.Report("lab", "up"), quiet=False)
    with run.phase("verify"):
        run.problem = "1 check(s) failed"
    with run.phase("readiness"):
        pass
    err = capsys.readouterr().err
    assert "✗ verify" in err and "1 check(s) failed" in err
    assert "✓ readiness" in err
