"""The monitoring add-on's pure parts: the objects it creates, the config rewrite, pod-resources, addresses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gpucluster.addons import monitoring as addon
from gpucluster.addons.monitoring_runtime import KSM_LABELS, KSM_PORT, Settings, addresses
from gpucluster.addons.prometheus_config import POD_RULES_DIR, expand_env, out_of_cluster
from gpucluster.render import monitoring
from gpucluster.simulator import podresources as pr
from gpucluster.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
FACTS = REPO / "tests" / "upstream" / "facts"


def fact(component: str, key: str):
    return yaml.safe_load((FACTS / f"{component}.yaml").read_text())["facts"][key]["value"]


@pytest.fixture(scope="module")
def spec():
    return load_spec(REPO / "tests" / "data" / "monitoring")


# -- objects ---------------------------------------------------------------------------------------
def test_exporter_service_and_pods_are_the_gpu_operators(spec):
    service, daemonset = addon.exporter_objects(spec)
    want = fact("gpu-operator", "dcgm-exporter-service")
    assert service["metadata"]["name"] == want["name"] == fact("dcgm-exporter", "operator-service-name")
    assert service["metadata"]["namespace"] == spec.gpu_operator.namespace
    assert service["metadata"]["labels"]["app"] == want["labels"]["app"]
    assert service["spec"]["selector"] == want["selector"]
    assert service["spec"]["ports"][0]["name"] == want["port-name"]
    assert service["spec"]["ports"][0]["port"] == want["port"]
    pod = daemonset["spec"]["template"]
    assert pod["metadata"]["labels"] == fact("dcgm-exporter", "operator-daemonset-pod-label")
    container = pod["spec"]["containers"][0]
    assert container["name"] == fact("dcgm-exporter", "operator-daemonset-container-name")
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["DCGM_EXPORTER_INTERVAL"]["value"] == "5000"  # the test spec scrapes every 5 s
    assert daemonset["metadata"]["name"] == fact("gpu-operator", "daemonset-dcgm-exporter-name")


def test_our_service_monitor_selects_the_exporter_service_the_add_on_creates(spec):
    service, _ = addon.exporter_objects(spec)
    sm = monitoring.service_monitor(spec)
    assert sm["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    assert sm["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}


def test_the_prometheus_object_selects_our_objects_in_every_namespace(spec):
    p = addon.prometheus_object(spec, scrape_interval="5s", evaluation_interval="5s")["spec"]
    label = dict(spec.monitoring.prometheus_label)
    assert p["serviceMonitorSelector"] == p["ruleSelector"] == {"matchLabels": label}
    # a null namespace selector would mean the Prometheus' own namespace only; ours is elsewhere
    assert "own namespace" in fact("prometheus", "prometheus-servicemonitornamespaceselector-null")
    assert monitoring.service_monitor(spec)["metadata"]["namespace"] != spec.monitoring.namespace
    assert p["serviceMonitorNamespaceSelector"] == p["ruleNamespaceSelector"] == {}
    assert monitoring.prometheus_rule(spec)["metadata"]["labels"].items() >= label.items()
    assert p["replicas"] == 0 and p["version"] == "v3.16.0"


def test_kube_state_metrics_is_scraped_with_honor_labels(spec):
    _, service, sm = addon.ksm_objects(spec)
    assert sm["spec"]["endpoints"][0]["honorLabels"] is fact("prometheus", "ksm-servicemonitor-honorlabels")
    assert sm["metadata"]["labels"].items() >= spec.monitoring.prometheus_label.items()
    assert service["spec"]["ports"][0]["port"] == KSM_PORT


# -- the generated configuration, out of cluster --------------------------------------------------------
GENERATED = {
    "global": {"external_labels": {"prometheus": "monitoring/gpucluster", "prometheus_replica": "$(POD_NAME)"}},
    "rule_files": [f"{POD_RULES_DIR}prometheus-gpucluster-rulefiles-0/*.yaml"],
    "scrape_configs": [{
        "job_name": "serviceMonitor/gpu-operator/gpucluster-dcgm-exporter/0",
        "kubernetes_sd_configs": [{"role": "endpoints", "namespaces": {"names": ["gpu-operator"]}}],
        "relabel_configs": [{"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"},
                            {"regex": "namespace|pod|container", "action": "labeldrop"}],
    }],
}


def test_only_what_running_out_of_cluster_forces_changes(tmp_path):
    routes = {"10.244.0.1:9400": "127.0.0.1:41000"}
    text = expand_env(yaml.safe_dump(GENERATED), {"POD_NAME": "prometheus-gpucluster-0"})
    out = out_of_cluster(yaml.safe_load(text), kubeconfig=tmp_path / "kc", rules_dir=tmp_path / "rules",
                         addresses=routes)
    assert out["global"]["external_labels"]["prometheus_replica"] == "prometheus-gpucluster-0"
    assert out["rule_files"] == [f"{tmp_path}/rules/prometheus-gpucluster-rulefiles-0/*.yaml"]
    job, before = out["scrape_configs"][0], GENERATED["scrape_configs"][0]
    sd = {**before["kubernetes_sd_configs"][0], "kubeconfig_file": str(tmp_path / "kc")}
    assert job["kubernetes_sd_configs"] == [sd]
    # the operator's relabelings (ours included) first and unchanged, then instance, then the route
    assert job["relabel_configs"][:2] == before["relabel_configs"]
    instance, route = job["relabel_configs"][2:]
    assert instance["target_label"] == "instance" and instance["source_labels"] == ["instance", "__address__"]
    assert re.fullmatch(instance["regex"], ";10.244.0.1:9400") and not re.fullmatch(instance["regex"], "x;10.0.0.1:1")
    assert re.fullmatch(route["regex"], "10.244.0.1:9400") and not re.fullmatch(route["regex"], "10.244.0.119400")
    assert (route["target_label"], route["replacement"]) == ("__address__", "127.0.0.1:41000")
    assert GENERATED["scrape_configs"][0]["relabel_configs"] == before["relabel_configs"]  # input not mutated
    with pytest.raises(ValueError, match="api_server"):
        bad = {"scrape_configs": [{"job_name": "j", "kubernetes_sd_configs": [{"api_server": "https://x"}]}]}
        out_of_cluster(bad, kubeconfig=tmp_path, rules_dir=tmp_path, addresses={})
    assert fact("prometheus", "operator-rules-dir") == POD_RULES_DIR.rstrip("/")


def test_pod_addresses_route_to_the_endpoint_of_their_node(spec):
    s = Settings(inventory="i", kubeconfig="k", folder="f", prometheus="gpucluster", namespace="monitoring",
                 exporter_namespace="gpu-operator", prometheus_port=1, ksm_port=2, exporter_ports={"gpu-1": 3})

    def pod(ns, name, labels, ip, node, deleting=False):
        meta = {"namespace": ns, "name": name, "labels": labels}
        if deleting:
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        return {"metadata": meta, "spec": {"nodeName": node}, "status": {"podIP": ip}}

    pods = [pod("gpu-operator", "e1", monitoring.EXPORTER_LABELS, "10.0.0.1", "gpu-1"),
            pod("gpu-operator", "e2", monitoring.EXPORTER_LABELS, "10.0.0.2", "cpu-1"),  # no GPU endpoint there
            pod("gpu-operator", "e3", monitoring.EXPORTER_LABELS, "10.0.0.3", "gpu-1", deleting=True),
            pod("monitoring", "ksm", KSM_LABELS, "10.0.0.4", "cpu-1"),
            pod("research", "other", KSM_LABELS, "10.0.0.5", "cpu-1")]
    assert addresses(pods, s) == {"10.0.0.1:9400": "127.0.0.1:3", "10.0.0.4:8080": "127.0.0.1:2"}


# -- the simulated kubelet's pod-resources ------------------------------------------------------------
def _pod(name, limits, node="n", phase="Running", created="2026-01-01T00:00:00Z", ns="t"):
    return {"metadata": {"namespace": ns, "name": name, "uid": f"u-{name}", "creationTimestamp": created},
            "spec": {"nodeName": node, "containers": [{"name": "main", "resources": {"limits": limits}}]},
            "status": {"phase": phase}}


GPUS = [{"index": 0}, {"index": 1}]


def test_exclusive_gpus_are_handed_out_lowest_first_and_kept():
    units = pr.units(GPUS)
    first = pr.allocate("n", [_pod("a", {"nvidia.com/gpu": "1"})], units, {})
    later = pr.allocate("n", [_pod("b", {"nvidia.com/gpu": "1"}, created="2025-01-01T00:00:00Z"),
                              _pod("a", {"nvidia.com/gpu": "1"})], units, first)
    holders = pr.attribution(later)
    assert holders[(0, None)].pod == "a" and holders[(1, None)].pod == "b"  # a keeps its GPU
    # a pod asking for more than is free gets nothing; pods elsewhere or not running hold nothing
    others = [_pod("c", {"nvidia.com/gpu": "2"}), _pod("d", {"nvidia.com/gpu": "1"}, node="m"),
              _pod("e", {"nvidia.com/gpu": "1"}, phase="Pending")]
    full = pr.allocate("n", [_pod("a", {"nvidia.com/gpu": "1"}), *others], units, first)
    assert set(full) == {"u-a"}
    assert pr.allocate("n", [], units, first) == {}  # gone pods give their GPUs back


def test_a_time_sliced_gpu_names_one_holder_the_last_listed():
    units = pr.units(GPUS, replicas=2)
    pods = [_pod(n, {"nvidia.com/gpu": "1"}) for n in ("p1", "p2", "p3")]
    held = pr.allocate("n", pods, units, {})
    assert len(held) == 3
    holders = pr.attribution(held)
    assert holders[(0, None)].pod == "p2" and holders[(1, None)].pod == "p3"  # p1 shares GPU 0, unnamed


def test_mig_instances_go_to_pods_asking_for_their_profile():
    gpus = [{"index": 0, "instances": [{"gi": 1, "profile": "1g.10gb"}, {"gi": 2, "profile": "3g.40gb"}]}]
    held = pr.allocate("n", [_pod("m", {"nvidia.com/mig-3g.40gb": "1"}), _pod("w", {"nvidia.com/gpu": "1"})],
                       pr.units(gpus), {})
    assert {d: h.pod for d, h in pr.attribution(held).items()} == {(0, 2): "m"}
    single = pr.allocate("n", [_pod("w", {"nvidia.com/gpu": "2"})], pr.units(gpus, mig_strategy="single"), {})
    assert set(pr.attribution(single)) == {(0, 1), (0, 2)}


def test_pods_with_resource_claims_hold_nothing_here():
    claim = _pod("dra", {})
    claim["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
    assert pr.allocate("n", [claim], pr.units(GPUS), {}) == {}
