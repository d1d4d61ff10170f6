"""The render core: pure functions from a validated spec to Kubernetes objects and Helm values.

One module per component of the registry (:mod:`gpucluster.components`), listed in :data:`MODULES`.
:func:`render` gathers them into a :class:`Rendered` that the GitOps bundle writer, the Pulumi
components and the tests all consume, so no object is defined twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpucluster import components
from gpucluster.render import monitoring, namespaces, nodes, tenants
from gpucluster.render.common import Obj
from gpucluster.render.contract import ComponentModule
from gpucluster.render.releases import CHART_MODULES, Release, releases
from gpucluster.spec.model import ClusterSpec

#: The render module of every registry row, by component name: the rows with a chart
#: (:data:`~gpucluster.render.releases.CHART_MODULES`) and those without.
MODULES: Mapping[str, ComponentModule] = {
    **CHART_MODULES,
    "namespaces": namespaces,
    "monitoring": monitoring,
    "tenants": tenants,
}


def module(component: str) -> ComponentModule:
    """The render module of the registry row ``component``."""
    try:
        return MODULES[component]
    except KeyError:
        raise KeyError(f"no render module for component {component!r}; known: {', '.join(MODULES)}") from None


@dataclass
class Rendered:
    components: dict[str, list[Obj]] = field(default_factory=dict)
    releases: list[Release] = field(default_factory=list)
    node_config: dict[str, dict] = field(default_factory=dict)

    def objects(self, *names: str) -> list[Obj]:
        wanted = names or tuple(self.components)
        return [o for n in wanted for o in self.components.get(n, [])]


def render(spec: ClusterSpec) -> Rendered:
    """Every component's objects (registry order), the pinned releases and the node configuration."""
    comps = {c.name: module(c.name).objects(spec) for c in components.COMPONENTS}
    return Rendered(components=comps, releases=releases(spec), node_config=nodes.node_config(spec))


__all__ = ["MODULES", "Release", "Rendered", "module", "releases", "render"]
