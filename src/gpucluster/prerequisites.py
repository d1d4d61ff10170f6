"""What a cluster must already serve before the stacks touch it: kinds whose CRDs no release of ours brings.

The monitoring component renders a ServiceMonitor and a PrometheusRule (``monitoring.coreos.com/v1``).
Their CRDs belong to the Prometheus Operator, which gpucluster does not install. ``up`` checks for them
right after it has looked at the cluster and before either stack runs (:func:`check`, called in the
plan phase of :mod:`gpucluster.flow`), and stops with exit 2, naming the CRDs and the charts that
bring them; nothing is applied. Without the check the stacks applied everything else and then failed.

Why a check, and not a Prometheus Operator stack installed by the spec (a pinned chart row like the
other operators):

- a cluster runs one Prometheus Operator; most that want GPU alerts already run one (typically
  kube-prometheus-stack), and a second would reconcile the same Prometheus objects;
- the CRDs are cluster-wide and shared: a release of ours would own them, and ``down`` would delete
  them, and with them every ServiceMonitor and PrometheusRule in the cluster, ours or not (the
  prometheus-operator-crds chart's README says its uninstall does exactly that);
- what a monitoring stack needs (storage, retention, Alertmanager routes, Grafana) is a site's own
  choice, larger than the few values we could pin for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucluster.errors import InputError


@dataclass(frozen=True)
class Prerequisite:
    """Kinds the stacks may create whose CRDs come from software the cluster must already run."""

    group: str
    #: (apiVersion, kind, CRD name) per kind.
    kinds: tuple[tuple[str, str, str], ...]
    #: What brings the CRDs, and how to install it; the spec key that turns our objects off.
    brings: str
    spec_key: str
    #: How the local world gets them.
    local: str


PROMETHEUS_OPERATOR = Prerequisite(
    group="monitoring.coreos.com",
    kinds=(("monitoring.coreos.com/v1", "ServiceMonitor", "servicemonitors.monitoring.coreos.com"),
           ("monitoring.coreos.com/v1", "PrometheusRule", "prometheusrules.monitoring.coreos.com")),
    # prometheus-community/helm-charts: charts/kube-prometheus-stack (its `crds` subchart) and
    # charts/prometheus-operator-crds.
    brings="the Prometheus Operator, which gpucluster does not install: install the prometheus-community chart "
           "kube-prometheus-stack (the operator, Prometheus and these CRDs; docs/observability.md) or "
           "prometheus-operator-crds (the CRDs alone, for a Prometheus Operator you run otherwise)",
    spec_key="monitoring.enabled: false",
    local="the local world installs them itself once they are built: `gpucluster tools install crds`, then "
          "`gpucluster local up`",
)
PREREQUISITES = (PROMETHEUS_OPERATOR,)


def missing(objects: list[dict[str, Any]], served: frozenset[tuple[str, str]] | None) -> list[tuple[Prerequisite,
                                                                                                  list[str]]]:
    """Per prerequisite the cluster lacks: the objects (``Kind namespace/name``) that need it.

    ``served`` None means unknown (previews without a cluster): nothing is missing then.
    """
    if served is None:
        return []
    found = []
    for pre in PREREQUISITES:
        lacking = {(api, kind) for api, kind, _ in pre.kinds} - served
        needing = [f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}".replace(" /", " ")
                   for o in objects if (o["apiVersion"], o["kind"]) in lacking]
        if needing:
            found.append((pre, needing))
    return found


def check(objects: list[dict[str, Any]], served: frozenset[tuple[str, str]] | None, *, simulated: bool = False,
          source: str = "the spec") -> None:
    """Raise :class:`InputError` (exit 2) naming the CRDs to install when the cluster lacks any prerequisite."""
    found = missing(objects, served)
    if not found:
        return
    parts = []
    for pre, needing in found:
        kinds = [(api, kind, crd) for api, kind, crd in pre.kinds if any(n.startswith(f"{kind} ") for n in needing)]
        crds = ", ".join(crd for _, _, crd in kinds)
        how = pre.local if simulated else f"they come with {pre.brings}"
        parts.append(f"the cluster does not serve {', '.join(f'{api} {kind}' for api, kind, _ in kinds)} (CRDs "
                     f"{crds}), which {source} needs for {', '.join(needing)}: {how}; or set {pre.spec_key} in "
                     f"{source}")
    raise InputError("; ".join(parts) + ". Nothing was applied to the cluster.")
