"""atomic: a file replaced in one step, its mode, what is left when a write fails."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gpucluster import atomic, ownership


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_mode_open_would_give_it(tmp_path: Path) -> None:
    umask = os.umask(0o027)
    try:
        atomic.write(tmp_path / "state.json", '{"format": 1}\n')
    finally:
        os.umask(umask)
    assert (tmp_path / "state.json").read_text() == '{"format": 1}\n'
    assert mode(tmp_path / "state.json") == 0o640
    assert os.listdir(tmp_path) == ["state.json"]  # no temporary file left


def test_an_explicit_mode_holds_whatever_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "kubeconfig"
    target.write_text("old")
    target.chmod(0o644)
    umask = os.umask(0o077)
    try:
        atomic.write(target, b"client-key-data: x\n", mode=0o600)
        atomic.write(tmp_path / "image.tar", b"blob", mode=0o644)
    finally:
        os.umask(umask)
    assert target.read_bytes() == b"client-key-data: x\n" and mode(target) == 0o600
    assert mode(tmp_path / "image.tar") == 0o644


def test_the_old_file_is_replaced_not_rewritten_in_place(tmp_path: Path) -> None:
    target = tmp_path / "components.json"
    target.write_text("old")
    reader = target.open()  # a reader holding the old file sees it whole
    atomic.write(target, "new")
    assert reader.read() == "old"
    reader.close()
    assert target.read_text() == "new"


def test_a_failed_write_leaves_the_target_and_no_temporary_file(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "state.json"
    target.write_text("intact")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        atomic.write(target, "half")
    assert target.read_text() == "intact"
    assert os.listdir(tmp_path) == ["state.json"]


def test_write_if_changed_leaves_an_identical_file_alone(tmp_path: Path) -> None:
    target = tmp_path / "prometheus.yaml"
    assert atomic.write_if_changed(target, "a: 1\n")
    inode = target.stat().st_ino
    assert not atomic.write_if_changed(target, "a: 1\n")
    assert target.stat().st_ino == inode  # not even replaced
    assert atomic.write_if_changed(target, "a: 2\n") and target.read_text() == "a: 2\n"


def test_a_temporary_file_a_crash_left_is_known_as_one(tmp_path: Path) -> None:
    assert atomic.temporary_of(".state.json.0a1b2c3d4e5f.tmp", "state.json")
    assert not atomic.temporary_of("state.json.tmp", "state.json")
    assert not atomic.temporary_of(".state.json.0a1b.yaml", "state.json")
    # a claim that crashed while writing the marker leaves the folder empty but for that file: still claimable
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / f".{ownership.MARKER}.0a1b2c3d4e5f.tmp").write_text("{")
    kind = ownership.Kind("test-kind", "a test folder", frozenset({"data"}))
    assert ownership.claim(folder, kind) == folder
    assert (folder / ownership.MARKER).is_file()
