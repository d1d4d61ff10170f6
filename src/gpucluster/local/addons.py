"""What runs on top of the local control plane: the GPU simulator and Volcano.

``start`` is called by ``gpucluster local up`` and by ``gpucluster up`` once the control plane is
healthy; ``World.down`` stops both (by pid) before the control plane.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpucluster.spec.model import ClusterSpec

Say = Callable[[str], None]


def start(world: Any, spec: ClusterSpec, inventory: Path, *, say: Say, keep_current: bool = True) -> None:
    """Register the simulated GPU nodes (one sync), keep them current in the background, start Volcano."""
    from gpucluster.local import volcano
    from gpucluster.local.simulator import attach
    from gpucluster.local.simulator_cli import spawn

    pending: list[str] = []

    def quiet(message: str) -> None:
        # Before the platform stack runs, no sharing/MIG config is deployed yet: every GPU node says
        # so. Collapse that into one line instead of one warning per node.
        if "ConfigMap not found" in message or "could not be applied" in message:
            pending.append(message)
        else:
            say(message)

    attach(world, spec, say=quiet).close()
    if pending:
        say(f"  {len(pending)} node(s) wait for the device-plugin/MIG configs the platform stack deploys "
            "(advertised unshared until then)")
    if keep_current:
        pid = spawn(world.dir, world.kubeconfig, inventory)
        say(f"✓ GPU simulator keeps the nodes current (pid {pid}, log {world.dir / 'logs' / 'gpu-simulator.log'})")
    if spec.scheduling.volcano.enabled:
        volcano.start(world, spec, say=say)


def stop(world: Any) -> list[str]:
    """Stop the background simulator and Volcano of ``world``; returns what was stopped."""
    from gpucluster.local import volcano
    from gpucluster.local.simulator_cli import stop_spawned

    stopped = ["gpu-simulator"] if stop_spawned(world.dir) else []
    return stopped + volcano.stop(world)
