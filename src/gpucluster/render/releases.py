"""The pinned Helm releases a spec installs: one per registry row with a chart whose module says so."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpucluster import components
from gpucluster.render import dra_driver, gpu_operator, network_operator, pod_network, volcano
from gpucluster.render.contract import ChartModule
from gpucluster.spec.model import ClusterSpec

#: The render module of every registry row with a chart, by component name (checked against the
#: registry by tests/unit/test_components.py; mypy checks each module against :class:`ChartModule`).
CHART_MODULES: Mapping[str, ChartModule] = {
    "pod-network": pod_network,
    "gpu-operator": gpu_operator,
    "dra-driver": dra_driver,
    "volcano": volcano,
    "network-operator": network_operator,
}


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


def chart_module(component: str) -> ChartModule:
    """The render module of the registry row ``component``, which must have a chart."""
    try:
        return CHART_MODULES[component]
    except KeyError:
        raise KeyError(f"component {component!r} installs no chart; those that do: "
                       f"{', '.join(CHART_MODULES)}") from None


def releases(spec: ClusterSpec) -> list[Release]:
    """Every release ``spec`` installs, in registry order, each naming the releases it waits for.

    A release waits for those its render module's ``after(spec)`` names, and for every release whose
    module sets ``BEFORE_OTHER_RELEASES`` (the pod network). Names of releases the spec does not
    install are dropped.
    """
    mods = {c.name: chart_module(c.name) for c in components.with_charts()}
    on = [name for name, mod in mods.items() if mod.enabled(spec)]
    first = [name for name in on if mods[name].BEFORE_OTHER_RELEASES]
    out = []
    for name in on:
        mod = mods[name]
        wanted = ([] if name in first else first) + list(mod.after(spec))
        after = tuple(dict.fromkeys(n for n in wanted if n in on))
        ref = mod.chart(spec)
        out.append(Release(name, ref.chart, ref.repository, ref.version, mod.namespace(spec), mod.values(spec), after))
    return out
