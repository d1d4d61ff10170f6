"""Check results: one row per (check, subject) with expected, actual and a verdict."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any


class Verdict(str, Enum):
    passed = "pass"
    #: Measured and not failed, but soon will be (a certificate about to expire): shown and counted, never
    #: a failure (exit 0), so a run stays green while the row says what to do before it turns red.
    warned = "warn"
    failed = "fail"
    #: The check could not be measured (its reason says why). Never a pass: ``verify`` and ``up``
    #: fail on it unless its check is allowed to be unmeasured (:mod:`gpucluster.verify.checks`).
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
        if self.verdict in (Verdict.skipped, Verdict.warned) and not self.reason:
            what = "skip" if self.verdict is Verdict.skipped else "warning"
            raise ValueError(f"{what} of {self.check}/{self.subject} without a reason")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Result:
        """The row :meth:`to_dict` gave (extra keys, such as a report's ``allowed``, are ignored)."""
        return cls(str(d["check"]), str(d["subject"]), Verdict(d["verdict"]), str(d.get("expected", "")),
                   str(d.get("actual", "")), str(d.get("reason", "")))


def ok(check: str, subject: str, expected: object = "", actual: object = "") -> Result:
    return Result(check, subject, Verdict.passed, _s(expected), _s(actual))


def fail(check: str, subject: str, expected: object, actual: object, reason: str = "") -> Result:
    return Result(check, subject, Verdict.failed, _s(expected), _s(actual), reason)


def warn(check: str, subject: str, expected: object, actual: object, reason: str) -> Result:
    """A row that passes today but needs action soon; ``reason`` says what and how."""
    return Result(check, subject, Verdict.warned, _s(expected), _s(actual), reason)


def skip(check: str, subject: str, reason: str) -> Result:
    """A row that was not measured, with the reason (shown as "not measured", never as a pass)."""
    return Result(check, subject, Verdict.skipped, reason=reason)


def unallowed(results: Iterable[Result], allowed: Mapping[str, str]) -> list[Result]:
    """The rows that were not measured and whose check is not in ``allowed``."""
    return [r for r in results if r.verdict is Verdict.skipped and r.check not in allowed]


def problems(results: list[Result], allowed: Mapping[str, str]) -> str:
    """Why a run with ``results`` does not pass ("" when it does).

    Failed rows always count; so does every row that was not measured, unless its check is in
    ``allowed`` (check id -> who allowed it: :func:`gpucluster.verify.checks.allowed`). Warnings never do.
    """
    failed = sum(r.verdict is Verdict.failed for r in results)
    parts = [f"{failed} check(s) failed"] if failed else []
    left = unallowed(results, allowed)
    if left:
        ids = ",".join(sorted({r.check for r in left}))
        parts.append(f"{len(left)} row(s) not measured ({ids}; each row says why): `--allow-not-measured {ids}` "
                     "accepts them")
    return "; ".join(parts)


def compare(check: str, subject: str, expected: object, actual: object, reason: str = "") -> Result:
    if expected == actual:
        return ok(check, subject, expected, actual)
    return fail(check, subject, expected, actual, reason)


def differences(want: Any, got: Any, path: str = "") -> list[str]:
    """Where ``got`` differs from ``want``: one ``path: want != got`` line per differing leaf."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        for key in sorted(set(want) | set(got), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in got:
                out.append(f"{where}: missing")
            elif key not in want:
                out.append(f"{where}: unexpected {got[key]!r}")
            else:
                out += differences(want[key], got[key], where)
        return out
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [d for i, (w, g) in enumerate(zip(want, got, strict=True)) for d in differences(w, g, f"{path}[{i}]")]
    return [] if want == got else [f"{path or '(value)'}: {want!r} != {got!r}"]


def _s(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items())) or "(none)"
    if isinstance(value, list | tuple | set):
        return ", ".join(str(v) for v in sorted(value, key=str)) or "(none)"
    return str(value)
