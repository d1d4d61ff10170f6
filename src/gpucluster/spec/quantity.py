"""Kubernetes quantities and durations, checked with hints for the usual unit mistakes.

Patterns spell digits ``[0-9]`` (``\\d`` also matches other scripts' digits, which Python's ``int``
accepts and Kubernetes does not) and checks match the whole string: no surrounding whitespace or
trailing newline reaches a rendered object.
"""

from __future__ import annotations

import re
from decimal import Decimal

_QUANTITY = re.compile(r"(?P<num>[0-9]+(\.[0-9]+)?)(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, Decimal] = {"m": Decimal("0.001"), "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9),
                                 "T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18)}
# Units people write that Kubernetes does not accept, and what they meant.
_WRONG_UNITS = {"KB": "Ki", "MB": "Mi", "GB": "Gi", "TB": "Ti", "KiB": "Ki", "MiB": "Mi", "GiB": "Gi",
                "TiB": "Ti", "kb": "Ki", "mb": "Mi", "gb": "Gi", "tb": "Ti", "g": "Gi", "gi": "Gi", "mi": "Mi"}
_DURATION = re.compile(r"([0-9]+(ms|s|m|h|d|w|y))+")


def parse_quantity(value: str) -> Decimal:
    """The value of a Kubernetes quantity in base units (bytes, cores)."""
    m = _QUANTITY.fullmatch(str(value).strip())
    if not m:
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    num, suffix = Decimal(m["num"]), m["suffix"]
    if suffix in _BINARY:
        return num * _BINARY[suffix]
    if suffix in _DECIMAL:
        return num * _DECIMAL[suffix]
    return num


def check_memory(value: str) -> str:
    value = str(value)
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)", value.strip())
    if m and m.group(2) in _WRONG_UNITS:
        raise ValueError(
            f"{value!r} uses the unit {m.group(2)!r}, which Kubernetes does not accept for memory; "
            f"hint: {m.group(1)}{_WRONG_UNITS[m.group(2)]}"
        )
    if not _QUANTITY.fullmatch(value):  # the whole value: no spaces or newline around it
        raise ValueError(f"{value!r} is not a memory quantity; hint: write it like 256Gi or 512Mi")
    if value.endswith("m"):
        raise ValueError(f"{value!r} means milli-bytes; hint: did you mean {value[:-1]}Mi?")
    return value


def check_cpu(value: str) -> str:
    value = str(value)
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?m?", value):
        raise ValueError(f"{value!r} is not a CPU quantity; hint: write cores like 64 or millicores like 500m")
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
