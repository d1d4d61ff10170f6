"""`up` takes over nothing it did not create: the ownership check, `--adopt`, and what the programs register.

Pure: the stack state is a list of checkpoint resources as the file backend stores them, the cluster a
fake lookup that records what it was asked. The live proof is in tests/integration/test_stacks.py.
"""

from __future__ import annotations

from pathlib import Path

import pulumi
import pytest

from gpucluster.errors import InputError, ObjectsNotOurs
from gpucluster.pulumi import ownership, programs
from gpucluster.pulumi.ownership import Ref, check, in_state, parse_adopt
from gpucluster.pulumi.plan import ChartSource, StackPlan, plan
from gpucluster.render import Release, render
from gpucluster.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
LOCAL = REPO / "inventories" / "local"
MONITORING = Ref("Namespace", "", "monitoring")


# -- --adopt ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "kind", "namespace", "name", "group"), [
    ("Namespace//monitoring", "Namespace", "", "monitoring", None),  # cluster-scoped: empty namespace
    ("ConfigMap/gpu-operator/dcgm", "ConfigMap", "gpu-operator", "dcgm", None),
    ("Queue.scheduling.volcano.sh//ml", "Queue", "", "ml", "scheduling.volcano.sh"),  # KIND.GROUP
    ("Release/volcano-system/volcano", "Release", "volcano-system", "volcano", None),  # a Helm release
])
def test_adopt_values_parse(text, kind, namespace, name, group):
    (w,) = parse_adopt([text])
    assert (w.kind, w.namespace, w.name, w.group) == (kind, namespace, name, group)


@pytest.mark.parametrize(("text", "says"), [
    ("Namespace/monitoring", "Namespace//monitoring"),  # the namespace slot left out: the fix is named
    ("monitoring", "expected KIND/NAMESPACE/NAME"),
    ("ConfigMap/a/b/c", "expected KIND/NAMESPACE/NAME"),
    ("/ns/name", "expected KIND/NAMESPACE/NAME"),  # no kind
    ("Namespace//", "expected KIND/NAMESPACE/NAME"),  # no name
    ("Namespace//monitoring\n", "expected KIND/NAMESPACE/NAME"),  # a trailing newline is not a name
])
def test_malformed_adopt_values_are_input_errors_naming_the_value(text, says):
    with pytest.raises(InputError, match="--adopt") as err:
        parse_adopt(["Namespace//ok", text])
    assert says in str(err.value) and repr(text) in str(err.value)
    assert err.value.exit_code == 2


# -- the stack state ------------------------------------------------------------------------------------
def k8s(type_: str, name: str, namespace: str = "", *, retain: bool = False, kind: str = "") -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    res = {"urn": f"urn:pulumi:local::p::x${type_}::{name}", "custom": True, "type": type_,
           "id": f"{namespace}/{name}" if namespace else name,
           "inputs": {"kind": kind or type_.rsplit(":", 1)[1], "metadata": meta}, "outputs": {"metadata": meta}}
    if retain:
        res["retainOnDelete"] = True
    return res


STATE = [
    {"urn": "urn:pulumi:local::p::pulumi:pulumi:Stack::p-local", "custom": False, "type": "pulumi:pulumi:Stack"},
    {"urn": "urn:…::pulumi:providers:kubernetes::cluster", "custom": True, "type": "pulumi:providers:kubernetes",
     "id": "abc"},
    {"urn": "urn:…::gpucluster:platform:Namespaces::namespaces", "custom": False,
     "type": "gpucluster:platform:Namespaces"},
    k8s("kubernetes:core/v1:Namespace", "gpu-operator"),
    k8s("kubernetes:core/v1:Namespace", "monitoring", retain=True),
    k8s("kubernetes:core/v1:ConfigMap", "dcgm", "gpu-operator"),
    k8s("kubernetes:resource.k8s.io/v1:DeviceClass", "hopper"),
    k8s("kubernetes:core/v1:NodePatch", "h100-1", kind="Node"),  # a patch of someone else's Node
    {"urn": "urn:…::kubernetes:helm.sh/v3:Release::release/volcano", "custom": True,
     "type": "kubernetes:helm.sh/v3:Release", "id": "volcano-system/volcano",
     "inputs": {"name": "volcano", "namespace": "volcano-system"}, "outputs": {"name": "volcano",
                                                                              "namespace": "volcano-system"}},
]


def test_the_state_records_objects_and_releases_not_providers_components_or_patches():
    assert in_state(STATE) == {
        Ref("Namespace", "", "gpu-operator"): False,
        MONITORING: True,  # retained: adopted
        Ref("ConfigMap", "gpu-operator", "dcgm"): False,
        Ref("DeviceClass", "", "hopper", "resource.k8s.io"): False,
        Ref("Release", "volcano-system", "volcano", "helm.sh"): False,
    }


def test_a_create_left_pending_by_an_interrupted_run_is_ours():
    # A pending create has no ID yet: its identity comes from its inputs.
    pending = k8s("kubernetes:core/v1:Namespace", "inference")
    del pending["id"], pending["outputs"]
    assert in_state([pending]) == {Ref("Namespace", "", "inference"): False}


# -- the check ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def plans():
    return plan(render(load_spec(LOCAL)))


class Cluster:
    """A fake lookup: holds ``present``; records what it was asked."""

    def __init__(self, *present: Ref) -> None:
        self.present = set(present)
        self.asked: list[Ref] = []

    def __call__(self, refs):
        self.asked = list(refs)
        return {r for r in refs if r in self.present}, 3


def test_an_existing_object_not_in_the_state_is_refused_naming_it_and_both_ways_on(plans):
    with pytest.raises(ObjectsNotOurs) as err:
        check(plans, {}, Cluster(MONITORING, Ref("ConfigMap", "default", "unrelated")), environment="local")
    msg = str(err.value)
    assert err.value.exit_code == 2
    assert "1 object the stacks would create already exists" in msg and "stack state of local" in msg
    assert "  - Namespace//monitoring" in msg and "unrelated" not in msg  # only what the stacks would create
    assert "--adopt Namespace//monitoring" in msg and "delete or rename" in msg
    assert "nothing was changed" in msg


def test_every_foreign_object_is_named_at_once_helm_releases_too(plans):
    (volcano,) = plans["platform"].releases["volcano"]  # the plan with chart repositories reachable
    rel = Ref("Release", volcano.release.namespace, "volcano", "helm.sh")
    with pytest.raises(ObjectsNotOurs) as err:
        check(plans, {}, Cluster(MONITORING, rel, Ref("Namespace", "", "ml-research")))
    msg = str(err.value)
    assert "3 objects the stacks would create already exist" in msg
    for r in ("Namespace//monitoring", "Namespace//ml-research", f"Release/{volcano.release.namespace}/volcano"):
        assert f"  - {r}" in msg and f"--adopt {r}" in msg


def test_what_the_state_holds_is_never_looked_up(plans):
    owned = in_state(STATE)
    cluster = Cluster()
    result = check(plans, owned, cluster)
    asked = set(cluster.asked)
    assert asked and not asked & set(owned)
    # Everything else the stacks would create is asked about, node patches excepted.
    planned = set(ownership.planned(plans))
    assert asked == planned - set(owned)
    assert result.looked_up == len(asked) and result.calls == 3


def test_adopting_imports_and_retains_it_in_its_stack(plans):
    result = check(plans, {}, Cluster(MONITORING), ["namespace//monitoring"])  # the kind in any case
    assert result.adopted_now == [MONITORING]
    assert result.adopt == {"platform": {"namespace/monitoring": "monitoring"}}


def test_an_adopted_object_stays_adopted_on_the_next_run_without_the_flag(plans):
    # The state holds it with retainOnDelete: the program must keep import and retain, or the next
    # run would drop retainOnDelete and `down` would delete it.
    result = check(plans, {MONITORING: True}, Cluster(MONITORING))
    assert result.adopted_now == []
    assert result.adopt == {"platform": {"namespace/monitoring": "monitoring"}}
    # ...and with the flag still given (a pipeline that always passes it), nothing changes either.
    assert check(plans, {MONITORING: True}, Cluster(MONITORING), ["Namespace//monitoring"]).adopt == result.adopt


def test_a_namespaced_object_is_adopted_under_its_namespace(plans):
    cm = next(o for o in plans["platform"].objects() if o["kind"] == "ConfigMap")
    ref = ownership.ref_of(cm)
    result = check(plans, {}, Cluster(ref), [f"ConfigMap/{ref.namespace}/{ref.name}"])
    assert result.adopt == {"platform": {f"configmap/{ref.namespace}/{ref.name}": f"{ref.namespace}/{ref.name}"}}


@pytest.mark.parametrize(("value", "owned", "says"), [
    # Not something the stacks create: the objects of that name they do create are named.
    ("ConfigMap/default/monitoring", {}, "the stacks create no such object (with that name they create: "
                                          "Namespace//monitoring)"),
    ("Secret/x/y", {}, "`gpucluster render` lists what they create"),
    # Not on the cluster: `up` would create it, and then it would be ours.
    ("Namespace//inference", {}, "it does not exist on the cluster, so there is nothing to adopt"),
    # Created by gpucluster: not someone else's.
    ("Namespace//gpu-operator", {Ref("Namespace", "", "gpu-operator"): False}, "the stacks created it"),
])
def test_an_adopt_that_names_nothing_to_adopt_is_an_input_error(plans, value, owned, says):
    with pytest.raises(InputError) as err:
        check(plans, owned, Cluster(MONITORING), ["Namespace//monitoring", value])
    assert says in str(err.value) and value in str(err.value)
    assert not isinstance(err.value, ObjectsNotOurs)


# -- the creates journal: what an interrupted run created without recording it ---------------------------
HOPPER = Ref("DeviceClass", "", "hopper", "resource.k8s.io")


class Provider:
    """A fake confirm: which objects the provider applied; records what it was asked."""

    def __init__(self, *applied: Ref) -> None:
        self.applied = set(applied)
        self.asked: list[Ref] = []

    def __call__(self, refs):
        self.asked += list(refs)
        return {r for r in refs if r in self.applied}


def test_an_object_the_journal_names_and_the_provider_applied_is_ours_not_adopted(plans):
    provider = Provider(HOPPER)
    result = check(plans, {}, Cluster(HOPPER), journal={HOPPER}, confirm=provider)
    assert result.recovered == [HOPPER] and provider.asked == [HOPPER]
    assert result.adopt == {}  # created by us: neither imported nor retained, so `down` deletes it
    assert HOPPER in result.creates  # stays in the journal until the state records it
    assert "1 created by an interrupted run and taken back" in result.summary()
    assert result.as_dict()["recovered"] == ["DeviceClass//hopper"]


@pytest.mark.parametrize(("journal", "applied"), [
    (set(), {HOPPER}),  # applied by a provider, but this state never said it would create it
    ({HOPPER}, set()),  # journaled, but someone else made it (kubectl create, their own apply)
])
def test_an_object_without_both_proofs_is_refused(plans, journal, applied):
    with pytest.raises(ObjectsNotOurs, match="DeviceClass//hopper"):
        check(plans, {}, Cluster(HOPPER), journal=journal, confirm=Provider(*applied))


def test_only_journaled_objects_are_asked_about_and_a_helm_release_never_is(plans):
    (volcano,) = plans["platform"].releases["volcano"]
    rel = Ref("Release", volcano.release.namespace, "volcano", "helm.sh")
    provider = Provider(HOPPER, rel, MONITORING)
    with pytest.raises(ObjectsNotOurs) as err:
        check(plans, {}, Cluster(HOPPER, rel, MONITORING), journal={HOPPER, rel}, confirm=provider)
    assert provider.asked == [HOPPER]
    assert "  - Namespace//monitoring" in str(err.value) and f"  - {rel}" in str(err.value)
    assert "hopper" not in str(err.value)


def test_creates_are_what_is_absent(plans):
    result = check(plans, {}, Cluster(MONITORING), ["Namespace//monitoring"])
    assert set(result.creates) == set(ownership.planned(plans)) - {MONITORING}


def test_the_journal_round_trips_and_goes_when_empty(tmp_path):
    path = tmp_path / "work" / ownership.JOURNAL
    refs = {HOPPER, MONITORING, Ref("ConfigMap", "gpu-operator", "dcgm")}
    assert ownership.write_journal(path, refs) and ownership.read_journal(path) == refs
    assert not ownership.write_journal(path, refs)  # unchanged: not written again
    assert ownership.write_journal(path, []) and not path.exists()
    assert not ownership.write_journal(path, [])
    assert ownership.read_journal(path) == set()


@pytest.mark.parametrize("text", ["", "not json", "[]", '{"creates": 3}', '{"creates": [{"kind": 1}]}',
                                  '{"creates": [{"kind": "Namespace", "name": "x"}]}'])
def test_a_journal_that_does_not_parse_recovers_nothing(tmp_path, text):
    path = tmp_path / ownership.JOURNAL
    path.write_text(text)
    assert ownership.read_journal(path) == set()


@pytest.mark.parametrize(("entries", "applied"), [
    ([{"manager": "pulumi-kubernetes-7e2b1c4d", "operation": "Apply"}], True),
    ([{"manager": "kubectl", "operation": "Apply"}], False),  # kubectl apply --server-side
    ([{"manager": "pulumi-kubernetes-7e2b1c4d", "operation": "Update"}], False),  # not an apply
    ([{"manager": "pulumi-kubernetes", "operation": "Apply"}], False),  # the client-side mode's fixed name
    ([{"manager": "kube-controller-manager", "operation": "Update"},
      {"manager": "pulumi-kubernetes-a1", "operation": "Apply"}], True),
    ([], False), (None, False), (["x"], False),
])
def test_the_provider_is_known_by_its_server_side_apply_field_manager(entries, applied):
    assert ownership.applied_by_provider({"managedFields": entries}) is applied


# -- what the programs register --------------------------------------------------------------------------
class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        return [f"{args.name}_id", args.inputs]

    def call(self, args):
        return {}


def registrations(monkeypatch, stack: str, p: StackPlan) -> dict[str, tuple[str, bool]]:
    """Logical name → (import ID, retainOnDelete) of every registration, read from the requests."""
    from pulumi.runtime import mocks

    seen: dict[str, tuple[str, bool]] = {}
    original = mocks.MockMonitor.RegisterResource

    def register(self, request):
        seen[request.name] = (request.importId, request.retainOnDelete)
        return original(self, request)

    monkeypatch.setattr(mocks.MockMonitor, "RegisterResource", register)
    pulumi.runtime.set_mocks(Mocks(), project=f"gpucluster-{stack}", stack="test", preview=False)

    @pulumi.runtime.test
    def program():
        comps = programs.PROGRAMS[stack](p, "/nonexistent/kubeconfig", None)
        return pulumi.Output.all(*[r.urn for c in comps.values() for r in c.resources.values()])

    program()
    return seen


def test_adopted_objects_are_registered_with_their_import_id_and_retained(monkeypatch, tmp_path):
    chart = tmp_path / "probe"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("name: probe\nversion: 0.1.0\n")
    p = plan(render(load_spec(LOCAL)))["platform"]
    rel = Release("volcano", "probe", str(tmp_path), "0.1.0", "volcano-system", {})
    p.releases["volcano"] = [ChartSource(rel, chart)]
    p.adopt = {"namespace/monitoring": "monitoring", "release/volcano": "volcano-system/volcano"}
    seen = registrations(monkeypatch, "platform", p)
    assert seen["namespace/monitoring"] == ("monitoring", True)
    assert seen["release/volcano"] == ("volcano-system/volcano", True)
    others = {k: v for k, v in seen.items() if k not in p.adopt}
    assert others and all(v == ("", False) for v in others.values()), others


def test_the_tenants_stack_adopts_a_tenant_namespace(monkeypatch):
    p = plan(render(load_spec(LOCAL)))["tenants"]
    p.adopt = {"namespace/ml-research": "ml-research"}
    seen = registrations(monkeypatch, "tenants", p)
    assert seen["namespace/ml-research"] == ("ml-research", True)
    assert seen["namespace/inference"] == ("", False)


def test_stacks_run_by_plain_pulumi_take_adopt_from_config(plans):
    fresh = plan(render(load_spec(LOCAL)))
    ownership.mark_adopted(fresh, ["Namespace//monitoring", "Namespace//ml-research"])
    assert fresh["platform"].adopt == {"namespace/monitoring": "monitoring"}
    assert fresh["tenants"].adopt == {"namespace/ml-research": "ml-research"}
