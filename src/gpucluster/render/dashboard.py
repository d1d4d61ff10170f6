"""The Grafana dashboard for GPUs, rendered as a ConfigMap the Grafana sidecar picks up.

The sidecar of the common Grafana charts loads every ConfigMap labelled ``grafana_dashboard: "1"``.
Every query reads series the DCGM exporter serves with our CSV (``monitoring.DCGM_FIELDS``), the
recording rules produce (``monitoring.recording_rules``), kube-state-metrics documents
(``monitoring.KSM_SERIES``) or Prometheus itself writes (``ALERTS``); ``tests/unit/render/test_render_dashboard.py``
holds it to that.
"""

from __future__ import annotations

import json
from typing import Any

from gpucluster.render.common import Obj, config_map
from gpucluster.spec.model import ClusterSpec

# Not imported from render.monitoring (which imports this module): the activity series and the
# labels that identify one GPU or MIG instance, as monitoring.ACTIVITY and monitoring.DEVICE_KEY
# (tests/unit/render/test_render_dashboard.py holds them equal).
ACTIVITY = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
DEVICE_KEY = "node, gpu, GPU_I_ID"

CONFIGMAP = "gpucluster-gpu-dashboard"
DASHBOARD_KEY = "gpucluster-gpus.json"
SIDECAR_LABEL = {"grafana_dashboard": "1"}
#: Grafana's dashboard JSON model version we write (Grafana 10/11 migrate older ones on load).
SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_NODE = 'node=~"$node"'

# (title, kind, unit, [(expr, legend)], width). Rows of the grid are filled left to right.
Panel = tuple[str, str, str, list[tuple[str, str]], int]

PANELS: list[Panel] = [
    # Activity (0..1) rather than DCGM_FI_DEV_GPU_UTIL, which MIG instances do not report.
    ("GPU utilization per node (graphics engine active)", "timeseries", "percentunit",
     [(f"avg by (node) ({ACTIVITY}{{{_NODE}}})", "{{node}}")], 12),
    ("Framebuffer used per node", "timeseries", "percent",
     [(f"100 * sum by (node) (DCGM_FI_DEV_FB_USED{{{_NODE}}}) / sum by (node) "
       f"(DCGM_FI_DEV_FB_USED{{{_NODE}}} + DCGM_FI_DEV_FB_FREE{{{_NODE}}})", "{{node}}")], 12),
    ("GPU utilization per pod (graphics engine active)", "timeseries", "percentunit",
     [(f'avg by (namespace, pod) ({ACTIVITY}{{pod!="", {_NODE}}})', "{{namespace}}/{{pod}}")], 12),
    # DCGM reports framebuffer in MiB: Grafana's "mbytes" (decmbytes would be SI megabytes).
    ("Framebuffer used per pod", "timeseries", "mbytes",
     [(f'sum by (namespace, pod) (DCGM_FI_DEV_FB_USED{{pod!="", {_NODE}}})', "{{namespace}}/{{pod}}")], 12),
    ("GPUs allocated vs quota per tenant", "timeseries", "short",
     [("sum by (namespace) (namespace:gpucluster_gpus_allocated:count)", "{{namespace}} allocated"),
      ('sum by (namespace) (kube_resourcequota{resource="requests.nvidia.com/gpu", type="hard"})',
       "{{namespace}} quota")], 12),
    ("Pending GPU pods per queue", "timeseries", "short",
     [("sum by (queue) (namespace:gpucluster_pending_gpu_pods:count"
       " * on (namespace) group_left (queue) gpucluster:tenant_info)", "{{queue}}")], 12),
    # Each XID value is its own series (label err_code): a new XID is a series that was not there.
    ("XID errors (new in the last 5m)", "table", "short",
     [(f"DCGM_FI_DEV_XID_ERRORS{{{_NODE}}} != 0 unless on ({DEVICE_KEY}, err_code) "
       f"(DCGM_FI_DEV_XID_ERRORS{{{_NODE}}} offset 5m)", "{{node}} GPU {{gpu}} XID {{err_code}}")], 8),
    ("ECC errors (last hour)", "timeseries", "short",
     [(f"sum by (node, gpu) (increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{_NODE}}}[1h]))",
       "DBE {{node}} GPU {{gpu}}"),
      (f"sum by (node, gpu) (increase(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{{{_NODE}}}[1h]))",
       "SBE {{node}} GPU {{gpu}}"),
      (f"max by (node, gpu) (DCGM_FI_DEV_ROW_REMAP_FAILURE{{{_NODE}}})",
       "row remap failed {{node}} GPU {{gpu}}")],
     8),
    ("Firing GPU alerts", "table", "short",
     [('sum by (alertname, node, gpu) (ALERTS{alertname=~"GPU.*", alertstate="firing"})',
       "{{alertname}}")], 8),
    ("GPU temperature", "timeseries", "celsius",
     [(f"max by (node, gpu) (DCGM_FI_DEV_GPU_TEMP{{{_NODE}}})", "{{node}} GPU {{gpu}}")], 12),
    ("Power draw per node", "timeseries", "watt",
     [(f"sum by (node) (DCGM_FI_DEV_POWER_USAGE{{{_NODE}}})", "{{node}}")], 12),
    ("GPU-hours per namespace (hourly)", "timeseries", "short",
     [("namespace:gpucluster_gpu_hours_allocated:1h", "{{namespace}} allocated"),
      ("namespace:gpucluster_gpu_hours_used:1h", "{{namespace}} useful")], 12),
    ("Tensor pipe activity per node", "timeseries", "percentunit",
     [(f"avg by (node) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{_NODE}}})", "{{node}}")], 12),
]


def _panel(pid: int, title: str, kind: str, unit: str, queries: list[tuple[str, str]],
           grid: dict[str, int]) -> dict[str, Any]:
    targets = [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend,
                "range": kind != "table", "instant": kind == "table"}
               for i, (expr, legend) in enumerate(queries)]
    return {
        "id": pid, "type": kind, "title": title, "datasource": DATASOURCE, "gridPos": grid,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}} if kind == "timeseries" else {},
        "targets": targets,
    }


def _layout(panels: list[Panel]) -> list[dict[str, Any]]:
    """Place panels on Grafana's 24-column grid, 8 units high, wrapping rows."""
    out, x, y = [], 0, 0
    for pid, (title, kind, unit, queries, width) in enumerate(panels, start=1):
        if x + width > 24:
            x, y = 0, y + 8
        out.append(_panel(pid, title, kind, unit, queries, {"x": x, "y": y, "w": width, "h": 8}))
        x += width
    return out


def dashboard(spec: ClusterSpec) -> dict[str, Any]:
    """The dashboard JSON model (a dict); ``uid`` is stable per cluster so re-renders update it."""
    return {
        "uid": f"gpucluster-gpus-{spec.metadata.name}"[:40],
        "title": f"GPUs — {spec.metadata.name}",
        "tags": ["gpucluster", "gpu", "dcgm"],
        "timezone": "utc",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
            {"name": "node", "type": "query", "datasource": DATASOURCE, "label": "Node",
             "query": {"query": f"label_values({ACTIVITY}, node)", "refId": "node"},
             "definition": f"label_values({ACTIVITY}, node)",
             "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2,
             "current": {"text": "All", "value": "$__all"}},
        ]},
        "annotations": {"list": []},
        "panels": _layout(PANELS),
    }


def configmap(spec: ClusterSpec) -> Obj:
    """The dashboard as a ConfigMap in the monitoring namespace, labelled for the Grafana sidecar."""
    text = json.dumps(dashboard(spec), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return config_map(CONFIGMAP, spec.monitoring.namespace, {DASHBOARD_KEY: text}, labels=SIDECAR_LABEL)
