"""The one quantity parser (gpucluster.quantity) with Kubernetes' resource.ParseQuantity semantics, and the
spec's memory and CPU checks built on it. The upstream tier compares every case here with ParseQuantity
itself (tests/upstream/test_cel_upstream.py::test_quantities_parse_as_kubernetes_parses_them)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpucluster.errors import SpecError
from gpucluster.quantity import FORMAT_WRONG, NUMERIC, SUFFIX, QuantityError, parse_quantity
from gpucluster.spec import load_spec

#: (written, exact value) — each checked against k8s.io/apimachinery v0.37.2 ParseQuantity.
VALUES = [
    ("80Gi", Decimal(80 * 2**30)),
    ("8e10", Decimal(80_000_000_000)),          # a decimal exponent
    ("8E10", Decimal(80_000_000_000)),
    ("1.5Ti", Decimal(1.5 * 2**40)),
    ("1e+3", Decimal(1000)),
    ("1e-3", Decimal("0.001")),
    ("500m", Decimal("0.5")),
    ("1E", Decimal(10**18)),                     # E alone is exa, not an exponent
    ("-1.5Gi", Decimal(-1.5 * 2**30)),
    ("+2", Decimal(2)),
    (".5Gi", Decimal(2**29)),
    ("5.Gi", Decimal(5 * 2**30)),
    ("00012", Decimal(12)),
    ("0.1n", Decimal("1e-9")),                   # finer than 1n rounds away from zero to 1n
    ("-0.1n", Decimal("-1e-9")),
    ("1.0000000001", Decimal("1.000000001")),
    ("100000000000000000000Ei", Decimal(2**63 - 1)),   # binary suffixes cap at 2^63-1
    ("12345678901234567890123", Decimal("12345678901234567890123")),  # decimal ones do not
    ("1e4294967296", Decimal(1)),                # upstream keeps the exponent as an int32
    ("-", Decimal(0)),                           # upstream's corners: a bare sign or suffix is 0
    ("k", Decimal(0)),
    ("0", Decimal(0)),
    (85899345920, Decimal(80 * 2**30)),          # an int from YAML
]

REFUSED = [
    ("", FORMAT_WRONG), (" 1", FORMAT_WRONG), ("1.5.5", FORMAT_WRONG), ("1 Gi", FORMAT_WRONG),
    ("1GB", FORMAT_WRONG), ("1K", SUFFIX), ("1ki", SUFFIX), ("1e", SUFFIX), ("1Ki5", SUFFIX),
    ("Ei", NUMERIC), ("e-10", NUMERIC),        # no digit where upstream needs one
]


@pytest.mark.parametrize(("text", "value"), VALUES)
def test_values(text, value):
    assert parse_quantity(text) == value


def test_integral_values_read_as_integers():
    assert str(parse_quantity("80Gi")) == "85899345920" and str(parse_quantity("1.5")) == "1.5"


@pytest.mark.parametrize(("text", "reason"), REFUSED)
def test_refused_with_upstreams_reason(text, reason):
    with pytest.raises(QuantityError) as err:
        parse_quantity(text)
    assert str(err.value) == f"{text!r} is not a Kubernetes quantity: {reason}"


def _problem(write_spec, spec: dict, path: str):
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(spec))
    hits = [p for p in info.value.problems if p.path == path]
    assert hits, [str(p) for p in info.value.problems]
    return hits[0]


@pytest.mark.parametrize(("field", "value"), [("memory", "1e12"), ("memory", "1.5Ti"), ("cpu", "2e3"),
                                              ("cpu", "+64")])
def test_the_spec_accepts_what_kubernetes_accepts(write_spec, base, field, value):
    base["tenants"][0]["quota"][field] = value
    assert getattr(load_spec(write_spec(base)).tenants[0].quota, field) == value


@pytest.mark.parametrize(("field", "value", "message", "hint"), [
    ("memory", "-1Gi", "'-1Gi' is negative", "a quota is at least 0"),
    ("cpu", "-2", "'-2' is negative", "write cores like 64"),
    ("cpu", "2 cores", "'2 cores' is not a CPU quantity", "millicores like 500m"),
    ("memory", "lots", "'lots' is not a memory quantity", "256Gi or 512Mi"),
])
def test_the_spec_names_path_value_and_hint(write_spec, base, field, value, message, hint):
    base["tenants"][0]["quota"][field] = value
    p = _problem(write_spec, base, f"tenants[0].quota.{field}")
    assert message in p.message and hint in p.hint
