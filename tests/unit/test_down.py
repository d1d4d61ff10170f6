"""`gpucluster down` on a real cluster: what it lists from the stack state, and that it asks first.

The stack state is a checkpoint file written as the file backend stores it; the cluster's pod and
PersistentVolumeClaim counts and the engine's destroy are replaced by recorders, so these tests prove
what is listed, kept and asked, and that nothing is destroyed before the answer. The live proof that
adopted objects survive `down` is in tests/integration/test_stacks.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpucluster.cli import main
from gpucluster.cli.stacks import ask_before_deleting
from gpucluster.errors import ConfirmationNeeded, Declined
from gpucluster.flow import run_down
from gpucluster.pulumi import teardown
from gpucluster.pulumi.ownership import Ref

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "inventories" / "lab"


def k8s(type_: str, name: str, namespace: str = "", *, retain: bool = False) -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    path = type_.split(":")[1]
    api_version = "v1" if path == "core/v1" else path
    return {"urn": f"urn:pulumi:lab::p::{type_}::{name}", "custom": True, "type": type_,
            "id": f"{namespace}/{name}" if namespace else name, "inputs": {"kind": type_.rsplit(":", 1)[1],
                                                                           "metadata": meta},
            "outputs": {"apiVersion": api_version, "metadata": {**meta, "uid": f"uid-{namespace}-{name}"}},
            **({"retainOnDelete": True} if retain else {})}


def node_patch(name: str) -> dict:
    """The platform stack's server-side-apply patch of a Node's labels (gpucluster.pulumi.objects, patch=True)."""
    return {"urn": f"urn:pulumi:lab::p::kubernetes:core/v1:NodePatch::node/{name}", "custom": True,
            "type": "kubernetes:core/v1:NodePatch", "id": name,
            "inputs": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pool": "a"}}},
            "outputs": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"uid--{name}"}}}


PLATFORM = [
    {"urn": "urn:…::pulumi:providers:kubernetes::cluster", "custom": True, "type": "pulumi:providers:kubernetes"},
    k8s("kubernetes:core/v1:Namespace", "gpu-operator"),
    k8s("kubernetes:core/v1:Namespace", "monitoring", retain=True),  # adopted by `up --adopt`
    k8s("kubernetes:core/v1:ConfigMap", "dcgm", "gpu-operator"),
    k8s("kubernetes:core/v1:ConfigMap", "mig", "gpu-operator"),
    k8s("kubernetes:monitoring.coreos.com/v1:PrometheusRule", "gpu", "monitoring"),
    node_patch("gpu-1"),
    node_patch("gpu-2"),
    {"urn": "urn:…::kubernetes:helm.sh/v3:Release::release/volcano", "custom": True,
     "type": "kubernetes:helm.sh/v3:Release", "id": "volcano-system/volcano",
     "outputs": {"name": "volcano", "namespace": "volcano-system"}},
]
TENANTS = [k8s("kubernetes:core/v1:Namespace", "training"), k8s("kubernetes:core/v1:ResourceQuota", "q", "training")]
STATES = {"platform": PLATFORM, "tenants": TENANTS}


def write_state(state: Path) -> None:
    for stack, resources in (("platform", PLATFORM), ("tenants", TENANTS)):
        folder = state / "backend" / ".pulumi" / "stacks" / f"gpucluster-{stack}"
        folder.mkdir(parents=True)
        (folder / "lab.json").write_text(json.dumps({"version": 3, "checkpoint": {"latest": {
            "resources": resources[:-1], "pending_operations": [{"resource": resources[-1], "type": "creating"}]}}}))


COUNTS = {"gpu-operator": (0, 0), "training": (3, 2)}


def contents(namespaces):
    return {ns: COUNTS[ns] for ns in namespaces}


def same_uids(wanted):
    """The cluster as the stacks left it: every object the state records, with the uid it records."""
    return {ref: f"uid-{ref.namespace}-{ref.name}" for ref in wanted}


def test_the_listing_names_namespaces_with_their_pods_and_volumes_and_keeps_adopted_objects():
    plan = teardown.of("lab", STATES, contents, same_uids)
    assert plan.namespaces == {"gpu-operator": (0, 0), "training": (3, 2)}
    assert plan.releases == ["volcano-system/volcano"]
    assert dict(plan.objects) == {"ConfigMap": 2, "PrometheusRule": 1, "ResourceQuota": 1}
    assert plan.kept == ["Namespace//monitoring"]
    text = "\n".join(plan.lines())
    assert "these 7 object(s) the stacks of lab created" in text
    assert "Namespace training (with 3 pod(s) and 2 PersistentVolumeClaim(s) in it, deleted with it)" in text
    assert "Namespace gpu-operator (no pods or PersistentVolumeClaims in it)" in text
    assert "Helm release volcano-system/volcano" in text and "2 ConfigMap, 1 PrometheusRule" in text
    assert "leaves in place (adopted by `up --adopt`, never deleted): Namespace//monitoring" in text
    assert "monitoring (" not in text  # the adopted namespace is not among those deleted
    assert plan.replaced == [] and "drops from the stack state" not in text


def test_an_object_someone_re_made_since_up_is_left_and_dropped_from_the_state():
    def remade(wanted):
        live = same_uids(wanted)
        live[Ref("ConfigMap", "gpu-operator", "dcgm")] = "theirs"  # deleted and made again by someone
        del live[Ref("ConfigMap", "gpu-operator", "mig")]  # gone: deleting it is a no-op, not a takeover
        return live

    plan = teardown.of("lab", STATES, contents, remade)
    assert [(r.ref, r.stack, r.urn) for r in plan.replaced] == [
        (Ref("ConfigMap", "gpu-operator", "dcgm"), "platform", PLATFORM[3]["urn"])]
    assert dict(plan.objects) == {"ConfigMap": 1, "PrometheusRule": 1, "ResourceQuota": 1}
    assert "made again by someone else since `up`" in "\n".join(plan.lines())


def test_what_was_in_a_re_made_namespace_is_not_ours_either():
    def remade(wanted):
        return {**same_uids(wanted), Ref("Namespace", "", "training"): "theirs"}

    plan = teardown.of("lab", STATES, contents, remade)
    # Dropped from the state dependents first (the quota inside), the Namespace last.
    assert [str(r.ref) for r in plan.replaced] == ["ResourceQuota/training/q", "Namespace//training"]
    assert "training" not in plan.namespaces and "ResourceQuota" not in plan.objects


def test_the_patch_of_a_node_that_is_gone_is_dropped_from_the_state_not_destroyed():
    def node_gone(wanted):
        assert {Ref("Node", "", "gpu-1"), Ref("Node", "", "gpu-2")} <= set(wanted)  # patch targets are looked up
        return {ref: uid for ref, uid in same_uids(wanted).items() if ref != Ref("Node", "", "gpu-1")}

    plan = teardown.of("lab", STATES, contents, node_gone)
    assert plan.orphaned == [teardown.Patch(Ref("Node", "", "gpu-1"), "platform", node_patch("gpu-1")["urn"], "v1")]
    assert plan.as_dict()["orphanedPatches"] == ["Node//gpu-1"]
    assert "patches of objects that no longer exist" in "\n".join(plan.lines())
    # patches are never among what down deletes, gone or not
    assert dict(plan.objects) == {"ConfigMap": 2, "PrometheusRule": 1, "ResourceQuota": 1}
    assert teardown.of("lab", STATES, contents, same_uids).orphaned == []  # both Nodes there: nothing dropped


@pytest.fixture
def engine(monkeypatch, tmp_path):
    """A lab state on disk; the pod/PVC counts and the engine's operations recorded instead of run."""
    from gpucluster.pulumi import cluster, engine

    write_state(tmp_path / "state")
    calls: list[tuple[str, str]] = []

    def run(self, name, operation, program, on_output=None):
        calls.append((name, operation))
        return engine.Counts(name, operation, {"delete": 1})

    monkeypatch.setattr(engine.Engine, "run", run)
    monkeypatch.setattr(engine.Engine, "forget", lambda self, name, urn: calls.append((name, f"forget {urn}")))
    monkeypatch.setattr(cluster, "namespace_contents", lambda kc, nss, context=None: contents(nss))
    monkeypatch.setattr(cluster, "live_uids", lambda kc, wanted, context=None: uids(wanted))
    uids = same_uids
    return tmp_path / "state", calls


def test_down_asks_with_the_listing_and_a_no_deletes_nothing(engine):
    state, calls = engine
    asked = []

    def no(plan):
        asked.append(plan)
        return False

    with pytest.raises(Declined, match="nothing was deleted"):
        run_down(LAB, state_dir=state, quiet=True, confirm=no)
    assert [p.kept for p in asked] == [["Namespace//monitoring"]] and asked[0].namespaces["training"] == (3, 2)
    assert calls == []


def test_re_made_objects_are_dropped_from_the_state_after_the_answer_and_before_the_destroy(engine, monkeypatch):
    from gpucluster.pulumi import cluster

    state, calls = engine
    monkeypatch.setattr(cluster, "live_uids", lambda kc, wanted, context=None: {
        **same_uids(wanted), Ref("ConfigMap", "gpu-operator", "dcgm"): "theirs"})
    with pytest.raises(Declined):
        run_down(LAB, state_dir=state, quiet=True, confirm=lambda plan: False)
    assert calls == []  # a no drops nothing either
    report = run_down(LAB, state_dir=state, quiet=True, confirm=lambda plan: True)
    assert calls == [("platform", f"forget {PLATFORM[3]['urn']}"), ("tenants", "destroy"), ("platform", "destroy")]
    assert report.teardown["replaced"] == ["ConfigMap/gpu-operator/dcgm"]


def test_patches_of_gone_nodes_are_dropped_after_the_answer_and_before_the_destroy(engine, monkeypatch):
    """Destroying the patch of a Node deleted since `up` would apply the bare Node and create it again."""
    from gpucluster.pulumi import cluster

    state, calls = engine
    monkeypatch.setattr(cluster, "live_uids", lambda kc, wanted, context=None: {
        ref: uid for ref, uid in same_uids(wanted).items() if ref != Ref("Node", "", "gpu-2")})
    with pytest.raises(Declined):
        run_down(LAB, state_dir=state, quiet=True, confirm=lambda plan: False)
    assert calls == []
    report = run_down(LAB, state_dir=state, quiet=True, confirm=lambda plan: True)
    forget = ("platform", f"forget {node_patch('gpu-2')['urn']}")
    assert calls == [forget, ("tenants", "destroy"), ("platform", "destroy")]
    assert report.teardown["orphanedPatches"] == ["Node//gpu-2"]


def test_down_with_a_yes_destroys_tenants_then_platform_and_reports_the_listing(engine):
    state, calls = engine
    report = run_down(LAB, state_dir=state, quiet=True, confirm=lambda plan: True)
    assert calls == [("tenants", "destroy"), ("platform", "destroy")]
    assert report.teardown["kept"] == ["Namespace//monitoring"]
    assert report.teardown["namespaces"]["training"] == {"pods": 3, "persistentVolumeClaims": 2}


def test_the_cli_refuses_on_a_non_interactive_stdin_without_yes(engine):
    state, calls = engine
    res = CliRunner().invoke(main, ["down", "-i", str(LAB), "--state-dir", str(state), "-o", "json"])
    assert isinstance(res.exception, ConfirmationNeeded) and res.exception.exit_code == 2
    assert "Pass --yes" in str(res.exception) and "nothing was deleted" in str(res.exception)
    assert "Namespace training (with 3 pod(s)" in res.stderr  # the listing, though the console is quiet
    assert calls == []


def test_the_cli_with_yes_asks_nothing_and_destroys(engine):
    state, calls = engine
    res = CliRunner().invoke(main, ["down", "-i", str(LAB), "--state-dir", str(state), "--yes", "-o", "json"])
    assert res.exit_code == 0, res.output
    assert calls == [("tenants", "destroy"), ("platform", "destroy")]
    assert json.loads(res.stdout)["teardown"]["kept"] == ["Namespace//monitoring"]


class Terminal:
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "deletes"), [("y\n", True), ("n\n", False), ("\n", False)])  # default: no
def test_a_terminal_is_asked_and_no_is_the_default(answer, deletes):
    plan = teardown.of("lab", {"tenants": TENANTS}, contents)
    with CliRunner().isolation(input=answer) as (_out, err, *_):
        assert ask_before_deleting(plan, show=True, stdin=Terminal()) is deletes  # type: ignore[arg-type]
        shown = err.getvalue().decode()
    assert "Namespace training (with 3 pod(s)" in shown and "Delete them? [y/N]" in shown


def test_nothing_in_the_state_means_nothing_to_ask(monkeypatch, tmp_path):
    from gpucluster.pulumi import engine

    monkeypatch.setattr(engine.Engine, "run", lambda self, name, op, program, on_output=None:
                        engine.Counts(name, op, {}))

    def never(plan):
        raise AssertionError("asked with nothing to delete")

    report = run_down(LAB, state_dir=tmp_path, quiet=True, confirm=never)
    assert report.teardown == {"namespaces": {}, "releases": [], "objects": {}, "kept": [], "replaced": [],
                               "orphanedPatches": []}
