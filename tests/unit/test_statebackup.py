"""A stack backup is untrusted input: only one of ours, of the environment restored, whose every resource
belongs to that environment's stacks, is read; a backup is never written over a file.

The round trip through the real engine (export, lost state, import, a converged `up`) is
tests/integration/test_stacks.py::test_a_lost_stack_state_comes_back_from_a_backup_and_up_then_changes_nothing.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from gpucluster.errors import InputError
from gpucluster.pulumi import statebackup


def _export(env: str, stack: str, names: tuple[str, ...] = ("a", "b")) -> dict:
    return {"version": 3, "deployment": {"manifest": {}, "resources": [
        {"urn": f"urn:pulumi:{env}::gpucluster-{stack}::kubernetes:core/v1:Namespace::{n}", "type": "x"}
        for n in names]}}


GOOD = {"kind": statebackup.KIND, "version": statebackup.VERSION, "environment": "prod",
        "takenAt": "2026-12-02T17:00:00Z",
        "stacks": {"platform": _export("prod", "platform"), "tenants": _export("prod", "tenants")}}


def _file(tmp_path: Path, doc) -> Path:
    path = tmp_path / "backup.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_a_backup_of_the_environment_reads_back_as_written(tmp_path):
    assert statebackup.read(_file(tmp_path, GOOD), "prod") == GOOD


def _changed(change) -> dict:
    doc = copy.deepcopy(GOOD)
    change(doc)
    return doc


@pytest.mark.parametrize("doc, message", [
    ("{not json", "not JSON"),
    ([], "not a stack backup of gpucluster"),
    (_changed(lambda d: d.update(kind="Deployment")), "not a stack backup of gpucluster"),
    (_changed(lambda d: d.update(version=2)), "backup format version 2"),
    (_changed(lambda d: d.update(environment="lab")), "a backup of the stacks of 'lab', not of 'prod'"),
    (_changed(lambda d: d.update(takenAt=5)), "takenAt"),
    (_changed(lambda d: d["stacks"].pop("tenants")), "expected exactly platform, tenants"),
    (_changed(lambda d: d["stacks"].update(extra=_export("prod", "extra"))), "expected exactly platform, tenants"),
    (_changed(lambda d: d["stacks"].update(platform={"deployment": {}})), "stacks.platform: expected {version"),
    (_changed(lambda d: d["stacks"]["tenants"]["deployment"].update(resources={})), "resources: expected a list"),
    # a resource of another environment's stack, or of the other stack, is not imported here
    (_changed(lambda d: d["stacks"].update(tenants=_export("lab", "tenants"))),
     "stacks.tenants.deployment.resources[0]: URN 'urn:pulumi:lab::gpucluster-tenants::"),
    (_changed(lambda d: d["stacks"].update(platform=_export("prod", "tenants"))),
     "is not of the platform stack of prod"),
    (_changed(lambda d: d["stacks"]["platform"]["deployment"]["resources"].append("urn")), "resources[2]: URN None"),
])
def test_anything_else_is_refused_naming_the_file_and_the_place(tmp_path, doc, message):
    path = _file(tmp_path, doc)
    with pytest.raises(InputError) as err:
        statebackup.read(path, "prod")
    assert str(path) in str(err.value) and message in str(err.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        statebackup.read(tmp_path / "nowhere.json", "prod")


def test_a_backup_is_written_private_and_never_over_a_file(tmp_path):
    path = tmp_path / "b.json"
    statebackup.write(path, GOOD)
    assert json.loads(path.read_text()) == GOOD
    assert path.stat().st_mode & 0o777 == 0o600
    theirs = tmp_path / "theirs.json"
    theirs.write_text("keep me")
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "dangling")
    for target in (path, theirs, link):
        before = os.readlink(target) if target.is_symlink() else target.read_text()
        with pytest.raises(InputError, match="never written over a file"):
            statebackup.write(target, GOOD)
        assert (os.readlink(target) if target.is_symlink() else target.read_text()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json", "link.json", "theirs.json"]  # no temporary left
    with pytest.raises(InputError, match="is not a folder"):
        statebackup.write(tmp_path / "nowhere" / "b.json", GOOD)
