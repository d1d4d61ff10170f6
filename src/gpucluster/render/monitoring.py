"""Monitoring: the DCGM exporter's metrics CSV, a ServiceMonitor that names the node, and GPU alerts.

Thresholds come from ``spec.monitoring.alerts``. Series names are DCGM exporter field names; the
``node`` label is put on every series by the ServiceMonitor (the exporter's own ``Hostname`` label
often holds its pod name, so it is overwritten with the node name too).
"""

from __future__ import annotations

from gpucluster.render.common import Obj, config_map, obj
from gpucluster.spec.model import ClusterSpec

DCGM_CONFIGMAP = "gpucluster-dcgm-metrics"
DCGM_CSV_KEY = "dcgm-metrics.csv"
RULE_NAME = "gpucluster-gpu-alerts"

# (field, type, help). The exporter's default CSV leaves ECC, retired pages and remap failures
# commented out; a GPU platform needs them.
DCGM_FIELDS: list[tuple[str, str, str]] = [
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_RETIRED_SBE", "counter", "Total number of retired pages due to single-bit errors."),
    ("DCGM_FI_DEV_RETIRED_DBE", "counter", "Total number of retired pages due to double-bit errors."),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver version."),
]


def dcgm_csv() -> str:
    lines = ["# Format: DCGM field, Prometheus metric type, help message. Written by gpucluster."]
    lines += [f"{name}, {kind}, {help_}" for name, kind, help_ in DCGM_FIELDS]
    return "\n".join(lines) + "\n"


def dcgm_metrics_configmap(namespace: str) -> Obj:
    return config_map(DCGM_CONFIGMAP, namespace, {DCGM_CSV_KEY: dcgm_csv()})


def service_monitor(spec: ClusterSpec) -> Obj:
    ns = spec.gpu_operator.namespace
    node = {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"}
    return obj(
        "monitoring.coreos.com/v1", "ServiceMonitor", "nvidia-dcgm-exporter", ns,
        labels=spec.monitoring.prometheus_label,
        spec={
            "selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}},
            "namespaceSelector": {"matchNames": [ns]},
            "endpoints": [{
                "port": "gpu-metrics",
                "interval": spec.gpu_operator.dcgm_exporter.interval,
                "relabelings": [node],
                "metricRelabelings": [
                    {"sourceLabels": ["node"], "targetLabel": "Hostname", "action": "replace"},
                ],
            }],
        },
    )


def _pool_count_expr(spec: ClusterSpec) -> str:
    """One clause per GPU pool: nodes of the pool reporting fewer GPUs than the spec gives them."""
    clauses = []
    for pool in spec.gpu_pools:
        assert pool.gpu
        nodes = "|".join(sorted(pool.hosts))
        clauses.append(
            f'count by (node) (count by (node, gpu) (DCGM_FI_DEV_GPU_TEMP{{node=~"{nodes}"}})) < {pool.gpu.count}'
        )
    return "\n  or\n".join(f"({c})" for c in clauses) or "vector(0) > 1"


def alert_rules(spec: ClusterSpec) -> list[dict]:
    a = spec.monitoring.alerts
    allocated = 'DCGM_FI_DEV_GPU_UTIL{namespace!="", pod!=""}'
    rules = [
        {
            "alert": "GPUAllocatedLowUtilization",
            # Joined with the pod's GPU request from kube-state-metrics, so only GPUs a pod holds
            # count; an idle, unallocated GPU is capacity, not waste.
            "expr": (f"avg_over_time({allocated}[{a.low_utilization_for}]) < {a.low_utilization_percent:g}\n"
                     "and on (namespace, pod)\n"
                     '(sum by (namespace, pod) (kube_pod_container_resource_requests{resource="nvidia_com_gpu"}) > 0)'),
            "for": a.low_utilization_for,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "GPU {{ $labels.gpu }} on {{ $labels.node }} held by {{ $labels.namespace }}/{{ $labels.pod }} "
                           f"averaged below {a.low_utilization_percent:g}% for {a.low_utilization_for}",
            },
        },
        {
            "alert": "GPUFramebufferHigh",
            "expr": (f"100 * DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > "
                     f"{a.framebuffer_percent:g}"),
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {"summary": "GPU {{ $labels.gpu }} on {{ $labels.node }} framebuffer above "
                                       f"{a.framebuffer_percent:g}%"},
        },
        {
            "alert": "GPUXidError",
            "expr": "changes(DCGM_FI_DEV_XID_ERRORS[5m]) > 0 and DCGM_FI_DEV_XID_ERRORS != 0",
            "labels": {"severity": "critical"},
            "annotations": {"summary": "XID {{ $value }} on GPU {{ $labels.gpu }} of {{ $labels.node }}",
                            "runbook": "docs/runbooks.md#xid"},
        },
        {
            "alert": "GPUDoubleBitECCError",
            "expr": "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[5m]) > 0",
            "labels": {"severity": "critical"},
            "annotations": {"summary": "Double-bit ECC error on GPU {{ $labels.gpu }} of {{ $labels.node }}: drain the node",
                            "runbook": "docs/runbooks.md#ecc"},
        },
        {
            "alert": "GPUTemperatureHigh",
            "expr": f"DCGM_FI_DEV_GPU_TEMP > {a.temperature_celsius:g}",
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {"summary": "GPU {{ $labels.gpu }} on {{ $labels.node }} above "
                                       f"{a.temperature_celsius:g}C"},
        },
        {
            "alert": "GPUCountBelowSpec",
            "expr": _pool_count_expr(spec),
            "for": "10m",
            "labels": {"severity": "critical"},
            "annotations": {"summary": "{{ $labels.node }} reports {{ $value }} GPUs, fewer than its pool has"},
        },
        {
            "alert": "GPUsAllocatedIdleInNamespace",
            "expr": (f"count by (namespace) (avg_over_time({allocated}[{a.low_utilization_for}]) < 1) "
                     f">= {a.idle_namespace_gpus}"),
            "for": a.low_utilization_for,
            "labels": {"severity": "info"},
            "annotations": {"summary": "{{ $value }} GPUs allocated to {{ $labels.namespace }} are idle"},
        },
    ]
    return rules


def recording_rules() -> list[dict]:
    allocated = 'DCGM_FI_DEV_GPU_UTIL{namespace!="", pod!=""}'
    return [
        {"record": "namespace:gpucluster_gpus_allocated:count", "expr": f"count by (namespace) ({allocated})"},
        {"record": "namespace:gpucluster_gpus_used:sum", "expr": f"sum by (namespace) ({allocated}) / 100"},
        # Averaging the per-namespace GPU count over an hour gives the GPU-hours of that hour.
        {"record": "namespace:gpucluster_gpu_hours_allocated:1h",
         "expr": "avg_over_time(namespace:gpucluster_gpus_allocated:count[1h])"},
        {"record": "namespace:gpucluster_gpu_hours_used:1h",
         "expr": "avg_over_time(namespace:gpucluster_gpus_used:sum[1h])"},
    ]


def prometheus_rule(spec: ClusterSpec) -> Obj:
    return obj(
        "monitoring.coreos.com/v1", "PrometheusRule", RULE_NAME, spec.monitoring.namespace,
        labels=spec.monitoring.prometheus_label,
        spec={"groups": [
            {"name": "gpucluster.gpu.alerts", "rules": alert_rules(spec)},
            {"name": "gpucluster.gpu.recording", "interval": "1m", "rules": recording_rules()},
        ]},
    )


def objects(spec: ClusterSpec) -> list[Obj]:
    if not spec.monitoring.enabled:
        return []
    out = [prometheus_rule(spec)]
    if spec.gpu_operator.enabled and spec.gpu_operator.dcgm_exporter.enabled \
            and spec.gpu_operator.dcgm_exporter.service_monitor:
        out.append(service_monitor(spec))
    return out
