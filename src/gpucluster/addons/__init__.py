"""What runs on top of the local control plane, and the order it starts in.

Each add-on module has ``NAME`` and ``start(world, spec, inventory, say=...)``; it records the
processes it starts with :mod:`gpucluster.local.addons`, which is all the control plane knows about
it (``down`` stops recorded processes by pid, ``status`` lists them). Adding one: a module here and
a row in :data:`ADDONS`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpucluster.addons import gpu_simulator, volcano
from gpucluster.errors import ToolMissing
from gpucluster.local.world import World
from gpucluster.spec.model import ClusterSpec

Say = Callable[[str], None]


def start(world: World, spec: ClusterSpec, inventory: Path, *, say: Say, keep_current: bool = True) -> None:
    """Start every add-on the spec wants: simulated GPU nodes first (schedulers need nodes), then Volcano."""
    gpu_simulator.start(world, spec, inventory, say=say, keep_current=keep_current)
    if spec.scheduling.volcano.enabled:
        try:
            volcano.start(world, spec, say=say)
        except ToolMissing as err:
            # Without its binaries Volcano's Queues still apply (CRDs) but nothing schedules gangs:
            # say so rather than fail the whole run.
            say(f"Volcano not started: {err}")
