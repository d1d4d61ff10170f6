"""Prometheus text exposition: parse it and scrape an endpoint.

Parsing is ``prometheus_client``'s (:func:`prometheus_client.parser.text_string_to_metric_families`, the
maintained parser of the Prometheus Python client), so label values are unescaped as the format defines
(``\\\\``, ``\\"``, ``\\n``, in one pass) and malformed input is refused. This module keeps the small shape
callers use: a flat list of :class:`Sample`, each named as the target exposed it.

Used by verification's DCGM health checks (a real exporter, a federate endpoint or the simulated
exporter) and by the tests.
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Sample:
    """One scraped sample: series name, labels, value."""

    name: str
    labels: dict[str, str]
    value: float


def parse(text: str) -> list[Sample]:
    """Parse Prometheus text exposition into samples, in order; ValueError for malformed input."""
    # The parser turns families into OpenMetrics' shape, renaming the samples of a counter whose name lacks
    # ``_total`` (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL becomes ..._TOTAL_total); Prometheus stores a text scrape's
    # series as exposed, so the TYPE lines (the only input to that renaming) are left out. Every sample
    # line still goes through the parser.
    kept = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("# TYPE"))
    try:
        return [Sample(s.name, dict(s.labels), float(s.value))
                for family in text_string_to_metric_families(kept) for s in family.samples]
    except Exception as err:  # ValueError mostly; IndexError/KeyError on some truncated lines
        raise ValueError(f"not Prometheus text exposition: {err}") from err


def scrape(url: str, timeout: float = 10.0) -> list[Sample]:
    """GET ``url`` and parse it (one request, bounded by ``timeout``)."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return parse(resp.read().decode())
