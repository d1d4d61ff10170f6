"""The lifecycle of whatever runs on top of the local control plane, without knowing what it is.

An add-on (the GPU simulator, Volcano, ...; see :mod:`gpucluster.addons`) keeps its files in
``<state>/addons/<name>/`` and records the processes it starts there (``components.json``, one
:class:`gpucluster.procs.Component` each). The control plane only ever deals with these records:
``gpucluster local down`` stops every recorded process by pid before the control plane, and
``gpucluster local status`` lists them, whatever add-ons exist.

``<state>/addons/`` carries its own marker (:mod:`gpucluster.ownership`, kind ``local-addons``); one an
earlier version made is known by lying in a marked world folder. The world removes it with its other
files (``gpucluster.local.world.OWNED``), only from a marked world folder.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from gpucluster import ownership, procs
from gpucluster.errors import LocalWorldError
from gpucluster.procs import Component

FOLDER = "addons"
RECORD = "components.json"
#: The marker kind of ``<state>/addons/`` (an earlier version's lies in a local world's marked folder).
KIND = ownership.Kind("local-addons", "the local world's add-on folder", inside="local-world")


@dataclass(frozen=True)
class AddonProcess:
    """One recorded add-on process and whether it still runs (and answers its health URL)."""

    addon: str
    component: Component
    running: bool
    healthy: bool


def folder(state_dir: Path, name: str) -> Path:
    """``<state>/addons/<name>/`` (created; ``<state>/addons/`` made ours first)."""
    path = ownership.claim(Path(state_dir) / FOLDER, KIND) / name
    path.mkdir(exist_ok=True)
    return path


def load(state_dir: Path, name: str) -> dict[str, Component]:
    """The processes add-on ``name`` recorded ({} when none)."""
    path = Path(state_dir) / FOLDER / name / RECORD
    if not path.is_file():
        return {}
    try:
        return {n: Component(**c) for n, c in json.loads(path.read_text()).items()}
    except (ValueError, TypeError) as err:
        raise LocalWorldError(
            f"{path} is corrupt ({err}); stop the processes it lists by hand, remove it, and run up again"
        ) from None


def record(state_dir: Path, name: str, comps: dict[str, Component]) -> None:
    """Record (atomically) the processes add-on ``name`` runs now."""
    path = folder(state_dir, name) / RECORD
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({n: asdict(c) for n, c in comps.items()}, indent=2) + "\n")
    os.replace(tmp, path)


def names(state_dir: Path) -> list[str]:
    """Add-ons that recorded something in ``state_dir``."""
    root = Path(state_dir) / FOLDER
    return sorted(p.parent.name for p in root.glob(f"*/{RECORD}")) if root.is_dir() else []


def alive(state_dir: Path, comp: Component) -> bool:
    """Whether ``comp`` still runs and is the process we started (see :meth:`Component.ours`)."""
    return comp.ours()


def status(state_dir: Path) -> list[AddonProcess]:
    """Every recorded add-on process with its running and health state."""
    out = []
    for name in names(state_dir):
        for comp in load(state_dir, name).values():
            running = alive(state_dir, comp)
            healthy = running and (not comp.health_url or procs.probe(comp.health_url, None)[0])
            out.append(AddonProcess(name, comp, running, healthy))
    return out


def stop(state_dir: Path, name: str) -> list[str]:
    """Stop add-on ``name``'s recorded processes (those still ours), newest first, and forget them."""
    stopped = []
    for comp in reversed(list(load(state_dir, name).values())):
        if alive(state_dir, comp):
            if not procs.stop(comp.pid):
                raise LocalWorldError(f"could not stop {comp.name} (pid {comp.pid}); stop it by hand")
            stopped.append(comp.name)
        else:
            procs.reap(comp.pid)
    (Path(state_dir) / FOLDER / name / RECORD).unlink(missing_ok=True)
    return stopped


def stop_all(state_dir: Path) -> list[str]:
    """Stop every add-on's processes (the world removes their folder with its own files)."""
    stopped = []
    for name in names(state_dir):
        stopped += stop(state_dir, name)
    return stopped
