"""``monitoring``: what DCGM monitoring cannot do for the spec at the pinned versions (warnings only)."""

from __future__ import annotations

from gpucluster import semver, versions
from gpucluster.spec.model import ClusterSpec, SharingMode
from gpucluster.spec.validate.common import Collector

MIG_MODES = (SharingMode.mig, SharingMode.dynamic_mig)
#: From this GPU Operator release on, the exporter's DaemonSet does not mount its ServiceAccount token
#: (NVIDIA/gpu-operator v26.3.2 assets/state-dcgm-exporter/0800_daemonset.yaml:27) unless pod labels or UIDs
#: are on (controllers/object_controls.go:1875-1878): KUBERNETES_ENABLE_DRA alone then has no credentials,
#: and the exporter only logs "Failed to get in-cluster config" (dcgm-exporter 4.5.1-4.8.0
#: internal/pkg/transformation/kubernetes.go:107-110).
OPERATOR_WITHOUT_EXPORTER_TOKEN = "26.3.2"


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
    chart = spec.gpu_operator.chart.version
    try:
        tokenless = semver.compare(semver.parse(chart, normalize=True),
                                   semver.parse(OPERATOR_WITHOUT_EXPORTER_TOKEN)) >= 0
    except ValueError:
        tokenless = False  # the chart checks report a version that does not parse
    if tokenless:
        c.warn("gpuOperator.chart.version",
               f"GPU Operator {chart} runs the DCGM exporter without its ServiceAccount token (from "
               f"v{OPERATOR_WITHOUT_EXPORTER_TOKEN} on, unless pod labels or UIDs are on), so the DRA attribution "
               "gpucluster configures gets no credentials and DRA GPUs carry no pod or namespace; gpucluster "
               f"proves the attribution with {versions.CHARTS['gpu-operator'].version}",
               f"keep gpuOperator.chart.version at {versions.CHARTS['gpu-operator'].version}, or set "
               "gpuOperator.dcgmExporter.draAttribution: false and bill DRA GPUs with `gpucluster cost --dra`")
    mig = [(i, p) for i, p in dra if p.sharing.mode in MIG_MODES]
    if mig:
        c.warn(f"nodePools[{mig[0][0]}].sharing.mode",
               f"MIG devices of DRA pools ({', '.join(p.name for _, p in mig)}) carry no pod or namespace in "
               f"DCGM metrics: the DCGM exporter {versions.DCGM_EXPORTER} keys a DRA MIG device by its parent "
               "GPU's UUID but looks MIG series up by GPU and instance id, so they never match; the "
               "recording rules and pod alerts do not count them",
               "bill them with `gpucluster cost --dra` (from the claims), or use the device plugin for MIG "
               "pools whose per-pod activity you alert on (docs/observability.md, \"DRA pools\")")
