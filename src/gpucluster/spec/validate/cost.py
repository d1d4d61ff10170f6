"""``cost``: the rate of each GPU model."""

from __future__ import annotations

from gpucluster import catalog
from gpucluster.spec.model import ClusterSpec
from gpucluster.spec.validate.common import Collector, model_hint


def check(spec: ClusterSpec, c: Collector) -> None:
    cat = catalog.catalog()
    for model, rate in spec.cost.rates.items():
        if model not in cat:
            c.error(f"cost.rates.{model}", f"unknown GPU model {model!r}", model_hint(model, cat))
        if rate < 0:
            c.error(f"cost.rates.{model}", "rate must not be negative")
