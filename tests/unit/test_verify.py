"""Verification logic on snapshots: a cluster built exactly from the spec passes every check, and each
injected fault fails exactly its check, naming the node or object with expected vs actual."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET

import pytest

from gpucluster import catalog, cel, expected
from gpucluster import labels as L
from gpucluster.render import pod_network, releases, render
from gpucluster.spec import load_spec
from gpucluster.verify import cluster, helm, report, tenancy
from gpucluster.verify.model import Verdict
from gpucluster.verify.model import problems as model_problems
from gpucluster.verify.snapshot import AccessQuestion, Snapshot


def placed_name(d: expected.Device, used: dict[int, set[int]]) -> str:
    """A MIG device's full name: the expected prefix, an id, and the first free valid start."""
    if d.type != "mig":
        return d.name
    taken = used.setdefault(d.gpu, set())
    for start in sorted(d.starts, reverse=True):
        span = set(range(start, start + d.slices))
        if not span & taken:
            taken |= span
            return f"{d.name}-7-{start}"
    raise AssertionError(f"no room for {d.name}")


def slice_for(node: str, devices: list[expected.Device]) -> dict:
    devs = []
    used: dict[int, set[int]] = {}
    for d in sorted(devices, key=lambda d: -d.slices):
        model = next(m for m in catalog.catalog().values() if m.product_name == d.product_name)
        attrs = {"type": {"string": d.type}, "productName": {"string": d.product_name},
                 "architecture": {"string": model.architecture},
                 "cudaComputeCapability": {"version": model.compute_capability + ".0"}}
        if d.profile:
            attrs["profile"] = {"string": d.profile}
        devs.append({"name": placed_name(d, used), "attributes": attrs,
                     "capacity": {"memory": {"value": str(d.memory_bytes)}}})
    return {"metadata": {"name": f"{node}-gpu"}, "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                                                           "pool": {"name": node}, "devices": devs}}


def helm_record(name: str, namespace: str, chart: str, version: str) -> dict:
    """A deployed release's Secret as Helm 3 stores it."""
    release = {"name": name, "namespace": namespace, "version": 1, "info": {"status": "deployed"},
               "chart": {"metadata": {"name": chart, "version": version}}}
    return {"metadata": {"name": f"sh.helm.release.v1.{name}.v1", "namespace": namespace,
                         "labels": {"owner": "helm", "name": name, "status": "deployed"}},
            "type": "helm.sh/release.v1", "data": {"release": helm.encode(release)}}


def flannel_daemonset(spec, containers: list[str]) -> dict:
    """flannel's DaemonSet as the chart makes it, with these containers, ready on every host."""
    n = len(spec.hosts)
    return {"metadata": {"namespace": spec.networking.pod_network.namespace, "name": pod_network.DAEMONSET},
            "spec": {"template": {"spec": {"containers": [{"name": c} for c in containers]}}},
            "status": {"desiredNumberScheduled": n, "numberReady": n}}


def perfect(spec) -> Snapshot:
    r = render(spec)
    objs = r.objects()
    states = expected.host_states(spec)
    nodes = []
    for name, s in states.items():
        res = {k: str(v) for k, v in s.resources.items()} | {"cpu": "64", "memory": "512Gi"}
        taints = []
        for t in s.taints:
            kv, effect = t.rsplit(":", 1)
            k, _, v = kv.partition("=")
            taints.append({"key": k, "value": v, "effect": effect})
        conditions = [{"type": "Ready", "status": "True"}]
        if s.gpu_count:  # as a node-problem-detector GPU monitor reports a healthy node
            conditions.append({"type": "GpuUnhealthy", "status": "False"})
        nodes.append({"metadata": {"name": name, "labels": dict(s.labels)}, "spec": {"taints": taints},
                      "status": {"capacity": dict(res), "allocatable": dict(res), "conditions": conditions}})
    kind = lambda k: [copy.deepcopy(o) for o in objs if o["kind"] == k]  # noqa: E731
    daemonsets = [{"metadata": {"namespace": ns, "name": name},
                   "status": {"desiredNumberScheduled": len(hosts), "numberReady": len(hosts)}}
                  for (ns, name), hosts in expected.daemonsets(spec).items()]
    if pod_network.enforces_network_policy(spec):  # flannel's DaemonSet with its NetworkPolicy add-on
        daemonsets.append(flannel_daemonset(spec, ["kube-flannel", pod_network.NETPOL_CONTAINER]))
    charts = [helm_record(rel.name, rel.namespace, rel.chart, rel.version) for rel in releases(spec)]
    return Snapshot(
        helm_releases=charts,
        nodes=nodes,
        resource_slices=[slice_for(n, s.devices) for n, s in states.items() if s.devices],
        device_classes=kind("DeviceClass"), daemonsets=daemonsets, quotas=kind("ResourceQuota"),
        limit_ranges=kind("LimitRange"), queues=kind("Queue"), prometheus_rules=kind("PrometheusRule"),
        namespaces=kind("Namespace"), network_policies=kind("NetworkPolicy"), priority_classes=kind("PriorityClass"),
        admission_policies=kind("ValidatingAdmissionPolicy"),
        admission_bindings=kind("ValidatingAdmissionPolicyBinding"),
        resource_claims=[], device_taint_rules=[],
        access=tenancy.expected_access(spec),
    )


@pytest.fixture(scope="module")
def spec(request):
    from pathlib import Path

    return load_spec(Path(__file__).resolve().parents[2] / "inventories" / "local")


def failures(results):
    return {(r.check, r.subject) for r in results if r.verdict is Verdict.failed}


def test_perfect_cluster_passes(spec):
    results = cluster.run(spec, perfect(spec))
    assert failures(results) == set()
    checks = {r.check for r in results if r.verdict is Verdict.passed}
    assert {"node-ready", "node-capacity", "node-allocatable", "node-labels", "node-taints", "dra-slices",
            "deviceclass-matches", "tenant-quota", "tenant-limitrange", "tenant-queue", "alert-rules",
            "tenant-security", "tenant-admission", "tenant-rbac", "priority-classes", "charts-installed",
            "daemonsets-ready", "gpu-health", "network-policy-enforcer"} <= checks
    skipped = [r for r in results if r.verdict is Verdict.skipped]
    assert all(r.reason for r in skipped)


def node(snap, name):
    return next(n for n in snap.nodes if n["metadata"]["name"] == name)


def lower_allocatable(s):
    node(s, "l4-1")["status"]["allocatable"]["nvidia.com/gpu"] = "15"


def remove_device(s):
    sl = next(x for x in s.resource_slices if x["spec"]["nodeName"] == "h100-2")
    sl["spec"]["devices"] = sl["spec"]["devices"][:-1]


def remove_taint(s):
    node(s, "h200-1")["spec"]["taints"] = []


def not_ready(s):
    node(s, "a100-1")["status"]["conditions"] = [{"type": "Ready", "status": "False"}]


def wrong_product(s):
    node(s, "h200-1")["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"


def delete_quota(s):
    s.quotas = [q for q in s.quotas if q["metadata"]["namespace"] != "inference"]


def class_matches_nothing(s):
    dc = next(d for d in s.device_classes if d["metadata"]["name"] == "gpu-80gb")
    expr = dc["spec"]["selectors"][0]["cel"]["expression"]
    dc["spec"]["selectors"][0]["cel"]["expression"] = expr.replace("quantity('80G')", "quantity('1000Gi')")


def class_fails_on_a_device(s):
    # A deployed selector that reads an attribute whole GPUs lack, without testing the type first: the
    # scheduler's evaluation fails on them (a CEL runtime error), so the class is broken, not "matching".
    dc = next(d for d in s.device_classes if d["metadata"]["name"] == "gpu-80gb")
    dc["spec"]["selectors"][0]["cel"]["expression"] = "device.attributes['gpu.nvidia.com'].profile != ''"


def gpu_condition(s):
    conditions = node(s, "h200-1")["status"]["conditions"]
    next(c for c in conditions if c["type"] == "GpuUnhealthy").update(status="True", message="XID 79")


def replicas_changed(s):
    # what the device plugin would advertise if the deployed ConfigMap said replicas: 2
    for name in ("l4-1", "l4-2"):
        n = node(s, name)
        n["status"]["capacity"]["nvidia.com/gpu"] = n["status"]["allocatable"]["nvidia.com/gpu"] = "8"
        n["metadata"]["labels"]["nvidia.com/gpu.replicas"] = "2"


def of(items, ns, name):
    return next(o for o in items if o["metadata"].get("namespace") == ns and o["metadata"]["name"] == name)


def quota_raised(s):
    of(s.quotas, "inference", "gpucluster-quota")["spec"]["hard"]["requests.nvidia.com/gpu"] = "99"


def quota_key_dropped(s):
    hard = of(s.quotas, "ml-research", "gpucluster-quota")["spec"]["hard"]
    del hard["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"]


def quota_in_canonical_units(s):
    # what the API server may return: the same values in other units must still pass
    of(s.quotas, "ml-research", "gpucluster-quota")["spec"]["hard"]["requests.memory"] = str(2 * 2**40)


def limit_range_deleted(s):
    s.limit_ranges = [lr for lr in s.limit_ranges if lr["metadata"]["namespace"] != "inference"]


def limit_range_changed(s):
    of(s.limit_ranges, "inference", "gpucluster-defaults")["spec"]["limits"][0]["default"]["cpu"] = "64"


def policy_allow_all(s):
    np = of(s.network_policies, "inference", "gpucluster-isolate")
    np["spec"]["ingress"], np["spec"]["egress"] = [{}], [{}]


def extra_policy(s):
    s.network_policies.append({"metadata": {"name": "open", "namespace": "inference"},
                               "spec": {"podSelector": {}, "ingress": [{}]}})


def pod_security_lowered(s):
    ns = next(n for n in s.namespaces if n["metadata"]["name"] == "inference")
    ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "privileged"


def binding_warns_only(s):
    b = next(b for b in s.admission_bindings if b["metadata"]["name"] == "gpucluster-tenant-resourceclaims")
    b["spec"]["validationActions"] = ["Warn"]


def policy_deleted(s):
    s.admission_policies = [p for p in s.admission_policies if p["metadata"]["name"] != "gpucluster-tenant-pods"]


def allowances_widened(s):
    ns = next(n for n in s.namespaces if n["metadata"]["name"] == "inference")
    ns["metadata"]["annotations"]["gpucluster.dev/allowed-device-classes"] = "gpu.nvidia.com"


def cluster_admin_bound(s):
    # what the authorizer answers once `inference` is bound to cluster-admin: yes to everything
    assert s.access is not None
    s.access = {q: True if q.group == "inference" else a for q, a in s.access.items()}


def role_lost_a_grant(s):
    assert s.access is not None
    s.access[AccessQuestion("inference", "create", "", "pods", "inference")] = False


def daemonset_missing(s):
    s.daemonsets = [d for d in s.daemonsets if d["metadata"]["name"] != "nvidia-device-plugin-daemonset"]


def daemonset_on_fewer_nodes(s):
    ds = next(d for d in s.daemonsets if d["metadata"]["name"] == "gpu-feature-discovery")
    ds["status"]["desiredNumberScheduled"] -= 1
    ds["status"]["numberReady"] -= 1


def daemonset_not_ready(s):
    ds = next(d for d in s.daemonsets if d["metadata"]["name"] == "nvidia-mig-manager")
    ds["status"]["numberReady"] = 0


def chart_other_version(s):
    rel = next(r for r in releases(load_spec_local()) if r.name == "gpu-operator")
    s.helm_releases = [r for r in s.helm_releases or [] if r["metadata"]["labels"]["name"] != "gpu-operator"]
    s.helm_releases.append(helm_record(rel.name, rel.namespace, rel.chart, "v25.10.0"))


def chart_missing(s):
    s.helm_releases = [r for r in s.helm_releases or [] if r["metadata"]["labels"]["name"] != "volcano"]


def extra_managed_taint(s):
    node(s, "l4-1")["spec"]["taints"].append({"key": "nvidia.com/gpu", "value": "x", "effect": "NoExecute"})


def unknown_node(s):
    extra = copy.deepcopy(node(s, "cp-1"))
    extra["metadata"]["name"] = "stray-1"
    s.nodes.append(extra)


def extra_dra_device(s):
    sl = next(x for x in s.resource_slices if x["spec"]["nodeName"] == "h100-1")
    sl["spec"]["devices"].append(dict(sl["spec"]["devices"][0], name="gpu-8"))


def queue_capability_raised(s):
    q = next(q for q in s.queues if q["metadata"]["name"] == "inference")
    q["spec"]["capability"]["nvidia.com/gpu"] = "999"


def priority_class_value_changed(s):
    pc = next(p for p in s.priority_classes if p["metadata"]["name"] == "training")
    pc["value"] = pc["value"] + 1


def alert_dropped(s):
    for pr in s.prometheus_rules:
        for g in pr["spec"]["groups"]:
            g["rules"] = [r for r in g["rules"] if r.get("alert") != "GPUXidError"]


def flannel(s):
    return of(s.daemonsets, "kube-flannel", pod_network.DAEMONSET)


def netpol_addon_off(s):
    # what the chart renders with netpol.enabled false: flanneld alone
    flannel(s)["spec"]["template"]["spec"]["containers"] = [{"name": "kube-flannel"}]


def enforcer_not_ready(s):
    flannel(s)["status"]["numberReady"] -= 1


def enforcer_on_fewer_nodes(s):
    flannel(s)["status"].update(desiredNumberScheduled=len(s.nodes) - 1, numberReady=len(s.nodes) - 1)


def flannel_missing(s):
    s.daemonsets.remove(flannel(s))


FAULTS = {
    # fault: (injector, the failures it must cause and nothing else)
    "netpol-addon-off": (netpol_addon_off, {("network-policy-enforcer", "kube-flannel/kube-flannel-ds")}),
    "enforcer-not-ready": (enforcer_not_ready, {("network-policy-enforcer", "kube-flannel/kube-flannel-ds")}),
    "enforcer-on-fewer-nodes": (enforcer_on_fewer_nodes,
                                {("network-policy-enforcer", "kube-flannel/kube-flannel-ds")}),
    "flannel-missing": (flannel_missing, {("network-policy-enforcer", "kube-flannel/kube-flannel-ds")}),
    "queue-capability-raised": (queue_capability_raised, {("tenant-queue", "tenants/inference")}),
    "alert-dropped": (alert_dropped, {("alert-rules", "monitoring")}),
    "priority-class-value-changed": (priority_class_value_changed, {("priority-classes", "priorityclass/training")}),
    "daemonset-missing": (daemonset_missing, {("daemonsets-ready", "gpu-operator/nvidia-device-plugin-daemonset")}),
    "daemonset-on-fewer-nodes": (daemonset_on_fewer_nodes,
                                 {("daemonsets-ready", "gpu-operator/gpu-feature-discovery")}),
    "daemonset-not-ready": (daemonset_not_ready, {("daemonsets-ready", "gpu-operator/nvidia-mig-manager")}),
    "chart-other-version": (chart_other_version, {("charts-installed", "release/gpu-operator")}),
    "chart-missing": (chart_missing, {("charts-installed", "release/volcano")}),
    "extra-managed-taint": (extra_managed_taint, {("node-taints", "l4-1")}),
    "unknown-node": (unknown_node, {("node-known", "stray-1")}),
    "extra-dra-device": (extra_dra_device, {("dra-slices", "h100-1")}),
    "quota-raised": (quota_raised, {("tenant-quota", "tenants/inference")}),
    "quota-key-dropped": (quota_key_dropped, {("tenant-quota", "tenants/ml-research")}),
    "limit-range-deleted": (limit_range_deleted, {("tenant-limitrange", "tenants/inference")}),
    "limit-range-changed": (limit_range_changed, {("tenant-limitrange", "tenants/inference")}),
    "network-policy-allow-all": (policy_allow_all, {("tenant-security", "tenants/inference")}),
    "extra-network-policy": (extra_policy, {("tenant-security", "tenants/inference")}),
    "pod-security-lowered": (pod_security_lowered, {("tenant-security", "tenants/inference")}),
    "binding-warns-only": (binding_warns_only,
                           {("tenant-admission", "validatingadmissionpolicy/gpucluster-tenant-resourceclaims")}),
    "policy-deleted": (policy_deleted, {("tenant-admission", "validatingadmissionpolicy/gpucluster-tenant-pods")}),
    "allowances-widened": (allowances_widened, {("tenant-admission", "tenants/inference")}),
    "cluster-admin-bound": (cluster_admin_bound, {("tenant-rbac", "tenants/inference")}),
    "role-lost-a-grant": (role_lost_a_grant, {("tenant-rbac", "tenants/inference")}),
    "allocatable-lowered": (lower_allocatable, {("node-allocatable", "l4-1")}),
    "device-removed": (remove_device, {("dra-slices", "h100-2")}),
    "taint-removed": (remove_taint, {("node-taints", "h200-1")}),
    "node-not-ready": (not_ready, {("node-ready", "a100-1")}),
    "wrong-product": (wrong_product, {("node-labels", "h200-1")}),
    "quota-deleted": (delete_quota, {("tenant-quota", "tenants/inference")}),
    "class-matches-nothing": (class_matches_nothing, {("deviceclass-matches", "deviceclass/gpu-80gb")}),
    "class-fails-on-a-device": (class_fails_on_a_device, {("deviceclass-matches", "deviceclass/gpu-80gb")}),
    "gpu-condition": (gpu_condition, {("gpu-health", "h200-1")}),
    # a changed sharing config changes what the nodes advertise *and* their replicas label
    "replicas-changed": (replicas_changed, {(c, n) for c in ("node-capacity", "node-allocatable", "node-labels")
                                            for n in ("l4-1", "l4-2")}),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_fails_exactly_its_check(spec, fault):
    inject, want = FAULTS[fault]
    snap = perfect(spec)
    inject(snap)
    results = cluster.run(spec, snap)
    assert failures(results) == want
    for r in results:
        if (r.check, r.subject) in want:
            assert r.expected and r.actual and r.expected != r.actual


def test_failure_rows_say_expected_and_actual(spec):
    snap = perfect(spec)
    lower_allocatable(snap)
    row = next(r for r in cluster.run(spec, snap) if r.verdict is Verdict.failed)
    assert "nvidia.com/gpu=16" in row.expected and "nvidia.com/gpu=15" in row.actual
    assert "1 nvidia.com/gpu withheld" in row.reason


def test_missing_node_fails_ready_and_skips_the_rest(spec):
    snap = perfect(spec)
    snap.nodes = [n for n in snap.nodes if n["metadata"]["name"] != "l4-2"]
    results = cluster.run(spec, snap)
    assert failures(results) == {("node-ready", "l4-2")}
    assert any(r.check == "node-capacity" and r.subject == "l4-2" and r.verdict is Verdict.skipped for r in results)


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
    assert model_problems(rows, partial=False) and not model_problems(rows, partial=True)


def test_a_run_with_only_unmeasured_rows_fails():
    from gpucluster.verify.model import skip

    rows = [skip("daemonsets-ready", "x/y", "not installed")]
    assert model_problems(rows, partial=False) == (
        "1 check(s) not measured (each row says why; --partial accepts them)")
    assert model_problems([], partial=False) == ""


def test_gpu_health_without_any_gpu_condition_is_not_measured(spec):
    snap = perfect(spec)
    for n in snap.nodes:
        n["status"]["conditions"] = [c for c in n["status"]["conditions"] if c["type"] == "Ready"]
    rows = [r for r in cluster.run(spec, snap) if r.check == "gpu-health"]
    assert rows and all(r.verdict is Verdict.skipped and "node-problem-detector" in r.reason for r in rows)


def test_an_unreachable_metrics_endpoint_fails_gpu_metrics(spec):
    from gpucluster.verify import health

    states = expected.host_states(spec)
    rows = list(health.metric_checks(states, ["http://127.0.0.1:9/metrics"]))
    bad = {(r.check, r.subject) for r in rows if r.verdict is Verdict.failed}
    assert ("gpu-metrics", "http://127.0.0.1:9/metrics") in bad


def test_an_unreachable_host_fails_host_reachable(monkeypatch, tmp_path, cli, local_inventory):
    from gpucluster.verify import cluster as verify_cluster
    from gpucluster.verify import hosts, watchdog

    spec = load_spec(local_inventory)
    monkeypatch.setattr(verify_cluster, "fetch", lambda *a, **k: perfect(spec))
    monkeypatch.setattr(watchdog, "live_rows", lambda *a, **k: [])  # no change in progress to follow

    def refuse(host, mode, target=None):
        raise ConnectionRefusedError(f"ssh to {host.address}: connection refused")

    monkeypatch.setattr(hosts, "connect", refuse)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("unused: the snapshot is stubbed\n")
    out = cli("verify", "-i", str(local_inventory), "--kubeconfig", str(kubeconfig), "--hosts", "ssh", "--partial",
              "-o", "json")
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
    assert enforcer_row(spec, snap).verdict is Verdict.passed
    netpol_addon_off(snap)
    row = enforcer_row(spec, snap)
    assert row.actual.endswith("containers kube-flannel") and "netpol.enabled" in row.reason
    snap = perfect(spec)
    enforcer_not_ready(snap)
    assert "not ready" in enforcer_row(spec, snap).reason


def test_an_enforcer_the_owner_brings_is_not_measured_never_passed(spec):
    byo = spec.model_copy(deep=True)
    byo.networking.pod_network.network_policy_enforcement = "bring-your-own"
    snap = perfect(byo)
    assert not [d for d in snap.daemonsets if d["metadata"]["name"] == pod_network.DAEMONSET]
    row = enforcer_row(byo, snap)
    assert row.verdict is Verdict.skipped and "bring-your-own" in row.reason and "not measured" in row.reason
    # a full run is then not a pass unless declared partial
    assert "not measured" in model_problems(cluster.run(byo, snap), partial=False)


def test_without_the_chart_the_enforcer_is_not_measured(spec):
    snap = perfect(spec)
    flannel_missing(snap)
    row = enforcer_row(spec, snap, charts_reachable=False)
    assert row.verdict is Verdict.skipped and "chart repositories are unreachable" in row.reason


def test_no_tenants_no_policies_to_enforce(spec):
    alone = spec.model_copy(deep=True)
    alone.tenants = []
    assert not [r for r in cluster.run(alone, perfect(alone)) if r.check == "network-policy-enforcer"]
