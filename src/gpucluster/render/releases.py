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
    #: Releases (by name) that must be installed before this one (see :func:`releases`).
    after: tuple[str, ...] = ()


def module(component: components.Component) -> ModuleType:
    """The render module of a registry row (``gpucluster.render.<module>``)."""
    return importlib.import_module(f"gpucluster.render.{component.module}")


def releases(spec: ClusterSpec) -> list[Release]:
    """Every release ``spec`` installs, in registry order, each naming the releases it waits for.

    A release waits for those its render module's optional ``after(spec)`` names, and for every
    release whose module sets ``BEFORE_OTHER_RELEASES`` (the pod network). Names of releases the spec
    does not install are dropped.
    """
    mods = {c.name: module(c) for c in components.with_charts()}
    on = [c for c in components.with_charts() if mods[c.name].enabled(spec)]
    names = {c.name for c in on}
    first = [c.name for c in on if getattr(mods[c.name], "BEFORE_OTHER_RELEASES", False)]
    out = []
    for comp in on:
        mod = mods[comp.name]
        wanted = ([] if comp.name in first else first) + list(getattr(mod, "after", lambda s: [])(spec))
        after = tuple(dict.fromkeys(n for n in wanted if n in names))
        ref = mod.chart(spec)
        out.append(Release(comp.name, ref.chart, ref.repository, ref.version, mod.namespace(spec),
                           mod.values(spec), after))
    return out
