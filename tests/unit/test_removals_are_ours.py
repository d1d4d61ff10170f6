"""Every removal this wave added takes only what gpucluster itself created, beside files that look alike.

- ``atomic.write``: on failure, the temporary file that call created (O_EXCL, a fresh random name);
- ``local.addons.Ledger.forget``: one add-on's record (``components.json``) in its own folder;
- ``pulumi.fingerprint.forget``: the record of the last update (``gpucluster-last-update.json``);
- ``scaffold.write`` (``gpucluster init``): on failure, the staging folder that call made with mkdtemp;
- ``pulumi.ownership.write_journal``: the creates journal (``creates.json``) once nothing is left in it;
- ``pulumi.statebackup.write`` and ``local.etcdsnap.save``: the names they reserved (``atomic.reserve``);
- ``local.etcdsnap.restore``: ``etcd-data.restoring`` and ``etcd-data.before-restore`` of a world folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpucluster import atomic, scaffold
from gpucluster.local import addons
from gpucluster.pulumi import fingerprint


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_failed_atomic_write_removes_its_own_temporary_file_only(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "state.json"
    target.write_text("intact")
    # another writer's temporary file for the same target, and one of the same shape for another name
    (tmp_path / ".state.json.0a1b2c3d4e5f.tmp").write_text("someone else's")
    (tmp_path / ".other.json.0a1b2c3d4e5f.tmp").write_text("not ours either")
    before = _tree(tmp_path)

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        atomic.write(target, "half")
    assert _tree(tmp_path) == before


def test_forgetting_an_add_ons_record_leaves_everything_else(tmp_path: Path) -> None:
    own = tmp_path / addons.FOLDER / "volcano"
    other = tmp_path / addons.FOLDER / "monitoring"
    for folder in (own, other):
        folder.mkdir(parents=True)
        (folder / addons.RECORD).write_text("{}")
        (folder / "scheduler.conf").write_text("kept")
    (tmp_path / addons.RECORD).write_text("a file of that name outside the add-on's folder")
    before = _tree(tmp_path)
    addons.Ledger(tmp_path, "volcano").forget()
    after = _tree(tmp_path)
    assert set(before) - set(after) == {f"{addons.FOLDER}/volcano/{addons.RECORD}"}
    assert all(after[k] == before[k] for k in after)


def test_forgetting_the_last_update_removes_that_record_only(tmp_path: Path) -> None:
    work, other = tmp_path / "platform", tmp_path / "tenants"
    for folder in (work, other):
        folder.mkdir()
        (folder / fingerprint.RECORD).write_text("{}")
        (folder / "Pulumi.yaml").write_text("name: x\n")
    before = _tree(tmp_path)
    fingerprint.forget(work)
    fingerprint.forget(work)  # again: nothing more goes
    after = _tree(tmp_path)
    assert set(before) - set(after) == {f"platform/{fingerprint.RECORD}"}
    assert all(after[k] == before[k] for k in after)


def test_a_failed_init_removes_its_own_staging_folder_only(tmp_path: Path, monkeypatch) -> None:
    # a folder with the staging prefix that this call did not make (another run's, or the user's)
    lookalike = tmp_path / ".prod.init-keepme"
    lookalike.mkdir()
    (lookalike / "cluster.yaml").write_text("mine\n")
    before = sorted(os.listdir(tmp_path))

    def broken(_folder):
        raise RuntimeError("template bug")

    monkeypatch.setattr("gpucluster.spec.load_spec", broken)
    with pytest.raises(RuntimeError, match="template bug"):
        scaffold.write(tmp_path / "prod")
    assert sorted(os.listdir(tmp_path)) == before
    assert (lookalike / "cluster.yaml").read_text() == "mine\n"


def test_an_emptied_creates_journal_removes_only_the_journal(tmp_path: Path) -> None:
    from gpucluster.pulumi import ownership
    from gpucluster.pulumi.ownership import Ref

    work = tmp_path / "work"
    journal = work / ownership.JOURNAL
    ownership.write_journal(journal, {Ref("Namespace", "", "ml")})
    for name in ("creates.json.bak", "creates.jsonl", "platform/creates.json"):  # look-alikes stay
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text('{"creates": []}')
    before = {k: v for k, v in _tree(tmp_path).items() if k != f"work/{ownership.JOURNAL}"}
    assert ownership.write_journal(journal, []) and not journal.exists()
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("content", ["my notes", '{"mine": true}', '["creates"]'])
def test_a_file_at_the_journals_path_that_is_no_journal_is_not_removed(tmp_path: Path, content: str) -> None:
    from gpucluster.pulumi import ownership

    path = tmp_path / ownership.JOURNAL
    path.write_text(content)
    assert not ownership.write_journal(path, [])
    assert path.read_text() == content


def test_a_link_at_the_journals_path_is_not_removed_nor_its_target(tmp_path: Path) -> None:
    from gpucluster.pulumi import ownership

    target = tmp_path / "elsewhere.json"
    target.write_text('{"creates": []}')
    link = tmp_path / ownership.JOURNAL
    link.symlink_to(target)
    assert not ownership.write_journal(link, [])
    assert link.is_symlink() and target.read_text() == '{"creates": []}'


def test_a_refused_stack_backup_removes_its_own_reserved_file_only(tmp_path: Path, monkeypatch) -> None:
    """statebackup.write: the file it reserved (O_EXCL) goes, look-alikes and the file that appeared stay."""
    from gpucluster.errors import InputError
    from gpucluster.pulumi import statebackup

    target = tmp_path / "b.json"
    (tmp_path / ".b.json.0a1b2c3d4e5f.tmp").write_text("someone else's")

    def appeared(src, dst):  # another process took the name between the check and the link
        Path(dst).write_text("theirs")
        raise FileExistsError(dst)

    monkeypatch.setattr(atomic.os, "link", appeared)
    with pytest.raises(InputError, match="never written over a file"):
        statebackup.write(target, {"kind": "x"})
    assert _tree(tmp_path) == {".b.json.0a1b2c3d4e5f.tmp": "someone else's", "b.json": "theirs"}


def test_an_etcd_snapshot_that_fails_removes_its_own_reserved_files_only(tmp_path: Path, monkeypatch) -> None:
    """etcdsnap.save: the two names it reserved (the snapshot's and etcdctl's ``.part``) go, nothing else."""
    from gpucluster.errors import LocalWorldError
    from gpucluster.local import etcdsnap

    class World:  # what save() reads of a running world
        dir = tmp_path / "world"
        pki = type("Pki", (), {"ca": "ca", "cert": staticmethod(lambda n: n), "key": staticmethod(lambda n: n)})()

        def state(self):
            return type("State", (), {"components": {"etcd": 1}, "alive": lambda s: {"etcd": True},
                                      "ports": {"etcd": 1}})()

    out = tmp_path / "snap.db"
    (tmp_path / ".snap.db.0a1b2c3d4e5f.tmp.part").write_text("someone else's")
    (tmp_path / "snap.db.part").write_text("not ours either")

    def etcdctl_fails(cmd, what):
        raise LocalWorldError(f"{what}: etcdctl exited with 1")

    monkeypatch.setattr(etcdsnap, "_tool", lambda name: Path(name))
    monkeypatch.setattr(etcdsnap, "_run", etcdctl_fails)
    with pytest.raises(LocalWorldError):
        etcdsnap.save(World(), out)  # type: ignore[arg-type]
    assert _tree(tmp_path) == {".snap.db.0a1b2c3d4e5f.tmp.part": "someone else's", "snap.db.part": "not ours either"}


def test_a_restores_leftovers_are_removed_only_in_a_world_folder_and_never_through_a_link(tmp_path: Path) -> None:
    """etcdsnap.restore clears etcd-data.restoring and etcd-data.before-restore with ownership.remove: only in a
    folder marked as a local world, only those names; a link out of the folder refuses, its target stays."""
    from gpucluster import ownership
    from gpucluster.errors import NotOurs
    from gpucluster.local import etcdsnap
    from gpucluster.local.world import FOLDER

    names = (etcdsnap.RESTORING, etcdsnap.BEFORE_RESTORE)
    plain = tmp_path / "not-a-world"
    for name in names:
        (plain / name).mkdir(parents=True)
        (plain / name / "db").write_text("theirs")
    with pytest.raises(NotOurs, match=r"no \.gpucluster-folder"):
        ownership.remove(plain, FOLDER, names)
    assert len(_tree(plain)) == 2

    world = tmp_path / "world"
    world.mkdir()
    ownership.claim(world, FOLDER)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "db").write_text("keep")
    (world / etcdsnap.RESTORING).symlink_to(outside)
    with pytest.raises(NotOurs):
        ownership.remove(world, FOLDER, names)
    assert (outside / "db").read_text() == "keep"

    (world / etcdsnap.RESTORING).unlink()
    for name in names:
        (world / name).mkdir()
        (world / name / "member").write_text("ours")
    (world / "etcd-data").mkdir()
    (world / "etcd-data" / "member").write_text("live")
    assert sorted(ownership.remove(world, FOLDER, names)) == sorted(names)
    assert (world / "etcd-data" / "member").read_text() == "live" and (outside / "db").read_text() == "keep"
