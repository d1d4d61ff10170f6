"""Both stacks with the real Pulumi engine and provider against the real local control plane.

Runs in file order on one local world: a user's ``monitoring`` Namespace holding a ConfigMap exists
before the first ``up``, which refuses it (exit 2) and changes nothing → cold ``up --adopt
Namespace//monitoring`` → converged re-run without the flag (0 changes) → ``up --only`` runs one
stack and leaves the other's state as it was → one tenant's GPU quota raised (exactly 1 update) →
drift → the stack state backed up, lost and restored → quota admission and taints at work → the
probe chart installed from a local path with the stack's values → a DeviceClass that matches no
device fails ``up``'s verify step → ``down`` leaves nothing behind but the adopted Namespace, the
user's ConfigMap and a ConfigMap someone
re-made under one of our names. Needs the toolchain
(local world + ``pulumi`` + ``pulumi-resource-kubernetes``); skipped with the reason otherwise
(GPUCLUSTER_REQUIRE_TOOLS=1 fails instead).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cluster_helpers import Cluster

from gpucluster.flow import run_down, run_up
from gpucluster.kube import Kube
from gpucluster.pulumi.cluster import discover
from gpucluster.pulumi.plan import plan
from gpucluster.render import render
from gpucluster.render.releases import CHART_MODULES
from gpucluster.spec import load_spec

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
LOCAL = REPO / "inventories" / "local"
CHARTS = REPO / "tests" / "fixtures" / "charts"


#: The local world of this module, plus the Pulumi engine and provider.
LOCAL_WORLD = {"tools": ("pulumi", "pulumi-resource-kubernetes")}


@pytest.fixture(scope="module")
def api(lw: Cluster):
    from kubernetes import config

    c = config.new_client_from_config(config_file=str(lw.kubeconfig))
    yield c
    c.close()


@pytest.fixture(scope="module")
def kc(lw: Cluster) -> Iterator[Kube]:
    with Kube(lw.kubeconfig) as client:
        yield client


def _variant(tmp: Path, name: str, change) -> Path:
    """A copy of the local inventory with ``change`` applied to its data (same cluster name)."""
    data = yaml.safe_load((LOCAL / "cluster.yaml").read_text())
    change(data)
    folder = tmp / name
    folder.mkdir(exist_ok=True)
    (folder / "cluster.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return folder


def _get(kc: Kube, obj: dict):
    """The live object, or None when the API server answers 404."""
    group_version = obj["apiVersion"]
    base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    plural = {"NetworkAttachmentDefinition": "network-attachment-definitions",
              "PriorityClass": "priorityclasses",
              "NicClusterPolicy": "nicclusterpolicies", "NetworkPolicy": "networkpolicies", "IPPool": "ippools",
              "ResourceClaimTemplate": "resourceclaimtemplates", "DeviceClass": "deviceclasses",
              "ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules",
              "ResourceQuota": "resourcequotas", "LimitRange": "limitranges", "Queue": "queues",
              "HyperNode": "hypernodes", "RoleBinding": "rolebindings", "Role": "roles", "ConfigMap": "configmaps",
              "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
              "Namespace": "namespaces", "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
              "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}[obj["kind"]]
    ns = obj["metadata"].get("namespace")
    path = f"{base}/namespaces/{ns}/{plural}/{obj['metadata']['name']}" if ns else \
        f"{base}/{plural}/{obj['metadata']['name']}"
    return kc.get(path)


def _counts(report, stack: str) -> dict:
    (c,) = [c for c in report.stacks if c["stack"] == stack]
    return c


#: Someone else's objects, there before the first `up`: a Namespace the platform stack renders too
#: (render/namespaces.py), and a ConfigMap of theirs in it.
THEIR_NAMESPACE = {"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "monitoring", "labels": {"owner": "someone-else"}}}
THEIR_CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "their-config", "namespace": "monitoring"}, "data": {"keep": "me"}}


@pytest.fixture(scope="module")
def theirs(kc: Kube, tmp_path_factory) -> dict:
    """The user's Namespace and ConfigMap as created, and the (still empty) stack state folder."""
    ns = kc.create("/api/v1/namespaces", THEIR_NAMESPACE)
    cm = kc.create("/api/v1/namespaces/monitoring/configmaps", THEIR_CONFIGMAP)
    return {"namespace": ns, "configmap": cm, "state": tmp_path_factory.mktemp("stacks")}


def _theirs_untouched(kc: Kube, theirs: dict) -> dict:
    ns = _get(kc, THEIR_NAMESPACE)
    cm = _get(kc, THEIR_CONFIGMAP)
    assert ns is not None and ns["metadata"]["uid"] == theirs["namespace"]["metadata"]["uid"]
    assert ns["status"]["phase"] == "Active"
    assert cm is not None and cm["metadata"]["uid"] == theirs["configmap"]["metadata"]["uid"]
    assert cm["data"] == {"keep": "me"}
    return ns


def test_the_first_up_refuses_a_namespace_it_did_not_create_and_changes_nothing(theirs, kc, lw: Cluster, cli):
    out = cli("up", "-i", LOCAL, "--world-dir", lw.state_dir, "--state-dir", theirs["state"], "--no-verify")
    assert out.exit_code == 2, out.stderr[-3000:]
    assert "phase 'plan' failed" in out.stderr and "  - Namespace//monitoring" in out.stderr
    assert "--adopt Namespace//monitoring" in out.stderr and "delete or rename" in out.stderr
    # Nothing changed: their objects as they were (same resourceVersion), none of ours created, no state.
    ns = _theirs_untouched(kc, theirs)
    assert ns["metadata"]["resourceVersion"] == theirs["namespace"]["metadata"]["resourceVersion"]
    rendered = render(load_spec(LOCAL))
    created = [o for o in rendered.objects() if _get(kc, o) is not None and o["metadata"]["name"] != "monitoring"]
    assert not created, created
    assert not list((theirs["state"] / "backend").rglob("*.json"))


@pytest.fixture(scope="module")
def cold(lw: Cluster, theirs, tmp_path_factory):
    state = theirs["state"]
    start = time.monotonic()
    report = run_up(LOCAL, world_dir=lw.state_dir, state_dir=state, quiet=True, adopt=["Namespace//monitoring"])
    return report, state, time.monotonic() - start


def _retained(state: Path) -> dict[str, bool]:
    """Objects of the platform stack's state → whether each is retained on delete."""
    from gpucluster.pulumi.engine import Engine

    return {r["urn"].rsplit("::", 1)[-1]: bool(r.get("retainOnDelete"))
            for r in Engine(state, "local").state_resources("platform") if r.get("type", "").startswith("kubernetes:")}


def test_up_with_adopt_imports_the_namespace_keeps_their_configmap_and_applies_the_spec(cold, kc, theirs):
    report, state, _ = cold
    assert report.ownership["adopted"] == ["Namespace//monitoring"]
    assert _counts(report, "platform")["imported"] == 1 and _counts(report, "tenants")["imported"] == 0
    ns = _theirs_untouched(kc, theirs)  # the same object (uid), imported, not re-created
    (ours,) = [o for o in render(load_spec(LOCAL)).objects() if o["kind"] == "Namespace"
               and o["metadata"]["name"] == "monitoring"]
    labels = ns["metadata"].get("labels") or {}
    assert labels.get("owner") == "someone-else"  # their label stays
    assert ours["metadata"]["labels"] and all(labels.get(k) == v for k, v in ours["metadata"]["labels"].items())
    retained = _retained(state)
    assert retained["namespace/monitoring"] is True
    assert [k for k, v in retained.items() if v] == ["namespace/monitoring"]  # nothing else is retained
    print(f"ownership check of the cold up: {report.ownership}")


def test_cold_up_creates_every_non_chart_object(cold, kc, lw: Cluster):
    report, _, seconds = cold
    facts = discover(lw.kubeconfig, remote_charts=False)
    rendered = render(load_spec(LOCAL))
    objects = rendered.objects()
    # Objects whose kind the cluster does not serve are left out, and only those, each with a reason.
    unserved = [o for o in objects if (o["apiVersion"], o["kind"]) not in facts.served]
    left_out = [s for s in report.skipped if not s["what"].startswith("release ")]
    assert sorted(s["what"] for s in left_out) == sorted(f"{o['kind']} {o['metadata']['name']}" for o in unserved)
    # A kind whose CRD only a release not installed here would bring is left out with that release.
    chart_kinds = {kind for mod in CHART_MODULES.values() for kind in mod.CHART_KINDS}
    for s in left_out:
        kind = next(o["kind"] for o in unserved if f"{o['kind']} {o['metadata']['name']}" == s["what"])
        from_chart = any(n == kind for _, n in chart_kinds)
        assert ("comes with the release" in s["reason"]) if from_chart else ("CRD is not installed" in s["reason"]), s
    objects = [o for o in objects if o not in unserved]
    plans = plan(rendered, facts)
    missing = [f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}"
               for o in objects if _get(kc, o) is None]
    assert not missing, f"not created: {missing}"
    assert _counts(report, "platform")["created"] > len(plans["platform"].objects())
    assert _counts(report, "tenants")["created"] > len(plans["tenants"].objects())
    # The DRA v1 objects the 4.25.0 provider has no kind-table entry for are real API objects.
    dc = _get(kc, {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                    "metadata": {"name": "hopper"}})
    assert dc["spec"]["selectors"][0]["cel"]["expression"]
    # Every chart release is reported as not installed here, one line each, with the reason.
    rels = [s for s in report.skipped if s["what"].startswith("release ")]
    assert len(rels) == len(render(load_spec(LOCAL)).releases)
    assert all("unreachable" in s["reason"] for s in rels)
    assert not report.not_ready
    # `up` ends with the cluster checks of `gpucluster verify`: all pass; skips carry their reason.
    summary = report.verify["summary"]
    assert summary["fail"] == 0, [p for p in report.verify["problems"] if p["verdict"] == "fail"]
    assert summary["pass"] >= 4 * len(load_spec(LOCAL).hosts)  # ready, capacity, allocatable, labels per node
    assert all(p["reason"] for p in report.verify["problems"])
    # with no flag: the local world allows its fixed list, and nothing else is left unmeasured (GPU health
    # included, read from the simulated DCGM exporter), so `gpucluster up` exits 0
    from gpucluster.verify import checks
    from gpucluster.verify.model import Result, problems

    assert report.verify["allowedNotMeasured"] == checks.LOCAL_WORLD
    unmeasured = {p["check"] for p in report.verify["problems"] if p["verdict"] == "not-measured"}
    assert unmeasured == set(checks.LOCAL_WORLD), unmeasured
    rows = [Result.from_dict(p) for p in report.verify["problems"]]
    assert problems(rows, report.verify["allowedNotMeasured"]) == ""
    print(f"cold up: {seconds:.1f} s; verify {summary}")


def test_second_up_reports_no_changes(cold, lw: Cluster):
    _, state, _ = cold
    report = run_up(LOCAL, world_dir=lw.state_dir, state_dir=state, quiet=True)  # without --adopt
    for c in report.stacks:
        assert (c["created"], c["updated"], c["deleted"]) == (0, 0, 0), c
        assert c["same"] > 0
    # The adopted Namespace stays adopted (the state still retains it) though the flag is gone; and
    # nothing is looked up: everything the stacks create is in their state.
    assert _retained(state)["namespace/monitoring"] is True
    assert (report.ownership["looked_up"], report.ownership["calls"], report.ownership["adopted"]) == (0, 0, [])
    # Once more with the same inputs: both stacks are byte-identical to that update, so the engine does not run,
    # and the report says so rather than count a comparison that did not happen.
    again = run_up(LOCAL, world_dir=lw.state_dir, state_dir=state, quiet=True)
    assert [(c["stack"], c["inputs_unchanged"]) for c in again.stacks] == [("platform", True), ("tenants", True)]
    assert [c["same"] for c in again.stacks] == [c["same"] for c in report.stacks], (again.stacks, report.stacks)


def test_a_create_the_state_lost_is_taken_back_only_when_the_creates_journal_names_it(cold, kc, lw: Cluster, cli):
    """What a Ctrl-C during an apply can leave (the provider's apply cancelled after the API server did it: the
    engine records no create): DeviceClass hopper on the cluster, applied by the provider, not in the state.
    Without the journal naming it, `up` refuses it like anyone's object; with it, `up` takes it back as created
    (not adopted: `down` deletes it) and the journal goes once the state records it."""
    from gpucluster.pulumi import ownership
    from gpucluster.pulumi.engine import Engine
    from gpucluster.pulumi.ownership import Ref

    _, state, _ = cold
    engine = Engine(state, "local")
    assert not engine.journal.exists()  # the runs so far ended well: nothing left unrecorded
    (rec,) = [r for r in engine.state_resources("platform")
              if r["type"].endswith(":DeviceClass") and r["outputs"]["metadata"]["name"] == "hopper"]
    hopper = Ref("DeviceClass", "", "hopper", "resource.k8s.io")
    uid = rec["outputs"]["metadata"]["uid"]
    engine.forget("platform", rec["urn"])
    refused = cli("up", "-i", LOCAL, "--world-dir", lw.state_dir, "--state-dir", state, "--no-verify")
    assert refused.exit_code == 2, refused.stderr[-3000:]
    assert "  - DeviceClass//hopper" in refused.stderr and "1 object the stacks would create" in refused.stderr
    assert not engine.journal.exists()  # refused before anything: nothing journaled either
    ownership.write_journal(engine.journal, {hopper})
    report = run_up(LOCAL, world_dir=lw.state_dir, state_dir=state, quiet=True, verify=False)
    assert report.ownership["recovered"] == ["DeviceClass//hopper"] and report.ownership["adopted"] == []
    assert _retained(state)["deviceclass/hopper"] is False  # ours again: `down` deletes it
    dc = _get(kc, {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "hopper"}})
    assert dc["metadata"]["uid"] == uid  # the same object, taken back, not re-made
    assert not engine.journal.exists()


def test_plan_lists_the_quota_change_field_by_field_and_exits_5_and_0_when_converged(cold, lw: Cluster, cli,
                                                                                       tmp_path):
    """`gpucluster plan` from the engine's own preview: on the converged state nothing is pending (exit 0);
    with one tenant's GPU quota raised, exactly that ResourceQuota is an update, its changed paths named with
    old and new values (exit 5), in plan.json and plan.md under --out-dir. Nothing is applied."""
    _, state, _ = cold

    def raise_quota(data):
        data["tenants"][0]["quota"]["gpus"] = 24

    base = ("plan", "--world-dir", lw.state_dir, "--state-dir", state)
    same = cli(*base, "-i", LOCAL, "-o", "json")
    assert same.exit_code == 0, same.stderr[-3000:]
    assert json.loads(same.stdout)["changes"] == 0
    out = tmp_path / "pr"
    more = cli(*base, "-i", _variant(tmp_path, "more-gpus", raise_quota), "-o", "json", "--out-dir", out)
    assert more.exit_code == 5, more.stderr[-3000:]
    doc = json.loads(more.stdout)
    assert doc == json.loads((out / "plan.json").read_text()) and doc["changes"] == 1
    (tenants,) = [s for s in doc["stacks"] if s["stack"] == "tenants"]
    (quota,) = tenants["objects"]
    assert (quota["op"], quota["object"]) == ("update", "resourcequota/ml-research/gpucluster-quota")
    by_path = {f["path"]: (f["old"], f["new"]) for f in quota["fields"]}
    assert by_path['spec.hard["requests.nvidia.com/gpu"]'] == ("16", "24")
    assert all(v == ("16", "24") for v in by_path.values()), by_path
    assert 'update | `resourcequota/ml-research/gpucluster-quota`' in (out / "plan.md").read_text()
    # nothing applied: the next plan on the unchanged spec is still empty
    assert json.loads(cli(*base, "-i", LOCAL, "-o", "json").stdout)["changes"] == 0


def _checkpoint(state: Path, stack: str) -> bytes:
    base = state / "backend" / ".pulumi" / "stacks" / f"gpucluster-{stack}"
    (path,) = [p for p in (base / "local.json", base / "local.json.gz") if p.exists()]
    return path.read_bytes()


def test_up_only_runs_the_named_stack_and_leaves_the_other_as_it_was(cold, kc, lw: Cluster, tmp_path):
    """`up --only tenants` on a spec that changes a tenant quota and an alert threshold applies the quota
    (one update) and does not run the platform stack at all (its state file is byte-identical after,
    though it had a change to make); `--only platform` then applies the threshold and leaves the tenants
    stack's state alone. The next test starts from quota 20 and the original threshold."""
    _, state, _ = cold
    quota = {"apiVersion": "v1", "kind": "ResourceQuota",
             "metadata": {"namespace": "ml-research", "name": "gpucluster-quota"}}

    def both(data):
        data["tenants"][0]["quota"]["gpus"] = 20
        data["monitoring"]["alerts"]["temperatureCelsius"] = 80

    platform_before = _checkpoint(state, "platform")
    report = run_up(_variant(tmp_path, "only-both", both), world_dir=lw.state_dir, state_dir=state, quiet=True,
                    verify=False, only=("tenants",))
    assert [c["stack"] for c in report.stacks] == ["tenants"]
    tenants = _counts(report, "tenants")
    assert (tenants["created"], tenants["updated"], tenants["deleted"]) == (0, 1, 0)
    assert _get(kc, quota)["spec"]["hard"]["requests.nvidia.com/gpu"] == "20"
    assert _checkpoint(state, "platform") == platform_before

    tenants_before = _checkpoint(state, "tenants")
    report = run_up(_variant(tmp_path, "only-both", both), world_dir=lw.state_dir, state_dir=state, quiet=True,
                    verify=False, only=("platform",))
    assert [c["stack"] for c in report.stacks] == ["platform"]
    platform = _counts(report, "platform")
    assert (platform["created"], platform["updated"], platform["deleted"]) == (0, 1, 0)
    assert _checkpoint(state, "tenants") == tenants_before

    def quota_only(data):
        data["tenants"][0]["quota"]["gpus"] = 20

    # the threshold back, through the platform stack alone again
    report = run_up(_variant(tmp_path, "only-quota", quota_only), world_dir=lw.state_dir, state_dir=state,
                    quiet=True, verify=False, only=("platform",))
    assert [(c["stack"], c["updated"]) for c in report.stacks] == [("platform", 1)]


def test_raising_one_tenant_gpu_quota_is_exactly_one_update(cold, kc, lw: Cluster, tmp_path):
    _, state, _ = cold

    def raise_quota(data):
        data["tenants"][0]["quota"]["gpus"] = 24

    report = run_up(_variant(tmp_path, "more-gpus", raise_quota), world_dir=lw.state_dir, state_dir=state,
                    quiet=True)
    tenants, platform = _counts(report, "tenants"), _counts(report, "platform")
    assert (tenants["created"], tenants["updated"], tenants["deleted"]) == (0, 1, 0)
    assert (platform["created"], platform["updated"], platform["deleted"]) == (0, 0, 0)
    quota = _get(kc, {"apiVersion": "v1", "kind": "ResourceQuota",
                       "metadata": {"namespace": "ml-research", "name": "gpucluster-quota"}})
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "24"
    assert quota["status"]["hard"]["requests.nvidia.com/gpu"] == "24"  # readiness waited for it


def test_drift_names_the_field_changed_outside_the_stack_and_nothing_else(cold, kc, lw: Cluster, cli):
    """`gpucluster drift` against the real API server's dry-run apply: a converged cluster has none (over every
    object of both stacks, so the server's defaulting and canonical forms never read as drift); a tenant
    quota edited by hand is named with both values (exit 5), while a label someone added to one of our
    Namespaces (a field we do not set) is not; put back, the cluster has none again."""
    _, state, _ = cold
    args = ("drift", "-i", LOCAL, "--world-dir", lw.state_dir, "--state-dir", state, "-o", "json")
    clean = cli(*args)
    assert clean.exit_code == 0, clean.stderr[-3000:]
    doc = json.loads(clean.stdout)
    assert doc["drifted"] == [] and doc["compared"] > 50 and doc["notCompared"] == []
    quota = "/api/v1/namespaces/ml-research/resourcequotas/gpucluster-quota"
    key = "requests.nvidia.com/gpu"
    applied = kc.get(quota)["spec"]["hard"][key]
    kc.patch(quota, {"spec": {"hard": {key: "99"}}})
    kc.patch("/api/v1/namespaces/inference", {"metadata": {"labels": {"team": "theirs"}}})
    try:
        found = cli(*args)
        assert found.exit_code == 5, found.stderr[-3000:]
        assert json.loads(found.stdout)["drifted"] == [{
            "stack": "tenants", "object": "ResourceQuota/ml-research/gpucluster-quota", "change": "changed",
            "fields": [{"path": f'spec.hard["{key}"]', "live": "99", "ours": applied}]}]
        text = cli(*args[:-2])
        assert text.exit_code == 5
        assert f'spec.hard["{key}"]: live "99", the stack applies "{applied}"' in text.stdout
        assert "1 object(s) changed outside the stacks" in text.stderr
    finally:
        kc.patch(quota, {"spec": {"hard": {key: applied}}})
        kc.patch("/api/v1/namespaces/inference", {"metadata": {"labels": {"team": None}}})
    assert cli(*args).exit_code == 0


def test_a_lost_stack_state_comes_back_from_a_backup_and_up_then_changes_nothing(cold, lw: Cluster, cli, tmp_path):
    """`backup stacks` writes both stacks' state (0600, never over a file); with the checkpoints gone, `up`
    refuses the stacks' own objects as not ours (exit 2); `restore stacks` puts the state back (a state that
    holds resources only with --yes) and `up` then finds nothing to change."""
    import shutil

    _, state, _ = cold

    def as_last_applied(data):  # the spec of the last `up` (test_raising_one_tenant_gpu_quota_is_exactly_one_update)
        data["tenants"][0]["quota"]["gpus"] = 24

    common = ("-i", _variant(tmp_path, "more-gpus", as_last_applied), "--world-dir", lw.state_dir, "--state-dir", state)
    backup = tmp_path / "stacks.json"
    taken = cli("backup", "stacks", *common, "--out", backup, "-o", "json")
    assert taken.exit_code == 0, taken.stderr[-3000:]
    counts = json.loads(taken.stdout)["stacks"]
    assert counts["platform"] > 10 and counts["tenants"] > 10
    assert backup.stat().st_mode & 0o777 == 0o600
    written = backup.read_bytes()
    again = cli("backup", "stacks", *common, "--out", backup)
    assert again.exit_code == 2 and "never written over a file" in again.stderr
    assert backup.read_bytes() == written

    refused = cli("restore", "stacks", *common, "--from", backup)  # the state still holds everything
    assert refused.exit_code == 2 and "Pass --yes to replace it" in refused.stderr

    checkpoints = state / "backend" / ".pulumi" / "stacks"
    shutil.move(checkpoints, tmp_path / "lost")
    lost = cli("up", *common, "--no-verify")
    assert lost.exit_code == 2, lost.stderr[-3000:]
    assert "not ours" in lost.stderr or "--adopt" in lost.stderr

    restored = cli("restore", "stacks", *common, "--from", backup, "-o", "json")
    assert restored.exit_code == 0, restored.stderr[-3000:]
    assert json.loads(restored.stdout)["stacks"] == counts
    after = cli("up", *common, "--no-verify", "-o", "json")
    assert after.exit_code == 0, after.stderr[-3000:]
    stacks = json.loads(after.stdout)["stacks"]
    assert [s["stack"] for s in stacks] == ["platform", "tenants"]
    assert all(s["created"] + s["updated"] + s["deleted"] == 0 for s in stacks), stacks


def _pod(name: str, gpus: int, toleration: bool) -> dict:
    # Tenant namespaces enforce Pod Security "restricted": the pod complies, so quota admission decides.
    restricted = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
                  "seccompProfile": {"type": "RuntimeDefault"}}
    spec: dict = {"containers": [{"name": "c", "image": "local/none:0", "securityContext": restricted,
                                  "resources": {"limits": {"nvidia.com/gpu": str(gpus), "cpu": "1",
                                                           "memory": "1Gi"}}}]}
    if toleration:
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    if not gpus:
        spec["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_pods_beyond_the_gpu_quota_are_rejected(api, cold):
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(api)
    ns = "ml-research"  # quota: 24 GPUs after the previous test
    try:
        core.create_namespaced_pod(ns, _pod("fits", 16, True))
        core.create_namespaced_pod(ns, _pod("fits-too", 8, True))
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod(ns, _pod("over", 1, True))
        assert err.value.status == 403 and "exceeded quota" in err.value.body
    finally:
        for name in ("fits", "fits-too", "over"):
            try:
                core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
            except ApiException:
                pass


def test_a_pod_without_the_gpu_toleration_never_lands_on_a_gpu_node(api, cold):
    from kubernetes import client

    core = client.CoreV1Api(api)
    gpu_nodes = {n.metadata.name for n in core.list_node().items
                 if any(t.key == "nvidia.com/gpu" for t in (n.spec.taints or []))}
    assert gpu_nodes, "the simulator registered no tainted GPU nodes"
    ns = "inference"
    core.create_namespaced_pod(ns, _pod("plain", 0, False))
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            pod = core.read_namespaced_pod("plain", ns)
            conds = {c.type: c for c in (pod.status.conditions or [])}
            unschedulable = "PodScheduled" in conds and conds["PodScheduled"].reason == "Unschedulable"
            if pod.spec.node_name or unschedulable:
                break
            time.sleep(0.5)
        assert pod.spec.node_name not in gpu_nodes, pod.spec.node_name
        assert pod.spec.node_name or conds["PodScheduled"].reason == "Unschedulable"
    finally:
        core.delete_namespaced_pod("plain", ns, grace_period_seconds=0)


def test_probe_chart_installs_from_a_local_path_with_the_stack_values(cold, kc, lw: Cluster, tmp_path):
    _, state, _ = cold

    def local_chart(data):
        data["tenants"][0]["quota"]["gpus"] = 24  # keep the previous test's state
        data.setdefault("scheduling", {}).setdefault("volcano", {})["chart"] = {
            "repository": str(CHARTS), "chart": "gpucluster-probe", "version": "0.1.0"}

    inv = _variant(tmp_path, "probe-chart", local_chart)
    report = run_up(inv, world_dir=lw.state_dir, state_dir=state, quiet=True)
    assert _counts(report, "platform")["created"] == 1  # the release, nothing else
    (volcano,) = [r for r in render(load_spec(inv)).releases if r.name == "volcano"]
    cm = _get(kc, {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"namespace": volcano.namespace, "name": "volcano-values"}})
    assert cm["data"]["chart"] == "gpucluster-probe-0.1.0"
    values = json.loads(cm["data"]["values.json"])
    assert {k: values[k] for k in volcano.values} == volcano.values
    assert not [s for s in report.skipped if s["what"].startswith("release volcano")]
    # The ownership check sees a release by its Helm records (what another `up` would have to adopt).
    from gpucluster.pulumi.cluster import existing
    from gpucluster.pulumi.ownership import release_ref

    installed, absent = release_ref(volcano.namespace, "volcano"), release_ref(volcano.namespace, "not-installed")
    found, _ = existing(lw.kubeconfig, [installed, absent], discover(lw.kubeconfig).resources)
    assert found == {installed}


def test_verify_reads_the_release_record_helm_wrote_for_the_local_chart(cold, kc, lw: Cluster, tmp_path):
    """charts-installed against the record the real provider's Helm wrote for the probe chart (a local path):
    the chart, its version and the values the stack installed it with pass; the same record judged against a
    spec whose Volcano values differ fails, naming the value; without the record the release is not installed."""
    from gpucluster.verify import cluster as vcluster
    from gpucluster.verify.model import Verdict

    def local_chart(data, reclaim=True):
        data["tenants"][0]["quota"]["gpus"] = 24  # the state the earlier tests left
        data.setdefault("scheduling", {}).setdefault("volcano", {})["chart"] = {
            "repository": str(CHARTS), "chart": "gpucluster-probe", "version": "0.1.0"}
        data["scheduling"]["volcano"]["reclaim"] = reclaim

    spec = load_spec(_variant(tmp_path, "probe-chart", local_chart))
    snap = vcluster.fetch(spec, lw.kubeconfig, simulated=True)
    rows = {r.subject: r for r in vcluster.chart_checks(spec, snap, charts_reachable=False)}
    row = rows["release/volcano"]
    assert row.verdict is Verdict.passed and row.actual.startswith("gpucluster-probe 0.1.0 in volcano-system"), row
    # releases from chart repositories are not installed here: not measured (the local world allows them)
    assert {r.verdict for s, r in rows.items() if s != "release/volcano"} == {Verdict.skipped}
    other = load_spec(_variant(tmp_path, "probe-chart-no-reclaim", lambda d: local_chart(d, reclaim=False)))
    row = next(r for r in vcluster.chart_checks(other, snap, charts_reachable=False) if r.subject == "release/volcano")
    assert row.verdict is Verdict.failed and "values.custom.scheduler_config_override" in row.reason, row
    snap.helm_releases = [r for r in snap.helm_releases or [] if r["metadata"]["labels"]["name"] != "volcano"]
    row = next(r for r in vcluster.chart_checks(spec, snap, charts_reachable=False) if r.subject == "release/volcano")
    assert row.verdict is Verdict.failed and row.actual == "not installed"


def test_up_fails_its_verify_step_when_a_device_class_matches_nothing(cold, lw: Cluster, tmp_path):
    _, state, _ = cold

    def unmatched_class(data):
        data["tenants"][0]["quota"]["gpus"] = 24  # keep the earlier tests' state
        data.setdefault("scheduling", {}).setdefault("volcano", {})["chart"] = {
            "repository": str(CHARTS), "chart": "gpucluster-probe", "version": "0.1.0"}
        # Validation refuses a class it can see matches nothing (a minMemory of 1Ti); one on a GPU's uuid it
        # cannot predict, so it warns and `up` deploys it: its verify step finds no device on the cluster.
        data["dra"]["deviceClasses"].append({"name": "gpu-no-such-uuid", "selector": {
            "cel": ["device.attributes['gpu.nvidia.com'].uuid == 'GPU-00000000-0000-0000-0000-000000000000'"]}})

    report = run_up(_variant(tmp_path, "unmatched-class", unmatched_class), world_dir=lw.state_dir,
                    state_dir=state, quiet=True)
    assert _counts(report, "platform")["created"] == 1  # the DeviceClass
    failed = [(p["check"], p["subject"]) for p in report.verify["problems"] if p["verdict"] == "fail"]
    assert failed == [("deviceclass-matches", "deviceclass/gpu-no-such-uuid")]


def test_down_removes_everything_it_created_and_leaves_what_it_adopted(cold, kc, lw: Cluster, theirs):
    _, state, _ = cold
    # Someone deletes our dashboard ConfigMap (in their adopted Namespace) and makes their own of that name.
    dashboard = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"namespace": "monitoring", "name": "gpucluster-gpu-dashboard"}}
    assert _get(kc, dashboard) is not None
    kc.delete("/api/v1/namespaces/monitoring/configmaps/gpucluster-gpu-dashboard")
    remade = kc.create("/api/v1/namespaces/monitoring/configmaps", {**dashboard, "data": {"mine": "now"}})
    report = run_down(LOCAL, world_dir=lw.state_dir, state_dir=state, keep_world=True, quiet=True)
    assert all(c["deleted"] > 0 for c in report.stacks)
    assert report.teardown["kept"] == ["Namespace//monitoring"]
    assert report.teardown["replaced"] == ["ConfigMap/monitoring/gpucluster-gpu-dashboard"]
    assert "monitoring" not in report.teardown["namespaces"] and "ml-research" in report.teardown["namespaces"]
    plans = plan(render(load_spec(LOCAL)), discover(lw.kubeconfig))
    left = [o for p in plans.values() for o in p.objects() if _get(kc, o) is not None]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in left) == [
        ("ConfigMap", "gpucluster-gpu-dashboard"), ("Namespace", "monitoring")]
    assert _get(kc, dashboard)["metadata"]["uid"] == remade["metadata"]["uid"]  # theirs, not deleted
    _theirs_untouched(kc, theirs)  # their Namespace, still Active, and their ConfigMap in it
    assert _get(kc, {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"namespace": "volcano-system", "name": "volcano-values"}}) is None
