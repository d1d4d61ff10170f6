"""Check results: one row per (check, subject) with expected, actual and a verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum


class Verdict(str, Enum):
    passed = "pass"
    failed = "fail"
    #: The check could not be measured (its reason says why). Never a pass: ``verify`` and ``up``
    #: fail on it unless the run is declared partial.
    skipped = "not-measured"


@dataclass(frozen=True)
class Result:
    check: str  # stable id, e.g. "node-allocatable"
    subject: str  # node or object the row is about, e.g. "l4-1" or "tenants/ml-research"
    verdict: Verdict
    expected: str = ""
    actual: str = ""
    reason: str = ""  # why it failed or was skipped

    def __post_init__(self) -> None:
        if self.verdict is Verdict.skipped and not self.reason:
            raise ValueError(f"skip of {self.check}/{self.subject} without a reason")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        return d


def ok(check: str, subject: str, expected: object = "", actual: object = "") -> Result:
    return Result(check, subject, Verdict.passed, _s(expected), _s(actual))


def fail(check: str, subject: str, expected: object, actual: object, reason: str = "") -> Result:
    return Result(check, subject, Verdict.failed, _s(expected), _s(actual), reason)


def skip(check: str, subject: str, reason: str) -> Result:
    """A row that was not measured, with the reason (shown as "not measured", never as a pass)."""
    return Result(check, subject, Verdict.skipped, reason=reason)


def problems(results: list[Result], *, partial: bool) -> str:
    """Why a run with ``results`` does not pass ("" when it does).

    Failed rows always count; rows that were not measured count unless the run is ``partial`` (a
    run that knows part of the cluster cannot be measured, e.g. the local world without charts).
    """
    failed = sum(r.verdict is Verdict.failed for r in results)
    unmeasured = sum(r.verdict is Verdict.skipped for r in results)
    parts = [f"{failed} check(s) failed"] if failed else []
    if unmeasured and not partial:
        parts.append(f"{unmeasured} check(s) not measured (each row says why; --partial accepts them)")
    return "; ".join(parts)


def compare(check: str, subject: str, expected: object, actual: object, reason: str = "") -> Result:
    if expected == actual:
        return ok(check, subject, expected, actual)
    return fail(check, subject, expected, actual, reason)


def _s(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items())) or "(none)"
    if isinstance(value, list | tuple | set):
        return ", ".join(str(v) for v in sorted(value, key=str)) or "(none)"
    return str(value)
