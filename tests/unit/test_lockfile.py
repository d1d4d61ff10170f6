"""The world's lock is held for a whole command: `local down` refuses a running one, naming it.

The holder is a real second process (flock locks are per open file, so only another process can show
the refusal); it holds the world as ``gpucluster up`` does (``World.hold``) until the test closes its
stdin.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpucluster import lockfile, ownership
from gpucluster.cli import entrypoint
from gpucluster.local.state import State
from gpucluster.local.world import FOLDER

HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from gpucluster.local.world import World
    with World(Path(sys.argv[1])).hold():
        print("held", flush=True)
        sys.stdin.read()
    """
)
TRY = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from gpucluster import lockfile
    from gpucluster.errors import StateLocked
    try:
        with lockfile.hold(Path(sys.argv[1]), "the test folder"):
            pass
    except StateLocked as err:
        sys.exit(str(err))
    """
)


@pytest.fixture
def holder(tmp_path: Path):
    """A process holding the world at ``tmp_path/w``; its command line ends in ``up -i inventories/local``."""
    world = ownership.claim(tmp_path / "w", FOLDER)
    State(dir=world, ports={"etcd": 1}).save()
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(world), "up", "-i", "inventories/local"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    try:
        assert proc.stdout.readline() == "held\n"
        yield proc, world
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_local_down_refuses_while_another_command_holds_the_world_naming_it(holder, capsys) -> None:
    proc, world = holder
    assert entrypoint(["local", "down", "--state-dir", str(world)]) == 1
    err = capsys.readouterr().err
    assert f"pid {proc.pid} (`-c {world} up -i inventories/local`, since " in err
    assert f"is working on the local world ({world}); wait for it to finish, or stop it" in err
    assert (world / "state.json").exists()  # nothing was stopped or removed


def test_local_down_proceeds_once_the_holder_is_done(holder, capsys) -> None:
    proc, world = holder
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)
    assert entrypoint(["local", "down", "--state-dir", str(world)]) == 0
    assert not (world / "state.json").exists()


def test_the_lock_is_reentrant_and_held_until_the_outermost_hold_ends(tmp_path: Path) -> None:
    def other_process() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", TRY, str(tmp_path)], capture_output=True, text=True,
                              timeout=60)

    with lockfile.hold(tmp_path, "the test folder"):
        with lockfile.hold(tmp_path, "the test folder"):  # World.up inside `gpucluster up`
            pass
        refused = other_process()
        assert refused.returncode == 1 and "is working on the test folder" in refused.stderr
    assert other_process().returncode == 0


def test_another_thread_of_the_same_process_is_refused(tmp_path: Path) -> None:
    import threading

    from gpucluster.errors import StateLocked

    outcome: list[BaseException | None] = []

    def take() -> None:
        try:
            with lockfile.hold(tmp_path, "the test folder"):
                outcome.append(None)
        except StateLocked as err:
            outcome.append(err)

    with lockfile.hold(tmp_path, "the test folder"):
        thread = threading.Thread(target=take)
        thread.start()
        thread.join(timeout=30)
    assert isinstance(outcome[0], StateLocked) and "in another thread of this process" in str(outcome[0])
    take()  # released: the same thread takes it now
    assert outcome[1] is None


@pytest.mark.parametrize("command", ["up", "down"])
def test_up_and_down_hold_the_local_world_for_their_whole_run(tmp_path: Path, local_inventory, monkeypatch,
                                                             command: str) -> None:
    # While `gpucluster up`/`down` is past its world phase (in its stacks), a `local down` from another
    # process is refused, naming this process: the world is not pulled from under the stacks.
    import os

    from gpucluster import flow

    world = tmp_path / "w"
    seen: list[subprocess.CompletedProcess] = []

    def stacks_phase(*args, **kwargs):
        seen.append(subprocess.run([sys.executable, "-m", "gpucluster", "local", "down", "--state-dir", str(world)],
                                   capture_output=True, text=True, timeout=120))
        return args[0]

    monkeypatch.setattr(flow, f"_{command}", stacks_phase)
    run = flow.run_up if command == "up" else flow.run_down
    run(local_inventory, world_dir=world, quiet=True)
    (refused,) = seen
    assert refused.returncode == 1, refused.stderr
    assert f"pid {os.getpid()} (" in refused.stderr and f"is working on the local world ({world})" in refused.stderr
