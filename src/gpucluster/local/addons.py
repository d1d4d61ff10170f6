"""The lifecycle of whatever runs on top of the local control plane, without knowing what it is.

An add-on (the GPU simulator, Volcano, ...; see :mod:`gpucluster.addons`) keeps its files in
``<state>/addons/<name>/`` and starts its processes with :func:`start` (the runtime of
:mod:`gpucluster.local.runtime`), which records them there (``components.json``, one
:class:`gpucluster.procs.Component` each). The control plane only ever deals with these records:
``gpucluster local down`` stops every recorded process by pid before the control plane, and
``gpucluster local status`` lists them, whatever add-ons exist.

``<state>/addons/`` carries its own marker (:mod:`gpucluster.ownership`, kind ``local-addons``); one an
earlier version made is known by lying in a marked world folder. The world removes it with its other
files (``gpucluster.local.world.OWNED``), only from a marked world folder.
"""

from __future__ import annotations

import json
import logging
import signal
import ssl
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from gpucluster import atomic, ownership, procs
from gpucluster.errors import LocalWorldError
from gpucluster.local import pki, runtime
from gpucluster.local.runtime import Launch
from gpucluster.procs import Component

Say = Callable[[str], None]

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
    text = json.dumps({n: asdict(c) for n, c in comps.items()}, indent=2) + "\n"
    atomic.write(folder(state_dir, name) / RECORD, text)


class Ledger:
    """An add-on's record as the runtime's ledger (:func:`gpucluster.local.runtime.start`): each process recorded
    as it starts, beside what the add-on already runs; forgotten after a roll-back."""

    def __init__(self, state_dir: Path, name: str) -> None:
        self.state_dir, self.name = Path(state_dir), name
        self.comps = load(state_dir, name)

    def record(self, comp: Component) -> None:
        self.comps[comp.name] = comp
        record(self.state_dir, self.name, self.comps)

    def forget(self) -> None:
        (self.state_dir / FOLDER / self.name / RECORD).unlink(missing_ok=True)


def start(state_dir: Path, name: str, groups: Iterable[Sequence[Launch]], *, timeout: float,
          say: Say | None = None) -> dict[str, Component]:
    """Start add-on ``name``'s processes with the runtime, recorded in its folder; what was started.

    On failure everything this call started is stopped and the record dropped (the add-on is stopped
    before it starts again, so nothing else of it runs then)."""
    return runtime.start(groups, Ledger(state_dir, name), timeout=timeout, say=say)


def names(state_dir: Path) -> list[str]:
    """Add-ons that recorded something in ``state_dir``."""
    root = Path(state_dir) / FOLDER
    return sorted(p.parent.name for p in root.glob(f"*/{RECORD}")) if root.is_dir() else []


def alive(state_dir: Path, comp: Component) -> bool:
    """Whether ``comp`` still runs and is the process we started (see :meth:`Component.ours`)."""
    return comp.ours()


def _healthy(state_dir: Path, comp: Component) -> bool:
    """``comp`` answers its health URL; an https one is verified against the world's CA (an add-on serving
    TLS, such as Volcano's webhook manager, holds a certificate the world's CA signed)."""
    if not comp.health_url:
        return True
    ctx = None
    if comp.health_url.startswith("https://"):
        ctx = ssl.create_default_context(cafile=str(pki.Pki(Path(state_dir) / "pki").ca))
    return procs.probe(comp.health_url, ctx)[0]


def running(state_dir: Path, name: str, expected: Iterable[str]) -> bool:
    """True when add-on ``name`` recorded exactly ``expected``, each running and answering its health URL."""
    comps = load(state_dir, name)
    return set(comps) == set(expected) and all(c.ours() and _healthy(state_dir, c) for c in comps.values())


def stop_event(kubeconfig: Path) -> threading.Event:
    """For an add-on's background process: an event set on SIGTERM (``down`` stops it by pid) or once the
    world's ``kubeconfig`` is gone (the world was removed under it), checked every second."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def watch_world() -> None:
        while not stop.wait(1.0):
            if not kubeconfig.exists():
                logging.getLogger("gpucluster.addons").info("kubeconfig %s is gone (world down): stopping", kubeconfig)
                stop.set()

    threading.Thread(target=watch_world, daemon=True).start()
    return stop


def status(state_dir: Path) -> list[AddonProcess]:
    """Every recorded add-on process with its running and health state."""
    out = []
    for name in names(state_dir):
        for comp in load(state_dir, name).values():
            runs = alive(state_dir, comp)
            out.append(AddonProcess(name, comp, runs, runs and _healthy(state_dir, comp)))
    return out


def stop(state_dir: Path, name: str) -> list[str]:
    """Stop add-on ``name``'s recorded processes (those still ours), newest first, and forget them."""
    stopped = runtime.stop_all(reversed(list(load(state_dir, name).values())))
    (Path(state_dir) / FOLDER / name / RECORD).unlink(missing_ok=True)
    return stopped


def stop_all(state_dir: Path) -> list[str]:
    """Stop every add-on's processes, all together, and forget them (the world removes their folder with
    its own files)."""
    every = names(state_dir)
    # Add-ons need the control plane, not one another: all of them at once.
    stopped = runtime.stop_groups([[c for name in every for c in reversed(list(load(state_dir, name).values()))]])
    for name in every:
        (Path(state_dir) / FOLDER / name / RECORD).unlink(missing_ok=True)
    return stopped
