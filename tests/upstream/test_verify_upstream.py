"""What verify reads from upstream components, against the cited facts: where GPU health comes from, what
Volcano and Prometheus add or reprint, how the API server reaches a pod."""

from __future__ import annotations

from upstream_facts import fact

from gpucluster import kube, upstream
from gpucluster.verify.cluster import promql_text


def test_gpu_health_reads_the_operators_pods_and_ignores_only_application_xids() -> None:
    assert sorted(upstream.APPLICATION_XIDS) == fact("device-plugin", "health-application-xids")
    validator = fact("gpu-operator", "validator-daemonset")
    assert upstream.OPERATOR_VALIDATOR_LABELS == validator["pod-labels"]
    assert list(upstream.OPERATOR_VALIDATIONS) == validator["init-containers"]
    exporter = fact("gpu-operator", "dcgm-exporter-daemonset")
    assert upstream.DCGM_EXPORTER_POD_LABELS == exporter["pod-labels"]
    assert upstream.DCGM_EXPORTER_POD_PORT == exporter["container-port"]["port"]


def test_dra_taints_are_a_health_source_only_with_the_drivers_gate() -> None:
    gates = fact("dra-driver", "driver-feature-gates")
    assert gates[upstream.DRA_HEALTH_GATE] == {"default": False, "stage": "alpha"}
    taints = fact("dra-driver", "device-taints-on-health-events")
    assert taints["gate"] == upstream.DRA_HEALTH_GATE
    assert all(k.startswith(upstream.DRA_HEALTH_TAINT_PREFIX) for k in taints["keys"])


def test_a_queue_holds_what_the_api_server_and_volcanos_controller_add() -> None:
    want = {**fact("volcano", "queue-spec-crd-defaults")}
    parent = fact("volcano", "queue-controller-sets-parent-root")
    want[parent["field"]] = parent["value"]
    assert upstream.VOLCANO_QUEUE_DEFAULTS == want


def test_prometheus_reprints_a_rule_with_its_matchers_sorted() -> None:
    assert fact("prometheus", "rules-api-query")["query"] == "rule.Query().String()"
    assert fact("prometheus", "printer-sorts-matchers") == {"sorted": True, "joined-by": ","}
    ours = 'sum by (a) (x{pod!="", namespace!="p q", node=~"a|b"}[5m])\nand on (a)\ny'
    printed = 'sum by (a) (x{namespace!="p q",node=~"a|b",pod!=""}[5m]) and on (a) y'
    assert promql_text(ours) == promql_text(printed)
    assert promql_text(ours) != promql_text(printed.replace('"p q"', '"pq"'))  # inside a string, space counts
    assert promql_text(ours) != promql_text(printed.replace("[5m]", "[10m]"))


def test_the_exporters_metrics_are_read_through_the_pod_proxy() -> None:
    assert fact("kubernetes", "pod-proxy-name-port").startswith("pods/<name>:<port>/proxy/<path>")
    assert kube.pod_proxy("gpu-operator", "nvidia-dcgm-exporter-x", 9400, "/metrics") == \
        "/api/v1/namespaces/gpu-operator/pods/nvidia-dcgm-exporter-x:9400/proxy/metrics"
