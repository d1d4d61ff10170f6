"""`gpucluster plan`'s artefacts from preview steps: counts, fields with old and new values, masked Secrets,
and files it refuses to overwrite. The live proof (the engine's real preview) is in
tests/integration/test_stacks.py::test_plan_lists_the_quota_change_field_by_field_and_exits_5_and_0_when_converged."""

from __future__ import annotations

import json

import pytest

from gpucluster.errors import InputError
from gpucluster.pulumi import planfile
from gpucluster.pulumi.engine import _at_path

QUOTA_STEP = {"op": "update", "urn": "urn:…::resourcequota/ml/q", "type": "kubernetes:core/v1:ResourceQuota",
              "name": "resourcequota/ml/q",
              "fields": [{"path": 'spec.hard["requests.nvidia.com/gpu"]', "kind": "update", "old": "16", "new": "24"}]}


def stack(name, steps=(), created=0, updated=0, deleted=0, same=3):
    return {"stack": name, "created": created, "updated": updated, "deleted": deleted, "same": same,
            "steps": list(steps)}


def test_changes_are_counted_and_each_object_keeps_its_fields():
    doc = planfile.document("lab", [stack("platform"), stack("tenants", [QUOTA_STEP], updated=1)])
    assert doc["changes"] == 1 and doc[planfile.JSON_MARK] == 1
    (obj,) = doc["stacks"][1]["objects"]
    assert obj == {"op": "update", "object": "resourcequota/ml/q", "type": "kubernetes:core/v1:ResourceQuota",
                   "fields": QUOTA_STEP["fields"]}
    md = planfile.markdown(doc)
    assert md.startswith(planfile.MD_MARK + "\n")
    assert '| update | `resourcequota/ml/q` | `spec.hard["requests.nvidia.com/gpu"]`: "16" → "24" |' in md
    assert "**tenants**: 0 to create, 1 to update, 0 to delete, 3 unchanged" in md


def test_no_changes_says_so():
    md = planfile.markdown(planfile.document("lab", [stack("platform"), stack("tenants")]))
    assert "No changes: the cluster already matches the spec." in md and "| operation |" not in md


def test_a_replacement_is_one_replace_row_and_a_secret_is_masked():
    secret = {"op": "update", "urn": "u", "type": "kubernetes:core/v1:Secret", "name": "secret/ml/s",
              "fields": [{"path": "stringData.token", "kind": "update", "old": "hunter2", "new": "swordfish"}]}
    steps = [{**QUOTA_STEP, "op": "create-replacement"}, {**QUOTA_STEP, "op": "delete-replaced"}, secret]
    doc = planfile.document("lab", [stack("tenants", steps, updated=2)])
    ops = [(o["op"], o["object"]) for o in doc["stacks"][0]["objects"]]
    assert ops == [("replace", "resourcequota/ml/q"), ("update", "secret/ml/s")]
    text = json.dumps(doc) + planfile.markdown(doc)
    assert "hunter2" not in text and "swordfish" not in text and "stringData.token" in text


def test_a_pipe_in_a_value_does_not_break_the_table():
    step = {**QUOTA_STEP, "fields": [{"path": "data.x", "kind": "update", "old": "a|b", "new": "c"}]}
    md = planfile.markdown(planfile.document("lab", [stack("tenants", [step], updated=1)]))
    assert '"a\\|b"' in md


def test_its_own_files_are_rewritten_anyone_elses_refused_and_nothing_written(tmp_path):
    doc = planfile.document("lab", [stack("tenants", [QUOTA_STEP], updated=1)])
    written = planfile.write(tmp_path / "pr", doc)
    assert [p.name for p in written] == ["plan.md", "plan.json"]
    assert planfile.write(tmp_path / "pr", doc) == written  # ours: rewritten
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "plan.md").write_text("# my notes\n")
    with pytest.raises(InputError, match="not written by `gpucluster plan`: nothing was written") as err:
        planfile.write(theirs, doc)
    assert err.value.exit_code == 2 and str(theirs / "plan.md") in str(err.value)
    assert (theirs / "plan.md").read_text() == "# my notes\n" and not (theirs / "plan.json").exists()


@pytest.mark.parametrize(("path", "value"), [
    ('spec.hard["requests.nvidia.com/gpu"]', "16"), ("spec.items[1].name", "b"), ("spec.missing", None),
    ("spec.items[5]", None), ('metadata.labels["a.b/c"]', "x"),
])
def test_a_property_path_is_read_as_pulumi_writes_it(path, value):
    obj = {"spec": {"hard": {"requests.nvidia.com/gpu": "16"}, "items": [{"name": "a"}, {"name": "b"}]},
           "metadata": {"labels": {"a.b/c": "x"}}}
    assert _at_path(obj, path) == value
