"""`backup etcd` / `restore etcd` on a kubeadm cluster, around the playbooks: what is refused before any
host is contacted, what the playbooks are given, and that nothing but a checked snapshot gets the asked
name. The playbooks themselves run on real kubeadm control planes in
tests/molecule/test_node_remove.py::test_an_etcd_snapshot_restores_both_control_planes_to_the_moment_it_was_taken.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpucluster import etcdhosts, flow
from gpucluster import inventory as inventories
from gpucluster.errors import GpuclusterError, InputError, LocalWorldError

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "inventories" / "lab"


class Runner:
    """Stands in for the host layer: records what it was asked and does what ``act`` says."""

    def __init__(self, act=None) -> None:
        self.calls: list[tuple[tuple[str, ...], dict]] = []
        self.act = act

    def __call__(self, playbooks, extra):
        self.calls.append((playbooks, extra))
        if self.act:
            self.act(extra)


def _spec():
    return inventories.load(LAB)


def test_the_snapshot_is_asked_of_the_first_control_plane_into_a_private_folder_beside_the_file(tmp_path):
    seen = {}

    def act(extra):
        dest = Path(extra["etcd_snapshot_dest"])
        seen["mode"] = dest.stat().st_mode & 0o777
        seen["parent"] = dest.parent
        (dest / "snapshot.db").write_bytes(b"not a snapshot")  # what a broken copy would be

    run = Runner(act)
    out = tmp_path / "etcd.db"
    with pytest.raises(LocalWorldError, match="not a usable snapshot"):
        etcdhosts.save(_spec(), out, run)
    [(playbooks, extra)] = run.calls
    assert playbooks == ("etcd-snapshot.yml",)
    assert Path(extra["etcd_tools_etcdctl"]).name == "etcdctl" and extra["etcd_snapshot_dest"].endswith("/")
    assert seen == {"mode": 0o700, "parent": tmp_path}  # only its owner reads the Secrets in it
    assert list(tmp_path.iterdir()) == []  # no file under the asked name, the folder and the copy gone


def test_a_relative_out_gives_the_playbook_an_absolute_folder(tmp_path, monkeypatch):
    """ansible-playbook runs in the checkout (hostlayer.run's cwd): a relative folder would land there."""
    monkeypatch.chdir(tmp_path)
    seen = []
    with pytest.raises(GpuclusterError, match="without copying a snapshot"):
        etcdhosts.save(_spec(), Path("etcd.db"), Runner(lambda extra: seen.append(extra["etcd_snapshot_dest"])))
    assert len(seen) == 1 and Path(seen[0]).is_absolute() and Path(seen[0]).parent == tmp_path.resolve()
    assert list(tmp_path.iterdir()) == []


def test_save_removes_only_the_copy_it_fetched_into_its_own_folder(tmp_path):
    # look-alikes of what save removes: a snapshot.db beside the asked file, another run's private folder
    # with its copy, and a file someone else put into save's own folder while the playbook ran
    beside = tmp_path / "snapshot.db"
    beside.write_text("mine")
    other_run = tmp_path / ".etcd.db.other"
    other_run.mkdir()
    (other_run / "snapshot.db").write_text("theirs")
    folders = []

    def act(extra):
        dest = Path(extra["etcd_snapshot_dest"])
        folders.append(dest)
        (dest / "snapshot.db").write_bytes(b"not a snapshot")
        (dest / "notes.txt").write_text("not save's")

    with pytest.raises(LocalWorldError, match="not a usable snapshot"):
        etcdhosts.save(_spec(), tmp_path / "etcd.db", Runner(act))
    [ours] = folders
    assert beside.read_text() == "mine" and (other_run / "snapshot.db").read_text() == "theirs"
    assert sorted(p.name for p in ours.iterdir()) == ["notes.txt"]  # its copy gone; the folder kept, not empty
    assert not (tmp_path / "etcd.db").exists()


def test_a_run_that_fetched_nothing_fails_and_leaves_nothing(tmp_path):
    with pytest.raises(GpuclusterError, match="without copying a snapshot"):
        etcdhosts.save(_spec(), tmp_path / "etcd.db", Runner())
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_or_a_missing_folder_is_refused_before_any_host(tmp_path):
    taken = tmp_path / "etcd.db"
    taken.write_text("mine")
    run = Runner()
    with pytest.raises(InputError, match="never written over a file"):
        etcdhosts.save(_spec(), taken, run)
    with pytest.raises(InputError, match="is not a folder"):
        etcdhosts.save(_spec(), tmp_path / "nowhere" / "etcd.db", run)
    assert run.calls == [] and taken.read_text() == "mine"


def test_a_restore_checks_the_snapshot_before_any_host_is_contacted(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a snapshot" * 100)
    run = Runner()
    with pytest.raises(InputError, match=r"not a usable snapshot.*No host was contacted"):
        etcdhosts.restore(_spec(), junk, run)
    with pytest.raises(InputError, match="no such file"):
        etcdhosts.restore(_spec(), tmp_path / "missing.db", run)
    assert run.calls == []


def test_a_restore_without_yes_names_the_cluster_and_what_is_lost(tmp_path):
    with pytest.raises(InputError) as refused:
        flow.run_restore_etcd(LAB, tmp_path / "etcd.db")
    message = str(refused.value)
    assert "the whole cluster lab" in message and "Pass --yes" in message and ".before-restore-" in message


def test_the_restore_playbook_gets_one_stamp_the_snapshot_and_the_confirmation(tmp_path, monkeypatch):
    source = tmp_path / "etcd.db"
    source.write_bytes(b"x")
    monkeypatch.setattr(etcdhosts.etcdsnap, "snapshot_status", lambda p: {"revision": 7, "keys": 3, "bytes": 1})
    run = Runner()
    result = etcdhosts.restore(_spec(), source, run)
    [(playbooks, extra)] = run.calls
    assert playbooks == ("etcd-restore.yml",)
    assert extra["etcd_restore_confirm"] is True and extra["etcd_restore_snapshot"] == str(source.resolve())
    assert re.fullmatch(r"\d{8}T\d{6}Z", extra["etcd_restore_stamp"])  # what the playbook's check accepts
    assert Path(extra["etcd_tools_etcdutl"]).name == "etcdutl"
    control_planes = [h.name for h in _spec().control_planes]
    assert [r.split(":")[0] for r in result["restarted"]] == control_planes
    assert result["keptAs"].endswith(extra["etcd_restore_stamp"])
