"""The DRA driver chart's release: whether it is installed, where, and its Helm values.

Apart from :mod:`gpucluster.render.dra_driver` (which re-exports these for the component registry) so
that the GPU simulator can read the values, as the kubelet plugins read their FEATURE_GATES, without
reaching the expectation side's device arithmetic.
"""

from __future__ import annotations

from gpucluster import labels as L
from gpucluster.spec.model import ChartRef, ClusterSpec, SharingMode

#: The DRA driver's feature gate for partitionable MIG (fact driver-feature-gates: alpha, default off).
DYNAMIC_MIG_GATE = "DynamicMIG"


def dynamic_mig(spec: ClusterSpec) -> bool:
    """Whether the driver runs with DynamicMIG (some DRA pool asks for ``sharing.mode: dynamic-mig``)."""
    return any(p.uses_dra and p.sharing.mode is SharingMode.dynamic_mig for p in spec.gpu_pools)


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
        # One gate for every kubelet plugin of the release (FEATURE_GATES env, fact values-featureGates):
        # validation makes every MIG-capable DRA pool ask for dynamic-mig when one does.
        **({"featureGates": {DYNAMIC_MIG_GATE: True}} if dynamic_mig(spec) else {}),
    }


def enabled(spec: ClusterSpec) -> bool:
    return spec.dra.enabled and any(p.uses_dra for p in spec.node_pools)


def namespace(spec: ClusterSpec) -> str:
    return spec.dra.namespace


def chart(spec: ClusterSpec) -> ChartRef:
    return spec.dra.chart
