"""DeviceClass CEL: writing literals, and evaluating the subset gpucluster renders against devices.

Two readers need to know which devices a selector matches without a scheduler: spec validation (the
devices the spec's pools will publish, :mod:`gpucluster.spec.dra_fit`) and verification (the devices
published now, read from the cluster together with the *deployed* expression). A full CEL engine with
the Kubernetes extensions (quantity, semver) is not available in Python; this evaluates the conjunction
of terms that :mod:`gpucluster.spec.selectors` emits and reports any other term as :class:`Unsupported`
(the caller then says it could not check, never that the check passed).

A device is a ResourceSlice device entry (``{"name", "attributes": {k: {"string"|"version"|...: v}},
"capacity": {k: {"value": q}}}``); attributes may be qualified (``gpu.nvidia.com/type``) or not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity


def cel_string(value: str) -> str:
    """``value`` as a CEL string literal (single quotes, backslash and quote escaped)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def cel_list(values: list[str]) -> str:
    """A CEL list literal of strings, in the given order."""
    return "[" + ", ".join(cel_string(v) for v in values) + "]"


_S = r"'((?:[^'\\]|\\.)*)'"
_ATTR = rf"device\.attributes\[{_S}\]\.(\w+)"
_CAP = rf"device\.capacity\[{_S}\]\.(\w+)"
TERMS = [
    ("false", re.compile(r"^false$")),
    ("driver", re.compile(rf"^device\.driver == {_S}$")),
    ("attr_eq", re.compile(rf"^{_ATTR} == {_S}$")),
    ("attr_in", re.compile(rf"^{_ATTR} in \[((?:{_S}(?:, )?)*)\]$")),
    ("attr_contains", re.compile(rf"^{_ATTR}\.lowerAscii\(\)\.contains\({_S}\)$")),
    ("cap_ge", re.compile(rf"^{_CAP}\.compareTo\(quantity\({_S}\)\) >= 0$")),
    ("semver_ge", re.compile(rf"^{_ATTR}\.compareTo\(semver\({_S}\)\) >= 0$")),
]


class Unsupported(ValueError):
    """The expression uses CEL outside the subset gpucluster renders."""


@dataclass(frozen=True)
class Term:
    """One ANDed term: its kind, the captured groups and the source text (for messages)."""

    kind: str
    args: tuple[str, ...]
    text: str


def _split(expr: str) -> list[str]:
    terms = []
    for raw in expr.split(" && "):
        t = raw.strip()
        while t.startswith("(") and t.endswith(")"):
            t = t[1:-1].strip()
        terms.append(t)
    return terms


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def compile_expr(expr: str) -> list[Term]:
    """The terms of a conjunction; :class:`Unsupported` for anything outside the subset."""
    out = []
    for term in _split(expr):
        for kind, rx in TERMS:
            m = rx.match(term)
            if m:
                args = m.groups()
                if kind == "attr_in":
                    args = (args[0], args[1], *(_unquote(v) for v in re.findall(_S, args[2])))
                out.append(Term(kind, tuple(_unquote(a) if isinstance(a, str) else a for a in args), term))
                break
        else:
            raise Unsupported(f"cannot evaluate CEL term {term!r}")
    return out


def attribute(device: dict, domain: str, name: str) -> Any:
    """An attribute's value (qualified or bare name), or None."""
    attrs = device.get("attributes") or {}
    value = attrs.get(f"{domain}/{name}") or attrs.get(name)
    if not value:
        return None
    return next(iter(value.values()))


def capacity(device: dict, domain: str, name: str) -> Decimal | None:
    """A capacity's value as a number, or None."""
    caps = device.get("capacity") or {}
    cap = caps.get(f"{domain}/{name}") or caps.get(name)
    return None if cap is None else Decimal(parse_quantity(str(cap["value"])))


def _semver(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def holds(term: Term, driver: str, device: dict) -> bool:
    """Whether one term holds for ``device`` of ``driver``."""
    g = term.args
    if term.kind == "false":
        return False
    if term.kind == "driver":
        return driver == g[0]
    if term.kind == "attr_eq":
        return bool(attribute(device, g[0], g[1]) == g[2])
    if term.kind == "attr_in":
        return attribute(device, g[0], g[1]) in g[2:]
    if term.kind == "attr_contains":
        v = attribute(device, g[0], g[1])
        return isinstance(v, str) and g[2] in v.lower()
    if term.kind == "cap_ge":
        cap = capacity(device, g[0], g[1])
        return cap is not None and cap >= Decimal(parse_quantity(g[2]))
    if term.kind == "semver_ge":
        v = attribute(device, g[0], g[1])
        return isinstance(v, str) and _semver(v) >= _semver(g[2])
    raise AssertionError(term.kind)  # pragma: no cover - compile_expr only yields the kinds above


def matches(program: list[Term], driver: str, device: dict) -> bool:
    """True when every term holds for ``device`` (a ResourceSlice device entry) of ``driver``."""
    return all(holds(t, driver, device) for t in program)


def failed_terms(program: list[Term], driver: str, device: dict) -> list[Term]:
    """The terms that do not hold for ``device`` (empty: it matches)."""
    return [t for t in program if not holds(t, driver, device)]
