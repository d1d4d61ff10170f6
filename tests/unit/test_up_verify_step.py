"""`gpucluster up` ends with the cluster checks: their summary is printed; a failed check exits 1, and so
does a row that could not be measured unless its check is allowed (--allow-not-measured, one id at a time)."""

from __future__ import annotations

import json

from gpucluster import flow
from gpucluster.cli import entrypoint
from gpucluster.verify import checks

UNMEASURED = {"check": "daemonsets-ready", "subject": "gpu-operator/nvidia-driver-daemonset", "verdict": "not-measured",
              "expected": "", "actual": "", "reason": "the GPU Operator chart is not installed"}


def _report(fail: int, allowed: dict[str, str] | None = None) -> flow.Report:
    report = flow.Report("lab", "up")
    report.stacks = [{"stack": "platform", "created": 0, "updated": 0, "deleted": 0, "same": 12, "seconds": 1.0}]
    problems = [UNMEASURED] * 2
    problems += [{"check": "deviceclass-matches", "subject": "deviceclass/gpu-1ti", "verdict": "fail",
                  "expected": ">= 1 device", "actual": "0 devices", "reason": ""}] * fail
    report.verify = {"summary": {"pass": 40, "fail": fail, "not-measured": 2}, "problems": problems,
                     "allowedNotMeasured": dict(allowed or {})}
    return report


def test_failed_check_after_up_is_printed_and_exits_1(monkeypatch, capsys):
    monkeypatch.setattr(flow, "run_up", lambda *a, **k: _report(fail=1))
    assert entrypoint(["up"]) == 1
    out = capsys.readouterr().out
    assert "verify: 40 passed, 1 failed, 2 not measured" in out
    assert "failed deviceclass-matches deviceclass/gpu-1ti: expected >= 1 device, actual 0 devices" in out
    # Repeated unmeasured rows are listed once, with their count and reason.
    assert "not measured daemonsets-ready x2: the GPU Operator chart is not installed" in out


def test_unmeasured_rows_exit_1_unless_their_check_is_allowed(monkeypatch, capsys):
    seen = {}

    def fake(*a, **k):
        seen.update(k)
        report = _report(fail=0, allowed=k["allow_not_measured"])
        if not k["verify"]:
            report.verify = {}
        return report

    monkeypatch.setattr(flow, "run_up", fake)
    assert entrypoint(["up"]) == 1
    out = capsys.readouterr()
    assert "verify: 40 passed, 0 failed, 2 not measured" in out.out
    assert ("2 row(s) not measured (daemonsets-ready; each row says why): `--allow-not-measured daemonsets-ready` "
            "accepts them") in out.err
    # another check's allowance does not cover them
    assert entrypoint(["up", "--allow-not-measured", "gpu-health,charts-installed"]) == 1
    assert seen["allow_not_measured"] == {"gpu-health": checks.BY_USER, "charts-installed": checks.BY_USER}
    capsys.readouterr()
    assert entrypoint(["up", "--allow-not-measured", "gpu-health", "--allow-not-measured", "daemonsets-ready"]) == 0
    out = capsys.readouterr().out
    assert f"not measured (allowed: {checks.BY_USER}) daemonsets-ready x2" in out
    assert entrypoint(["up", "--no-verify"]) == 0
    assert seen["verify"] is False


def test_an_unknown_check_id_is_bad_input_before_anything_runs(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(flow, "run_up", lambda *a, **k: ran.append(k))
    assert entrypoint(["up", "--allow-not-measured", "gpu-healthy"]) == 2
    err = capsys.readouterr().err
    assert "--allow-not-measured: unknown check id(s) gpu-healthy" in err and "gpu-health" in err
    assert ran == []


def test_up_reports_its_allowances_in_json(monkeypatch, capsys):
    monkeypatch.setattr(flow, "run_up", lambda *a, **k: _report(fail=0, allowed=dict(checks.LOCAL_WORLD)))
    assert entrypoint(["up", "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verify"]["allowedNotMeasured"] == checks.LOCAL_WORLD


def test_the_local_world_allows_its_fixed_list_and_nothing_else():
    assert checks.allowed(local_world=True) == checks.LOCAL_WORLD
    assert set(checks.LOCAL_WORLD) == {"daemonsets-ready", "charts-installed", "network-policy-enforcer",
                                       "kubelet-resource-managers"}
    # what no chart brings, plus the kubelets kwok nodes do not have (a real cluster without chart
    # repositories still has its kubelets, so --no-chart-repositories does not allow that row)
    assert set(checks.NO_CHART_REPOSITORIES) >= set(checks.LOCAL_WORLD) - {"kubelet-resource-managers"}
    assert "kubelet-resource-managers" not in checks.NO_CHART_REPOSITORIES
    # a user's allowance adds to it and says who allowed it
    both = checks.allowed(checks.parse(["tenant-queue"]), local_world=True)
    assert both == {**checks.LOCAL_WORLD, "tenant-queue": checks.BY_USER}


def test_a_phase_with_failed_checks_is_marked_failed(capsys):
    run = flow.Runner(flow.Report("lab", "up"), quiet=False)
    with run.phase("verify"):
        run.problem = "1 check(s) failed"
    with run.phase("readiness"):
        pass
    err = capsys.readouterr().err
    assert "✗ verify" in err and "1 check(s) failed" in err
    assert "✓ readiness" in err


def test_a_warning_after_up_is_printed_with_its_fix_and_exits_0(monkeypatch, capsys):
    report = _report(fail=0, allowed={"daemonsets-ready": "the local world installs no chart"})
    report.verify["summary"]["warn"] = 1
    report.verify["problems"].append({
        "check": "control-plane-certificates", "subject": "apiserver/10.0.0.1:6443", "verdict": "warn",
        "expected": "valid", "actual": "expires on 2027-01-01 00:00 UTC (12 days left)",
        "reason": "renew before 2027-01-01 00:00 UTC; renew them: `ansible-playbook ...`"})
    monkeypatch.setattr(flow, "run_up", lambda *a, **k: report)
    assert entrypoint(["up"]) == 0
    out = capsys.readouterr().out
    assert "verify: 40 passed, 0 failed, 2 not measured, 1 warning" in out
    assert ("warning control-plane-certificates apiserver/10.0.0.1:6443: renew before 2027-01-01 00:00 UTC; renew "
            "them: `ansible-playbook ...`") in out
    assert "not measured control-plane-certificates" not in out  # a warning is no unmeasured row
