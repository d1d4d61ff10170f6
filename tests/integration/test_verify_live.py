"""`gpucluster verify` against the real local control plane, with faults injected into it.

The render bundle for ``inventories/local`` is applied with ``kubectl apply --server-side`` (kinds
whose CRD is not installed are left out and listed), the GPU simulator registers the nodes, and
verify must pass. Then each fault is injected into the live cluster; verify must fail exactly the
checks that fault breaks, naming the node or object, and pass again once the fault is undone.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cluster_helpers import Cluster, wait_for

from gpucluster import expected
from gpucluster.cli import entrypoint
from gpucluster.render import releases, render, tenants
from gpucluster.simulator import Simulator, attach
from gpucluster.spec import load_spec
from gpucluster.verify import checks, snapshot

pytestmark = pytest.mark.integration
LOCAL = Path(__file__).resolve().parents[2] / "inventories" / "local"


def served_kinds(lw: Cluster) -> set[tuple[str, str]]:
    out = lw.kubectl("api-resources", "--no-headers", "-o", "wide")
    kinds = set()
    for line in out.splitlines():
        cols = line.split()
        # NAME [SHORTNAMES] APIVERSION NAMESPACED KIND VERBS ...
        idx = next(i for i, c in enumerate(cols) if c in ("true", "false"))
        kinds.add((cols[idx - 1].split("/")[0] if "/" in cols[idx - 1] else "", cols[idx + 1]))
    return kinds


def apply_rendered(lw: Cluster, objs: list[dict], *, force: bool = False) -> list[str]:
    """Server-side apply every object whose kind the API serves; return the ones left out.

    ``force`` takes back fields another manager (a fault's ``kubectl patch``) changed.
    """
    kinds = served_kinds(lw)
    ok, left_out = [], []
    for o in objs:
        group = o["apiVersion"].split("/")[0] if "/" in o["apiVersion"] else ""
        (ok if (group, o["kind"]) in kinds else left_out).append(o)
    ns_first = sorted(ok, key=lambda o: o["kind"] != "Namespace")
    lw.kubectl("apply", "--server-side", "--field-manager=gpucluster-test", *(["--force-conflicts"] if force else []),
               "-f", "-", stdin=yaml.safe_dump_all(ns_first))
    return [f"{o['kind']}/{o['metadata']['name']}" for o in left_out]


def wait_ready(lw: Cluster, names: set[str], timeout: float = 180) -> None:
    """kwok marks new nodes Ready asynchronously; wait (bounded) as `gpucluster up` does."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        nodes = json.loads(lw.kubectl("get", "nodes", "-o", "json"))["items"]
        ready = {n["metadata"]["name"] for n in nodes
                 if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))}
        if names <= ready:
            return
        assert time.monotonic() < deadline, f"nodes not Ready after {timeout}s: {sorted(names - ready)}"
        time.sleep(1)


@pytest.fixture(scope="module")
def deployed(lw: Cluster) -> Iterator[tuple[Cluster, Simulator, list[str]]]:
    spec = load_spec(LOCAL)
    left_out = apply_rendered(lw, render(spec).objects())
    sim = attach(lw.kubeconfig, spec)
    wait_ready(lw, {h.name for h in spec.hosts})
    yield lw, sim, left_out
    sim.close()


#: This world runs no Volcano (its Queue and HyperNode CRDs are not installed here): the checks its verify
#: allows to be unmeasured beyond the local world's own list.
ALLOW = ("tenant-queue", "topology-domains")


def verify(lw: Cluster, tmp_path: Path, capsys, *, allow: tuple[str, ...] = ALLOW,
           extra: tuple[str, ...] = ()) -> tuple[int, dict]:
    """`gpucluster verify` on the local world, allowing ``allow`` beyond the local world's fixed list."""
    report = tmp_path / "verify.json"
    junit = tmp_path / "verify.xml"
    report.unlink(missing_ok=True)  # a report left by an earlier call must not stand in for this one
    junit.unlink(missing_ok=True)
    code = entrypoint(["verify", "-i", str(LOCAL), "--kubeconfig", str(lw.kubeconfig), "--out-dir", str(tmp_path),
                       *(["--allow-not-measured", ",".join(allow)] if allow else []), *extra])
    out = capsys.readouterr()
    assert report.exists(), f"verify exited {code} without a report:\n{out.err}\n{out.out[-3000:]}"
    data = json.loads(report.read_text())
    assert junit.read_text().startswith("<testsuite")
    return code, data


def failed(data: dict) -> set[tuple[str, str]]:
    return {(r["check"], r["subject"]) for r in data["results"] if r["verdict"] == "fail"}


def test_healthy_cluster_passes(deployed, tmp_path, capsys):
    lw, _sim, _left_out = deployed
    code, data = verify(lw, tmp_path, capsys)
    assert failed(data) == set(), data["results"]
    assert code == 0
    # one LIST per snapshot field, the Helm records of each release namespace (never cluster-wide) and the
    # GPU Operator namespace's pods
    release_namespaces = {rel.namespace for rel in releases(load_spec(LOCAL))}
    assert data["listCalls"] == len(snapshot.PATHS) + len(release_namespaces) + 1 == 22
    assert data["accessReviews"] > 700  # every group the spec binds, every grant, protected write, other namespace
    passed = {r["check"] for r in data["results"] if r["verdict"] == "pass"}
    assert {"node-ready", "node-capacity", "node-allocatable", "node-labels", "node-taints", "dra-slices",
            "deviceclass-matches", "dra-extended-resource", "tenant-quota", "tenant-limitrange", "tenant-security",
            "tenant-admission", "tenant-rbac", "gpu-health", "priority-classes", "alert-rules",
            "control-plane-certificates"} <= passed
    unmeasured = {r["check"] for r in data["results"] if r["verdict"] == "not-measured"}
    # The local world installs no chart: the operators' DaemonSets and releases, and flannel's NetworkPolicy
    # enforcer (its chart's add-on), are not measured (never passed, allowed by the local world), nor the
    # h200-dp pool's kubelet policies (kwok nodes have no kubelet to read); this world has no Volcano CRDs
    # (allowed by the test). GPU health is measured: the simulated DCGM exporter is its source.
    assert unmeasured == {"daemonsets-ready", "charts-installed", "network-policy-enforcer",
                          "kubelet-resource-managers", *ALLOW}
    assert unmeasured - set(ALLOW) == set(checks.LOCAL_WORLD)
    assert {r["allowed"] for r in data["results"] if r["verdict"] == "not-measured"} == {
        *checks.LOCAL_WORLD.values(), checks.BY_USER}
    health = [r for r in data["results"] if r["check"] == "gpu-health"]
    assert health and all("SIMULATED DCGM exporter" in r["actual"] for r in health)
    for r in data["results"]:
        if r["verdict"] == "not-measured":
            assert r["reason"], r


def test_the_local_worlds_certificates_pass_with_a_year_left(deployed, tmp_path, capsys):
    """The row reads the certificate the real API server serves and the admin kubeconfig's client certificate:
    the world signed both for LEAF_DAYS when it started; the row names the one that ends first, to the minute."""
    import datetime as dt

    from cryptography import x509

    from gpucluster.local.pki import LEAF_DAYS

    lw, _sim, _ = deployed
    code, data = verify(lw, tmp_path, capsys)
    [row] = [r for r in data["results"] if r["check"] == "control-plane-certificates"]
    state = lw.world.state()
    assert state is not None
    port = state.ports["kube-apiserver"]
    assert (row["subject"], row["verdict"], code) == (f"apiserver/127.0.0.1:{port}", "pass", 0)
    certs = {f"API server serving certificate (127.0.0.1:{port})": lw.world.pki.cert("apiserver"),
             "kubeconfig client certificate (gpucluster-admin)": lw.world.pki.cert("admin")}
    ends = {name: x509.load_pem_x509_certificate(path.read_bytes()).not_valid_after_utc for name, path in certs.items()}
    name, end = min(ends.items(), key=lambda item: item[1])
    left = (end - dt.datetime.now(dt.timezone.utc)).days
    assert left in (LEAF_DAYS - 1, LEAF_DAYS - 2)  # a world started minutes (not days) ago
    assert row["actual"] == (f"earliest expiry: {name} on {end:%Y-%m-%d %H:%M} UTC ({left} days left); "
                             "2 certificates read")


def test_an_unmeasured_row_whose_check_is_not_allowed_fails_the_run(deployed, tmp_path, capsys):
    lw, _sim, _left_out = deployed
    code, data = verify(lw, tmp_path, capsys, allow=())
    assert failed(data) == set() and data["summary"]["not-measured"] > 0
    assert code == 1
    # the local world's own allowances still hold: only the row nobody allowed is named
    data_rows = {r["check"] for r in data["results"] if r["verdict"] == "not-measured" and "allowed" not in r}
    assert data_rows == set(ALLOW)


def _cm_replicas(lw: Cluster, replicas: int) -> None:
    cm = json.loads(lw.kubectl("get", "configmap", "-n", "gpu-operator", "gpucluster-device-plugin-config",
                            "-o", "json"))
    doc = yaml.safe_load(cm["data"]["l4-infer"])
    doc["sharing"]["timeSlicing"]["resources"][0]["replicas"] = replicas
    patch = {"data": {"l4-infer": yaml.safe_dump(doc, sort_keys=False)}}
    lw.kubectl("patch", "configmap", "-n", "gpu-operator", "gpucluster-device-plugin-config", "--type=merge",
            "-p", json.dumps(patch))


def _device_class_expr(lw: Cluster, old: str, new: str) -> None:
    dc = json.loads(lw.kubectl("get", "deviceclass", "gpu-80gb", "-o", "json"))
    expr = dc["spec"]["selectors"][0]["cel"]["expression"]
    dc["spec"]["selectors"][0]["cel"]["expression"] = expr.replace(old, new)
    lw.kubectl("patch", "deviceclass", "gpu-80gb", "--type=merge", "-p", json.dumps({"spec": dc["spec"]}))


def _rendered(kind: str, ns: str | None = None) -> list[dict]:
    return [o for o in render(load_spec(LOCAL)).objects() if o["kind"] == kind
            and (ns is None or o["metadata"].get("namespace") == ns)]


def _patch(lw: Cluster, *target: str, body: dict) -> None:
    lw.kubectl("patch", *target, "--type=merge", "-p", json.dumps(body))


ALLOW_ALL = {"spec": {"ingress": [{}], "egress": [{}]}}
EXTRA_POLICY = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": "open", "namespace": "inference"},
                "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}}
CLUSTER_ADMIN = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": "inference-is-admin"},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                 "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "inference"}]}
ALLOWED_CLASSES = "gpucluster.dev/allowed-device-classes"
INFERENCE_CLASSES = ",".join(sorted(tenants.device_quota(load_spec(LOCAL), next(
    t for t in load_spec(LOCAL).tenants if t.name == "inference"))))

# fault id: (inject(lw, sim), undo(lw, sim), failures expected and nothing else)
FAULTS = {
    "unknown-node": (
        lambda lw, sim: lw.kubectl("create", "-f", "-", stdin=yaml.safe_dump(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "stray-1"}})),
        lambda lw, sim: lw.kubectl("delete", "node", "stray-1", "--wait=true"),
        {("node-known", "stray-1")}),
    "extra-managed-taint": (
        lambda lw, sim: lw.kubectl("taint", "node", "l4-1", "nvidia.com/gpu=maintenance:NoExecute"),
        lambda lw, sim: lw.kubectl("taint", "node", "l4-1", "nvidia.com/gpu:NoExecute-"),
        {("node-taints", "l4-1")}),
    "allocatable-lowered": (
        lambda lw, sim: (sim.inject("l4-1", "unhealthy-gpus", "0"), sim.sync()),
        lambda lw, sim: (sim.clear("l4-1"), sim.sync()),
        {("node-allocatable", "l4-1")}),
    "device-removed": (
        lambda lw, sim: (sim.inject("h100-2", "missing-devices", "gpu-7"), sim.sync()),
        lambda lw, sim: (sim.clear("h100-2"), sim.sync()),
        {("dra-slices", "h100-2")}),
    "replicas-changed": (
        lambda lw, sim: (_cm_replicas(lw, 2), sim.sync()),
        lambda lw, sim: (_cm_replicas(lw, 4), sim.sync()),
        {(c, n) for c in ("node-capacity", "node-allocatable", "node-labels") for n in ("l4-1", "l4-2")}),
    "taint-removed": (
        lambda lw, sim: lw.kubectl("taint", "node", "h200-1", "nvidia.com/gpu-"),
        lambda lw, sim: lw.kubectl("taint", "node", "h200-1", "nvidia.com/gpu=present:NoSchedule"),
        {("node-taints", "h200-1")}),
    "wrong-product": (
        lambda lw, sim: (sim.inject("h200-1", "product", "NVIDIA-H100-80GB-HBM3"), sim.sync()),
        lambda lw, sim: (sim.clear("h200-1"), sim.sync()),
        {("node-labels", "h200-1")}),
    "quota-deleted": (
        lambda lw, sim: lw.kubectl("delete", "resourcequota", "-n", "inference", "gpucluster-quota"),
        lambda lw, sim: apply_rendered(lw, [o for o in render(load_spec(LOCAL)).objects()
                                             if o["kind"] == "ResourceQuota"]),
        {("tenant-quota", "tenants/inference")}),
    "quota-raised": (
        lambda lw, sim: _patch(lw, "resourcequota", "-n", "inference", "gpucluster-quota",
                               body={"spec": {"hard": {"requests.nvidia.com/gpu": "99"}}}),
        lambda lw, sim: apply_rendered(lw, _rendered("ResourceQuota", "inference"), force=True),
        {("tenant-quota", "tenants/inference")}),
    "limitrange-deleted": (
        lambda lw, sim: lw.kubectl("delete", "limitrange", "-n", "inference", "gpucluster-defaults"),
        lambda lw, sim: apply_rendered(lw, _rendered("LimitRange", "inference")),
        {("tenant-limitrange", "tenants/inference")}),
    "networkpolicy-allow-all": (
        lambda lw, sim: _patch(lw, "networkpolicy", "-n", "inference", "gpucluster-isolate", body=ALLOW_ALL),
        lambda lw, sim: apply_rendered(lw, _rendered("NetworkPolicy", "inference"), force=True),
        {("tenant-security", "tenants/inference")}),
    "extra-allow-all-networkpolicy": (
        lambda lw, sim: apply_rendered(lw, [EXTRA_POLICY]),
        lambda lw, sim: lw.kubectl("delete", "networkpolicy", "-n", "inference", "open"),
        {("tenant-security", "tenants/inference")}),
    "pod-security-lowered": (
        lambda lw, sim: lw.kubectl("label", "--overwrite", "namespace", "inference",
                                   "pod-security.kubernetes.io/enforce=privileged"),
        lambda lw, sim: lw.kubectl("label", "--overwrite", "namespace", "inference",
                                   "pod-security.kubernetes.io/enforce=restricted"),
        {("tenant-security", "tenants/inference")}),
    "admission-binding-warns-only": (
        lambda lw, sim: _patch(lw, "validatingadmissionpolicybinding", "gpucluster-tenant-resourceclaims",
                               body={"spec": {"validationActions": ["Warn"]}}),
        # validationActions is a set-list: an apply would merge Deny into [Warn]; a merge patch replaces it
        lambda lw, sim: _patch(lw, "validatingadmissionpolicybinding", "gpucluster-tenant-resourceclaims",
                               body={"spec": {"validationActions": ["Deny"]}}),
        {("tenant-admission", "validatingadmissionpolicy/gpucluster-tenant-resourceclaims")}),
    "namespace-allowances-widened": (
        lambda lw, sim: lw.kubectl("annotate", "--overwrite", "namespace", "inference",
                                   f"{ALLOWED_CLASSES}=gpu.nvidia.com"),
        # back to what the render gives: dra-nvidia-gpu, which every tenant with quota.gpus may claim
        lambda lw, sim: lw.kubectl("annotate", "--overwrite", "namespace", "inference",
                                   f"{ALLOWED_CLASSES}={INFERENCE_CLASSES}"),
        {("tenant-admission", "tenants/inference")}),
    "tenant-bound-to-cluster-admin": (
        lambda lw, sim: apply_rendered(lw, [CLUSTER_ADMIN]),
        lambda lw, sim: lw.kubectl("delete", "clusterrolebinding", "inference-is-admin"),
        {("tenant-rbac", "tenants/inference")}),
    "class-matches-nothing": (
        lambda lw, sim: _device_class_expr(lw, "quantity('80G')", "quantity('1000Gi')"),
        lambda lw, sim: _device_class_expr(lw, "quantity('1000Gi')", "quantity('80G')"),
        {("deviceclass-matches", "deviceclass/gpu-80gb")}),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_fault_fails_exactly_its_check(deployed, tmp_path, capsys, fault):
    lw, sim, _ = deployed
    inject, undo, want = FAULTS[fault]
    inject(lw, sim)
    try:
        code, data = verify(lw, tmp_path, capsys)
        assert failed(data) == want
        assert code == 1
        for r in data["results"]:
            if (r["check"], r["subject"]) in want:
                assert r["expected"] != r["actual"]
    finally:
        undo(lw, sim)
    code, data = verify(lw, tmp_path, capsys)
    assert failed(data) == set() and code == 0, f"undoing {fault} did not restore a passing cluster"


#: Deliberate errors on the expectation side (gpucluster.devices, gpucluster.catalog), each with the
#: checks it must fail. The simulator is synced after the error is planted: had it shared that code,
#: it would publish the same wrong value and verify would still pass.
EXPECTATION_ERRORS = {
    "replicas-off-by-one": (
        "advertised_resources",
        lambda real: lambda count, sharing: {k: v + (1 if sharing.replicas > 1 else 0)
                                             for k, v in real(count, sharing).items()},
        {(c, n) for c in ("node-capacity", "node-allocatable") for n in ("l4-1", "l4-2")}),
    "mig-memory-nominal": (
        "gfd_labels",
        lambda real: lambda *a, **kw: {k: ("10240" if k == "nvidia.com/mig-1g.10gb.memory" else v)
                                       for k, v in real(*a, **kw).items()},
        {("node-labels", "a100-1"), ("node-labels", "a100-2")}),  # both MIG pools hold 1g.10gb devices
}


@pytest.mark.parametrize("error", EXPECTATION_ERRORS)
def test_a_wrong_expectation_fails_verify(deployed, tmp_path, capsys, monkeypatch, error):
    from gpucluster import devices

    lw, sim, _ = deployed
    name, wrap, want = EXPECTATION_ERRORS[error]
    monkeypatch.setattr(devices, name, wrap(getattr(devices, name)))
    sim.sync()  # the simulator runs in this process: it would pick the error up if it used devices
    code, data = verify(lw, tmp_path, capsys)
    assert code == 1
    assert failed(data) == want


def test_node_not_ready(deployed, tmp_path, capsys):
    import time

    lw, sim, _ = deployed
    sim.inject("a100-1", "not-ready")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            code, data = verify(lw, tmp_path, capsys)
            if failed(data):
                break
            time.sleep(1)
        assert failed(data) == {("node-ready", "a100-1")}
    finally:
        sim.clear("a100-1")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        code, data = verify(lw, tmp_path, capsys)
        if not failed(data):
            break
        time.sleep(1)
    assert failed(data) == set() and code == 0


def test_metrics_health_names_node_and_gpu(deployed, tmp_path, capsys):
    from gpucluster.simulator.dcgm import Fleet, devices_for

    lw, _sim, _ = deployed
    spec = load_spec(LOCAL)
    with Fleet(devices_for(spec)) as fleet:  # one exporter per GPU node, given with --metrics-url
        fleet.inject_xid("h200-1", 3, 79)
        fleet.inject_ecc("l4-2", 1, double_bit=2)
        urls = tuple(a for url in fleet.urls.values() for a in ("--metrics-url", url))
        code, data = verify(lw, tmp_path, capsys, extra=urls)
    bad = {(r["check"], r["subject"]): r["actual"] for r in data["results"] if r["verdict"] == "fail"}
    assert set(bad) == {("gpu-health", "h200-1"), ("gpu-health", "l4-2")}
    assert "GPU 3: XID 79 (GPU has fallen off the bus)" in bad[("gpu-health", "h200-1")]
    assert "GPU 1: 2 double-bit ECC errors" in bad[("gpu-health", "l4-2")]
    assert {r["verdict"] for r in data["results"] if r["check"] == "gpu-metrics"} == {"pass"}
    assert code == 1


def _simulate_dcgm(lw: Cluster, node: str, knobs: dict | None) -> None:
    from gpucluster import labels as L

    value = json.dumps(knobs) if knobs else None
    lw.kubectl("annotate", "--overwrite", "node", node, f"{L.SIMULATE_DCGM}={value}" if value
               else f"{L.SIMULATE_DCGM}-")


def test_gpu_health_through_the_simulated_exporter(deployed, tmp_path, capsys):
    """The local world's GPU health source is the simulated DCGM exporter, read from the cluster's state: an
    XID set on one GPU fails exactly that node's row, an application XID does not, and without the metrics
    CSV ConfigMap no exporter can start, which fails every GPU node."""
    from gpucluster.render.monitoring import DCGM_CONFIGMAP

    lw, _sim, _ = deployed
    _simulate_dcgm(lw, "h200-1", {"3": {"xid": 79}})
    try:
        code, data = verify(lw, tmp_path, capsys)
        bad = {(r["check"], r["subject"]): r for r in data["results"] if r["verdict"] == "fail"}
        assert set(bad) == {("gpu-health", "h200-1")} and code == 1
        row = bad[("gpu-health", "h200-1")]
        assert "GPU 3: XID 79 (GPU has fallen off the bus)" in row["actual"]
        assert "SIMULATED DCGM exporter" in row["reason"]
        _simulate_dcgm(lw, "h200-1", {"3": {"xid": 13}})  # an application error: the GPU is still healthy
        code, data = verify(lw, tmp_path, capsys)
        assert failed(data) == set() and code == 0
    finally:
        _simulate_dcgm(lw, "h200-1", None)
    ns = load_spec(LOCAL).gpu_operator.namespace
    cm = lw.get("configmap", DCGM_CONFIGMAP, "-n", ns)
    lw.kubectl("delete", "configmap", "-n", ns, DCGM_CONFIGMAP)
    try:
        code, data = verify(lw, tmp_path, capsys)
        gpu_nodes = {h for h, s in expected.host_states(load_spec(LOCAL)).items() if s.gpu_count}
        assert failed(data) == {("gpu-health", n) for n in gpu_nodes} and code == 1
        assert all("cannot mount its metrics CSV" in r["actual"] for r in data["results"] if r["check"] == "gpu-health")
    finally:
        apply_rendered(lw, [{k: cm[k] for k in ("apiVersion", "kind", "data")}
                            | {"metadata": {"name": DCGM_CONFIGMAP, "namespace": ns}}])
    code, data = verify(lw, tmp_path, capsys)
    assert failed(data) == set() and code == 0


def _stand_in_daemonset(name: str, namespace: str, node_selector: dict[str, str]) -> dict:
    """A DaemonSet named and selecting nodes as the operator's would; kwok runs its pods."""
    app = {"app": name}
    secure = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": app}, "template": {"metadata": {"labels": app}, "spec": {
                "nodeSelector": node_selector, "tolerations": [{"operator": "Exists"}],
                "securityContext": {"runAsNonRoot": True, "runAsUser": 65534,
                                    "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [{"name": name, "image": f"{name}:stand-in", "securityContext": secure}]}}}}


def _settled(lw: Cluster, namespace: str, name: str) -> dict:
    def probe():
        ds = lw.get("daemonset", name, "-n", namespace)
        st = ds.get("status") or {}
        done = (st.get("observedGeneration") == ds["metadata"]["generation"] and st.get("desiredNumberScheduled")
                and st.get("numberReady") == st.get("desiredNumberScheduled") == st.get("updatedNumberScheduled"))
        return ds if done else None

    return wait_for(f"DaemonSet {namespace}/{name} counted ready by its controller", probe, timeout=120)


def test_daemonsets_ready_is_measured_on_a_real_daemonset_controller(deployed, tmp_path, capsys):
    """The local world installs no operator, so its DaemonSets are not measured (allowed); one created here, as
    the GPU Operator names and selects it (fact daemonsets), is measured from the status the real DaemonSet
    controller writes: ready on the device-plugin pools' nodes it passes; moved to one node it fails."""
    lw, _sim, _ = deployed
    ns, name = load_spec(LOCAL).gpu_operator.namespace, "nvidia-device-plugin-daemonset"
    subject = f"{ns}/{name}"
    apply_rendered(lw, [_stand_in_daemonset(name, ns, {"nvidia.com/gpu.deploy.device-plugin": "true"})])
    try:
        _settled(lw, ns, name)
        code, data = verify(lw, tmp_path, capsys)
        rows = {(r["check"], r["subject"]): r for r in data["results"]}
        assert rows[("daemonsets-ready", subject)]["verdict"] == "pass" and code == 0
        _patch(lw, "daemonset", "-n", ns, name,
               body={"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": "l4-1"}}}}})
        _settled(lw, ns, name)
        code, data = verify(lw, tmp_path, capsys)
        assert failed(data) == {("daemonsets-ready", subject)} and code == 1
        row = next(r for r in data["results"] if r["subject"] == subject)
        assert row["actual"].startswith("1 scheduled") and "other nodes than the spec's" in row["reason"]
    finally:
        lw.kubectl("delete", "daemonset", "-n", ns, name, "--wait=true")
    code, data = verify(lw, tmp_path, capsys)
    assert failed(data) == set() and code == 0


def test_unreachable_cluster_is_one_clear_line_and_exit_1(tmp_path, capsys):
    # One ClusterUnreachable for every command: a cluster that does not answer is a failure (1), as
    # for `up`; a kubeconfig that cannot be loaded is bad input (2, see the next test).
    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "x",
                                  "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
                                  "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:1"}}],
                                  "users": [{"name": "x", "user": {}}]}))
    code = entrypoint(["verify", "-i", str(LOCAL), "--kubeconfig", str(kc)])
    err = capsys.readouterr().err
    assert code == 1 and "cannot reach the API server" in err and "Traceback" not in err


def test_a_kubeconfig_that_cannot_be_loaded_is_bad_input(tmp_path, capsys):
    missing = tmp_path / "nope"
    assert entrypoint(["verify", "-i", str(LOCAL), "--kubeconfig", str(missing)]) == 2
    assert f"kubeconfig {missing} not found" in capsys.readouterr().err
    broken = tmp_path / "broken"
    broken.write_text("clusters: [oops")
    assert entrypoint(["verify", "-i", str(LOCAL), "--kubeconfig", str(broken)]) == 2
    err = capsys.readouterr().err
    assert "is not usable" in err and "Traceback" not in err


def _suite(lw: Cluster, tmp_path: Path) -> tuple[int, dict[str, str]]:
    """`pytest --pyargs gpucluster.verify.suite.test_cluster` in a subprocess: exit code, verdict per test id."""
    import sys
    from xml.etree import ElementTree as ET

    junit = tmp_path / "suite.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs",
                           "gpucluster.verify.suite.test_cluster", "--gpucluster-inventory", str(LOCAL),
                           "--gpucluster-kubeconfig", str(lw.kubeconfig), "--gpucluster-allow-not-measured",
                           ",".join(ALLOW),
                           f"--junitxml={junit}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert junit.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    verdicts = {}
    for case in ET.parse(junit).iter("testcase"):
        kind = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        verdicts[case.get("name").removeprefix("test_cluster[").removesuffix("]")] = kind
    return proc.returncode, verdicts


def test_plain_pytest_suite_runs_the_same_checks(deployed, tmp_path, capsys):
    """The checks as a pytest suite (the `pytest11` plugin): one test per row, the same verdicts."""
    lw, _sim, _ = deployed
    code, verdicts = _suite(lw, tmp_path)
    _, data = verify(lw, tmp_path, capsys)
    assert code == 0, [k for k, v in verdicts.items() if v != "passed"]
    assert len(verdicts) == len(data["results"])
    assert {k for k, v in verdicts.items() if v == "skipped"} == {
        f"{r['check']}[{r['subject']}]" for r in data["results"] if r["verdict"] == "not-measured"}
    lw.kubectl("taint", "node", "h200-1", "nvidia.com/gpu-")
    try:
        code, verdicts = _suite(lw, tmp_path)
    finally:
        lw.kubectl("taint", "node", "h200-1", "nvidia.com/gpu=present:NoSchedule")
    assert code == 1
    assert {k for k, v in verdicts.items() if v == "failure"} == {"node-taints[h200-1]"}
