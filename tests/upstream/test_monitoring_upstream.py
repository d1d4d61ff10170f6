"""GPU monitoring against upstream: what we render and simulate, compared with the cited facts.

Facts come from tests/upstream/facts/{dcgm-exporter,prometheus,gpu-operator}.yaml (each read from the
upstream source at the pinned tag). Every test here failed on the monitoring code as it was at
94c5b21 and passes now; the comment on each says what was wrong.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from upstream_facts import fact

from gpucluster import versions
from gpucluster.promtext import parse
from gpucluster.render import dashboard, gpu_operator, monitoring
from gpucluster.simulator import ksm
from gpucluster.simulator.dcgm import NodeExporter, devices_for, mig_instances
from gpucluster.spec import load_spec, warnings_of
from gpucluster.spec.validate.kubernetes import api_runtime_config

REPO = Path(__file__).resolve().parents[2]
LOCAL = REPO / "inventories" / "local"


@pytest.fixture(scope="module")
def local():
    return load_spec(REPO / "inventories" / "local")


@pytest.fixture(scope="module")
def lab():
    return load_spec(REPO / "inventories" / "lab")


def _rule_exprs(spec) -> list[str]:
    return [r["expr"] for g in monitoring.rule_groups(spec) for r in g["rules"]]


def _dashboard_exprs(spec) -> list[str]:
    board = dashboard.dashboard(spec)
    out = [t["expr"] for p in board["panels"] for t in p["targets"]]
    return out + [v["definition"] for v in board["templating"]["list"] if "definition" in v]


# -- the ServiceMonitor --------------------------------------------------------------------------
def test_our_service_monitor_is_not_the_one_the_operator_deletes(local):
    # Was: named nvidia-dcgm-exporter in the operator namespace, which the GPU Operator deletes on
    # every reconcile while dcgmExporter.serviceMonitor.enabled is false, as our values set it.
    deleted = fact("gpu-operator", "service-monitor-func-deletes-when-disabled")
    sm = monitoring.service_monitor(local)
    assert gpu_operator.values(local)["dcgmExporter"]["serviceMonitor"]["enabled"] is False
    assert sm["metadata"]["namespace"] == local.gpu_operator.namespace  # the operator's namespace
    assert sm["metadata"]["name"] != deleted["name"]


def test_service_monitor_selects_the_operators_service_and_port(local):
    service = fact("gpu-operator", "dcgm-exporter-service")
    endpoint = monitoring.service_monitor(local)["spec"]["endpoints"][0]
    assert monitoring.service_monitor(local)["spec"]["selector"]["matchLabels"] == service["selector"]
    assert endpoint["port"] == service["port-name"] == monitoring.EXPORTER_PORT_NAME
    assert monitoring.EXPORTER_PORT == service["port"] and monitoring.EXPORTER_SERVICE == service["name"]


def _relabel(labels: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, str]:
    """Prometheus relabeling, for the two actions our ServiceMonitor uses (replace, labeldrop)."""
    out = dict(labels)
    for r in rules:
        action = r.get("action", fact("prometheus", "relabel-default-action"))
        regex = re.compile(f"(?:{r.get('regex', '(.*)')})")
        if action == "labeldrop":  # fact relabel-labeldrop: names that fully match
            out = {k: v for k, v in out.items() if not regex.fullmatch(k)}
        elif action == "replace":
            value = ";".join(out.get(s, "") for s in r["sourceLabels"])
            m = regex.fullmatch(value)
            if m:
                new = m.expand(r.get("replacement", "$1").replace("$1", r"\1"))
                if new:
                    out[r["targetLabel"]] = new
                else:
                    out.pop(r["targetLabel"], None)  # fact relabel-empty-value-deletes-label
        else:
            raise AssertionError(f"relabel action {action} is not modelled here")
    return out


def _merge(target: dict[str, str], sample: dict[str, str], honor: bool) -> dict[str, str]:
    """How a scrape merges target and sample labels (facts honor-labels-*, exported-label-prefix)."""
    prefix = fact("prometheus", "exported-label-prefix")
    out = {k: v for k, v in sample.items() if v != ""}
    for name, value in target.items():
        if name.startswith("__"):
            continue
        if name in out and not honor:
            out[prefix + name] = out[name]  # scraped label renamed, target value kept
            out[name] = value
        elif name not in out:
            out[name] = value
    return out


def _scraped(spec, holder: dict[str, str] | None) -> dict[str, str]:
    """Labels of one GPU series after our ServiceMonitor, for a GPU held by ``holder`` (or nobody)."""
    node = next(iter(devices_for(spec)))
    exporter = NodeExporter(node, devices_for(spec)[node])
    exporter.attribute(0, None, holder)
    sample = next(s for s in parse(exporter.exposition())
                  if s.name == monitoring.ACTIVITY and s.labels["gpu"] == "0")
    target_labels = fact("prometheus", "servicemonitor-target-labels")
    exporter_pod = {"namespace": spec.gpu_operator.namespace, "pod": "nvidia-dcgm-exporter-x7k2p",
                    "container": fact("dcgm-exporter", "operator-daemonset-container-name"),
                    "service": "nvidia-dcgm-exporter", "job": "nvidia-dcgm-exporter", "endpoint": "gpu-metrics"}
    assert set(exporter_pod) == set(target_labels)
    endpoint = monitoring.service_monitor(spec)["spec"]["endpoints"][0]
    target = _relabel({**exporter_pod, "__meta_kubernetes_pod_node_name": node}, endpoint["relabelings"])
    honor = endpoint.get("honorLabels", fact("prometheus", "endpoint-honorlabels-default"))
    return _merge(target, sample.labels, honor)


def test_the_workloads_pod_reaches_the_series_not_the_exporters(local):
    # Was: no relabeling removed the operator's target labels, so every GPU series named the
    # exporter pod and the workload went to exported_pod / exported_namespace / exported_container.
    attribution = fact("dcgm-exporter", "pod-attribution-labels")
    holder = {"namespace": "ml-research", "pod": "train-0", "container": "main"}
    assert set(holder) == set(attribution)
    held = _scraped(local, holder)
    assert {k: held.get(k) for k in attribution} == holder
    assert not [k for k in held if k.startswith(fact("prometheus", "exported-label-prefix"))]
    assert held["node"] == next(iter(devices_for(local)))
    # A GPU nobody holds carries no namespace/pod at all (so `pod!=""` selects held GPUs only).
    free = _scraped(local, None)
    assert not set(attribution) & set(free)


def test_labeldrop_runs_after_the_node_relabeling_and_honor_labels_stays_false(local):
    endpoint = monitoring.service_monitor(local)["spec"]["endpoints"][0]
    actions = [r.get("action") for r in endpoint["relabelings"]]
    assert actions == ["replace", "labeldrop"]
    # With honorLabels true the exporter pod's labels would still land on GPUs nobody holds.
    assert endpoint["honorLabels"] is False
    order = fact("prometheus", "servicemonitor-user-relabelings-order")
    assert order == "appended after the operator's own relabelings"


# -- the activity signal exists for every sharing mode ------------------------------------------
def test_no_rule_or_panel_reads_gpu_util_which_mig_instances_do_not_report(local, lab):
    # Was: DCGM_FI_DEV_GPU_UTIL in the utilization alerts, the used-GPU recording rule, the
    # dashboard and its node variable; MIG instances do not report it.
    assert fact("dcgm-exporter", "mig-gpu-util-supported") is False
    assert monitoring.ACTIVITY in fact("dcgm-exporter", "mig-fields-per-instance")
    for spec in (local, lab):
        for expr in _rule_exprs(spec) + _dashboard_exprs(spec):
            assert "DCGM_FI_DEV_GPU_UTIL" not in expr, expr
    low = {r["alert"]: r for r in monitoring.alert_rules(lab)}["GPUAllocatedLowUtilization"]
    assert monitoring.ACTIVITY in low["expr"]
    # the activity is a 0..1 ratio: the spec's percentage is divided, never the series
    assert fact("dcgm-exporter", "field-gr-engine-active-range") == "ratio 0-1"
    assert f"< {lab.monitoring.alerts.low_utilization_percent / 100!r}" in low["expr"]
    assert dashboard.ACTIVITY == monitoring.ACTIVITY and dashboard.DEVICE_KEY == monitoring.DEVICE_KEY


def test_gpu_pods_include_mig_instances(local):
    # Was: resource="nvidia_com_gpu" only, so pods holding MIG instances were never "GPU pods".
    values = fact("dcgm-exporter", "ksm-extended-resource-label-value")
    pattern = re.compile(f"(?:{monitoring.GPU_RESOURCES})")
    for name, label in values.items():
        assert ksm.resource_label(name) == label
        assert pattern.fullmatch(label), label
    assert "nvidia.com/mig-*" in fact("dcgm-exporter", "attributed-resource-names")


def test_mig_share_is_read_from_the_compute_slices_of_gpu_i_profile(lab):
    # DCGM names the memory part after the instance's real size (7g.79gb), so only <n>g is used.
    assert fact("dcgm-exporter", "series-mig-labels") == ["GPU_I_PROFILE", "GPU_I_ID"]
    regex = re.compile(r"([0-9]+)g[.].*")
    assert 'GPU_I_PROFILE", "([0-9]+)g[.].*")' in " ".join(_rule_exprs(lab))
    for profile, slices in (("1g.10gb", "1"), ("7g.79gb", "7"), ("1g.11gb", "1"), ("3g.40gb", "3")):
        assert regex.fullmatch(profile)[1] == slices
    shares = {(r["labels"]["modelName"], r["labels"]["mig_compute_slices"]): r["expr"]
              for r in monitoring.recording_rules(lab) if r["record"] == monitoring.MIG_SHARE}
    assert shares[("NVIDIA H100 80GB HBM3", "1")] == "vector(1 / 7)"
    assert shares[("NVIDIA H100 80GB HBM3", "7")] == "vector(7 / 7)"


# -- XID -----------------------------------------------------------------------------------------
def test_xid_is_matched_on_err_code_never_with_changes(local):
    # Was: changes(DCGM_FI_DEV_XID_ERRORS[5m]) in the alert and the panel; every XID value is its
    # own series (err_code), so changes() over one series stays 0 and the panel was always empty.
    assert fact("dcgm-exporter", "series-xid-extra-labels") == ["err_code", "err_msg"]
    xid = [e for e in _rule_exprs(local) + _dashboard_exprs(local) if "DCGM_FI_DEV_XID_ERRORS" in e]
    assert len(xid) == 2
    for expr in xid:
        assert "changes(" not in expr
        assert re.search(r"unless on \([^)]*err_code\)", expr), expr


# -- DRA, time-slicing, intervals ----------------------------------------------------------------
def test_dra_pools_get_the_exporters_dra_attribution_configured_as_upstream_needs_it(local):
    # Was: a warning that DRA-allocated GPUs are never attributed, and nothing configured.
    assert versions.DCGM_EXPORTER == fact("dcgm-exporter", "operator-dcgm-exporter-version").removesuffix("-distroless")
    assert versions.DCGM_EXPORTER_DRA_API == fact("dcgm-exporter", "dra-resourceslice-api")
    assert any(p.uses_dra and not p.sharing.mode.value.endswith("mig") for p in local.node_pools)
    # the switch, unprefixed, on the exporter container through the operator's dcgmExporter.env
    env = {e["name"]: e["value"] for e in gpu_operator.values(local)["dcgmExporter"]["env"]}
    assert env[fact("dcgm-exporter", "dra-env")] == "true"
    # the version its informer lists, served although Kubernetes keeps it off by default
    assert fact("dcgm-exporter", "k8s-resource-v1beta1-disabled-by-default") is True
    assert f"{fact('dcgm-exporter', 'dra-resourceslice-api')}/resourceslices=true" in api_runtime_config(local)
    # cluster-wide read of ResourceSlices for the operator's exporter account (the exporter's own chart
    # grants the same verbs; pods it reads through the kubelet, not the API, with pod labels off)
    rbac = {o["kind"]: o for o in gpu_operator.objects(local) if o["apiVersion"].startswith("rbac.")}
    chart = fact("dcgm-exporter", "dra-helm-chart-rbac")
    assert rbac["ClusterRole"]["rules"] == [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
                                            "verbs": chart["verbs"]}]
    assert rbac["ClusterRoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": fact("gpu-operator", "dcgm-exporter-service-account"),
         "namespace": local.gpu_operator.namespace}]
    # no whole-GPU warning; the MIG one names the key mismatch
    messages = [w.message for w in warnings_of(local) if "DCGM" in w.message]
    assert len(messages) == 1 and "MIG devices of DRA pools (a100-dra)" in messages[0], messages
    assert "parent GPU's UUID" in messages[0] and "instance id" in messages[0]
    assert "parent GPU UUID" in fact("dcgm-exporter", "dra-mig-key-mismatch")


def test_a_dra_training_pool_beside_device_plugin_pools_validates_without_a_metrics_warning():
    spec = load_spec(REPO / "tests" / "data" / "monitoring")  # train (device plugin) and train-dra (DRA, whole GPUs)
    assert {p.name: p.uses_dra for p in spec.gpu_pools} == {"train": False, "train-dra": True}
    assert spec.dcgm_dra_attribution and not warnings_of(spec)


@pytest.mark.parametrize(("chart", "warned"), [("v26.3.0", False), ("v26.3.1", False), ("v26.3.2", True),
                                               ("v26.7.0", True)])
def test_an_operator_whose_exporter_has_no_token_is_named_for_dra_attribution(tmp_path, chart, warned):
    # Pin review: from v26.3.2 the exporter DaemonSet mounts no ServiceAccount token for KUBERNETES_ENABLE_DRA.
    from gpucluster.spec.validate.monitoring import OPERATOR_WITHOUT_EXPORTER_TOKEN

    assert f"v{OPERATOR_WITHOUT_EXPORTER_TOKEN}" == fact("gpu-operator", "exporter-token-off-from")
    text = (LOCAL / "cluster.yaml").read_text()
    pinned = versions.CHARTS["gpu-operator"]
    (tmp_path / "cluster.yaml").write_text(text.replace("gpuOperator:\n", (
        f"gpuOperator:\n  chart: {{chart: {pinned.name}, repository: '{pinned.repository}', version: {chart}}}\n"), 1))
    spec = load_spec(tmp_path / "cluster.yaml")
    assert spec.gpu_operator.chart.version == chart
    named = [w for w in warnings_of(spec) if w.path == "gpuOperator.chart.version" and "token" in w.message]
    assert bool(named) is warned, [w.message for w in warnings_of(spec)]


def test_without_dra_attribution_nothing_is_configured_and_validation_says_what_is_lost(tmp_path):
    text = (LOCAL / "cluster.yaml").read_text()
    assert "gpuOperator:\n  migStrategy: mixed\n" in text
    (tmp_path / "cluster.yaml").write_text(text.replace(
        "gpuOperator:\n", "gpuOperator:\n  dcgmExporter: {draAttribution: false}\n", 1))
    spec = load_spec(tmp_path / "cluster.yaml")
    env = {e["name"] for e in gpu_operator.values(spec)["dcgmExporter"]["env"]}
    assert fact("dcgm-exporter", "dra-env") not in env
    assert not [o for o in gpu_operator.objects(spec) if o["apiVersion"].startswith("rbac.")]
    assert not [r for r in api_runtime_config(spec) if "v1beta1" in r]
    warning = [w for w in warnings_of(spec) if "KUBERNETES_ENABLE_DRA" in w.message]
    assert len(warning) == 1 and warning[0].path == "gpuOperator.dcgmExporter.draAttribution"


def test_no_dra_pool_no_dra_warning(lab):
    assert not any(p.uses_dra for p in lab.node_pools)
    assert not [w for w in warnings_of(lab) if "KUBERNETES_ENABLE_DRA" in w.message]


def test_shared_gpus_are_apportioned_by_requests_not_by_the_exporters_one_pod(lab):
    # Was: a time-sliced GPU counted for whichever pod the exporter named (the last listed).
    # KUBERNETES_VIRTUAL_GPUS would name every pod but drops the series of GPUs nobody holds.
    assert "last pod listed wins" in fact("dcgm-exporter", "time-slicing-attribution-default")
    assert fact("dcgm-exporter", "virtual-gpus-drops-unheld-gpus") is True
    env = {e["name"] for e in gpu_operator.values(lab)["dcgmExporter"]["env"]}
    assert fact("dcgm-exporter", "virtual-gpus-option")["env"] not in env
    shared = monitoring.shared_pools(lab)
    assert shared, "the lab spec has a time-sliced pool"
    hosts = sorted(h for p in shared for h in p.hosts)
    rules = {r["record"]: r["expr"] for r in monitoring.recording_rules(lab)}
    allocated = rules["namespace_model:gpucluster_gpus_allocated:count"]
    assert f'node!~"{"|".join(hosts)}"' in allocated  # the exporter's pick is not used there
    assert "kube_pod_container_resource_requests" in allocated and monitoring.REPLICA_SHARE in allocated
    replicas = {r["labels"]["node"]: r["expr"] for r in monitoring.recording_rules(lab)
                if r["record"] == monitoring.REPLICA_SHARE}
    assert replicas == {h: f"vector(1 / {p.sharing.replicas})" for p in shared for h in p.hosts}


def test_the_exporter_collects_as_often_as_it_is_scraped(local):
    # Was: scraped every 15 s while the exporter refreshes every 30 s (its default).
    default_ms = fact("dcgm-exporter", "collect-interval-default-ms")
    interval = monitoring.service_monitor(local)["spec"]["endpoints"][0]["interval"]
    env = {e["name"]: e["value"] for e in gpu_operator.values(local)["dcgmExporter"]["env"]}
    assert interval == "15s" and default_ms > 15_000
    assert env["DCGM_EXPORTER_INTERVAL"] == "15000"


# -- the CSV -------------------------------------------------------------------------------------
def test_csv_help_texts_and_types_are_the_exporters():
    # Was: "Whether remapping of rows has failed." and "Driver version." (upstream: no period, "Version").
    helps, types = fact("dcgm-exporter", "default-counters-help"), fact("dcgm-exporter", "default-counters-types")
    ours = {name: (kind, help_) for name, kind, help_ in monitoring.DCGM_FIELDS}
    for name, help_ in helps.items():
        assert ours[name] == (types[name], help_), name
    enabled = set(fact("dcgm-exporter", "default-counters-enabled"))
    assert "DCGM_FI_DEV_ROW_REMAP_FAILURE" in enabled  # the default does not leave it out
    assert "remap failures" not in Path(monitoring.__file__).read_text()


# -- the simulated exporter serves what the real one does --------------------------------------------
def _lines(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name + "{")]


def test_simulated_exporter_labels_follow_the_exporters_order_and_names(local):
    node = next(iter(devices_for(local)))
    e = NodeExporter(node, devices_for(local)[node])
    e.attribute(1, None, {"namespace": "ns", "pod": "p", "container": "c"})
    e.set(1, xid=79)
    text = e.exposition()
    xid = next(line for line in _lines(text, "DCGM_FI_DEV_XID_ERRORS") if 'gpu="1"' in line)
    names = re.findall(r'(\w+)="', xid)
    base = fact("dcgm-exporter", "series-base-labels")
    assert names[:len(base)] == base
    assert names[len(base)] == fact("dcgm-exporter", "series-hostname-label")
    assert names[len(base) + 1] == fact("dcgm-exporter", "series-driver-version-label")
    attributes = names[len(base) + 2:]
    assert attributes == sorted(attributes) == ["container", "err_code", "err_msg", "namespace", "pod", "pod_uid"]
    assert 'err_code="79"' in xid and f'err_msg="{fact("dcgm-exporter", "xid-err-msg-79")}"' in xid
    assert "node=" not in text  # our ServiceMonitor adds it, the exporter does not
    assert re.search(r'pci_bus_id="[0-9a-f]{8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9]"', xid)
    assert re.search(r'device="nvidia1"', xid)
    # Unheld GPUs carry no attribution; a zero XID reads "No Error".
    zero = next(line for line in _lines(text, "DCGM_FI_DEV_XID_ERRORS") if 'gpu="0"' in line)
    assert "pod=" not in zero and f'err_msg="{fact("dcgm-exporter", "xid-zero-err-msg")}"' in zero


def test_simulated_mig_gpus_are_served_per_instance_without_gpu_util(lab):
    node = "gpu-mig-01"
    layout = {"1g.10gb": 2, "3g.40gb": 1}
    e = NodeExporter(node, devices_for(lab, {node: layout})[node])
    text = e.exposition()
    assert not _lines(text, "DCGM_FI_DEV_GPU_UTIL") and not _lines(text, "DCGM_FI_DEV_MEM_COPY_UTIL")
    for name in fact("dcgm-exporter", "mig-fields-per-instance"):
        rows = _lines(text, name)
        assert len(rows) == 8 * 3, name  # 8 GPUs x 3 instances, no whole-GPU row
        assert all('GPU_I_PROFILE="' in r and 'GPU_I_ID="' in r for r in rows)
    assert len(mig_instances("H100-SXM5-80GB", layout)) == 3


def test_simulated_kube_state_metrics_labels_are_kube_state_metrics(local):
    pod = {"metadata": {"namespace": "ml", "name": "p", "uid": "u1"},
           "spec": {"nodeName": "n1", "containers": [{"name": "main", "resources": {
               "requests": {"nvidia.com/mig-1g.10gb": "1", "cpu": "500m"}}}]},
           "status": {"phase": "Running"}}
    quota = {"metadata": {"namespace": "ml", "name": "q"},
             "status": {"hard": {"requests.nvidia.com/gpu": "4"}, "used": {"requests.nvidia.com/gpu": "1"}}}
    node = {"metadata": {"name": "n1"}, "status": {"nodeInfo": {"kubeletVersion": "kwok-v0.8.0"}}}
    samples = parse(ksm.exposition([pod], [node], [quota]))

    def labels(name: str) -> list[dict[str, str]]:
        return [s.labels for s in samples if s.name == name]

    requests = labels(fact("dcgm-exporter", "ksm-resource-requests-name"))
    assert all(list(r) == fact("dcgm-exporter", "ksm-resource-requests-labels") for r in requests)
    mig = next(r for r in requests if r["resource"].startswith("nvidia_com_mig"))
    assert mig["resource"] == fact("dcgm-exporter", "ksm-extended-resource-label-value")["nvidia.com/mig-1g.10gb"]
    assert mig["unit"] == fact("dcgm-exporter", "ksm-extended-resource-unit")
    phases = labels("kube_pod_status_phase")
    assert {p["phase"] for p in phases} == set(fact("dcgm-exporter", "ksm-pod-status-phase-values"))
    assert all(list(p) == fact("dcgm-exporter", "ksm-pod-status-phase-labels") for p in phases)
    quotas = labels("kube_resourcequota")
    assert all(list(q) == fact("dcgm-exporter", "ksm-resourcequota-labels") for q in quotas)
    assert {q["type"] for q in quotas} == set(fact("dcgm-exporter", "ksm-resourcequota-type-values"))
    assert {q["resource"] for q in quotas} == {"requests.nvidia.com/gpu"}
    assert list(labels("kube_node_info")[0]) == fact("dcgm-exporter", "ksm-node-info-labels")
