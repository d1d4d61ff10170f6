"""Monitoring: the DCGM exporter's metrics CSV, a ServiceMonitor that names the node, GPU alerts,
recording rules for GPU-hours, and the Grafana dashboard (see :mod:`gpucluster.render.dashboard`).

Thresholds come from ``spec.monitoring.alerts``. Series names are DCGM exporter field names; the
``node`` label is put on every series by the ServiceMonitor (the exporter's own ``Hostname`` label
often holds its pod name, so it is overwritten with the node name too). Alert runbooks live in
``docs/runbooks.md``; ``tests/promtool`` unit-tests every rule with the real promtool.
"""

from __future__ import annotations

from gpucluster.render import dashboard
from gpucluster.render.common import Obj, config_map, obj
from gpucluster.spec.model import ClusterSpec

DCGM_CONFIGMAP = "gpucluster-dcgm-metrics"
DCGM_CSV_KEY = "dcgm-metrics.csv"
RULE_NAME = "gpucluster-gpu-alerts"
ALERT_GROUP = "gpucluster.gpu.alerts"
RECORDING_GROUP = "gpucluster.gpu.recording"
RUNBOOKS = "docs/runbooks.md"

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

#: kube-state-metrics series the rules and the dashboard read (names as kube-state-metrics
#: documents them; extended resources have their dots and slashes replaced by underscores).
KSM_SERIES: tuple[str, ...] = (
    "kube_pod_container_resource_requests",
    "kube_pod_status_phase",
    "kube_resourcequota",
    "kube_node_info",
)

#: Durations of the rules whose thresholds are not in the spec (the promtool tests pin them too).
FRAMEBUFFER_FOR = "5m"
TEMPERATURE_FOR = "5m"
GPU_COUNT_FOR = "10m"
XID_WINDOW = "5m"
ECC_WINDOW = "5m"
#: Below this utilization (%) an allocated GPU counts as idle for the per-namespace alert.
IDLE_PERCENT = 1

# An allocated GPU is one the exporter attributes to a pod (pod-resources API) *and* whose pod
# kube-state-metrics still shows requesting a GPU: a GPU nobody holds is capacity, not waste.
ALLOCATED = 'DCGM_FI_DEV_GPU_UTIL{namespace!="", pod!=""}'
_GPU_PODS = ('(sum by (namespace, pod) (kube_pod_container_resource_requests{resource="nvidia_com_gpu"})'
             " > 0)")


def dcgm_csv() -> str:
    lines = ["# Format: DCGM field, Prometheus metric type, help message. Written by gpucluster."]
    lines += [f"{name}, {kind}, {help_}" for name, kind, help_ in DCGM_FIELDS]
    return "\n".join(lines) + "\n"


def dcgm_metrics_configmap(namespace: str) -> Obj:
    return config_map(DCGM_CONFIGMAP, namespace, {DCGM_CSV_KEY: dcgm_csv()})


def exporter_metrics() -> list[str]:
    """Series names the exporter serves with our CSV (``label`` fields become labels, not series)."""
    return [name for name, kind, _ in DCGM_FIELDS if kind != "label"]


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
    """One clause per GPU pool: nodes of the pool reporting fewer GPUs than the spec gives them.

    A node Kubernetes knows but whose exporter reports no GPU at all counts as 0 GPUs (``or`` with
    kube-state-metrics' node list), so losing every GPU of a node is caught too.
    """
    clauses = []
    for pool in spec.gpu_pools:
        assert pool.gpu
        nodes = "|".join(sorted(pool.hosts))
        clauses.append(
            f'(count by (node) (count by (node, gpu) (DCGM_FI_DEV_GPU_TEMP{{node=~"{nodes}"}}))\n'
            f'  or on (node) (0 * group by (node) (kube_node_info{{node=~"{nodes}"}}))) < {pool.gpu.count}'
        )
    return "\n  or\n".join(f"({c})" for c in clauses)


def _runbook(anchor: str) -> str:
    return f"{RUNBOOKS}#{anchor}"


def alert_rules(spec: ClusterSpec) -> list[dict]:
    """The GPU alerting rules, thresholds from ``spec.monitoring.alerts``."""
    a = spec.monitoring.alerts
    window = a.low_utilization_for
    on_gpu = "GPU {{ $labels.gpu }} on {{ $labels.node }}"
    rules = [
        {
            "alert": "GPUAllocatedLowUtilization",
            # `for` equal to the window: a model server that just started (and so has a short, low
            # average) must stay low for the whole window before anyone is paged.
            "expr": (f"avg_over_time({ALLOCATED}[{window}]) < {a.low_utilization_percent:g}\n"
                     f"and on (namespace, pod)\n{_GPU_PODS}"),
            "for": window,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"{on_gpu} held by {{{{ $labels.namespace }}}}/{{{{ $labels.pod }}}} "
                           f"averaged below {a.low_utilization_percent:g}% for {window}",
                "runbook_url": _runbook("low-utilization"),
            },
        },
        {
            "alert": "GPUFramebufferHigh",
            # A ratio against threshold/100 rather than 100*ratio: both sides are then correctly
            # rounded divisions, so a value exactly at the threshold does not fire.
            "expr": (f"DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > "
                     f"{a.framebuffer_percent / 100!r}"),
            "for": FRAMEBUFFER_FOR,
            "labels": {"severity": "warning"},
            "annotations": {"summary": f"{on_gpu} framebuffer above {a.framebuffer_percent:g}%",
                            "runbook_url": _runbook("framebuffer")},
        },
        {
            "alert": "GPUXidError",
            # The gauge holds the last XID: a change to a non-zero value is a new error; a series
            # that appears already non-zero (exporter restarted after the error) is one too.
            "expr": (f"(DCGM_FI_DEV_XID_ERRORS != 0 and changes(DCGM_FI_DEV_XID_ERRORS[{XID_WINDOW}]) > 0)\n"
                     f"or (DCGM_FI_DEV_XID_ERRORS != 0 unless DCGM_FI_DEV_XID_ERRORS offset {XID_WINDOW})"),
            "labels": {"severity": "critical"},
            "annotations": {"summary": f"XID {{{{ $value }}}} on {on_gpu}",
                            "runbook_url": _runbook("xid")},
        },
        {
            "alert": "GPUDoubleBitECCError",
            "expr": f"increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[{ECC_WINDOW}]) > 0",
            "labels": {"severity": "critical"},
            "annotations": {"summary": f"Double-bit ECC error on {on_gpu}: drain the node",
                            "runbook_url": _runbook("ecc")},
        },
        {
            "alert": "GPURowRemapFailure",
            "expr": "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0",
            "labels": {"severity": "critical"},
            "annotations": {"summary": f"Row remapping failed on {on_gpu}: the GPU needs replacing",
                            "runbook_url": _runbook("ecc")},
        },
        {
            "alert": "GPUTemperatureHigh",
            "expr": f"DCGM_FI_DEV_GPU_TEMP > {a.temperature_celsius:g}",
            "for": TEMPERATURE_FOR,
            "labels": {"severity": "warning"},
            "annotations": {"summary": f"{on_gpu} above {a.temperature_celsius:g}C",
                            "runbook_url": _runbook("thermal")},
        },
    ]
    if spec.gpu_pools:
        rules.append({
            "alert": "GPUCountBelowSpec",
            "expr": _pool_count_expr(spec),
            "for": GPU_COUNT_FOR,
            "labels": {"severity": "critical"},
            "annotations": {"summary": "{{ $labels.node }} reports {{ $value }} GPUs, fewer than its pool",
                            "runbook_url": _runbook("gpu-count")},
        })
    rules.append({
        "alert": "GPUsAllocatedIdleInNamespace",
        "expr": (f"count by (namespace) (\n  avg_over_time({ALLOCATED}[{window}]) < {IDLE_PERCENT}\n"
                 f"  and on (namespace, pod)\n  {_GPU_PODS}\n) >= {a.idle_namespace_gpus}"),
        "for": window,
        "labels": {"severity": "info"},
        "annotations": {"summary": "{{ $value }} GPUs allocated to {{ $labels.namespace }} are idle",
                        "runbook_url": _runbook("idle-namespace")},
    })
    return rules


def tenant_info_rules(spec: ClusterSpec) -> list[dict]:
    """One constant series per tenant mapping its namespace to the tenant and its Volcano queue."""
    return [{"record": "gpucluster:tenant_info", "expr": "vector(1)",
             "labels": {"namespace": t.ns, "tenant": t.name, "queue": t.name}} for t in spec.tenants]


def recording_rules(spec: ClusterSpec | None = None) -> list[dict]:
    """Allocated / used GPUs per namespace and GPU model, their hourly GPU-hours, pending GPU pods.

    ``used`` is allocated x activity (utilization / 100), so its integral over time is the useful
    GPU-hours ``gpucluster cost`` reports.
    """
    by = "namespace, modelName"
    rules = [
        {"record": "namespace_model:gpucluster_gpus_allocated:count",
         "expr": f"count by ({by}) ({ALLOCATED})"},
        {"record": "namespace_model:gpucluster_gpus_used:sum", "expr": f"sum by ({by}) ({ALLOCATED}) / 100"},
        {"record": "namespace:gpucluster_gpus_allocated:count",
         "expr": "sum by (namespace) (namespace_model:gpucluster_gpus_allocated:count)"},
        {"record": "namespace:gpucluster_gpus_used:sum",
         "expr": "sum by (namespace) (namespace_model:gpucluster_gpus_used:sum)"},
        # Averaging a GPU count over an hour gives the GPU-hours of that hour.
        {"record": "namespace:gpucluster_gpu_hours_allocated:1h",
         "expr": "avg_over_time(namespace:gpucluster_gpus_allocated:count[1h])"},
        {"record": "namespace:gpucluster_gpu_hours_used:1h",
         "expr": "avg_over_time(namespace:gpucluster_gpus_used:sum[1h])"},
        {"record": "namespace:gpucluster_pending_gpu_pods:count",
         "expr": ('count by (namespace) ((kube_pod_status_phase{phase="Pending"} == 1)\n'
                  f"  and on (namespace, pod) {_GPU_PODS})")},
    ]
    return rules + (tenant_info_rules(spec) if spec else [])


def rule_groups(spec: ClusterSpec) -> list[dict]:
    """The rule groups exactly as a Prometheus rule file (``groups:``) holds them."""
    return [
        {"name": ALERT_GROUP, "rules": alert_rules(spec)},
        {"name": RECORDING_GROUP, "interval": "1m", "rules": recording_rules(spec)},
    ]


def recorded_series(spec: ClusterSpec) -> list[str]:
    """Names of the series the recording rules produce (for dashboard and cost checks)."""
    return sorted({r["record"] for r in recording_rules(spec)})


def prometheus_rule(spec: ClusterSpec) -> Obj:
    return obj(
        "monitoring.coreos.com/v1", "PrometheusRule", RULE_NAME, spec.monitoring.namespace,
        labels=spec.monitoring.prometheus_label,
        spec={"groups": rule_groups(spec)},
    )


def objects(spec: ClusterSpec) -> list[Obj]:
    if not spec.monitoring.enabled:
        return []
    out = [prometheus_rule(spec), dashboard.configmap(spec)]
    if spec.gpu_operator.enabled and spec.gpu_operator.dcgm_exporter.enabled \
            and spec.gpu_operator.dcgm_exporter.service_monitor:
        out.append(service_monitor(spec))
    return out
