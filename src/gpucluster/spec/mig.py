"""MIG layouts: resolve a named layout to profile counts and check that a layout fits on one GPU.

A layout fits when every profile is known for the model, no profile exceeds its per-GPU maximum, the
compute slices add up to at most the GPU's, and the instances can be placed on the GPU's memory slices
at the offsets NVIDIA allows (a small backtracking search over the placement table in the catalog).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucluster import catalog
from gpucluster.catalog import GpuModel

if TYPE_CHECKING:
    from gpucluster.spec.model import NodePool


class LayoutError(ValueError):
    """A layout that cannot exist on the GPU; the message says why, the hint how to fix it."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def resolve_named(model: GpuModel, name: str) -> dict[str, int]:
    """Turn a mig-parted style layout name into profile counts for one GPU.

    ``all-<profile>`` fills the GPU with as many instances of the profile as fit; ``all-balanced`` is
    the catalog's balanced layout; ``all-disabled`` means MIG off (no instances).
    """
    assert model.mig is not None
    if name == "all-disabled":
        return {}
    if name == "all-balanced":
        return dict(model.mig.balanced)
    if name.startswith("all-"):
        profile = name[4:]
        p = model.mig.profiles.get(profile)
        if p is None:
            names = ", ".join(f"all-{n}" for n in _plain_profiles(model))
            raise LayoutError(
                f"unknown layout {name!r} for {model.key}",
                f"use one of all-balanced, all-disabled, {names}, or list profiles explicitly",
            )
        return {profile: p.max}
    raise LayoutError(
        f"unknown layout {name!r}",
        "named layouts are all-<profile>, all-balanced or all-disabled; "
        "or give `profiles: {\"<profile>\": <count>}`",
    )


def _plain_profiles(model: GpuModel) -> list[str]:
    assert model.mig is not None
    return [n for n in model.mig.profiles if "+me" not in n]


def check_fits(model: GpuModel, layout: dict[str, int]) -> None:
    """Raise :class:`LayoutError` unless ``layout`` (profile → count) fits on one GPU of ``model``."""
    mig = model.mig
    assert mig is not None
    for name, count in layout.items():
        p = mig.profiles.get(name)
        if p is None:
            raise LayoutError(
                f"profile {name!r} does not exist on {model.key}",
                f"{model.key} supports {', '.join(mig.profiles)}",
            )
        if count < 0:
            raise LayoutError(f"profile {name!r} has a negative count {count}")
        if count > p.max:
            raise LayoutError(
                f"{count}x {name} exceeds the {p.max} instances of {name} one {model.key} can hold",
                f"use at most {p.max}",
            )
    compute = sum(mig.profiles[n].compute * c for n, c in layout.items())
    memory = sum(mig.profiles[n].memory * c for n, c in layout.items())
    if compute > mig.compute_slices:
        raise LayoutError(
            f"layout needs {compute} compute slices; {model.key} has {mig.compute_slices}",
            "remove instances or use smaller profiles",
        )
    if memory > mig.memory_slices:
        raise LayoutError(
            f"layout needs {memory} memory slices ({_gib(model, memory)} GiB); "
            f"{model.key} has {mig.memory_slices} ({_gib(model, mig.memory_slices)} GiB)",
            "remove instances or use profiles with less memory",
        )
    instances = sorted(
        (mig.profiles[n] for n, c in layout.items() for _ in range(c)), key=lambda p: -p.memory
    )
    if not _place(instances, [False] * mig.memory_slices):
        raise LayoutError(
            f"layout {_fmt(layout)} cannot be placed on one {model.key}: the instances overlap at "
            "every allowed offset",
            "see the placement rules in NVIDIA's MIG user guide; e.g. all-balanced fits",
        )


def _place(instances: list, used: list[bool]) -> bool:
    if not instances:
        return True
    first, rest = instances[0], instances[1:]
    for start in first.starts:
        span = range(start, start + first.memory)
        if span.stop <= len(used) and not any(used[i] for i in span):
            for i in span:
                used[i] = True
            if _place(rest, used):
                return True
            for i in span:
                used[i] = False
    return False


def _gib(model: GpuModel, slices: int) -> int:
    assert model.mig is not None
    return round(model.memory_mib / 1024 * slices / model.mig.memory_slices)


def _fmt(layout: dict[str, int]) -> str:
    return ", ".join(f"{c}x {n}" for n, c in sorted(layout.items()))


def pool_layout(pool: NodePool) -> dict[str, int]:
    """Profile → count on one GPU of a MIG pool: its explicit profiles or its named layout resolved.

    The pool must be a validated MIG pool.
    """
    assert pool.gpu and pool.sharing.mig
    model = catalog.get(pool.gpu.model)
    if pool.sharing.mig.profiles is not None:
        return dict(pool.sharing.mig.profiles)
    return resolve_named(model, pool.sharing.mig.layout or "all-balanced")
