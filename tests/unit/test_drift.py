"""`gpucluster drift`: which fields the stacks set differ on the cluster, from a dry-run apply's answer.

Pure: the cluster is a fake :class:`gpucluster.pulumi.drift.Api` whose dry-run answer is the live object
with the inputs merged in (what a forced apply does to the fields it sets). The live proof, with the real
API server's dry-run apply, is in tests/integration/test_stacks.py.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpucluster.errors import ApiError
from gpucluster.pulumi import drift
from gpucluster.pulumi.drift import Field, changed_fields

QUOTA_IN = {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "q", "namespace": "ml", "labels": {"app.kubernetes.io/managed-by": "gpucluster"}},
            "spec": {"hard": {"requests.nvidia.com/gpu": "16", "limits.memory": "1Ti"}}}


def live_of(inputs: dict, **changes: Any) -> dict:
    obj = copy.deepcopy(inputs)
    obj["metadata"].update(uid="u-1", resourceVersion="7", managedFields=[{"manager": "x"}],
                           creationTimestamp="2026-12-02T00:00:00Z")
    obj["status"] = {"used": {"requests.nvidia.com/gpu": "3"}}
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = obj
        for p in parents:
            node = node.setdefault(p.replace("_", "."), {}) if p not in node else node[p]
        node[leaf] = value
    return obj


def test_the_same_object_has_no_drift_whatever_the_server_adds():
    live = live_of(QUOTA_IN)
    assert changed_fields(QUOTA_IN, live, live) == []


def test_a_field_the_stack_sets_changed_is_named_with_both_values():
    ours = live_of(QUOTA_IN)
    live = copy.deepcopy(ours)
    live["spec"]["hard"]["requests.nvidia.com/gpu"] = "99"
    assert changed_fields(QUOTA_IN, ours, live) == [Field('spec.hard["requests.nvidia.com/gpu"]', "99", "16")]


def test_a_label_the_stack_sets_removed_is_drift_one_someone_added_is_not():
    ours = live_of(QUOTA_IN)
    live = copy.deepcopy(ours)
    del live["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    live["metadata"]["labels"]["team"] = "theirs"
    (f,) = changed_fields(QUOTA_IN, ours, live)
    assert f.path == 'metadata.labels["app.kubernetes.io/managed-by"]' and f.ours == "gpucluster"
    assert repr(f.live) == "(absent)"


def test_the_servers_canonical_form_is_what_ours_means():
    # The inputs say 1024Gi; the server stores (and answers the dry run with) 1Ti: no drift.
    inputs = copy.deepcopy(QUOTA_IN)
    inputs["spec"]["hard"]["limits.memory"] = "1024Gi"
    live = live_of(QUOTA_IN)
    assert changed_fields(inputs, live, live) == []


def test_a_list_is_compared_whole():
    inputs = {"apiVersion": "v1", "kind": "X", "metadata": {"name": "x"}, "spec": {"items": [1, 2]}}
    assert changed_fields(inputs, {"spec": {"items": [1, 2]}}, {"spec": {"items": [2, 1]}}) == [
        Field("spec.items", [2, 1], [1, 2])]


class FakeApi:
    def __init__(self, live: dict[str, dict], *, served: bool = True, refuse: bool = False) -> None:
        self.live = live
        self.served = served
        self.refuse = refuse
        self.applied: list[tuple[str, str]] = []

    def path_of(self, api_version, kind, namespace, name):
        return f"/{kind}/{namespace}/{name}" if self.served else None

    def get(self, path):
        return copy.deepcopy(self.live.get(path))

    def dry_run_apply(self, path, body, manager):
        if self.refuse:
            raise ApiError("PATCH /ResourceQuota/ml/q: 422 Invalid: field is immutable", 422, "Invalid")
        self.applied.append((path, manager))
        out = copy.deepcopy(self.live[path])

        def merge(dst, src):
            for k, v in src.items():
                if isinstance(v, dict) and isinstance(dst.get(k), dict):
                    merge(dst[k], v)
                else:
                    dst[k] = copy.deepcopy(v)
        merge(out, body)
        return out


def state(inputs: dict, *, uid: str = "u-1", type_: str = "kubernetes:core/v1:ResourceQuota") -> dict:
    return {"custom": True, "type": type_, "inputs": inputs,
            "outputs": {**copy.deepcopy(inputs), "metadata": {**inputs["metadata"], "uid": uid},
                        "__fieldManager": "pulumi-kubernetes-abc"}}


def test_over_the_state_changed_deleted_and_re_made_objects_each_say_so():
    quota = live_of(QUOTA_IN)
    quota["spec"]["hard"]["requests.nvidia.com/gpu"] = "99"
    ns_in = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}
    cm_in = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ml"}, "data": {"a": "1"}}
    api = FakeApi({"/ResourceQuota/ml/q": quota, "/Namespace//ml": live_of(ns_in) | {"metadata": {"name": "ml",
                                                                                                  "uid": "other"}}})
    report = drift.of("lab", {"tenants": [state(QUOTA_IN), state(ns_in), state(cm_in)]}, api)
    assert report.compared == 3
    assert [(d.object, d.change) for d in report.drifted] == [
        ("ResourceQuota/ml/q", "changed"), ("Namespace//ml", "re-made"), ("ConfigMap/ml/c", "deleted")]
    assert report.drifted[0].fields == [Field('spec.hard["requests.nvidia.com/gpu"]', "99", "16")]
    # The dry run is asked as the provider's own field manager for that object.
    assert api.applied == [("/ResourceQuota/ml/q", "pulumi-kubernetes-abc")]
    text = "\n".join(report.lines())
    assert "3 object(s) compared" in text and "3 changed outside the stacks" in text
    assert 'spec.hard["requests.nvidia.com/gpu"]: live "99", the stack applies "16"' in text


def test_no_drift_is_said_and_the_document_has_its_keys():
    report = drift.of("lab", {"tenants": [state(QUOTA_IN)]}, FakeApi({"/ResourceQuota/ml/q": live_of(QUOTA_IN)}))
    assert report.drifted == [] and report.compared == 1
    assert report.as_dict() == {"environment": "lab", "compared": 1, "drifted": [], "notCompared": []}
    assert "no drift" in report.lines()[0]


@pytest.mark.parametrize(("api", "says"), [
    (FakeApi({}, served=False), "does not serve ResourceQuota"),
    (FakeApi({"/ResourceQuota/ml/q": live_of(QUOTA_IN)}, refuse=True), "refused a dry-run apply"),
])
def test_what_cannot_be_compared_is_listed_never_counted_as_without_drift(api, says):
    report = drift.of("lab", {"tenants": [state(QUOTA_IN)]}, api)
    assert report.compared == 0 and report.drifted == []
    (n,) = report.not_compared
    assert n["object"] == "ResourceQuota/ml/q" and says in n["reason"]


def test_a_helm_release_is_not_compared_and_providers_and_components_are_skipped():
    rel = {"custom": True, "type": "kubernetes:helm.sh/v3:Release", "inputs": {"name": "volcano",
                                                                              "namespace": "volcano-system"},
           "outputs": {"name": "volcano", "namespace": "volcano-system"}}
    others = [{"custom": True, "type": "pulumi:providers:kubernetes"},
              {"custom": False, "type": "gpucluster:platform:Namespaces"}]
    report = drift.of("lab", {"platform": [rel, *others]}, FakeApi({}))
    assert report.compared == 0
    assert report.not_compared == [{"stack": "platform", "object": "Release/volcano-system/volcano",
                                    "reason": "a Helm release: its values are in Helm's records, not in an "
                                              "applied object"}]


def test_a_secrets_values_are_masked_its_path_is_not():
    sec_in = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ml"},
              "stringData": {"token": "hunter2"}}
    live = live_of(sec_in)
    live["stringData"]["token"] = "changed"
    report = drift.of("lab", {"platform": [state(sec_in, type_="kubernetes:core/v1:Secret")]},
                      FakeApi({"/Secret/ml/s": live}))
    (d,) = report.drifted
    assert d.fields == [Field("stringData.token", drift.MASK, drift.MASK)]
    assert "hunter2" not in str(report.as_dict()) and "changed" not in "\n".join(report.lines()[1:])


def test_a_node_patch_is_compared_as_its_node():
    patch_in = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "h100-1", "labels": {"pool": "h100"}}}
    node = live_of(patch_in)
    node["metadata"]["labels"] = {"pool": "a100", "kubernetes.io/hostname": "h100-1"}
    report = drift.of("lab", {"platform": [state(patch_in, type_="kubernetes:core/v1:NodePatch")]},
                      FakeApi({"/Node//h100-1": node}))
    (d,) = report.drifted
    assert d.object == "Node//h100-1" and d.fields == [Field("metadata.labels.pool", "a100", "h100")]


def test_drift_without_a_stack_state_is_bad_input_naming_the_folder(cli, tmp_path):
    from pathlib import Path

    lab = Path(__file__).resolve().parents[2] / "inventories" / "lab"
    out = cli("drift", "-i", lab, "--state-dir", tmp_path / "none", "-o", "json")
    assert out.exit_code == 2
    import json

    doc = json.loads(out.stdout)
    assert doc["error"]["kind"] == "InputError" and doc["error"]["exitCode"] == 2
    assert f"no stack state of lab in {tmp_path / 'none'}" in doc["error"]["message"]
    assert "Run `gpucluster up` first" in doc["error"]["message"]
    assert not (tmp_path / "none").exists()  # a read-only command makes no folder
