"""Where NVML places the GPU instances of one MIG-enabled GPU (memory-slice placements).

Each profile may start only at the memory slices NVML lists for it (``placements`` in
simulator/data/nvml.yaml, from go-nvml's GetGpuInstancePossiblePlacements tables) and covers ``size``
slices; instances never overlap and a profile has at most ``instances`` of them. The simulator
creates the instances largest first and, like NVML choosing a placement for an instance created
without one, fills the GPU from its last memory slices down (a 3g.40gb at 4, then a 2g.20gb at 2);
when that greedy order leaves a device without room it backtracks, so every set NVML could hold
fits. A set that does not fit raises ValueError.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpucluster.simulator.nvml import NvmlModel


@dataclass(frozen=True)
class Placed:
    """One GPU instance: its profile and the memory slices it covers."""

    profile: str
    start: int
    size: int


def place(model: NvmlModel, profiles: Sequence[str]) -> list[Placed]:
    """Placements for the MIG devices ``profiles`` on one GPU of ``model``, in creation order."""
    table = model.mig
    if table is None:
        raise ValueError(f"{model.name}: no MIG profile table")
    known = {p.name: p for p in table.profiles}
    for name in sorted(set(profiles)):
        if name not in known:
            raise ValueError(f"{model.name} has no MIG profile {name!r} (NVML lists {', '.join(sorted(known))})")
        if profiles.count(name) > known[name].instances:
            raise ValueError(f"{profiles.count(name)}x {name} exceeds the {known[name].instances} instances "
                             f"one {model.name} can hold")
        if name not in table.placements:
            raise ValueError(f"{model.name}: no placements recorded for {name!r}")
    order = sorted(profiles, key=lambda n: (-table.placements[n][1], n))

    def fill(i: int, used: frozenset[int]) -> list[Placed] | None:
        if i == len(order):
            return []
        starts, size = table.placements[order[i]]
        for start in sorted(starts, reverse=True):
            span = frozenset(range(start, start + size))
            if not span & used:
                rest = fill(i + 1, used | span)
                if rest is not None:
                    return [Placed(order[i], start, size), *rest]
        return None

    placed = fill(0, frozenset())
    if placed is None:
        raise ValueError(f"{model.name}: {', '.join(order)} do not fit one GPU's memory slices together")
    return placed
