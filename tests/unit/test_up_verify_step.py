"""`gpucluster up` ends with the cluster checks: their summary is printed and a failed check exits 1."""

from __future__ import annotations

from gpucluster import flow
from gpucluster.cli import entrypoint


def _report(fail: int) -> flow.Report:
    report = flow.Report("lab", "up")
    report.stacks = [{"stack": "platform", "created": 0, "updated": 0, "deleted": 0, "same": 12, "seconds": 1.0}]
    problems = [{"check": "node-daemonsets", "subject": "gpu-operator", "verdict": "skip", "expected": "",
                 "actual": "", "reason": "the GPU Operator chart is not installed"}] * 2
    problems += [{"check": "deviceclass-matches", "subject": "deviceclass/gpu-1ti", "verdict": "fail",
                  "expected": ">= 1 device", "actual": "0 devices", "reason": ""}] * fail
    report.verify = {"summary": {"pass": 40, "fail": fail, "skip": 2}, "problems": problems}
    return report


def test_failed_check_after_up_is_printed_and_exits_1(monkeypatch, capsys):
    monkeypatch.setattr(flow, "run_up", lambda *a, **k: _report(fail=1))
    assert entrypoint(["up"]) == 1
    out = capsys.readouterr().out
    assert "verify: 40 checks passed, 1 failed, 2 skipped" in out
    assert "failed deviceclass-matches deviceclass/gpu-1ti: expected >= 1 device, actual 0 devices" in out
    # Repeated skips are listed once, with their count and reason.
    assert "skipped node-daemonsets x2: the GPU Operator chart is not installed" in out


def test_passing_checks_exit_0_and_no_verify_skips_them(monkeypatch, capsys):
    seen = {}

    def fake(*a, **k):
        seen.update(k)
        return _report(fail=0)

    monkeypatch.setattr(flow, "run_up", fake)
    assert entrypoint(["up"]) == 0
    assert seen["verify"] is True
    assert "verify: 40 checks passed, 0 failed, 2 skipped" in capsys.readouterr().out
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
