"""Monitoring render: DCGM CSV, ServiceMonitor relabeling, alert thresholds from the spec, runbooks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpucluster.render import dashboard, monitoring, render
from gpucluster.spec import load_spec

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def local(local_inventory):
    return load_spec(local_inventory)


def _alerts(spec) -> dict[str, dict]:
    return {r["alert"]: r for r in monitoring.alert_rules(spec)}


def test_dcgm_csv_enables_the_fields_the_default_leaves_out():
    cm = monitoring.dcgm_metrics_configmap("gpu-operator")
    csv = cm["data"][monitoring.DCGM_CSV_KEY]
    fields = {line.split(",")[0] for line in csv.splitlines() if line and not line.startswith("#")}
    for needed in ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_RETIRED_DBE",
                   "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_TEMP",
                   "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
                   "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"):
        assert needed in fields
    # Every line is "field, type, help" with a type the exporter knows.
    for line in csv.splitlines()[1:]:
        _, kind, help_ = (p.strip() for p in line.split(",", 2))
        assert kind in {"gauge", "counter", "label"} and help_, line


def test_service_monitor_puts_the_node_name_on_every_series(local):
    sm = monitoring.service_monitor(local)
    endpoint = sm["spec"]["endpoints"][0]
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node",
            "action": "replace"} in endpoint["relabelings"]
    # The operator's namespace/pod/container target labels are dropped, so the exporter's stay.
    assert endpoint["relabelings"][-1] == {"action": "labeldrop", "regex": "namespace|pod|container"}
    # Hostname is kept equal to the node name.
    assert endpoint["metricRelabelings"] == [
        {"sourceLabels": ["node"], "targetLabel": "Hostname", "action": "replace"}]
    assert sm["metadata"]["labels"]["release"] == "prometheus"
    assert endpoint["interval"] == local.gpu_operator.dcgm_exporter.interval


def test_thresholds_come_from_the_spec(write_spec, base):
    base["monitoring"] = {"alerts": {"lowUtilizationPercent": 7, "lowUtilizationFor": "45m",
                                     "framebufferPercent": 95, "temperatureCelsius": 80,
                                     "idleNamespaceGpus": 3}}
    alerts = _alerts(load_spec(write_spec(base)))
    low = alerts["GPUAllocatedLowUtilization"]
    assert "[45m]) < 0.07\n" in low["expr"] and low["for"] == "45m"
    assert alerts["GPUFramebufferHigh"]["expr"].endswith("> 0.95")
    assert alerts["GPUTemperatureHigh"]["expr"] == "DCGM_FI_DEV_GPU_TEMP > 80"
    assert alerts["GPUsAllocatedIdleInNamespace"]["expr"].endswith(">= 3")
    # The pool sizes of the spec: g1 has 8 H100, g2 has 4 L4.
    count = alerts["GPUCountBelowSpec"]["expr"]
    assert re.search(r'DCGM_FI_DEV_GPU_TEMP\{node=~"g1"\} or DCGM_FI_PROF_GR_ENGINE_ACTIVE\{node=~"g1"\}.*\n'
                     r'.*kube_node_info\{node=~"g1"\}\)\)\) < 8', count)
    assert re.search(r'node=~"g2"\}\)\)\) < 4', count)


def test_low_utilization_only_counts_allocated_gpus(local):
    expr = _alerts(local)["GPUAllocatedLowUtilization"]["expr"]
    assert 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace!="", pod!=""' in expr
    assert 'and on (namespace, pod)' in expr
    assert 'resource=~"nvidia_com_gpu|nvidia_com_gpu_shared|nvidia_com_mig_.+"' in expr


def test_shared_pools_leave_the_exporters_pick_out_of_the_pod_alerts(base, write_spec):
    # g2 is a time-sliced L4 pool: the exporter names one arbitrary pod per shared GPU there.
    spec = load_spec(write_spec(base))
    assert [p.name for p in monitoring.shared_pools(spec)] == ["l4"]
    for name in ("GPUAllocatedLowUtilization", "GPUsAllocatedIdleInNamespace"):
        assert 'node!~"g2"' in _alerts(spec)[name]["expr"]


def test_no_gpu_pools_means_no_gpu_count_alert(write_spec, base):
    base["nodePools"] = []
    base["tenants"] = []
    alerts = _alerts(load_spec(write_spec(base)))
    assert "GPUCountBelowSpec" not in alerts
    assert "GPUTemperatureHigh" in alerts


def test_every_alert_links_a_runbook_section_that_exists(local):
    text = (REPO / "docs" / "runbooks.md").read_text()
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).strip().replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", text, re.M)}
    anchors |= set(re.findall(r'<a id="([^"]+)"', text))
    for alert in monitoring.alert_rules(local):
        url = alert["annotations"]["runbook_url"]
        path, anchor = url.split("#")
        assert (REPO / path).is_file(), url
        assert anchor in anchors, f"{alert['alert']}: no section #{anchor} in {path}"
        assert alert["labels"]["severity"] in {"critical", "warning", "info"}


def test_recording_rules_give_gpu_hours_per_namespace_and_model_and_tenant_info(local):
    rules = {r["record"]: r for r in monitoring.recording_rules(local)}
    allocated = rules["namespace_model:gpucluster_gpus_allocated:count"]["expr"]
    used = rules["namespace_model:gpucluster_gpus_used:sum"]["expr"]
    for expr in (allocated, used):
        assert expr.startswith("sum by (namespace, modelName) (")
    # activity is already 0..1: no /100 any more
    assert "/ 100" not in used and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in used
    records = [r["record"] for r in monitoring.recording_rules(local)]
    # constant share series are recorded before the rules that join on them
    assert records.index(monitoring.MIG_SHARE) < records.index("namespace_model:gpucluster_gpus_allocated:count")
    assert "[1h]" in rules["namespace:gpucluster_gpu_hours_allocated:1h"]["expr"]
    info = [r for r in monitoring.recording_rules(local) if r["record"] == "gpucluster:tenant_info"]
    assert [i["labels"] for i in info] == [{"namespace": t.ns, "tenant": t.name, "queue": t.name}
                                          for t in local.tenants]


def test_monitoring_component_holds_rule_dashboard_and_service_monitor(local):
    objs = render(local).components["monitoring"]
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}
    assert kinds == {("PrometheusRule", monitoring.RULE_NAME), ("ServiceMonitor", "gpucluster-dcgm-exporter"),
                     ("ConfigMap", dashboard.CONFIGMAP)}
    rule = next(o for o in objs if o["kind"] == "PrometheusRule")
    assert rule["metadata"]["namespace"] == local.monitoring.namespace
    assert rule["spec"]["groups"] == monitoring.rule_groups(local)


def test_monitoring_disabled_renders_nothing(write_spec, base):
    base["monitoring"] = {"enabled": False}
    assert render(load_spec(write_spec(base))).components["monitoring"] == []


def test_kube_state_metrics_series_are_documented():
    doc = (REPO / "docs" / "observability.md").read_text()
    for name in monitoring.KSM_SERIES:
        assert f"`{name}`" in doc, f"docs/observability.md does not list {name}"
