"""Verification logic on snapshots recorded from the local world (tests/data/verify): the healthy ones pass,
and a fault's row says what it expected and what it found. The named fault matrix is
tests/unit/verify_faults.py, run by tests/unit/test_check_coverage.py."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from verify_faults import FAULTS, recorded
from verify_faults import node as node_of

from gpucluster import cel, expected
from gpucluster import labels as L
from gpucluster.spec import load_spec
from gpucluster.verify import checks, cluster, report, tenancy
from gpucluster.verify.model import Verdict
from gpucluster.verify.model import problems as model_problems
from gpucluster.verify.snapshot import AccessQuestion, Snapshot


def perfect(spec) -> Snapshot:
    """The healthy real-cluster recording (``spec`` is the local inventory it was recorded for)."""
    return recorded("real-cluster")


@pytest.fixture(scope="module")
def spec(request):
    from pathlib import Path

    return load_spec(Path(__file__).resolve().parents[2] / "inventories" / "local")


def failures(results):
    return {(r.check, r.subject) for r in results if r.verdict is Verdict.failed}


def lower_allocatable(s):
    FAULTS["allocatable-lowered"].mutate(s)


def remove_taint(s):
    FAULTS["taint-removed"].mutate(s)


def cluster_admin_bound(s):
    FAULTS["cluster-admin-bound"].mutate(s)


def quota_in_canonical_units(s):
    # what the API server may return: the same values in other units must still pass
    q = next(q for q in s.quotas if q["metadata"]["namespace"] == "ml-research")
    q["spec"]["hard"]["requests.memory"] = str(2 * 2**40)


def test_failure_rows_say_expected_and_actual(spec):
    snap = perfect(spec)
    gpus = int(node_of(snap, "l4-1")["status"]["allocatable"]["nvidia.com/gpu"])
    lower_allocatable(snap)
    row = next(r for r in cluster.run(spec, snap) if r.verdict is Verdict.failed)
    assert f"nvidia.com/gpu={gpus}" in row.expected and f"nvidia.com/gpu={gpus - 1}" in row.actual
    assert "1 nvidia.com/gpu withheld" in row.reason


def test_missing_node_fails_ready_and_skips_the_rest(spec):
    snap = perfect(spec)
    snap.nodes = [n for n in snap.nodes if n["metadata"]["name"] != "l4-2"]
    results = cluster.run(spec, snap)
    assert failures(results) == {("node-ready", "l4-2")}
    skipped = {r.check for r in results if r.subject == "l4-2" and r.verdict is Verdict.skipped}
    assert {"node-capacity", "node-allocatable", "node-labels", "node-taints", "gpu-health"} <= skipped


def test_crds_absent_are_skips_with_reasons(spec):
    snap = perfect(spec)
    snap.queues = None
    snap.prometheus_rules = None
    results = cluster.run(spec, snap)
    skips = {r.check: r.reason for r in results if r.verdict is Verdict.skipped}
    assert "Queue CRD" in skips["tenant-queue"] and "PrometheusRule CRD" in skips["alert-rules"]


def test_quota_in_other_units_still_passes(spec):
    snap = perfect(spec)
    quota_in_canonical_units(snap)
    assert failures(cluster.run(spec, snap)) == set()


def test_rbac_failure_names_group_verb_and_resource(spec):
    snap = perfect(spec)
    cluster_admin_bound(snap)
    row = next(r for r in cluster.run(spec, snap) if r.check == "tenant-rbac" and r.verdict is Verdict.failed)
    assert "group inference may create resourcequotas in inference (the spec says it may not)" in row.reason


def test_rbac_not_reviewable_is_a_skip_with_the_reason(spec):
    snap = perfect(spec)
    snap.access, snap.access_error = None, "POST subjectaccessreviews: HTTP 403; checking tenant RBAC needs create"
    skips = {(r.check, r.subject): r.reason for r in cluster.run(spec, snap) if r.verdict is Verdict.skipped}
    assert "needs create" in skips[("tenant-rbac", "tenants/inference")]


def test_access_questions_cover_every_group_and_protected_write(spec):
    qs = tenancy.access_questions(spec)
    assert {q.group for q in qs} == {"ml-research", "ml-research-admins", "inference", "inference-admins"}
    want = tenancy.expected_access(spec)
    assert want[AccessQuestion("inference", "delete", "", "resourcequotas", "inference")] is False
    assert want[AccessQuestion("inference", "create", "resource.k8s.io", "resourceclaimtemplates", "inference")]
    assert want[AccessQuestion("inference-admins", "create", "", "secrets", "inference")]
    assert AccessQuestion("inference", "create", "", "secrets", "inference") not in want
    review = AccessQuestion("g", "update", "resource.k8s.io", "resourceclaims/status", "ns").review()
    assert review["spec"]["groups"] == ["g", "system:authenticated"]
    assert review["spec"]["resourceAttributes"] == {"verb": "update", "group": "resource.k8s.io",
                                                    "resource": "resourceclaims", "subresource": "status",
                                                    "namespace": "ns"}


def test_cel_subset():
    prog = cel.compile_expr("device.driver == 'gpu.nvidia.com' && "
                            "device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('h100') && "
                            "device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('9.0.0')) >= 0")
    dev = {"attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"},
                          "cudaComputeCapability": {"version": "9.0.0"}}}
    assert cel.matches(prog, "gpu.nvidia.com", dev)
    dev["attributes"]["cudaComputeCapability"] = {"version": "8.9.0"}
    assert not cel.matches(prog, "gpu.nvidia.com", dev)
    names = cel.compile_expr("device.attributes['gpu.nvidia.com'].productName in ['NVIDIA L4', 'NVIDIA L40S'] "
                             "&& device.attributes['gpu.nvidia.com'].type == 'gpu'")
    assert cel.matches(names, "gpu.nvidia.com", {"attributes": {"productName": {"string": "NVIDIA L40S"},
                                                                "type": {"string": "gpu"}}})
    assert not cel.matches(names, "gpu.nvidia.com", dev)
    assert not cel.matches(cel.compile_expr("device.driver == 'gpu.nvidia.com' && false"), "gpu.nvidia.com", dev)
    assert cel.matches(cel.compile_expr("size(device.attributes['gpu.nvidia.com'].productName) > 2"),
                       "gpu.nvidia.com", dev)
    # a missing attribute fails the evaluation, as it fails the scheduler's allocation: never "no match"
    missing = cel.compile_expr("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'")
    assert cel.evaluate(missing, "gpu.nvidia.com", dev).verdict == "error"
    with pytest.raises(cel.SelectorFailed, match="no such key: profile"):
        cel.matches(missing, "gpu.nvidia.com", dev)
    with pytest.raises(cel.CompileError, match="undefined field 'foo'"):
        cel.compile_expr("device.foo == 1")
    with pytest.raises(cel.Unsupported):
        cel.compile_expr("isURL(device.attributes['gpu.nvidia.com'].productName)")



def test_reports(spec):
    snap = perfect(spec)
    remove_taint(snap)
    results = cluster.run(spec, snap)
    data = json.loads(report.to_json(results, {"cluster": "local"}))
    assert data["summary"]["fail"] == 1
    suite = ET.fromstring(report.to_junit(results))
    assert suite.get("failures") == "1"
    failed = [c for c in suite if c.find("failure") is not None]
    assert failed[0].get("classname") == "node-taints" and failed[0].get("name") == "h200-1"


def load_spec_local():
    from pathlib import Path

    return load_spec(Path(__file__).resolve().parents[2] / "inventories" / "local")


def test_the_local_world_does_not_measure_what_its_missing_charts_would_run(spec):
    snap = perfect(spec)
    snap.daemonsets, snap.helm_releases = [], []
    results = cluster.run(spec, snap, charts_reachable=False)
    assert failures(results) == set()
    unmeasured = {(r.check, r.reason.split(" (")[0].split(":")[0]) for r in results if r.verdict is Verdict.skipped}
    # flannel's chart brings the NetworkPolicy enforcer: without it nothing is measured there either
    assert {c for c, _ in unmeasured} == {"daemonsets-ready", "charts-installed", "network-policy-enforcer"}
    # the same cluster, where charts could be fetched: every one of them fails instead
    assert {c for c, _ in failures(cluster.run(spec, snap))} == {"daemonsets-ready", "charts-installed",
                                                                 "network-policy-enforcer"}


def test_unreadable_helm_records_are_not_measured(spec):
    snap = perfect(spec)
    snap.helm_releases, snap.helm_error = None, "403 Forbidden"
    rows = [r for r in cluster.run(spec, snap) if r.check == "charts-installed"]
    assert rows and all(r.verdict is Verdict.skipped and "403" in r.reason for r in rows)
    assert model_problems(rows, {}) and not model_problems(rows, checks.parse(["charts-installed"]))
    # another check's allowance does not cover them
    assert model_problems(rows, checks.parse(["daemonsets-ready"]))


def test_a_run_with_only_unmeasured_rows_fails():
    from gpucluster.verify.model import skip

    rows = [skip("daemonsets-ready", "x/y", "not installed")]
    assert model_problems(rows, {}) == ("1 row(s) not measured (daemonsets-ready; each row says why): "
                                        "`--allow-not-measured daemonsets-ready` accepts them")
    assert model_problems([], {}) == ""


def test_gpu_health_without_any_source_is_not_measured_naming_what_it_looked_for(spec):
    snap = perfect(spec)
    snap.dcgm, snap.operator_pods = [], []
    rows = {r.subject: r for r in cluster.run(spec, snap) if r.check == "gpu-health"}
    # a DRA node's slice is a source with the driver's health monitor on: no taint there, healthy
    dra = {h for h, st in expected.host_states(spec).items() if st.devices}
    assert dra and all(rows[h].verdict is Verdict.passed and "NVMLDeviceHealthCheck on" in rows[h].actual for h in dra)
    others = [r for h, r in rows.items() if h not in dra]
    assert others and all(r.verdict is Verdict.skipped for r in others)
    assert all("no DCGM exporter pod" in r.reason and "no GPU Operator validator pod" in r.reason
               and "node-problem-detector" in r.reason for r in others)
    off = spec.model_copy(update={"dra": spec.dra.model_copy(update={"device_health_check": False})})
    rows = {r.subject: r for r in cluster.run(off, snap) if r.check == "gpu-health"}
    assert all(rows[h].verdict is Verdict.skipped and "NVMLDeviceHealthCheck gate off" in rows[h].reason for h in dra)


def test_an_unreachable_metrics_endpoint_fails_gpu_metrics(spec):
    from gpucluster.verify import health

    snap = perfect(spec)
    snap.dcgm += health.scrape_urls(["http://127.0.0.1:9/metrics"])
    bad = failures(cluster.run(spec, snap))
    assert bad == {("gpu-metrics", "http://127.0.0.1:9/metrics")}


def test_an_unreachable_host_fails_host_reachable(monkeypatch, tmp_path, cli, local_inventory):
    from gpucluster.verify import certs, hosts, watchdog
    from gpucluster.verify import cluster as verify_cluster

    spec = load_spec(local_inventory)
    monkeypatch.setattr(verify_cluster, "fetch", lambda *a, **k: perfect(spec))
    monkeypatch.setattr(watchdog, "live_rows", lambda *a, **k: [])  # no change in progress to follow
    monkeypatch.setattr(certs, "rows", lambda *a, **k: [])  # no API server to shake hands with

    def refuse(host, mode, target=None):
        raise ConnectionRefusedError(f"ssh to {host.address}: connection refused")

    monkeypatch.setattr(hosts, "connect", refuse)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("unused: the snapshot is stubbed\n")
    out = cli("verify", "-i", str(local_inventory), "--kubeconfig", str(kubeconfig), "--hosts", "ssh", "-o", "json")
    assert out.stdout.strip(), out.output[-2000:]
    data = json.loads(out.stdout)
    bad = {(r["check"], r["subject"]) for r in data["results"] if r["verdict"] == "fail"}
    assert bad == {("host-reachable", h.name) for h in spec.hosts}
    assert out.exit_code == 1


def _nothing_publishes(snap: Snapshot, spec) -> Snapshot:
    """The same cluster with no device plugin, no DRA kubelet plugin, no GFD/NFD and no chart installed:
    nodes carry only the labels we apply (kubelet registration, node patches)."""
    from gpucluster.render.nodes import node_config

    applied = node_config(spec)
    for node in snap.nodes:
        node["metadata"]["labels"] = dict(applied[node["metadata"]["name"]]["labels"])
        for key in ("capacity", "allocatable"):
            node["status"][key] = {k: v for k, v in node["status"][key].items()
                                   if not k.startswith(cluster.GPU_PREFIXES)}
    snap.resource_slices, snap.daemonsets, snap.helm_releases = [], [], []
    return snap


DEVICE_ROWS = {"node-capacity", "node-allocatable", "dra-slices", "deviceclass-matches", "node-labels"}


def test_without_chart_repositories_devices_nothing_publishes_are_not_measured(spec):
    snap = _nothing_publishes(perfect(spec), spec)
    results = cluster.run(spec, snap, charts_reachable=False)
    assert failures(results) == set()
    unmeasured = {r.check: r.reason for r in results if r.verdict is Verdict.skipped}
    assert DEVICE_ROWS <= set(unmeasured)
    assert "gpu-operator" in unmeasured["node-capacity"] and "dra-driver" in unmeasured["dra-slices"]
    # the labels we apply are still measured on every node; the agents' labels are their own row
    gpu_hosts = [n for n, s in expected.host_states(spec).items() if s.gpu_count]
    labels = {r.subject: r.verdict for r in results if r.check == "node-labels"}
    assert all(labels[n] is Verdict.passed and labels[f"{n} (agent labels)"] is Verdict.skipped for n in gpu_hosts)
    # hosts that are expected to publish nothing are still measured (and pass)
    bare = [n for n, s in expected.host_states(spec).items() if not s.resources]
    passed = {(r.check, r.subject) for r in results if r.verdict is Verdict.passed}
    assert all(("node-capacity", n) in passed for n in bare)
    # the local world's GPU simulator stands in for those agents: there the same cluster fails
    simulated = {c for c, _ in failures(cluster.run(spec, snap, charts_reachable=False, simulated=True))}
    assert DEVICE_ROWS <= simulated
    # and so it does where the charts can be fetched
    assert DEVICE_ROWS <= {c for c, _ in failures(cluster.run(spec, snap))}


def test_without_chart_repositories_a_node_that_publishes_devices_is_measured(spec):
    snap = _nothing_publishes(perfect(spec), spec)
    name, state = next((n, s) for n, s in expected.host_states(spec).items() if "nvidia.com/gpu" in s.resources)
    node = next(n for n in snap.nodes if n["metadata"]["name"] == name)
    node["status"]["capacity"]["nvidia.com/gpu"] = str(state.resources["nvidia.com/gpu"] - 1)
    results = cluster.run(spec, snap, charts_reachable=False)
    assert ("node-capacity", name) in failures(results)


def test_without_chart_repositories_a_wrong_applied_label_still_fails(spec):
    snap = _nothing_publishes(perfect(spec), spec)
    node = next(n for n in snap.nodes if n["metadata"]["labels"].get(L.POOL))
    node["metadata"]["labels"][L.POOL] = "another-pool"
    assert ("node-labels", node["metadata"]["name"]) in failures(cluster.run(spec, snap, charts_reachable=False))


def enforcer_row(spec, snap, **kw):
    (row,) = [r for r in cluster.run(spec, snap, **kw) if r.check == "network-policy-enforcer"]
    return row


def test_the_enforcer_row_names_what_is_missing(spec):
    snap = perfect(spec)
    row = enforcer_row(spec, snap)
    n = len(spec.hosts)
    assert row.verdict is Verdict.passed
    assert row.actual == f"{n} scheduled, {n} ready, with container kube-network-policies"
    FAULTS["netpol-addon-off"].mutate(snap)
    row = enforcer_row(spec, snap)
    assert row.actual.endswith("containers kube-flannel") and "netpol.enabled" in row.reason
    snap = perfect(spec)
    FAULTS["enforcer-not-ready"].mutate(snap)
    assert "pods not available, ready" in enforcer_row(spec, snap).reason


def test_an_enforcer_the_owner_brings_is_not_measured_never_passed(spec):
    byo = spec.model_copy(deep=True)
    byo.networking.pod_network.network_policy_enforcement = "bring-your-own"
    snap = perfect(byo)
    FAULTS["flannel-missing"].mutate(snap)  # flannel's add-on stays off: its DaemonSet is nothing to go by
    row = enforcer_row(byo, snap)
    assert row.verdict is Verdict.skipped and "bring-your-own" in row.reason and "not measured" in row.reason
    rows = [row]
    # not measured is never passed: the run fails on it unless the operator allows that check by name ...
    assert "network-policy-enforcer" in model_problems(rows, {})
    assert model_problems(rows, checks.parse(["network-policy-enforcer"])) == ""
    # ... and no chart allowance stands in for that: the chart is not why nothing is measured
    for allowances in (checks.allowed(local_world=True, spec=byo),
                       checks.allowed(chart_repositories=False, spec=byo)):
        assert "network-policy-enforcer" not in allowances
        assert "network-policy-enforcer" in model_problems(rows, allowances)


def test_without_the_chart_the_enforcer_is_not_measured_and_allowed(spec):
    snap = perfect(spec)
    FAULTS["flannel-missing"].mutate(snap)
    row = enforcer_row(spec, snap, charts_reachable=False)
    assert row.verdict is Verdict.skipped and "chart repositories are unreachable" in row.reason
    # flannel's add-on is the spec's enforcer: the local world and --no-chart-repositories allow that row
    for allowances in (checks.allowed(local_world=True, spec=spec),
                       checks.allowed(chart_repositories=False, spec=spec)):
        assert model_problems([row], allowances) == ""
    assert model_problems([row], {}) != ""


def test_no_tenants_no_policies_to_enforce(spec):
    alone = spec.model_copy(deep=True)
    alone.tenants = []
    assert not [r for r in cluster.run(alone, perfect(alone)) if r.check == "network-policy-enforcer"]
