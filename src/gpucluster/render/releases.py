"""The pinned Helm releases a spec installs: one per registry row with a chart whose module says so."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from gpucluster import components
from gpucluster.spec.model import ClusterSpec


@dataclass(frozen=True)
class Release:
    """A pinned Helm release with values from the render core (named after its component)."""

    name: str
    chart: str
    repository: str
    version: str
    namespace: str
    values: dict


def module(component: components.Component) -> ModuleType:
    """The render module of a registry row (``gpucluster.render.<module>``)."""
    return importlib.import_module(f"gpucluster.render.{component.module}")


def releases(spec: ClusterSpec) -> list[Release]:
    """Every release ``spec`` installs, in registry order."""
    out = []
    for comp in components.with_charts():
        mod = module(comp)
        if not mod.enabled(spec):
            continue
        ref = mod.chart(spec)
        out.append(Release(comp.name, ref.chart, ref.repository, ref.version, mod.namespace(spec), mod.values(spec)))
    return out
