"""``scheduling``: priority classes."""

from __future__ import annotations

from collections import Counter

from gpucluster.spec.model import ClusterSpec
from gpucluster.spec.validate.common import Collector


def check(spec: ClusterSpec, c: Collector) -> None:
    c.duplicates("scheduling.priorityClasses", (p.name for p in spec.scheduling.priority_classes))
    values = Counter(p.value for p in spec.scheduling.priority_classes)
    for i, p in enumerate(spec.scheduling.priority_classes):
        if values[p.value] > 1:
            c.warn(f"scheduling.priorityClasses[{i}].value", f"value {p.value} is shared with another class",
                   "classes with equal values do not order against each other")
