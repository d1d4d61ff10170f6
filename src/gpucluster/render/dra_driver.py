"""DRA: the NVIDIA DRA driver's Helm values, DeviceClasses selected by attributes, claim templates.

Selectors are CEL over what the driver publishes for driver ``gpu.nvidia.com``: string attributes
``type``, ``productName``, ``architecture``, ``profile``; semver ``cudaComputeCapability``; and capacity
``memory`` (bytes). The removed ``index`` attribute is never used.
"""

from __future__ import annotations

from gpucluster import labels as L
from gpucluster.devices import DRA_DRIVER
from gpucluster.render.common import Obj, cel_string, obj
from gpucluster.spec.model import ChartRef, ClusterSpec, DeviceClass, Tenant

API = "resource.k8s.io/v1"


def cel(dc: DeviceClass) -> str:
    """The CEL expression of a DeviceClass: every selector field ANDed."""
    q = cel_string
    attr = f"device.attributes[{q(DRA_DRIVER)}]"
    s = dc.selector
    terms = [f"device.driver == {q(DRA_DRIVER)}", f"{attr}.type == {q(dc.type)}"]
    if s.min_memory:
        terms.append(f"device.capacity[{q(DRA_DRIVER)}].memory.compareTo(quantity({q(s.min_memory)})) >= 0")
    if s.product_name_contains:
        terms.append(f"{attr}.productName.lowerAscii().contains({q(s.product_name_contains.lower())})")
    if s.architecture:
        terms.append(f"{attr}.architecture == {q(s.architecture)}")
    if s.min_compute_capability:
        terms.append(f"{attr}.cudaComputeCapability.compareTo(semver({q(s.min_compute_capability + '.0')})) >= 0")
    if s.mig_profile:
        terms.append(f"{attr}.profile == {q(s.mig_profile)}")
    terms += [f"({extra})" for extra in s.cel]
    return " && ".join(terms)


def device_class(dc: DeviceClass) -> Obj:
    annotations = {L.DESCRIPTION: dc.description} if dc.description else None
    return obj(API, "DeviceClass", dc.name, annotations=annotations,
               spec={"selectors": [{"cel": {"expression": cel(dc)}}]})


def claim_template(name: str, namespace: str, device_class_name: str, count: int) -> Obj:
    return obj(API, "ResourceClaimTemplate", name, namespace, spec={"spec": {"devices": {"requests": [{
        "name": "gpus" if count > 1 else "gpu",
        "exactly": {"deviceClassName": device_class_name, "allocationMode": "ExactCount", "count": count},
    }]}}})


def objects(spec: ClusterSpec) -> list[Obj]:
    if not spec.dra.enabled:
        return []
    return [device_class(dc) for dc in spec.dra.device_classes]


def tenant_claim_templates(spec: ClusterSpec, tenant: Tenant) -> list[Obj]:
    """The claim templates a tenant is offered, created in its namespace (tenants component)."""
    if not spec.dra.enabled:
        return []
    templates = {t.name: t for t in spec.dra.claim_templates}
    return [claim_template(name, tenant.ns, templates[name].device_class, templates[name].count)
            for name in tenant.claim_templates]


def plugin_tolerations(spec: ClusterSpec) -> list[dict]:
    """Tolerations for every taint of every DRA pool: the kubelet plugin must run wherever DRA GPUs are."""
    seen: dict[tuple[str, str, str], dict] = {}
    for pool in spec.node_pools:
        if not pool.uses_dra:
            continue
        for t in pool.effective_taints:
            tol = {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect} if t.value else \
                {"key": t.key, "operator": "Exists", "effect": t.effect}
            seen[(t.key, t.value, t.effect)] = tol
    return [seen[k] for k in sorted(seen)]


def values(spec: ClusterSpec) -> dict:
    """Helm values for the DRA driver chart (installed only when some pool uses DRA)."""
    operator_driver = spec.gpu_operator.enabled and spec.gpu_operator.driver.managed_by == "operator"
    return {
        # The chart refuses to serve GPUs unless this override is set (it wants the operator's
        # device plugin off on those nodes, which our node labels do).
        "gpuResourcesEnabledOverride": True,
        "nvidiaDriverRoot": "/run/nvidia/driver" if operator_driver else "/",
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "kubeletPlugin": {"nodeSelector": {L.DRA: "true"}, "tolerations": plugin_tolerations(spec)},
    }


def enabled(spec: ClusterSpec) -> bool:
    return spec.dra.enabled and any(p.uses_dra for p in spec.node_pools)


def namespace(spec: ClusterSpec) -> str:
    return spec.dra.namespace


def chart(spec: ClusterSpec) -> ChartRef:
    return spec.dra.chart
