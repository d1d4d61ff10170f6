"""Evaluate DeviceClass CEL selectors against published devices, for the subset gpucluster renders.

Verification must know whether a *deployed* DeviceClass matches any device, so it reads the
expression from the cluster rather than trusting the spec. A full CEL engine with the Kubernetes
extensions (quantity, semver) is not available in Python; this evaluates the conjunction of terms
that :mod:`gpucluster.render.dra` emits and reports any other term as unsupported (the check is then
skipped with that reason, never passed).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from gpucluster.spec.quantity import parse_quantity

_S = r"'((?:[^'\\]|\\.)*)'"
_ATTR = rf"device\.attributes\[{_S}\]\.(\w+)"
_CAP = rf"device\.capacity\[{_S}\]\.(\w+)"
TERMS = [
    ("driver", re.compile(rf"^device\.driver == {_S}$")),
    ("attr_eq", re.compile(rf"^{_ATTR} == {_S}$")),
    ("attr_contains", re.compile(rf"^{_ATTR}\.lowerAscii\(\)\.contains\({_S}\)$")),
    ("cap_ge", re.compile(rf"^{_CAP}\.compareTo\(quantity\({_S}\)\) >= 0$")),
    ("semver_ge", re.compile(rf"^{_ATTR}\.compareTo\(semver\({_S}\)\) >= 0$")),
]


class Unsupported(ValueError):
    """The expression uses CEL outside the subset gpucluster renders."""


def _split(expr: str) -> list[str]:
    terms = []
    for raw in expr.split(" && "):
        t = raw.strip()
        while t.startswith("(") and t.endswith(")"):
            t = t[1:-1].strip()
        terms.append(t)
    return terms


def compile_expr(expr: str) -> list[tuple[str, tuple[str, ...]]]:
    out = []
    for term in _split(expr):
        for kind, rx in TERMS:
            m = rx.match(term)
            if m:
                out.append((kind, m.groups()))
                break
        else:
            raise Unsupported(f"cannot evaluate CEL term {term!r}")
    return out


def _attr(device: dict, domain: str, name: str) -> Any:
    attrs = device.get("attributes", {})
    value = attrs.get(f"{domain}/{name}") or attrs.get(name)
    if not value:
        return None
    return next(iter(value.values()))


def _semver(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def matches(program: list[tuple[str, tuple[str, ...]]], driver: str, device: dict) -> bool:
    """True when every term holds for ``device`` (a ResourceSlice device entry) of ``driver``."""
    for kind, g in program:
        if kind == "driver":
            ok = driver == g[0]
        elif kind == "attr_eq":
            ok = _attr(device, g[0], g[1]) == g[2]
        elif kind == "attr_contains":
            v = _attr(device, g[0], g[1])
            ok = isinstance(v, str) and g[2] in v.lower()
        elif kind == "cap_ge":
            cap = device.get("capacity", {}).get(f"{g[0]}/{g[1]}") or device.get("capacity", {}).get(g[1])
            ok = cap is not None and parse_quantity(str(cap["value"])) >= Decimal(parse_quantity(g[2]))
        elif kind == "semver_ge":
            v = _attr(device, g[0], g[1])
            ok = isinstance(v, str) and _semver(v) >= _semver(g[2])
        else:  # pragma: no cover - compile_expr only yields the kinds above
            ok = False
        if not ok:
            return False
    return True
