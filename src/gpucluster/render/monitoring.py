"""Monitoring: the DCGM exporter's metrics CSV, a ServiceMonitor for the exporter, GPU alerts,
recording rules for GPU-hours, and the Grafana dashboard (see :mod:`gpucluster.render.dashboard`).

Thresholds come from ``spec.monitoring.alerts``. Series names are DCGM exporter field names and
their labels those the exporter writes (facts in ``tests/upstream/facts/dcgm-exporter.yaml``):
``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``, ``GPU_I_PROFILE``/``GPU_I_ID`` on MIG
instances, ``Hostname``, and ``pod``/``namespace``/``container`` of the pod that holds the GPU. Our
ServiceMonitor adds ``node`` and removes the Prometheus Operator's own ``namespace``/``pod``/
``container`` target labels, so that the exporter's attribution reaches the series unrenamed (see
:func:`service_monitor`).

The activity signal everywhere is ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a 0..1 ratio): it is the one
utilization field the exporter reports for whole GPUs *and* per MIG instance (``DCGM_FI_DEV_GPU_UTIL``
is not reported for MIG instances). Alert runbooks live in ``docs/runbooks.md``; ``tests/promtool``
unit-tests every rule with the real promtool.
"""

from __future__ import annotations

from gpucluster import catalog
from gpucluster.render import dashboard
from gpucluster.render.common import Obj, config_map, obj
from gpucluster.spec.model import ClusterSpec, NodePool
from gpucluster.spec.quantity import duration_ms

DCGM_CONFIGMAP = "gpucluster-dcgm-metrics"
DCGM_CSV_KEY = "dcgm-metrics.csv"
#: Not the GPU Operator's name (``nvidia-dcgm-exporter``): with ``dcgmExporter.serviceMonitor.enabled``
#: false the operator deletes a ServiceMonitor of that name in its namespace on every reconcile.
SERVICE_MONITOR = "gpucluster-dcgm-exporter"
#: The Service the GPU Operator creates for the exporter: name, selector label, port name and number.
EXPORTER_SERVICE = "nvidia-dcgm-exporter"
EXPORTER_LABELS = {"app": "nvidia-dcgm-exporter"}
EXPORTER_PORT_NAME = "gpu-metrics"
EXPORTER_PORT = 9400
#: Target labels the Prometheus Operator adds to every ServiceMonitor target that collide with the
#: exporter's pod attribution; dropped after the operator's relabelings (see :func:`service_monitor`).
ATTRIBUTION_LABELS = ("namespace", "pod", "container")
#: The exporter's switch for DRA attribution, and what it labels a DRA-held GPU's series with besides
#: the pod (dcgm-exporter 4.5.1-4.8.0 pkg/cmd/app.go:329-333, internal/pkg/transformation/const.go:32-39).
DRA_ENV = "KUBERNETES_ENABLE_DRA"
DRA_LABELS = ("dra_claim_name", "dra_claim_namespace", "dra_driver_name", "dra_pool_name", "dra_device_name")
DRA_MIG_LABELS = ("dra_mig_profile", "dra_mig_device_uuid")
#: The exporter's ServiceAccount (gpu-operator v26.3.0 assets/state-dcgm-exporter/0100_service_account.yaml)
#: and our ClusterRole that lets it read ResourceSlices.
EXPORTER_ACCOUNT = "nvidia-dcgm-exporter"
EXPORTER_DRA_ROLE = "gpucluster-dcgm-exporter-resourceslices"
RULE_NAME = "gpucluster-gpu-alerts"
ALERT_GROUP = "gpucluster.gpu.alerts"
RECORDING_GROUP = "gpucluster.gpu.recording"
RUNBOOKS = "docs/runbooks.md"
#: The activity of a GPU or MIG instance, 0..1.
ACTIVITY = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"

# (field, type, help). Help texts are the exporter's own (etc/default-counters.csv). The exporter's
# default CSV leaves the volatile ECC counters and retired pages commented out; a GPU platform needs them.
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
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
     "Ratio of cycles the device memory interface is active sending or receiving data."),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
]

#: kube-state-metrics series the rules and the dashboard read (names as kube-state-metrics
#: documents them; extended resources have their dots and slashes replaced by underscores).
KSM_SERIES: tuple[str, ...] = (
    "kube_pod_container_resource_requests",
    "kube_pod_status_phase",
    "kube_resourcequota",
    "kube_node_info",
)
#: kube-state-metrics' ``resource`` values of GPU requests: whole or shared GPUs and MIG instances.
GPU_RESOURCES = "nvidia_com_gpu|nvidia_com_gpu_shared|nvidia_com_mig_.+"

#: Durations of the rules whose thresholds are not in the spec (the promtool tests pin them too).
FRAMEBUFFER_FOR = "5m"
TEMPERATURE_FOR = "5m"
GPU_COUNT_FOR = "10m"
XID_WINDOW = "5m"
ECC_WINDOW = "5m"
#: Below this activity (%) an allocated GPU counts as idle for the per-namespace alert.
IDLE_PERCENT = 1
#: Labels that identify one GPU or MIG instance of a scrape whatever pod holds it.
DEVICE_KEY = "node, gpu, GPU_I_ID"
#: Constant series the recording rules join on: a MIG instance's share of its GPU, a shared
#: (time-sliced / MPS) GPU replica's share of its GPU.
MIG_SHARE = "gpucluster:mig_slice_share"
REPLICA_SHARE = "gpucluster:node_gpu_replica_share"

_GPU_PODS = (f'(sum by (namespace, pod) (kube_pod_container_resource_requests{{resource=~"{GPU_RESOURCES}"}})'
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


def exporter_env(spec: ClusterSpec) -> list[dict[str, str]]:
    """``dcgmExporter.env`` for the GPU Operator chart.

    ``DCGM_EXPORTER_INTERVAL`` (ms) makes the exporter collect as often as the ServiceMonitor
    scrapes it: its default is 30 s, so a 15 s scrape would read every value twice.
    ``KUBERNETES_ENABLE_DRA`` (dcgm-exporter 4.5.1-4.8.0 ``pkg/cmd/app.go:329-333``; the operator at
    v26.3.0 passes ``dcgmExporter.env`` through) names the pod of each DRA-allocated GPU
    (``ClusterSpec.dcgm_dra_attribution``; the RBAC and API version it needs: :func:`exporter_dra_rbac`).
    """
    env = [{"name": "DCGM_EXPORTER_INTERVAL", "value": str(duration_ms(spec.gpu_operator.dcgm_exporter.interval))}]
    if spec.dcgm_dra_attribution:
        env.append({"name": DRA_ENV, "value": "true"})
    return env


def exporter_dra_rbac(spec: ClusterSpec) -> list[Obj]:
    """What the exporter's ResourceSlice informer may read, granted to the operator's exporter account.

    With ``KUBERNETES_ENABLE_DRA`` the exporter lists and watches every ResourceSlice (cluster-scoped) at
    ``resource.k8s.io/v1beta1`` before it serves anything (dcgm-exporter 4.5.1-4.8.0
    ``internal/pkg/transformation/dra.go:36-76``, reached from ``server.go:70`` at start). The operator's
    own Role for it (gpu-operator v26.3.0 ``assets/state-dcgm-exporter/0200_role.yaml``) is namespaced:
    configmaps and pods only. Read-only, ResourceSlices only.
    """
    if not spec.dcgm_dra_attribution:
        return []
    ns = spec.gpu_operator.namespace
    rules = [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["get", "list", "watch"]}]
    return [
        obj("rbac.authorization.k8s.io/v1", "ClusterRole", EXPORTER_DRA_ROLE, rules=rules),
        obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", EXPORTER_DRA_ROLE,
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": EXPORTER_DRA_ROLE},
            subjects=[{"kind": "ServiceAccount", "name": EXPORTER_ACCOUNT, "namespace": ns}]),
    ]


def service_monitor(spec: ClusterSpec) -> Obj:
    """The ServiceMonitor of the GPU Operator's exporter Service.

    ``relabelings`` run after the Prometheus Operator's own, which set the target labels
    ``namespace``/``pod``/``container`` to the *exporter* pod's. With ``honor_labels`` false a scraped
    label that collides with a target label is renamed ``exported_<name>``, so the workload the
    exporter attributes a GPU to would end up in ``exported_pod``. Dropping the three target labels
    leaves the exporter's own. ``honorLabels`` stays false: with true the target labels would still be
    added to GPUs no pod holds, and a Prometheus with ``overrideHonorLabels`` forces false anyway.
    The pod's node becomes ``node`` (the operator adds it only for Node-backed targets).
    """
    ns = spec.gpu_operator.namespace
    node = {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"}
    drop = {"action": "labeldrop", "regex": "|".join(ATTRIBUTION_LABELS)}
    return obj(
        "monitoring.coreos.com/v1", "ServiceMonitor", SERVICE_MONITOR, ns,
        labels=spec.monitoring.prometheus_label,
        spec={
            "selector": {"matchLabels": dict(EXPORTER_LABELS)},
            "namespaceSelector": {"matchNames": [ns]},
            "endpoints": [{
                "port": EXPORTER_PORT_NAME,
                "interval": spec.gpu_operator.dcgm_exporter.interval,
                "honorLabels": False,
                "relabelings": [node, drop],
                # The exporter's Hostname already is the node name (the operator sets NODE_NAME);
                # this keeps it so should an exporter run without NODE_NAME.
                "metricRelabelings": [
                    {"sourceLabels": ["node"], "targetLabel": "Hostname", "action": "replace"},
                ],
            }],
        },
    )


def shared_pools(spec: ClusterSpec) -> list[NodePool]:
    """Device-plugin pools whose GPUs several pods share (time-slicing or MPS with replicas > 1).

    The exporter names one pod per shared GPU (whichever the kubelet lists last), so the rules
    apportion these GPUs by what pods request instead.
    """
    return [p for p in spec.gpu_pools if p.shares_gpus]


def _shared_nodes(spec: ClusterSpec) -> str:
    return "|".join(sorted(h for p in shared_pools(spec) for h in p.hosts))


def held(spec: ClusterSpec, extra: str = "") -> str:
    """GPUs and MIG instances the exporter attributes to a pod, outside shared pools: with DRA attribution
    whole DRA GPUs too (DRA MIG devices never carry a pod: ``NodeExporter.attribute_dra`` in the simulator
    says why; their GPU time comes from the claims, ``gpucluster cost --dra``)."""
    shared = _shared_nodes(spec)
    not_shared = f', node!~"{shared}"' if shared else ""
    return f'{ACTIVITY}{{namespace!="", pod!=""{extra}{not_shared}}}'


def gpu_pods(spec: ClusterSpec) -> str:
    """(namespace, pod) of pods that hold GPUs: those requesting a GPU resource (kube-state-metrics), and with
    DRA attribution those the exporter names through a ResourceClaim: a pod that holds a claim requests no
    ``nvidia.com/gpu``. Their namespace is taken from ``dra_claim_namespace`` (a claim is in its pod's
    namespace), so a series whose ``namespace`` is not the workload's (a scrape that kept the exporter pod's
    target labels) never qualifies itself."""
    if not spec.dcgm_dra_attribution:
        return _GPU_PODS
    claimed = f'label_replace({ACTIVITY}{{dra_claim_name!=""}}, "namespace", "$1", "dra_claim_namespace", "(.+)")'
    return f"({_GPU_PODS}\n  or group by (namespace, pod) ({claimed}))"


def _pool_count_expr(spec: ClusterSpec) -> str:
    """One clause per GPU pool: nodes of the pool reporting fewer GPUs than the spec gives them.

    A GPU counts when it reports its temperature or its activity (MIG instances report the activity
    with the parent's ``gpu`` label). A node Kubernetes knows but whose exporter reports no GPU at
    all counts as 0 GPUs (``or`` with kube-state-metrics' node list), so losing every GPU is caught.
    """
    clauses = []
    for pool in spec.gpu_pools:
        assert pool.gpu
        nodes = "|".join(sorted(pool.hosts))
        sel = f'{{node=~"{nodes}"}}'
        clauses.append(
            f"(count by (node) (count by (node, gpu) (DCGM_FI_DEV_GPU_TEMP{sel} or {ACTIVITY}{sel}))\n"
            f"  or on (node) (0 * group by (node) (kube_node_info{sel}))) < {pool.gpu.count}"
        )
    return "\n  or\n".join(f"({c})" for c in clauses)


def _runbook(anchor: str) -> str:
    return f"{RUNBOOKS}#{anchor}"


def alert_rules(spec: ClusterSpec) -> list[dict]:
    """The GPU alerting rules, thresholds from ``spec.monitoring.alerts``."""
    a = spec.monitoring.alerts
    window = a.low_utilization_for
    on_gpu = "GPU {{ $labels.gpu }} on {{ $labels.node }}"
    held_gpus = held(spec)
    rules = [
        {
            "alert": "GPUAllocatedLowUtilization",
            # `for` equal to the window: a model server that just started (and so has a short, low
            # average) must stay low for the whole window before anyone is paged. The threshold is
            # a percentage, the activity a ratio: compare with threshold/100 (no rounding on our side).
            "expr": (f"avg_over_time({held_gpus}[{window}]) < {a.low_utilization_percent / 100!r}\n"
                     f"and on (namespace, pod)\n{gpu_pods(spec)}"),
            "for": window,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"{on_gpu} held by {{{{ $labels.namespace }}}}/{{{{ $labels.pod }}}} "
                           f"averaged below {a.low_utilization_percent:g}% activity for {window}",
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
            # The gauge holds the last XID, and the exporter puts it in the label err_code too: a
            # new XID is a new series (changes() over one series never sees it). It fires while that
            # XID was not there one window ago on the same GPU, whatever pod holds the GPU now.
            "expr": (f"DCGM_FI_DEV_XID_ERRORS != 0\nunless on ({DEVICE_KEY}, err_code)\n"
                     f"(DCGM_FI_DEV_XID_ERRORS offset {XID_WINDOW})"),
            "labels": {"severity": "critical"},
            "annotations": {"summary": f"XID {{{{ $labels.err_code }}}} ({{{{ $labels.err_msg }}}}) on {on_gpu}",
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
        "expr": (f"count by (namespace) (\n  avg_over_time({held_gpus}[{window}]) < {IDLE_PERCENT / 100!r}\n"
                 f"  and on (namespace, pod)\n  {gpu_pods(spec)}\n) >= {a.idle_namespace_gpus}"),
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


def share_rules(spec: ClusterSpec) -> list[dict]:
    """Constant series: what share of a GPU one MIG instance or one shared-GPU replica is.

    A MIG instance's share is its compute slices over the GPU's (``1g.*`` of a 7-slice H100 is 1/7),
    keyed by the parent's ``modelName`` and the slice count the exporter's ``GPU_I_PROFILE`` starts
    with (only that part: DCGM names the memory part after the instance's actual size, e.g.
    ``7g.79gb``). A shared GPU's replica is 1/replicas of it, keyed by node.
    """
    rules = []
    models = sorted({p.gpu.model for p in spec.gpu_pools if p.gpu and catalog.get(p.gpu.model).mig_capable})
    for key in models:
        model = catalog.get(key)
        assert model.mig
        total = model.mig.compute_slices
        for slices in sorted({prof.compute for prof in model.mig.profiles.values()}):
            rules.append({"record": MIG_SHARE, "expr": f"vector({slices} / {total})",
                          "labels": {"modelName": model.product_name, "mig_compute_slices": str(slices)}})
    for pool in shared_pools(spec):
        assert pool.gpu
        product = catalog.get(pool.gpu.model).product_name
        for host in sorted(pool.hosts):
            rules.append({"record": REPLICA_SHARE, "expr": f"vector(1 / {pool.sharing.replicas})",
                          "labels": {"node": host, "modelName": product}})
    return rules


def _mig_with_slices(selector: str) -> str:
    return f'label_replace({selector}, "mig_compute_slices", "$1", "GPU_I_PROFILE", "([0-9]+)g[.].*")'


def _allocation(spec: ClusterSpec) -> tuple[str, str]:
    """(allocated, used) GPU-equivalents, one element per GPU, MIG instance or shared-GPU pod.

    - a whole GPU the exporter attributes to a pod: 1, busy = its activity;
    - a MIG instance attributed to a pod: its share of the GPU, busy = share x its activity;
    - a pod on a shared pool (time-slicing / MPS), from its kube-state-metrics request while it
      runs: replicas / replicas-per-GPU, busy = that x the average activity of the node's GPUs
      (which replica runs on which GPU is not observable).
    """
    whole = held(spec, ', GPU_I_PROFILE=""')
    mig = _mig_with_slices(f'{ACTIVITY}{{namespace!="", pod!="", GPU_I_PROFILE!=""}}')
    on_share = f"on (modelName, mig_compute_slices) group_left {MIG_SHARE}"
    if spec.dcgm_dra_attribution:
        # A DRA claim several pods share is one series per pod: a GPU counts once per namespace.
        one = "max by (namespace, modelName, node, gpu) "
        allocated = [f"{one}({whole} * 0 + 1)", f"({mig} * 0 + {on_share})"]
        used = [f"{one}({whole})", f"({mig} * {on_share})"]
    else:
        allocated = [f"({whole} * 0 + 1)", f"({mig} * 0 + {on_share})"]
        used = [f"{whole}", f"({mig} * {on_share})"]
    shared = _shared_nodes(spec)
    if shared:
        requests = (f'kube_pod_container_resource_requests{{resource=~"nvidia_com_gpu|nvidia_com_gpu_shared", '
                    f'node=~"{shared}"}}')
        pods = (f"(sum by (namespace, pod, node) ({requests}\n    and on (namespace, pod) "
                f'(kube_pod_status_phase{{phase="Running"}} == 1))\n'
                f"    * on (node) group_left (modelName) {REPLICA_SHARE})")
        allocated.append(pods)
        used.append(f"({pods}\n    * on (node) group_left avg by (node) ({ACTIVITY}{{node=~\"{shared}\"}}))")

    def total(parts: list[str]) -> str:
        return "sum by (namespace, modelName) (\n  " + "\n  or ".join(parts) + "\n)"

    return total(allocated), total(used)


def recording_rules(spec: ClusterSpec) -> list[dict]:
    """Allocated / used GPUs per namespace and GPU model, their hourly GPU-hours, pending GPU pods.

    Allocation is in GPU-equivalents (see :func:`_allocation`); ``used`` is allocated x activity,
    so its integral over time is the useful GPU-hours ``gpucluster cost`` reports. The constant
    share series come first: a group evaluates its rules in order.
    """
    allocated, used = _allocation(spec)
    rules = [
        *share_rules(spec),
        {"record": "namespace_model:gpucluster_gpus_allocated:count", "expr": allocated},
        {"record": "namespace_model:gpucluster_gpus_used:sum", "expr": used},
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
    return [*rules, *tenant_info_rules(spec)]


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
