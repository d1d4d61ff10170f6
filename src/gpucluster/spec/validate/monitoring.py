"""``monitoring``: what DCGM monitoring cannot do for the spec at the pinned versions (warnings only)."""

from __future__ import annotations

from gpucluster import versions
from gpucluster.spec.model import ClusterSpec
from gpucluster.spec.validate.common import Collector


def check(spec: ClusterSpec, c: Collector) -> None:
    """What DCGM monitoring cannot do for this spec at the pinned versions (warnings only)."""
    exporter = spec.gpu_operator.dcgm_exporter
    if not (spec.monitoring.enabled and spec.gpu_operator.enabled and exporter.enabled and spec.dra.enabled):
        return
    dra = [(i, p.name) for i, p in enumerate(spec.node_pools) if p.uses_dra]
    if dra:
        c.warn(f"nodePools[{dra[0][0]}].dra",
               f"DCGM metrics of DRA pools ({', '.join(name for _, name in dra)}) carry no pod or namespace: "
               f"the DCGM exporter {versions.DCGM_EXPORTER} attributes ResourceClaim devices only with "
               f"KUBERNETES_ENABLE_DRA, by watching {versions.DCGM_EXPORTER_DRA_API} ResourceSlices, which "
               f"Kubernetes {versions.KUBERNETES} does not serve by default; gpucluster enables neither, so "
               "per-namespace cost and the low-utilization alerts do not count these GPUs",
               "use the device plugin (dra: false) for pools whose GPU time you bill "
               "(docs/observability.md, \"DRA pools\")")
