"""Folders gpucluster owns: the marker, what counts as ours, and removal that never leaves the folder.

Every case uses real folders under the test's own temporary folder; the commands are run in-process
with explicit ``--state-dir``/``--world-dir`` so nothing of the user's own state is touched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpucluster import lockfile, ownership
from gpucluster.cli import entrypoint
from gpucluster.errors import NotOurs
from gpucluster.flow import STACK_STATE
from gpucluster.local import addons
from gpucluster.local.state import State
from gpucluster.local.world import FOLDER as WORLD
from gpucluster.local.world import OWNED, World

KIND = ownership.Kind("test-kind", "a test folder", frozenset({"data", "logs"}))


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def marker(root: Path) -> dict:
    return json.loads((root / ownership.MARKER).read_text())


def users_folder(root: Path, *names: str) -> Path:
    """A folder of the user's holding files and folders under gpucluster's names."""
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        (root / name).mkdir()
        (root / name / "precious.txt").write_text(f"the user's {name}")
    (root / "kubeconfig").write_text("the user's kubeconfig")
    return root


def old_lock(root: Path) -> None:
    """The lock file an earlier gpucluster left behind (what lockfile.hold writes)."""
    (root / lockfile.LOCK_FILE).write_text(json.dumps({"pid": 4242, "command": "gpucluster up", "started": 1.5}))


# -- claim ---------------------------------------------------------------------------------------------


def test_a_missing_or_empty_folder_is_made_ours(tmp_path: Path) -> None:
    missing, empty = tmp_path / "a" / "b", tmp_path / "empty"
    empty.mkdir()
    for folder in (missing, empty):
        assert ownership.claim(folder, KIND) == folder.resolve()
        assert marker(folder) == {"owner": "gpucluster", "kind": "test-kind", "format": 1,
                                  "note": marker(folder)["note"]}
    (empty / "data").write_text("ours now")
    assert ownership.claim(empty, KIND) == empty  # marked: taken as it is, whatever it holds


def test_a_folder_with_files_and_no_marker_is_refused_naming_it(tmp_path: Path) -> None:
    root = users_folder(tmp_path / "mine", "logs")
    before = files(root)
    with pytest.raises(NotOurs, match=rf"{root} holds files \(kubeconfig, logs\) but no \.gpucluster-folder, .*"
                                      r"Pick an empty or new folder, or, .* remove it yourself"):
        ownership.claim(root, KIND)
    assert files(root) == before  # no marker either
    assert not ownership.owned(tmp_path / "nothing-here", KIND)  # missing: nothing to do, nothing made
    assert not (tmp_path / "nothing-here").exists()


@pytest.mark.parametrize(("text", "why"), [
    ("", "not JSON"),
    ("ours, honestly", "not JSON"),
    ('{"owner": "someone", "kind": "test-kind", "format": 1}', 'not {"owner": "gpucluster"'),
    ('{"owner": "gpucluster", "kind": "test-kind", "format": 7}', 'not {"owner": "gpucluster"'),
])
def test_a_marker_that_is_not_ours_is_refused_naming_it(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / ownership.MARKER).write_text(text)
    (tmp_path / "data").write_text("kept")
    with pytest.raises(NotOurs, match=rf"{tmp_path / ownership.MARKER} is not a gpucluster folder marker \({why}"):
        ownership.remove(tmp_path, KIND, ["data"])
    assert (tmp_path / "data").read_text() == "kept"


def test_another_kinds_folder_is_refused(tmp_path: Path) -> None:
    ownership.claim(tmp_path, STACK_STATE)
    with pytest.raises(NotOurs, match=rf"{tmp_path} is gpucluster's 'stack-state' folder .* not a local world's"):
        ownership.claim(tmp_path, WORLD)


def test_an_earlier_versions_world_folder_is_recognised_and_marked(tmp_path: Path) -> None:
    # As gpucluster left it before markers: state.json of our format and the world's files ...
    running = tmp_path / "running"
    State(dir=running, ports={"etcd": 1}).save()
    (running / "logs").mkdir()
    (running / "pulumi").mkdir()
    assert ownership.claim(running, WORLD) == running
    assert marker(running)["kind"] == "local-world"
    # ... or after its `down`: only the lock it held and the stacks' folder are left.
    downed = tmp_path / "downed"
    downed.mkdir()
    old_lock(downed)
    (downed / "pulumi").mkdir()
    assert World(downed).down() == []
    assert marker(downed)["kind"] == "local-world"
    # ... or after a `gpucluster down` before any world ran: the stacks' folder with its lock only.
    never = tmp_path / "never" / "pulumi"
    never.mkdir(parents=True)
    old_lock(never)
    assert ownership.claim(never.parent, WORLD) == never.parent


@pytest.mark.parametrize("case", ["names-only", "lock-and-a-foreign-file", "state-json-of-another-format"])
def test_a_look_alike_of_an_earlier_world_is_not_taken(tmp_path: Path, case: str) -> None:
    root = users_folder(tmp_path / "w", "logs", "pki")  # only names a world has, but nothing proves it ours
    if case == "lock-and-a-foreign-file":
        old_lock(root)
        (root / "thesis.tex").write_text("mine")
    elif case == "state-json-of-another-format":
        (root / "state.json").write_text('{"format": 9}')
    before = files(root)
    with pytest.raises(NotOurs, match=r"no \.gpucluster-folder"):
        ownership.claim(root, WORLD)
    assert files(root) == before


def test_an_earlier_versions_stack_state_is_recognised(tmp_path: Path) -> None:
    with_lock, without = tmp_path / "a", tmp_path / "b"
    for root in (with_lock, without):
        (root / "work" / "platform").mkdir(parents=True)
        (root / "passphrase").write_text("x")
    old_lock(with_lock)
    # before the lock existed: Pulumi's file backend holding gpucluster's projects only
    (without / "backend" / ".pulumi" / "stacks" / "gpucluster-platform").mkdir(parents=True)
    for root in (with_lock, without):
        assert ownership.claim(root, STACK_STATE) == root
    (tmp_path / "c" / "backend" / ".pulumi" / "stacks" / "someone-elses").mkdir(parents=True)
    with pytest.raises(NotOurs):
        ownership.claim(tmp_path / "c", STACK_STATE)


def test_the_add_on_folder_is_marked_inside_the_world(tmp_path: Path) -> None:
    ownership.claim(tmp_path, WORLD)
    assert addons.folder(tmp_path, "volcano") == tmp_path / "addons" / "volcano"
    assert marker(tmp_path / "addons")["kind"] == "local-addons"


# -- remove --------------------------------------------------------------------------------------------


def test_remove_refuses_a_symlink_out_of_the_folder_and_removes_nothing(tmp_path: Path) -> None:
    outside = users_folder(tmp_path / "outside", "logs")
    root = tmp_path / "ours"
    ownership.claim(root, KIND)
    (root / "data").write_text("ours")
    (root / "logs").symlink_to(outside / "logs")
    with pytest.raises(NotOurs, match=rf"{root / 'logs'} is a symbolic link to {outside / 'logs'}, outside "
                                      rf"{root}; .*nothing was removed"):
        ownership.remove(root, KIND, ["data", "logs"])
    assert (root / "data").read_text() == "ours"
    assert (outside / "logs" / "precious.txt").exists()


def test_remove_never_follows_a_link_inside_what_it_removes(tmp_path: Path) -> None:
    outside = users_folder(tmp_path / "outside", "photos")
    root = tmp_path / "ours"
    ownership.claim(root, KIND)
    (root / "logs").mkdir()
    (root / "logs" / "a.log").write_text("ours")
    (root / "logs" / "photos").symlink_to(outside / "photos")
    (root / "data").symlink_to(root / "logs")  # a link that stays inside: removed as a link
    assert ownership.remove(root, KIND, ["data", "logs", "absent"]) == ["data", "logs"]
    assert sorted(p.name for p in root.iterdir()) == [ownership.MARKER]
    assert (outside / "photos" / "precious.txt").read_text() == "the user's photos"


# -- the commands: the cases of issue 22 ---------------------------------------------------------------


def test_local_down_and_up_on_a_folder_that_never_held_a_world_delete_nothing(tmp_path: Path, local_inventory,
                                                                             capsys) -> None:
    root = users_folder(tmp_path / "x", "logs", "pki", "addons")
    before = files(root)
    assert entrypoint(["local", "down", "--state-dir", str(root)]) == 2
    assert f"{root} holds files (addons, kubeconfig, logs, pki) but no .gpucluster-folder" in capsys.readouterr().err
    # (up refuses before it would look for its binaries, so this runs without the toolchain)
    assert entrypoint(["local", "up", "--state-dir", str(root), "-i", str(local_inventory)]) == 2
    assert "Pick an empty or new folder" in capsys.readouterr().err
    assert entrypoint(["local", "down", "--force", "--state-dir", str(root)]) == 2
    assert files(root) == before


def test_down_with_a_foreign_state_dir_deletes_nothing(tmp_path: Path, local_inventory, capsys) -> None:
    state = users_folder(tmp_path / "x", "work", "backend")
    before = files(state)
    rc = entrypoint(["down", "-i", str(local_inventory), "--state-dir", str(state),
                     "--world-dir", str(tmp_path / "world")])
    assert rc == 2
    assert f"{state} holds files (backend, kubeconfig, work) but no .gpucluster-folder" in capsys.readouterr().err
    assert files(state) == before
    assert not (tmp_path / "world").exists()  # checked before anything was made


def test_down_removes_the_stack_state_it_owns_and_nothing_else(tmp_path: Path, local_inventory) -> None:
    state = tmp_path / "x"
    for part in ("work/platform", "backend/.pulumi/stacks/gpucluster-platform"):
        (state / part).mkdir(parents=True)
    (state / "passphrase").write_text("kept")
    old_lock(state)  # an earlier version's: marked now
    assert entrypoint(["down", "-i", str(local_inventory), "--state-dir", str(state),
                       "--world-dir", str(tmp_path / "world")]) == 0
    assert sorted(p.name for p in state.iterdir()) == [ownership.MARKER, ".lock", "passphrase"]


def test_down_refuses_a_stack_state_part_linked_out_of_the_folder(tmp_path: Path, local_inventory, capsys) -> None:
    outside = users_folder(tmp_path / "outside", "work")
    state = tmp_path / "x"
    ownership.claim(state, STACK_STATE)
    (state / "backend").mkdir()
    (state / "work").symlink_to(outside / "work")
    assert entrypoint(["down", "-i", str(local_inventory), "--state-dir", str(state),
                       "--world-dir", str(tmp_path / "world")]) == 2
    assert f"{state / 'work'} is a symbolic link to {outside / 'work'}" in capsys.readouterr().err
    assert (state / "backend").is_dir() and (outside / "work" / "precious.txt").exists()


def test_a_worlds_down_removes_only_what_it_owns(tmp_path: Path) -> None:
    root = tmp_path / "w"
    ownership.claim(root, WORLD)
    State(dir=root).save()
    for name in set(OWNED) - {"state.json"}:
        if name.endswith(".yaml") or name == "kubeconfig":
            (root / name).write_text("ours")
        else:
            (root / name).mkdir()
            (root / name / "f").write_text("ours")
    (root / "pulumi").mkdir()
    (root / "pulumi" / "passphrase").write_text("kept")
    assert World(root).down() == []  # nothing ran
    assert sorted(p.name for p in root.iterdir()) == sorted([ownership.MARKER, ".lock", "pulumi"])
