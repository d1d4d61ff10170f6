"""Prometheus text exposition: parse it and scrape an endpoint (no client library needed).

Used by verification's DCGM health checks (a real exporter, a federate endpoint or the simulated
exporter) and by the tests.
"""

from __future__ import annotations

import re
import urllib.request
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    """One scraped sample: series name, labels, value."""

    name: str
    labels: dict[str, str]
    value: float


_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*')


def parse(text: str) -> list[Sample]:
    """Parse Prometheus text exposition into samples (comments skipped)."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = _LINE.match(line.strip())
        if not m:
            raise ValueError(f"not a Prometheus sample line: {line!r}")
        labels = {k: v.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
                  for k, v in _LABEL.findall(m[2] or "")}
        out.append(Sample(m[1], labels, float(m[3])))
    return out


def scrape(url: str, timeout: float = 10.0) -> list[Sample]:
    """GET ``url`` and parse it (one request, bounded by ``timeout``)."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return parse(resp.read().decode())
