"""GPU alerts end to end: our ServiceMonitor and PrometheusRule under the real Prometheus Operator and Prometheus.

Real: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, the Prometheus Operator
(v0.85.0, out of cluster) that turns our objects into a scrape configuration and rule files, and
Prometheus (3.16.0, on 127.0.0.1) that scrapes and evaluates them. SIMULATED: the GPUs and kubelets,
the DCGM exporter (one endpoint per GPU node, behind the GPU Operator's Service and DaemonSet pods
that kwok runs) and kube-state-metrics (gpucluster.addons.monitoring says what and why).

Spec: tests/data/monitoring (a device-plugin node and a DRA node with 2 H100 each, tenant "research",
1-minute utilization window). A tenant pod gets a GPU from the real scheduler; the simulated exporter
attributes that GPU to it; an XID and an idle activity are injected on that GPU; GPUXidError and
GPUAllocatedLowUtilization must fire with the tenant pod's namespace/pod. A second tenant pod gets a GPU
of the DRA node through a ResourceClaim the real scheduler allocates: with the exporter's
KUBERNETES_ENABLE_DRA (rendered) its series carry the pod and the claim, it fires the same alert when idle,
and the recording rules, hence `gpucluster cost`, count it for the tenant's namespace.
A copy of our ServiceMonitor without the labeldrop relabeling, scraping the same exporter as another
job, shows what the fix prevents: the exporter pod's namespace/pod on the series and the tenant's in
exported_*.
"""

from __future__ import annotations

import copy
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_helpers import Cluster, wait_for

from gpucluster import labels as L
from gpucluster import procs
from gpucluster.addons import monitoring as addon
from gpucluster.local import addons
from gpucluster.render import monitoring, render
from gpucluster.simulator import attach
from gpucluster.spec import load_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]
DATA = Path(__file__).resolve().parents[1] / "data" / "monitoring"
LOCAL_WORLD = {"tools": ("prometheus", "prometheus-operator")}
TENANT, POD, NODE = "research", "train-0", "gpu-1"
DRA_POD, DRA_CLAIM, DRA_NODE = "train-dra-0", "train-dra-0-gpu", "gpu-2"
#: The negative: our ServiceMonitor as it was (no labeldrop), as a job of its own.
UNFIXED_JOB = "dcgm-without-labeldrop"


def unfixed_service_monitor(spec) -> dict[str, Any]:
    sm = copy.deepcopy(monitoring.service_monitor(spec))
    sm["metadata"]["name"] = UNFIXED_JOB
    endpoint = sm["spec"]["endpoints"][0]
    endpoint["relabelings"] = [r for r in endpoint["relabelings"] if r.get("action") != "labeldrop"]
    assert len(endpoint["relabelings"]) == 1  # only the node relabeling is left
    endpoint["relabelings"].append({"targetLabel": "job", "replacement": UNFIXED_JOB, "action": "replace"})
    return sm


def tenant_pod() -> dict[str, Any]:
    """A restricted-compliant pod asking for one GPU (the tenant namespace enforces `restricted`)."""
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD, "namespace": TENANT},
        "spec": {
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "trainer:1", "resources": {"limits": {"nvidia.com/gpu": "1"}},
                            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
        },
    }


def dra_claim_and_pod() -> list[dict[str, Any]]:
    """A tenant's ResourceClaim for one H100 of the spec's class and a restricted pod that uses it."""
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": DRA_CLAIM, "namespace": TENANT},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "h100", "count": 1}}]}}}
    pod = tenant_pod()
    pod["metadata"]["name"] = DRA_POD
    container = pod["spec"]["containers"][0]
    container["resources"] = {"claims": [{"name": "gpu"}]}
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": DRA_CLAIM}]
    return [claim, pod]


def wait_running(lw: Cluster, pod: str, node: str) -> None:
    """Wait until the tenant's ``pod`` is bound to ``node`` by the real scheduler and Running."""
    wait_for(f"{pod} bound to {node} and Running", lambda: (
        (p := lw.get("pod", pod, "-n", TENANT))["spec"].get("nodeName") == node
        and p["status"].get("phase") == "Running"), timeout=60)


def held_rows(stack: dict[str, Any], node: str, pod: str) -> list[str]:
    """The activity lines the simulated exporter of ``node`` serves for ``pod`` (scraped directly)."""
    url = f"http://127.0.0.1:{stack['settings']['exporter_ports'][node]}/metrics"
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return [line for line in text.splitlines()
            if line.startswith(monitoring.ACTIVITY + "{") and f'pod="{pod}"' in line]


def api(base: str, path: str, **params: str) -> Any:
    url = f"{base}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.loads(resp.read().decode())
    assert body["status"] == "success", body
    return body["data"]


@pytest.fixture(scope="module")
def stack(lw: Cluster) -> Iterator[dict[str, Any]]:
    """The rendered objects applied, simulated nodes, monitoring started; stopped (by pid) at the end."""
    started = time.monotonic()
    spec = load_spec(DATA)
    rendered = render(spec).components
    tenants = [o for o in rendered["tenants"] if o["kind"] == "Namespace"]
    lw.apply(*rendered["namespaces"], *rendered["gpu-operator"], *rendered["dra-driver"], *rendered["monitoring"],
             *tenants, unfixed_service_monitor(spec))
    attach(lw.kubeconfig, spec).close()
    comps = addon.start(lw.world, spec, DATA, scrape_interval="5s", evaluation_interval="5s")
    settings = json.loads((addons.folder(lw.state_dir, addon.NAME) / "settings.json").read_text())
    yield {"spec": spec, "comps": comps, "prometheus": addon.url(lw.world), "settings": settings,
           "started": started}
    addon.stop(lw.world)


def test_the_tenant_pods_gpu_reaches_prometheus_with_the_tenants_labels(stack: dict[str, Any], lw: Cluster) -> None:
    lw.apply(tenant_pod())
    wait_running(lw, POD, NODE)
    # The simulated exporter of that node names the pod on exactly one GPU, in its own labels.
    rows = wait_for("the exporter attributing a GPU to the tenant pod", lambda: held_rows(stack, NODE, POD),
                    timeout=30)
    assert len(rows) == 1 and f'namespace="{TENANT}"' in rows[0] and 'container="main"' in rows[0]
    stack["gpu"] = rows[0].split('gpu="')[1].split('"')[0]

    # Through OUR ServiceMonitor: the tenant's namespace/pod/container, nothing renamed.
    query = f'{monitoring.ACTIVITY}{{job="{monitoring.EXPORTER_SERVICE}", node="{NODE}", gpu="{stack["gpu"]}"}}'
    series = wait_for("Prometheus holding the attributed series", lambda: [
        r["metric"] for r in api(stack["prometheus"], "/api/v1/query", query=query)["result"]
        if r["metric"].get("pod") == POD], timeout=90)
    m = series[0]
    assert (m["namespace"], m["pod"], m["container"], m["node"]) == (TENANT, POD, "main", NODE)
    assert not [k for k in m if k.startswith("exported_")], m
    assert m["instance"].endswith(f":{monitoring.EXPORTER_PORT}")  # the pod's address, not loopback
    # The GPU nobody holds has no namespace/pod at all.
    others = f'{monitoring.ACTIVITY}{{job="{monitoring.EXPORTER_SERVICE}", node="{NODE}", gpu!="{stack["gpu"]}"}}'
    other = api(stack["prometheus"], "/api/v1/query", query=others)
    assert other["result"] and all("pod" not in r["metric"] and "namespace" not in r["metric"]
                                   for r in other["result"])

    # The negative: the same exporter through the ServiceMonitor without the labeldrop.
    unfixed_query = f'{monitoring.ACTIVITY}{{job="{UNFIXED_JOB}", node="{NODE}", gpu="{stack["gpu"]}"}}'
    unfixed = wait_for("the unfixed job's series", lambda: [
        r["metric"] for r in api(stack["prometheus"], "/api/v1/query", query=unfixed_query)["result"]], timeout=90)
    bad = unfixed[0]
    assert bad["namespace"] == stack["spec"].gpu_operator.namespace and bad["pod"].startswith("nvidia-dcgm-exporter-")
    assert (bad["exported_namespace"], bad["exported_pod"], bad["exported_container"]) == (TENANT, POD, "main")


def test_a_tenants_dra_claim_reaches_prometheus_with_the_tenants_and_the_claims_labels(
        stack: dict[str, Any], lw: Cluster) -> None:
    lw.apply(*dra_claim_and_pod())
    wait_running(lw, DRA_POD, DRA_NODE)
    (result,) = lw.get("resourceclaim", DRA_CLAIM, "-n", TENANT)["status"]["allocation"]["devices"]["results"]
    rows = wait_for("the exporter attributing the claim's GPU to the pod", lambda: held_rows(stack, DRA_NODE, DRA_POD),
                    timeout=30)
    assert len(rows) == 1, rows
    for label in (f'namespace="{TENANT}"', 'container="main"', f'dra_claim_name="{DRA_CLAIM}"',
                  f'dra_claim_namespace="{TENANT}"', 'dra_driver_name="gpu.nvidia.com"',
                  f'dra_pool_name="{result["pool"]}"', f'dra_device_name="{result["device"]}"'):
        assert label in rows[0], (label, rows[0])
    stack["dra_gpu"] = rows[0].split('gpu="')[1].split('"')[0]
    assert result["device"] == f"gpu-{stack['dra_gpu']}"  # the device the scheduler allocated, by its index
    query = f'{monitoring.ACTIVITY}{{job="{monitoring.EXPORTER_SERVICE}", node="{DRA_NODE}"}}'
    series = wait_for("Prometheus holding the claim's series", lambda: [
        r["metric"] for r in api(stack["prometheus"], "/api/v1/query", query=query)["result"]
        if r["metric"].get("pod") == DRA_POD], timeout=90)
    m = series[0]
    assert (m["namespace"], m["pod"], m["gpu"], m["dra_claim_name"]) == (TENANT, DRA_POD, stack["dra_gpu"], DRA_CLAIM)
    assert not [k for k in m if k.startswith("exported_")], m
    # The DRA node's other GPU, which no claim holds, carries no pod.
    others = [r["metric"] for r in api(stack["prometheus"], "/api/v1/query", query=query)["result"]
              if r["metric"]["gpu"] != stack["dra_gpu"]]
    assert others and all("pod" not in o and "dra_claim_name" not in o for o in others)


def test_xid_and_idle_gpu_alerts_fire_with_the_tenant_pods_labels(stack: dict[str, Any], lw: Cluster) -> None:
    gpu, dra_gpu = stack["gpu"], stack["dra_gpu"]
    knobs = {gpu: {"xid": 79, "gr_engine_active": 0.005}}  # XID 79 and (almost) no activity
    lw.kubectl("annotate", "--overwrite", "node", NODE, f"{L.SIMULATE_DCGM}={json.dumps(knobs)}")
    # The claim's GPU idle too; the DRA node's other GPU busy-free but held by nobody.
    lw.kubectl("annotate", "--overwrite", "node", DRA_NODE,
               f"{L.SIMULATE_DCGM}={json.dumps({dra_gpu: {'gr_engine_active': 0.005}})}")
    injected = time.monotonic()

    def firing() -> dict[str, list[dict[str, str]]]:
        out: dict[str, list[dict[str, str]]] = {}
        for a in api(stack["prometheus"], "/api/v1/alerts")["alerts"]:
            if a["state"] == "firing":
                out.setdefault(a["labels"]["alertname"], []).append(a["labels"])
        return out

    def tenant(alerts: dict[str, list[dict[str, str]]], name: str, pod: str = POD) -> list[dict[str, str]]:
        return [a for a in alerts.get(name, []) if a.get("pod") == pod and a.get("namespace") == TENANT]

    def both() -> dict[str, list[dict[str, str]]] | None:
        alerts = firing()
        return alerts if tenant(alerts, "GPUXidError") and tenant(alerts, "GPUAllocatedLowUtilization") \
            and tenant(alerts, "GPUAllocatedLowUtilization", DRA_POD) else None

    # for: 1m on the utilization alert, evaluated every 5 s: it fires about a minute after the injection
    alerts = wait_for("GPUXidError and GPUAllocatedLowUtilization firing for the tenant pod", both,
                      timeout=240, every=2)
    took = time.monotonic() - injected
    xid = tenant(alerts, "GPUXidError")
    assert len(xid) == 1 and (xid[0]["gpu"], xid[0]["err_code"], xid[0]["node"]) == (gpu, "79", NODE)
    assert xid[0]["container"] == "main" and xid[0]["severity"] == "critical"
    low = tenant(alerts, "GPUAllocatedLowUtilization")
    assert len(low) == 1 and low[0]["gpu"] == gpu
    # The claim's GPU, named by its claim: a pod that requests no nvidia.com/gpu still counts as holding it.
    (dra_low,) = tenant(alerts, "GPUAllocatedLowUtilization", DRA_POD)
    assert (dra_low["gpu"], dra_low["node"], dra_low["dra_claim_name"]) == (dra_gpu, DRA_NODE, DRA_CLAIM)
    # Only the held GPUs: the idle GPUs nobody holds never are "allocated, low utilization".
    assert sorted((a["node"], a["gpu"]) for a in alerts["GPUAllocatedLowUtilization"]) == [
        (NODE, gpu), (DRA_NODE, dra_gpu)]
    # The unfixed job's XID alert names the exporter pod: what every alert looked like before the fix.
    unfixed = [a for a in alerts["GPUXidError"] if a.get("job") == UNFIXED_JOB]
    assert unfixed and all(a["pod"].startswith("nvidia-dcgm-exporter-") and a["exported_pod"] == POD for a in unfixed)
    print(f"alerts fired {took:.0f} s after the injection; stack up {time.monotonic() - stack['started']:.0f} s")


def test_the_tenant_is_charged_for_its_dra_gpu_as_for_its_device_plugin_gpu(stack: dict[str, Any], lw: Cluster,
                                                                           cli) -> None:
    """The recording rules (evaluated every minute) count both GPUs for the tenant's namespace, and
    `gpucluster cost` over a window where both were held charges two GPUs' hours, not one."""
    allocated = "namespace_model:gpucluster_gpus_allocated:count"

    def count() -> float | None:
        result = api(stack["prometheus"], "/api/v1/query", query=f'{allocated}{{namespace="{TENANT}"}}')["result"]
        return float(result[0]["value"][1]) if result else None
    wait_for("the recording rule counting the device-plugin GPU and the claim's GPU",
             lambda: count() == 2, timeout=150, every=2)
    start = int(time.time())

    def evaluations_since_start() -> int:  # samples the rule recorded after `start`, each a minute apart
        since = max(int(time.time()) - start, 1)
        result = api(stack["prometheus"], "/api/v1/query",
                     query=f'count_over_time({allocated}{{namespace="{TENANT}"}}[{since}s])')["result"]
        return int(float(result[0]["value"][1])) if result else 0
    wait_for("two recording evaluations after the window's start", lambda: evaluations_since_start() >= 2,
             timeout=180, every=5)
    got = cli("cost", "-i", str(DATA), "--prometheus", stack["prometheus"], "--start", str(start), "--step", "15s",
              "-o", "json")
    assert got.exit_code == 0, got.output
    lines = [r for r in json.loads(got.stdout)["rows"] if r["scope"] == "namespace" and r["namespace"] == TENANT]
    assert len(lines) == 1 and lines[0]["model"] == "H100-SXM5-80GB", lines
    hours = float(lines[0]["allocatedGpuHours"])
    window = (int(time.time()) - start) / 3600
    assert 1.5 * window < hours <= 2 * window + 30 / 3600, (hours, window)  # two GPUs, not one


def test_verify_reads_the_alert_rules_the_real_prometheus_loaded(stack: dict[str, Any], lw: Cluster) -> None:
    """alert-rules through the real Prometheus: every alert it loaded from our PrometheusRule evaluates the
    rendered expression (Prometheus answers the query as it parsed it), waits the rendered ``for`` and carries
    the rendered labels; an alert neutered in the live PrometheusRule fails the row twice over, as a
    difference of the object and as what the Prometheus then evaluates."""
    from gpucluster.verify import cluster as vcluster
    from gpucluster.verify.model import Verdict

    spec, url = stack["spec"], stack["prometheus"]

    def row():
        snap = vcluster.fetch(spec, lw.kubeconfig, simulated=True, prometheus=url)
        assert snap.prometheus_loaded is not None, snap.prometheus_error
        (r,) = vcluster.alert_checks(spec, snap)
        return r

    healthy = row()
    assert healthy.verdict is Verdict.passed and f"loaded by {url}" in healthy.actual, healthy
    rule = lw.get("prometheusrule", monitoring.RULE_NAME, "-n", spec.monitoring.namespace)
    groups = rule["spec"]["groups"]
    neutered = [dict(g, rules=[dict(r, expr="vector(0) > 1") if r.get("alert") == "GPUDoubleBitECCError" else r
                               for r in g["rules"]]) for g in groups]
    lw.kubectl("patch", "prometheusrule", monitoring.RULE_NAME, "-n", spec.monitoring.namespace, "--type=merge",
               "-p", json.dumps({"spec": {"groups": neutered}}))
    try:
        # the operator regenerates the rule file, the add-on's reloader hands it to Prometheus
        failed = wait_for("Prometheus evaluating the neutered alert", lambda: (
            r if "Prometheus evaluates 'vector(0) > 1'" in (r := row()).reason else None), timeout=120, every=2)
        assert failed.verdict is Verdict.failed
        assert "spec.groups[0].rules" in failed.reason and "vector(0) > 1" in failed.reason
    finally:
        lw.kubectl("patch", "prometheusrule", monitoring.RULE_NAME, "-n", spec.monitoring.namespace,
                   "--type=merge", "-p", json.dumps({"spec": {"groups": groups}}))
    wait_for("the rendered rules back in Prometheus", lambda: row().verdict is Verdict.passed, timeout=120, every=2)


def test_everything_the_add_on_started_stops_by_pid(stack: dict[str, Any], lw: Cluster) -> None:
    comps = addons.load(lw.state_dir, addon.NAME)
    assert set(comps) == {"prometheus-operator", "monitoring-sim", "prometheus"}
    assert all(addons.alive(lw.state_dir, c) for c in comps.values())
    stopped = addon.stop(lw.world)
    assert sorted(stopped) == sorted(comps)
    for c in comps.values():
        assert procs.gone(c.pid), c
        assert not procs.probe(c.health_url, None)[0], c.health_url
    assert addons.load(lw.state_dir, addon.NAME) == {}
