"""The GPU simulator as an add-on of the local world: one sync, then a background process keeps it current.

The process is ``python -m gpucluster local gpus run`` against the world's kubeconfig; it is recorded
like any other process of the world (:mod:`gpucluster.local.addons`), logs to
``<state>/logs/gpu-simulator.log``, and also ends by itself once the kubeconfig is gone.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from pathlib import Path

from gpucluster import atomic
from gpucluster.local import addons
from gpucluster.local.runtime import Launch
from gpucluster.local.world import World
from gpucluster.procs import Component
from gpucluster.simulator import attach
from gpucluster.spec.model import ClusterSpec

NAME = "gpu-simulator"
INTERVAL_S = 5.0
#: Beside the add-on's record: the digest of the spec the running process was started for.
INPUTS = "spec.sha256"

Say = Callable[[str], None]


def command(kubeconfig: Path, inventory: Path, interval: float = INTERVAL_S) -> list[str]:
    """The background process's argv after the interpreter."""
    return ["-m", "gpucluster", "local", "gpus", "run", "--kubeconfig", str(kubeconfig),
            "-i", str(Path(inventory).resolve()), "--interval", str(interval)]


def start(world: World, spec: ClusterSpec, inventory: Path, *, say: Say, keep_current: bool = True) -> None:
    """Register the simulated GPU nodes (one sync) and keep them current from a recorded process."""
    register(world, spec, say=say)
    keep(world, inventory, say=say, keep_current=keep_current)


def register(world: World, spec: ClusterSpec, *, say: Say) -> None:
    """Register the spec's simulated GPU nodes and settle them (:func:`gpucluster.simulator.attach`)."""
    attach(Path(world.kubeconfig), spec, say=say).close()


def keep(world: World, inventory: Path, *, say: Say, keep_current: bool = True) -> None:
    """Keep the nodes current from the recorded background process (``keep_current`` False: stop it).

    The process reads the spec once, when it starts. One that still runs with the same command line,
    started for the same spec file content, is left running (a converged re-run of ``up`` restarts
    nothing); otherwise it is replaced.
    """
    state_dir = Path(world.dir)
    if not keep_current:
        stop(state_dir)
        return
    kubeconfig = Path(world.kubeconfig)
    want, spec = launch(state_dir, kubeconfig, inventory), spec_digest(inventory)
    running = addons.load(state_dir, NAME).get(NAME)
    stamp = addons.folder(state_dir, NAME) / INPUTS
    if (running is not None and running.ours() and running.binary == str(want.binary)
            and running.args == list(want.args) and stamp.is_file() and stamp.read_text() == spec):
        say(f"✓ GPU simulator already keeps the nodes current (pid {running.pid}, same spec; log {running.log})")
        return
    stamp.unlink(missing_ok=True)
    comp = spawn(state_dir, kubeconfig, inventory)
    atomic.write(stamp, spec)
    say(f"✓ GPU simulator keeps the nodes current (pid {comp.pid}, log {comp.log})")


def spec_digest(inventory: Path) -> str:
    """SHA-256 of the spec file the process loads at start (all it reads of the inventory): an inventory
    folder's ``cluster.yaml``, or the file itself. Read here, not through the spec loader: the simulator
    never reaches the validation (expectation) side, even for a path."""
    path = Path(inventory).resolve()
    return hashlib.sha256((path / "cluster.yaml" if path.is_dir() else path).read_bytes()).hexdigest() + "\n"


def launch(state_dir: Path, kubeconfig: Path, inventory: Path, interval: float = INTERVAL_S) -> Launch:
    """What the background process is: no port, and nothing to wait for (it syncs on its own)."""
    return Launch(NAME, Path(sys.executable), tuple(command(kubeconfig, inventory, interval)),
                  Path(state_dir) / "logs" / f"{NAME}.log")


def spawn(state_dir: Path, kubeconfig: Path, inventory: Path, interval: float = INTERVAL_S) -> Component:
    """Start the background process (replacing one already running) and record it; returns its record."""
    stop(state_dir)
    started = addons.start(Path(state_dir), NAME, [[launch(state_dir, kubeconfig, inventory, interval)]], timeout=0)
    return started[NAME]


def stop(state_dir: Path) -> list[str]:
    """Stop the background simulator of the world at ``state_dir`` (only if its pid is still ours)."""
    return addons.stop(Path(state_dir), NAME)
