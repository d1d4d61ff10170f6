"""What runs on top of the local control plane, and the order it starts in.

Each add-on module has ``NAME`` and ``start(world, spec, inventory, say=...)``; it records the
processes it starts with :mod:`gpucluster.local.addons`, which is all the control plane knows about
it (``down`` stops recorded processes by pid, ``status`` lists them). Adding one: a module here and
a row in :data:`ADDONS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import TypeVar

from gpucluster.addons import gpu_simulator, volcano
from gpucluster.errors import ToolMissing
from gpucluster.local.world import World
from gpucluster.spec.model import ClusterSpec

Say = Callable[[str], None]
T = TypeVar("T")


def start(world: World, spec: ClusterSpec, inventory: Path, *, say: Say, keep_current: bool = True,
          alongside: Sequence[Callable[[], object]] = ()) -> None:
    """Start every add-on the spec wants, in two steps.

    First what needs only the API server, side by side (each mostly waits for the API server, so one
    after the other would add the waits up): the simulated GPU nodes registered and settled, Volcano's
    CRDs, and the caller's ``alongside`` (the operators' CRDs). Then the processes: the simulator's
    background process, and Volcano's daemons, whose informers need their CRDs.
    """
    steps: list[Callable[[], object]] = [lambda: gpu_simulator.register(world, spec, say=say), *alongside]
    volcano_on = spec.scheduling.volcano.enabled
    if volcano_on:
        steps.append(lambda: _without_volcano_binaries(lambda: volcano.prepare(world, say=say), say))
    outcomes = side_by_side(steps)
    gpu_simulator.keep(world, inventory, say=say, keep_current=keep_current)
    prepared = outcomes[-1] if volcano_on else None
    if prepared is not None:  # None: its binaries are missing (said); False: it runs already
        volcano.start(world, spec, say=say, prepared=bool(prepared))


def _without_volcano_binaries(step: Callable[[], bool], say: Say) -> bool | None:
    try:
        return step()
    except ToolMissing as err:
        # Without its binaries Volcano's Queues still apply (CRDs) but nothing schedules gangs:
        # say so rather than fail the whole run.
        say(f"Volcano not started: {err}")
        return None


def side_by_side(steps: Sequence[Callable[[], T]]) -> list[T]:
    """Run ``steps`` at once, one thread each; their results in order once all are done.

    The first step's error (in order) is raised after every step has finished, so nothing started here
    is still running when the caller cleans up.
    """
    if len(steps) == 1:
        return [steps[0]()]
    with ThreadPoolExecutor(len(steps), thread_name_prefix="addons") as pool:
        futures = [pool.submit(step) for step in steps]
        wait(futures)
    return [f.result() for f in futures]
