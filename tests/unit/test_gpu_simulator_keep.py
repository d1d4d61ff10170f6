"""`up` on a running local world leaves the background GPU simulator running when nothing it reads changed.

The process loads the spec once, at start: it is replaced when its command line or the spec file's content
changed, or when it no longer runs; otherwise a converged re-run restarts nothing (before, every `up`
stopped it, waiting for it to exit, and paid a new interpreter and first sync).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpucluster import procs
from gpucluster.addons import gpu_simulator
from gpucluster.local import addons

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A world folder whose simulator 'process' is a sleep this test starts (recorded as the add-on does)."""
    started: list[subprocess.Popen] = []
    inventory = tmp_path / "inv"
    inventory.mkdir()
    shutil.copy(REPO / "inventories" / "local" / "cluster.yaml", inventory / "cluster.yaml")

    def spawn(state_dir: Path, kubeconfig: Path, inv: Path, interval: float = gpu_simulator.INTERVAL_S):
        gpu_simulator.stop(state_dir)
        proc = subprocess.Popen(["sleep", "300"])
        started.append(proc)
        found = procs.identity(proc.pid)
        assert found is not None
        launch = gpu_simulator.launch(state_dir, kubeconfig, inv, interval)
        comp = procs.Component(gpu_simulator.NAME, proc.pid, str(launch.binary), list(launch.args), str(launch.log),
                               time.time(), start_time=found[0], exe=found[1])
        addons.record(state_dir, gpu_simulator.NAME, {gpu_simulator.NAME: comp})
        return comp

    monkeypatch.setattr(gpu_simulator, "spawn", spawn)
    (tmp_path / "w").mkdir()
    yield SimpleNamespace(dir=tmp_path / "w", kubeconfig=tmp_path / "w" / "kubeconfig", inventory=inventory,
                          started=started)
    for proc in started:
        proc.kill()
        proc.wait()


def keep(world) -> str:
    said: list[str] = []
    gpu_simulator.keep(world, world.inventory, say=said.append)
    (line,) = said
    return line


def test_a_rerun_leaves_the_running_simulator_and_a_changed_spec_replaces_it(world) -> None:
    assert "keeps the nodes current" in keep(world) and len(world.started) == 1
    first = world.started[0].pid
    assert keep(world) == (f"✓ GPU simulator already keeps the nodes current (pid {first}, same spec; "
                           f"log {world.dir / 'logs' / 'gpu-simulator.log'})")
    assert len(world.started) == 1 and world.started[0].poll() is None
    spec = world.inventory / "cluster.yaml"
    spec.write_text(spec.read_text() + "# edited\n")
    assert "already" not in keep(world) and len(world.started) == 2
    assert world.started[0].wait(timeout=30) is not None  # the old one was stopped
    assert "already" in keep(world) and len(world.started) == 2


def test_a_simulator_that_died_or_runs_other_arguments_is_started_again(world) -> None:
    keep(world)
    world.started[0].kill()
    world.started[0].wait()
    assert "already" not in keep(world) and len(world.started) == 2
    rec = addons.load(world.dir, gpu_simulator.NAME)[gpu_simulator.NAME]
    addons.record(world.dir, gpu_simulator.NAME, {gpu_simulator.NAME: procs.Component(
        **{**rec.__dict__, "args": [*rec.args[:-1], "1.0"]})})  # recorded with another --interval
    assert "already" not in keep(world) and len(world.started) == 3


def test_replacing_removes_only_its_own_stamp_in_a_folder_it_owns(world, tmp_path: Path) -> None:
    """The one removal (the stale spec digest, before a new process starts) touches only ``spec.sha256`` in
    the add-on folder gpucluster marked as its own: another file there stays, a stamp that is a link to a
    file elsewhere loses the link only, and an ``addons`` folder holding someone else's files is refused."""
    from gpucluster.ownership import NotOurs

    keep(world)
    folder = addons.folder(world.dir, gpu_simulator.NAME)
    neighbour = folder / "notes.txt"
    neighbour.write_text("kept\n")
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("not ours\n")
    (folder / gpu_simulator.INPUTS).unlink()
    (folder / gpu_simulator.INPUTS).symlink_to(outside)
    assert "already" not in keep(world)  # no stamp of its own: replaced
    assert neighbour.read_text() == "kept\n" and outside.read_text() == "not ours\n"
    assert not (folder / gpu_simulator.INPUTS).is_symlink()
    stranger = SimpleNamespace(dir=tmp_path / "stranger", kubeconfig=tmp_path / "stranger" / "kubeconfig",
                               inventory=world.inventory, started=world.started)
    (stranger.dir / addons.FOLDER).mkdir(parents=True)
    (stranger.dir / addons.FOLDER / "theirs.txt").write_text("theirs\n")
    with pytest.raises(NotOurs):
        gpu_simulator.keep(stranger, world.inventory, say=lambda _m: None)
    assert (stranger.dir / addons.FOLDER / "theirs.txt").read_text() == "theirs\n"
