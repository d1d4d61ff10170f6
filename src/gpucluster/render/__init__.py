"""The render core: pure functions from a validated spec to Kubernetes objects and Helm values.

One module per component. :func:`render` gathers them into a :class:`Rendered` that the GitOps
bundle writer, the Pulumi components and the tests all consume, so no object is defined twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpucluster import versions
from gpucluster.render import dra, gpu_operator, monitoring, network, nodes, tenants, volcano
from gpucluster.render.common import Obj, namespace
from gpucluster.spec.model import ClusterSpec

PLATFORM_COMPONENTS = ("namespaces", "gpu-operator", "dra", "scheduling", "networking", "monitoring")
TENANT_COMPONENTS = ("tenants",)


@dataclass(frozen=True)
class Release:
    """A pinned Helm release with values from the render core."""

    name: str
    chart: str
    repository: str
    version: str
    namespace: str
    values: dict


@dataclass
class Rendered:
    components: dict[str, list[Obj]] = field(default_factory=dict)
    releases: list[Release] = field(default_factory=list)
    node_config: dict[str, dict] = field(default_factory=dict)

    def objects(self, *names: str) -> list[Obj]:
        wanted = names or tuple(self.components)
        return [o for n in wanted for o in self.components.get(n, [])]


def _operator_namespace(name: str) -> Obj:
    # Operator namespaces run privileged node agents (drivers, device plugins, CNI).
    return namespace(name, labels={"pod-security.kubernetes.io/enforce": "privileged"})


def releases(spec: ClusterSpec) -> list[Release]:
    out = []

    def add(name: str, ns: str, vals: dict, chart_ref) -> None:
        out.append(Release(name, chart_ref.chart, chart_ref.repository, chart_ref.version, ns, vals))

    if spec.gpu_operator.enabled:
        add("gpu-operator", spec.gpu_operator.namespace, gpu_operator.values(spec),
            spec.gpu_operator.chart)
    if dra.enabled(spec):
        add("nvidia-dra-driver-gpu", spec.dra.namespace, dra.values(spec), spec.dra.chart)
    if spec.scheduling.volcano.enabled:
        add("volcano", spec.scheduling.volcano.namespace, volcano.values(spec),
            spec.scheduling.volcano.chart)
    if network.enabled(spec):
        add("network-operator", spec.networking.network_operator.namespace,
            network.values(spec), spec.networking.network_operator.chart)
    return out


def namespaces(spec: ClusterSpec, rels: list[Release]) -> list[Obj]:
    out = []
    for rel in rels:
        if rel.name == "volcano":
            out.append(namespace(rel.namespace))
        else:
            out.append(_operator_namespace(rel.namespace))
    if spec.monitoring.enabled and spec.monitoring.namespace not in {r.namespace for r in rels}:
        out.append(namespace(spec.monitoring.namespace))
    if spec.gpu_operator.enabled is False and gpu_operator.objects(spec):
        out.append(_operator_namespace(spec.gpu_operator.namespace))
    return out


def render(spec: ClusterSpec) -> Rendered:
    rels = releases(spec)
    comps = {
        "namespaces": namespaces(spec, rels),
        "gpu-operator": gpu_operator.objects(spec),
        "dra": dra.objects(spec),
        "scheduling": volcano.objects(spec),
        "networking": network.objects(spec),
        "monitoring": monitoring.objects(spec),
        "tenants": tenants.objects(spec),
    }
    return Rendered(components=comps, releases=rels, node_config=nodes.node_config(spec))


__all__ = ["PLATFORM_COMPONENTS", "TENANT_COMPONENTS", "Release", "Rendered", "render", "versions"]
