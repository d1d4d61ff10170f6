"""``monitoring``: what DCGM monitoring cannot do for the spec at the pinned versions (warnings only)."""

from __future__ import annotations

from gpucluster import versions
from gpucluster.spec.model import ClusterSpec, SharingMode
from gpucluster.spec.validate.common import Collector

MIG_MODES = (SharingMode.mig, SharingMode.dynamic_mig)


def check(spec: ClusterSpec, c: Collector) -> None:
    """What DCGM monitoring cannot do for this spec at the pinned versions (warnings only)."""
    exporter = spec.gpu_operator.dcgm_exporter
    if not (spec.monitoring.enabled and spec.gpu_operator.enabled and exporter.enabled and spec.dra.enabled):
        return
    dra = [(i, p) for i, p in enumerate(spec.node_pools) if p.uses_dra]
    if not dra:
        return
    if not spec.dcgm_dra_attribution:
        c.warn("gpuOperator.dcgmExporter.draAttribution",
               f"DCGM metrics of DRA pools ({', '.join(p.name for _, p in dra)}) carry no pod or namespace: "
               f"the DCGM exporter {versions.DCGM_EXPORTER} names the pod of a ResourceClaim's GPU only with "
               "KUBERNETES_ENABLE_DRA, which draAttribution: false leaves off, so per-namespace cost and the "
               "low-utilization alerts do not count these GPUs",
               "set gpuOperator.dcgmExporter.draAttribution: true (the default), or bill DRA GPUs with "
               "`gpucluster cost --dra` (docs/observability.md, \"DRA pools\")")
        return
    mig = [(i, p) for i, p in dra if p.sharing.mode in MIG_MODES]
    if mig:
        c.warn(f"nodePools[{mig[0][0]}].sharing.mode",
               f"MIG devices of DRA pools ({', '.join(p.name for _, p in mig)}) carry no pod or namespace in "
               f"DCGM metrics: the DCGM exporter {versions.DCGM_EXPORTER} keys a DRA MIG device by its parent "
               "GPU's UUID but looks MIG series up by GPU and instance id, so they never match; the "
               "recording rules and pod alerts do not count them",
               "bill them with `gpucluster cost --dra` (from the claims), or use the device plugin for MIG "
               "pools whose per-pod activity you alert on (docs/observability.md, \"DRA pools\")")
