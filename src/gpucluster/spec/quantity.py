"""Spec quantities and durations, checked with hints for the usual unit mistakes.

Quantities are parsed by the code base's one parser, :func:`gpucluster.quantity.parse_quantity`
(Kubernetes' ``resource.ParseQuantity`` semantics: signs, exponents, ``8e10``, ``1.5Ti``). Patterns
spell digits ``[0-9]`` (``\\d`` also matches other scripts' digits, which Python's ``int`` accepts and
Kubernetes does not) and checks match the whole string: no surrounding whitespace or trailing newline
reaches a rendered object.
"""

from __future__ import annotations

import re

from gpucluster.quantity import QuantityError, parse_quantity

__all__ = ["check_cpu", "check_duration", "check_memory", "duration_ms", "parse_quantity"]

# Units people write that Kubernetes does not accept, and what they meant.
_WRONG_UNITS = {"KB": "Ki", "MB": "Mi", "GB": "Gi", "TB": "Ti", "KiB": "Ki", "MiB": "Mi", "GiB": "Gi",
                "TiB": "Ti", "kb": "Ki", "mb": "Mi", "gb": "Gi", "tb": "Ti", "g": "Gi", "gi": "Gi", "mi": "Mi"}
_DURATION = re.compile(r"([0-9]+(ms|s|m|h|d|w|y))+")


def check_memory(value: str) -> str:
    value = str(value)
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)", value.strip())
    if m and m.group(2) in _WRONG_UNITS:
        raise ValueError(
            f"{value!r} uses the unit {m.group(2)!r}, which Kubernetes does not accept for memory; "
            f"hint: {m.group(1)}{_WRONG_UNITS[m.group(2)]}"
        )
    try:
        amount = parse_quantity(value)
    except QuantityError:
        raise ValueError(f"{value!r} is not a memory quantity; hint: write it like 256Gi or 512Mi") from None
    if amount < 0:
        raise ValueError(f"{value!r} is negative; hint: a quota is at least 0, e.g. 256Gi")
    if value.endswith("m"):
        raise ValueError(f"{value!r} means milli-bytes; hint: did you mean {value[:-1]}Mi?")
    return value


_CPU_HINT = "write cores like 64 or millicores like 500m"


def check_cpu(value: str) -> str:
    value = str(value)
    try:
        amount = parse_quantity(value)
    except QuantityError:
        raise ValueError(f"{value!r} is not a CPU quantity; hint: {_CPU_HINT}") from None
    if amount < 0:
        raise ValueError(f"{value!r} is negative; hint: {_CPU_HINT}")
    return value


_DURATION_PART = re.compile(r"([0-9]+)(ms|s|m|h|d|w|y)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000,
            "y": 31_536_000_000}


def duration_ms(value: str) -> int:
    """Milliseconds of a Prometheus-style duration (``15s``, ``1h30m``); ValueError when malformed."""
    check_duration(value)
    return sum(int(n) * _UNIT_MS[unit] for n, unit in _DURATION_PART.findall(value))


def check_duration(value: str) -> str:
    if not _DURATION.fullmatch(str(value)):
        raise ValueError(f"{value!r} is not a duration; hint: write it like 30m, 1h or 15s")
    return str(value)
