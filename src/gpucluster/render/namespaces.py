"""Namespaces of the operator releases and of monitoring (tenant namespaces are the tenants' own)."""

from __future__ import annotations

from gpucluster import labels as L
from gpucluster.render import gpu_operator
from gpucluster.render.common import Obj, namespace
from gpucluster.render.releases import releases
from gpucluster.spec.model import ClusterSpec

#: Releases whose pods need no privileges beyond the restricted defaults' exceptions (no node agents).
UNPRIVILEGED_RELEASES = ("volcano",)


def _operator_namespace(name: str) -> Obj:
    # Operator namespaces run privileged node agents (drivers, device plugins, CNI).
    return namespace(name, labels={L.POD_SECURITY_ENFORCE: "privileged"})


def objects(spec: ClusterSpec) -> list[Obj]:
    rels = releases(spec)
    out = []
    for rel in rels:
        if rel.name in UNPRIVILEGED_RELEASES:
            out.append(namespace(rel.namespace))
        else:
            out.append(_operator_namespace(rel.namespace))
    if spec.monitoring.enabled and spec.monitoring.namespace not in {r.namespace for r in rels}:
        out.append(namespace(spec.monitoring.namespace))
    if spec.gpu_operator.enabled is False and gpu_operator.objects(spec):
        out.append(_operator_namespace(spec.gpu_operator.namespace))
    return out
