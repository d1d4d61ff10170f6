"""Where verify's rows come from, read without a cluster: the recorded snapshot's round trip, the local
world's simulated DCGM exporter, the exporter pods through the pod proxy, --metrics-url endpoints, a
Prometheus's loaded rules, the watchdog's and driver upgrades' reads, and the pytest suite's tests."""

from __future__ import annotations

import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from verify_faults import recorded, spec

from gpucluster import expected, kube
from gpucluster import labels as L
from gpucluster.errors import ApiError
from gpucluster.render import releases
from gpucluster.render.monitoring import DCGM_CONFIGMAP, DCGM_CSV_KEY, dcgm_csv
from gpucluster.verify import checklist, cluster, health, snapshot, upgrades, watchdog
from gpucluster.verify.model import Verdict, fail, ok, skip


class FakeKube:
    """Answers GETs and LISTs from a table (path prefix -> answer); records every path asked."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers, self.asked, self.sent = answers, [], []

    def __call__(self, *_a: Any, **_k: Any) -> FakeKube:  # stands in for the Kube class
        return self

    def __enter__(self) -> FakeKube:
        return self

    def __exit__(self, *_exc: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def _answer(self, path: str) -> Any:
        self.asked.append(path)
        hit = [k for k in self.answers if path.startswith(k)]
        if not hit:
            raise AssertionError(f"unexpected request {path}")
        answer = self.answers[max(hit, key=len)]
        if isinstance(answer, Exception):
            raise answer
        return copy.deepcopy(answer)

    def get(self, path: str) -> Any:
        return self._answer(path)

    def items(self, path: str) -> list[Any]:
        return self._answer(path) or []

    def text(self, path: str) -> str:
        return self._answer(path)

    def list(self, path: str) -> list[Any] | None:
        return self._answer(path)

    def answer(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        self.sent.append((method, path, body))
        return 201, self._answer(path)


def test_a_snapshot_survives_its_recording_without_managed_fields() -> None:
    snap = recorded("local-world")
    snap.nodes[0]["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    data = snapshot.to_data(snap)
    assert "managedFields" not in data["nodes"][0]["metadata"]
    assert data["access"][0][-1] in (True, False) and len(data["access"][0]) == 7
    back = snapshot.from_data(json.loads(json.dumps(data)))
    assert back.access == snap.access and back.helm_namespaces == snap.helm_namespaces
    assert back.nodes[1:] == snap.nodes[1:] and back.dcgm == snap.dcgm
    with pytest.raises(ValueError, match="not snapshot fields: bogus"):
        snapshot.from_data({**data, "bogus": 1})


def test_the_local_worlds_exporter_is_read_from_the_cluster_as_its_process_serves_it(monkeypatch) -> None:
    from gpucluster.simulator import dcgm_live

    nodes = recorded("local-world").nodes
    h200 = next(n for n in nodes if n["metadata"]["name"] == "h200-1")
    h200["metadata"].setdefault("annotations", {})[L.SIMULATE_DCGM] = json.dumps({"3": {"xid": 79}})
    ns = spec().gpu_operator.namespace
    fake = FakeKube({kube.configmap(ns, DCGM_CONFIGMAP): {"data": {DCGM_CSV_KEY: dcgm_csv()}},
                     kube.NODES: nodes, kube.PODS: [], dcgm_live.DRA_SLICES: [], kube.RESOURCE_CLAIMS: [],
                     kube.SUBJECT_ACCESS_REVIEWS: {"status": {"allowed": True}}})
    monkeypatch.setattr(dcgm_live.kube, "Kube", fake)
    entries = {e["node"]: e for e in health.read_simulated(spec(), "kubeconfig")}
    gpu_nodes = {n for n, s in expected.host_states(spec()).items() if s.gpu_count}
    assert set(entries) == gpu_nodes
    assert all(e["source"] == health.SIMULATED and e["error"] == "" and e["status"] == 0 for e in entries.values())
    assert 'DCGM_FI_DEV_XID_ERRORS{gpu="3"' in entries["h200-1"]["text"]
    xid = [line for line in entries["h200-1"]["text"].splitlines()
           if line.startswith('DCGM_FI_DEV_XID_ERRORS{gpu="3"')]
    assert xid and xid[0].endswith(" 79")
    fake.answers[kube.configmap(ns, DCGM_CONFIGMAP)] = None  # no metrics CSV: no exporter starts
    down = health.read_simulated(spec(), "kubeconfig")
    assert down and all(e["text"] == "" and e["status"] == 503 and "cannot mount its metrics CSV" in e["error"]
                        for e in down)
    assert health.read_simulated(spec(), None) == []


def test_the_simulated_exporter_with_dra_attribution_serves_nothing_until_its_informer_can_list(monkeypatch) -> None:
    """As dcgm-exporter 4.5.1-4.8.0 waits for its v1beta1 ResourceSlice informer before serving: the version not
    served, or its account not allowed to list and watch, is a 503 that names why; once allowed it serves."""
    from gpucluster.simulator import dcgm_live

    ns = spec().gpu_operator.namespace
    assert spec().dcgm_dra_attribution
    fake = FakeKube({kube.configmap(ns, DCGM_CONFIGMAP): {"data": {DCGM_CSV_KEY: dcgm_csv()}},
                     kube.NODES: recorded("local-world").nodes, kube.PODS: [], dcgm_live.DRA_SLICES: None,
                     kube.RESOURCE_CLAIMS: [], kube.SUBJECT_ACCESS_REVIEWS: {"status": {"allowed": False}}})
    monkeypatch.setattr(dcgm_live.kube, "Kube", fake)
    unserved = health.read_simulated(spec(), "kubeconfig")
    assert unserved and all(e["status"] == 503 and "does not serve /apis/resource.k8s.io/v1beta1/resourceslices"
                            in e["error"] for e in unserved)
    fake.answers[dcgm_live.DRA_SLICES] = []
    denied = health.read_simulated(spec(), "kubeconfig")
    assert all(e["status"] == 503 and f"system:serviceaccount:{ns}:nvidia-dcgm-exporter may not list" in e["error"]
               for e in denied)
    review = fake.sent[-1][2]["spec"]
    assert review["resourceAttributes"] == {"group": "resource.k8s.io", "version": "v1beta1",
                                            "resource": "resourceslices", "verb": "list"}
    fake.answers[kube.SUBJECT_ACCESS_REVIEWS] = {"status": {"allowed": True}}
    served = health.read_simulated(spec(), "kubeconfig")
    assert all(e["status"] == 0 and e["error"] == "" for e in served)
    assert [b["spec"]["resourceAttributes"]["verb"] for _, _, b in fake.sent[-2:]] == ["list", "watch"]
    off = spec().model_copy(deep=True)
    off.gpu_operator.dcgm_exporter.dra_attribution = False
    fake.answers[dcgm_live.DRA_SLICES] = None
    assert all(e["status"] == 0 for e in health.read_simulated(off, "kubeconfig"))  # never asks without the env


def test_exporter_pods_are_read_through_the_pod_proxy() -> None:
    def pod(name: str, node: str | None, phase: str = "Running", app: str = "nvidia-dcgm-exporter") -> dict:
        return {"metadata": {"name": name, "namespace": "gpu-operator", "labels": {"app": app}},
                "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}

    pods = [pod("e-1", "n1"), pod("e-2", "n2"), pod("e-3", "n3", "Pending"), pod("e-4", None),
            pod("v-1", "n1", app="nvidia-operator-validator")]
    api = FakeKube({kube.pod_proxy("gpu-operator", "e-1", 9400, "metrics"): "X 1\n",
                    kube.pod_proxy("gpu-operator", "e-2", 9400, "metrics"): ApiError("GET ...: HTTP 403", 403, "")})
    got = sorted(health.scrape_exporter_pods(api, pods), key=lambda e: e["node"])
    assert got == [
        {"source": "DCGM exporter pod gpu-operator/e-1", "node": "n1", "text": "X 1\n", "error": "", "status": 0},
        {"source": "DCGM exporter pod gpu-operator/e-2", "node": "n2", "text": "", "error": "GET ...: HTTP 403",
         "status": 403}]
    assert sorted(api.asked) == sorted(kube.pod_proxy("gpu-operator", n, 9400, "metrics") for n in ("e-1", "e-2"))


class _Serve:
    """One local HTTP server answering every GET with ``body`` (a JSON or text page)."""

    def __init__(self, body: str, status: int = 200) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(status)
                self.end_headers()
                self.wfile.write(body.encode())
                Handler.paths.append(self.path)

            def log_message(self, *_a: Any) -> None:
                pass

        Handler.paths = []
        self.handler = Handler
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_metrics_urls_are_scraped_and_an_unreachable_one_says_why() -> None:
    text = 'DCGM_FI_DEV_XID_ERRORS{gpu="0",node="a"} 0\n'
    page = _Serve(text)
    try:
        (good,) = health.scrape_urls([f"{page.url}/metrics"])
    finally:
        page.close()
    assert good == {"source": f"{page.url}/metrics", "node": "", "text": text, "error": "", "url": True}
    (bad,) = health.scrape_urls(["http://127.0.0.1:9/metrics"])
    assert bad["text"] == "" and "refused" in bad["error"] and bad["url"] is True


def test_a_prometheuss_loaded_rules_are_read_from_its_rules_api() -> None:
    groups = [{"name": "g", "file": "/x/monitoring-r-1.yaml", "rules": [{"name": "A", "type": "alerting"}]}]
    prom = _Serve(json.dumps({"status": "success", "data": {"groups": groups}}))
    snap = snapshot.Snapshot()
    try:
        cluster.read_prometheus(snap, prom.url + "/")
    finally:
        prom.close()
    assert (snap.prometheus_url, snap.prometheus_loaded, snap.prometheus_error) == (prom.url, groups, "")
    assert prom.handler.paths == ["/api/v1/rules?type=alert"]
    down = snapshot.Snapshot()
    cluster.read_prometheus(down, "http://127.0.0.1:9")
    assert down.prometheus_loaded is None and "refused" in down.prometheus_error
    assert cluster.local_prometheus(None) is None


def test_a_prometheus_that_cannot_be_read_fails_alert_rules_saying_so() -> None:
    snap = recorded("real-cluster")
    snap.prometheus_loaded, snap.prometheus_error = None, "connection refused"
    (row,) = cluster.alert_checks(spec(), snap)
    assert row.verdict is Verdict.failed and f"the Prometheus at {snap.prometheus_url} could not be read: " \
                                               "connection refused" in row.reason


def test_the_watchdog_reads_nodes_and_the_sharing_config_once_settled(monkeypatch) -> None:
    nodes = recorded("real-cluster").nodes
    ns = spec().gpu_operator.namespace
    from gpucluster.render.gpu_operator import DEVICE_PLUGIN_CONFIGMAP, device_plugin_config, dump

    configs = {k: dump(v) for k, v in device_plugin_config(spec()).items()}
    fake = FakeKube({kube.configmap(ns, DEVICE_PLUGIN_CONFIGMAP): {"data": configs}, kube.NODES: nodes})
    monkeypatch.setattr(kube, "Kube", fake)
    rows = watchdog.live_rows(spec(), "kubeconfig", None, 0.0, 3600.0)
    assert rows and {r.check for r in rows} <= {"mig-reconfig", "sharing-reconfig"}
    assert {r.verdict for r in rows} == {Verdict.passed}
    one = watchdog.live_rows(spec(), "kubeconfig", None, 0.0, 3600.0, node="l4-1")
    assert {r.subject for r in one} == {"l4-1"}


def test_driver_upgrades_are_read_only_where_a_node_carries_a_state() -> None:
    nodes = recorded("real-cluster").nodes
    api = FakeKube({kube.EVENTS: [{"e": 1}], "/apis/apps/v1/namespaces/gpu-operator/daemonsets": [{"d": 1}],
                    "/apis/apps/v1/namespaces/gpu-operator/controllerrevisions": [{"r": 1}],
                    "/api/v1/namespaces/gpu-operator/pods": [{"p": 1}]})
    assert upgrades.fetch(api, "gpu-operator", nodes) is None and api.asked == []
    nodes[0]["metadata"]["labels"][upgrades.STATE_LABEL] = "upgrade-done"
    got = upgrades.fetch(api, "gpu-operator", nodes)
    assert got is not None
    assert (got.events, got.daemonsets, got.revisions, got.pods, got.namespace) == (
        [{"e": 1}], [{"d": 1}], [{"r": 1}], [{"p": 1}], "gpu-operator")
    assert api.asked[0] == kube.EVENTS + "?fieldSelector=reason%3D" + upgrades.EVENT_REASON


def test_the_checklist_prints_each_point_with_its_checks_and_note() -> None:
    lines = checklist.lines()
    assert len(lines) == len(checklist.CHECKLIST)
    assert lines[0].startswith(" 1. Version matrix pinned (Kubernetes, driver, operators, charts)\n"
                               "    checks: charts-installed\n    note: validation refuses")
    assert "\n    checks: —\n" in next(line for line in lines if "Cost labels" in line)


def test_the_suites_cluster_test_passes_fails_and_skips_as_the_row_says() -> None:
    from gpucluster.verify.suite import test_cluster as suite

    class Config:
        stash = pytest.Stash()

        def getoption(self, name: str) -> Any:
            return {"--gpucluster-allow-not-measured": ["gpu-health"], "--gpucluster-inventory": str(
                Path(__file__).resolve().parents[2] / "inventories" / "local")}[name]

    config = Config()
    suite.test_cluster(ok("node-ready", "a", "True", "True"), config)  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match=r"node-ready a: expected True, actual False \(not Ready\)"):
        suite.test_cluster(fail("node-ready", "a", "True", "False", "not Ready"), config)  # type: ignore[arg-type]
    with pytest.raises(pytest.skip.Exception, match="no exporter"):
        suite.test_cluster(skip("gpu-health", "a", "no exporter"), config)  # type: ignore[arg-type]
    with pytest.raises(pytest.fail.Exception, match="not measured: no CRD"):
        suite.test_cluster(skip("tenant-queue", "t", "no CRD"), config)  # type: ignore[arg-type]


class ListingKube(FakeKube):
    """A FakeKube that answers LISTs (None for a resource not served) and access reviews by a rule."""

    def __init__(self, answers: dict[str, Any], allowed: Any = None, refuse_reviews: bool = False) -> None:
        super().__init__(answers)
        self.allowed, self.refuse_reviews, self.reviews = allowed, refuse_reviews, []

    def list(self, path: str) -> Any:
        return self._answer(path)

    def create(self, path: str, body: dict) -> dict:
        assert path == kube.SUBJECT_ACCESS_REVIEWS
        if self.refuse_reviews:
            raise ApiError("POST subjectaccessreviews: HTTP 403", 403, "Forbidden")
        self.reviews.append(body)
        return {"status": {"allowed": bool(self.allowed and self.allowed(body["spec"]))}}


def _served(**over: Any) -> dict[str, Any]:
    out: dict[str, Any] = {path: [] for path in snapshot.PATHS.values()}
    out[kube.NODES] = [{"metadata": {"name": "n1"}}]
    out.update(over)
    return out


def test_fetch_asks_one_list_per_field_the_release_namespaces_and_the_operators_pods(monkeypatch) -> None:
    answers = _served(**{
        kube.VOLCANO_QUEUES: None,  # the Queue CRD is not installed
        "/api/v1/namespaces/gpu-operator/secrets": [{"r": 1}], "/api/v1/namespaces/volcano-system/secrets": [{"r": 2}],
        "/api/v1/namespaces/gpu-operator/pods": [{"p": 1}], "/apis/x/devicetaintrules": []})
    fake = ListingKube(answers, allowed=lambda s: s["resourceAttributes"]["verb"] == "get")
    monkeypatch.setattr(snapshot.kube, "Kube", fake)
    questions = [snapshot.AccessQuestion("g", "get", "", "pods", "ns"),
                 snapshot.AccessQuestion("g", "delete", "", "pods", "ns")]
    seen = []
    snap = snapshot.fetch("kc", None, questions, {"device_taint_rules": "/apis/x/devicetaintrules"},
                          helm_namespaces=["gpu-operator", "volcano-system", "gpu-operator"],
                          operator_namespace="gpu-operator", then=lambda api, s: seen.append((api, s.calls)))
    assert snap.nodes == [{"metadata": {"name": "n1"}}] and snap.queues is None
    assert snap.helm_namespaces == ("gpu-operator", "volcano-system")
    assert snap.helm_releases == [{"r": 1}, {"r": 2}] and snap.operator_pods == [{"p": 1}]
    assert snap.calls == len(snapshot.PATHS) + 2 + 1
    assert "/apis/x/devicetaintrules" in fake.asked and kube.DEVICE_TAINT_RULES not in fake.asked
    assert snap.access == {questions[0]: True, questions[1]: False} and snap.reviews == 2
    assert seen == [(fake, snap.calls)]


def test_fetch_says_what_read_access_verify_needs(monkeypatch) -> None:
    forbidden = ApiError("GET /api/v1/resourcequotas: HTTP 403", 403, "Forbidden")
    monkeypatch.setattr(snapshot.kube, "Kube", ListingKube(_served(**{kube.RESOURCE_QUOTAS: forbidden})))
    with pytest.raises(ApiError, match="verification needs read access to nodes, DRA objects, quotas") as err:
        snapshot.fetch("kc")
    assert err.value.status == 403
    broken = ApiError("GET /api/v1/resourcequotas: HTTP 500", 500, "")
    monkeypatch.setattr(snapshot.kube, "Kube", ListingKube(_served(**{kube.RESOURCE_QUOTAS: broken})))
    with pytest.raises(ApiError, match=r"HTTP 500$"):
        snapshot.fetch("kc")
    from gpucluster.errors import ClusterUnreachable

    monkeypatch.setattr(snapshot.kube, "Kube", ListingKube(_served(**{kube.NAMESPACES: None})))
    with pytest.raises(ClusterUnreachable, match="/api/v1/namespaces is not served; is this a Kubernetes API server"):
        snapshot.fetch("kc")


def test_fetch_leaves_what_it_may_not_read_unread_with_the_reason(monkeypatch) -> None:
    refused = ApiError("GET secrets: HTTP 403", 403, "Forbidden")
    answers = _served(**{"/api/v1/namespaces/a/secrets": refused, "/api/v1/namespaces/gpu-operator/pods": refused})
    monkeypatch.setattr(snapshot.kube, "Kube", ListingKube(answers, refuse_reviews=True))
    snap = snapshot.fetch("kc", None, [snapshot.AccessQuestion("g", "get", "", "pods", "ns")], helm_namespaces=["a"],
                          operator_namespace="gpu-operator")
    assert snap.helm_releases is None
    assert snap.helm_error == ("GET secrets: HTTP 403; reading installed chart versions needs list on Secrets "
                               "labelled owner=helm in a")
    assert snap.operator_pods is None and snap.operator_pods_error == (
        "GET secrets: HTTP 403; reading GPU health from the GPU Operator's exporter and validator pods needs list on "
        "pods in gpu-operator")
    assert snap.access is None and snap.reviews == 0
    assert snap.access_error == ("POST subjectaccessreviews: HTTP 403; checking tenant RBAC needs create on "
                                 "subjectaccessreviews (authorization.k8s.io)")
    broken = ApiError("GET pods: HTTP 500", 500, "")
    monkeypatch.setattr(snapshot.kube, "Kube", ListingKube(_served(**{"/api/v1/namespaces/gpu-operator/pods": broken})))
    with pytest.raises(ApiError, match="HTTP 500"):
        snapshot.fetch("kc", operator_namespace="gpu-operator")


def test_clusters_fetch_reads_the_health_sources_its_world_has(monkeypatch) -> None:
    calls: dict[str, Any] = {}

    def fake_fetch(kubeconfig, context, questions, paths, **kw):
        calls.update(kw, questions=len(questions), paths=paths)
        snap = snapshot.Snapshot(operator_pods=[{"pod": 1}])
        kw["then"]("api", snap)
        return snap

    monkeypatch.setattr(snapshot, "fetch", fake_fetch)
    monkeypatch.setattr(health, "scrape_exporter_pods", lambda api, pods: [{"pods": pods, "api": api}])
    monkeypatch.setattr(health, "scrape_urls", lambda urls: [{"urls": list(urls)}])
    monkeypatch.setattr(health, "read_simulated", lambda spec_, kc: [{"simulated": kc}])
    monkeypatch.setattr(cluster, "read_prometheus", lambda snap, url: setattr(snap, "prometheus_url", url))
    monkeypatch.setattr(cluster, "local_prometheus", lambda kc: "http://local-prom")
    real = cluster.fetch(spec(), "kc", None, metrics_urls=["u"], prometheus="http://prom")
    assert real.dcgm == [{"pods": [{"pod": 1}], "api": "api"}, {"urls": ["u"]}]
    assert real.prometheus_url == "http://prom"
    assert calls["operator_namespace"] == spec().gpu_operator.namespace
    assert calls["helm_namespaces"] == [r.namespace for r in releases(spec())]
    assert calls["questions"] > 700 and "device_taint_rules" in calls["paths"]
    local = cluster.fetch(spec(), "kc", None, simulated=True)
    assert local.dcgm == [{"urls": []}, {"simulated": "kc"}]  # no pod proxy: kwok pods have no address
    assert local.prometheus_url == "http://local-prom"


def test_the_suite_parametrizes_one_test_per_row(monkeypatch) -> None:
    from gpucluster.verify.suite import test_cluster as suite

    rows = [ok("node-ready", "a", "True", "True"), skip("gpu-health", "a", "no exporter")]
    monkeypatch.setattr(suite, "cluster_results", lambda config: rows)

    class Metafunc:
        fixturenames = ["row", "pytestconfig"]
        config = object()

        def parametrize(self, name: str, values: list, ids: list[str]) -> None:
            self.got = (name, values, ids)

    meta = Metafunc()
    suite.pytest_generate_tests(meta)  # type: ignore[arg-type]
    assert meta.got == ("row", rows, ["node-ready[a]", "gpu-health[a]"])
    other = Metafunc()
    other.fixturenames = ["host"]
    suite.pytest_generate_tests(other)  # type: ignore[arg-type]
    assert not hasattr(other, "got")


def test_the_suites_cluster_test_passes_a_warning_with_a_pytest_warning_and_fails_a_failure() -> None:
    from gpucluster.verify.model import warn
    from gpucluster.verify.suite import test_cluster as suite

    row = warn("control-plane-certificates", "apiserver/x:6443", "valid", "expires soon", "renew: do X")
    with pytest.warns(UserWarning, match="control-plane-certificates apiserver/x:6443: renew: do X"):
        suite.test_cluster(row, None)  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="expected valid, actual expired"):
        suite.test_cluster(fail("control-plane-certificates", "apiserver/x:6443", "valid", "expired"), None)  # type: ignore[arg-type]


def test_the_suites_host_test_matches_hosts_by_name_or_address_and_judges_their_rows(monkeypatch) -> None:
    from gpucluster.verify.suite import test_hosts as suite

    local = spec()
    h200 = local.host("h200-1")
    calls = []

    def host_checks(spec_, host, h):
        calls.append(host.name)
        return [ok("host-swap", host.name, "off", "off"), fail("host-sysctl", f"{host.name}/x", "1", "0"),
                skip("host-rdma", host.name, "no NIC")]

    monkeypatch.setattr(suite, "host_checks", host_checks)
    monkeypatch.setattr(suite, "_RESULTS", {})

    class Host:
        def __init__(self, name: str) -> None:
            self.backend = type("B", (), {"get_hostname": lambda _self: name})()

    class Config:
        stash = pytest.Stash()

        def getoption(self, name: str) -> Any:
            return {"--gpucluster-allow-not-measured": [], "--gpucluster-inventory": str(
                Path(__file__).resolve().parents[2] / "inventories" / "local")}[name]

    config = Config()
    suite.test_host(Host("h200-1"), local, "host-swap", config)  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match=r"h200-1/x: expected 1, actual 0"):
        suite.test_host(Host("h200-1"), local, "host-sysctl", config)  # type: ignore[arg-type]
    with pytest.raises(pytest.fail.Exception, match=r"not measured: no NIC"):
        suite.test_host(Host("h200-1"), local, "host-rdma", config)  # type: ignore[arg-type]
    with pytest.raises(pytest.skip.Exception, match="host-nouveau does not apply to h200-1"):
        suite.test_host(Host("h200-1"), local, "host-nouveau", config)  # type: ignore[arg-type]
    assert calls == ["h200-1"]  # the host's rows are computed once
    # a testinfra host named by its address is the spec host with that address (the local world's share one)
    first = next(h.name for h in local.hosts if h.address == h200.address)
    with pytest.raises(AssertionError, match=rf"{first}/x: expected 1"):
        suite.test_host(Host(h200.address), local, "host-sysctl", config)  # type: ignore[arg-type]
    with pytest.raises(pytest.fail.Exception, match="stray is neither the name nor the address of a host of cluster "
                                                    "local"):
        suite.test_host(Host("stray"), local, "host-swap", config)  # type: ignore[arg-type]
