"""Kubernetes quantities (``80Gi``, ``500m``, ``8e10``, ``-1.5Ti``): the one parser of the code base.

:func:`parse_quantity` gives the exact value ``resource.ParseQuantity`` of k8s.io/apimachinery v0.37.2
(``pkg/api/resource/quantity.go``, ``suffix.go``) gives, or refuses what it refuses, with its message:

- syntax ``[+-]<digits>[.<digits>]<suffix>``, suffix one of the binary ``Ki Mi Gi Ti Pi Ei``, the decimal
  ``n u m k M G T P E`` (``E`` alone is exa), or a decimal exponent ``e<int>`` / ``E<int>``;
- values finer than 1n round away from zero to 1n; binary-suffixed values are capped at 2^63-1;
- upstream's corners are kept: a bare sign or suffix (``-``, ``k``) is 0, ``Ei`` without digits is refused.

``tests/upstream/test_cel_upstream.py`` compares it with ``ParseQuantity`` itself (the dra-cel tool).
"""

from __future__ import annotations

import re
from decimal import ROUND_UP, Context, Decimal, localcontext

#: Upstream's messages (pkg/api/resource/quantity.go ErrFormatWrong, ErrNumeric, ErrSuffix).
FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
NUMERIC = "unable to parse numeric part of quantity"
SUFFIX = "unable to parse quantity's suffix"

# The scan of parseQuantityString: sign, integer digits, an optional fraction, suffix letters, then an
# optional signed integer (the exponent's digits).
_SCAN = re.compile(r"(?P<sign>[+-]?)(?P<num>[0-9]*)(?:\.(?P<denom>[0-9]*))?(?P<suffix>[eEinumkKMGTP]*[+-]?[0-9]*)")
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_MAX_INT64 = 2**63 - 1
_NANO = Decimal("1e-9")
# Exact arithmetic: enough digits for any value a quantity string can write.
_EXACT = Context(prec=100_000, Emax=10**15, Emin=-(10**15))


class QuantityError(ValueError):
    """Not a Kubernetes quantity; the message is upstream's reason, after the value."""


def _exponent(suffix: str) -> tuple[int, int, bool]:
    """(base, exponent, binary) of a suffix, as suffixHandler.interpret reads it."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], False
    if suffix in _BINARY:
        return 2, _BINARY[suffix], True
    if len(suffix) > 1 and suffix[0] in "eE" and re.fullmatch(r"[+-]?[0-9]+", suffix[1:]):
        parsed = int(suffix[1:])
        if -(2**63) <= parsed < 2**63:
            return 10, (parsed + 2**31) % 2**32 - 2**31, False  # upstream keeps it as an int32
    raise ValueError(SUFFIX)


def _fast_path(num: str, denom: str, exponent: int, binary: bool) -> bool:
    """Whether ParseQuantity takes its int64 path (which needs no digits) rather than inf.Dec's."""
    if binary:
        if denom:
            return False
        precision = 15 - len(num) - exponent * 3 // 10 - 1
        scale = 0
        mantissa = 1 << exponent
    else:
        precision = 18 - (len(num) + len(denom))
        scale = exponent - len(denom)
        mantissa = 1
    return precision >= 0 and scale >= -9 and int(num + denom) * mantissa <= _MAX_INT64


def parse_quantity(value: str | int | float) -> Decimal:
    """The exact value of a Kubernetes quantity in base units (bytes, cores); :class:`QuantityError` when
    Kubernetes refuses it."""
    text = str(value)
    try:
        return _parse(text)
    except ValueError as err:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity: {err}") from None


def _parse(text: str) -> Decimal:
    if text == "0":
        return Decimal(0)
    m = _SCAN.fullmatch(text)
    if not text or not m:
        raise ValueError(FORMAT_WRONG)
    num = m["num"].lstrip("0") or "0"
    denom = m["denom"] or ""
    base, exponent, binary = _exponent(m["suffix"])
    written = m["num"] + ("." + denom if m["denom"] is not None else "")
    if not _fast_path(num, denom, exponent, binary) and not re.search("[0-9]", written):
        raise ValueError(NUMERIC)  # inf.Dec's SetString needs a digit
    with localcontext(_EXACT):
        magnitude = Decimal(f"{num}.{denom or '0'}")
        magnitude = magnitude.scaleb(exponent) if base == 10 else magnitude * (2**exponent)
        places = magnitude.as_tuple().exponent
        if isinstance(places, int) and places < -9:
            magnitude = magnitude.quantize(_NANO, rounding=ROUND_UP)
        if binary and magnitude > _MAX_INT64:
            magnitude = Decimal(_MAX_INT64)
        if magnitude.adjusted() < 100 and magnitude == magnitude.to_integral_value():
            magnitude = Decimal(int(magnitude))  # 80Gi reads 85899345920, not 85899345920.0
        return -magnitude if m["sign"] == "-" else magnitude
