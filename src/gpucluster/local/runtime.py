"""How a component runs: one runtime starts, records, waits for, rolls back and stops every process we start.

What a component *is* (its executable, arguments, files, port and readiness) is a :class:`Launch`, built
by one function per component: the control plane's in :mod:`gpucluster.local.components`, each add-on's
in its own module. How it runs is the same for all of them, here:

- :func:`start` takes groups of launches. Each launch of a group gets its files written (atomically), its
  port checked free, and is spawned (:func:`gpucluster.procs.spawn`) and recorded in a :class:`Ledger`
  right away; then each is waited for until ready, and the next group starts once the whole group is.
  When anything fails, or the user presses Ctrl-C, every process this call started is stopped (newest
  first), the ledger forgets them, and the error goes on.
- Readiness is a list of :class:`Check`: the health URL answering HTTP 200 (:func:`http`), then any
  other probe (a file the process writes). A process that exits while it is waited for fails at once,
  with the tail of its log; one that is not ready in time fails naming the check and what it last saw.
- :func:`stop_all` stops recorded processes by identity (:meth:`gpucluster.procs.Component.ours`), never
  a pid that now belongs to another process.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from gpucluster import atomic, procs
from gpucluster.errors import LocalWorldError
from gpucluster.poll import Deadline, wait_for
from gpucluster.procs import HOST, Component

Say = Callable[[str], None]
#: A readiness probe: (ready, what it saw: a body, an error, "not written yet").
Probe = Callable[[], tuple[bool, str]]


@dataclass(frozen=True)
class Check:
    """One readiness condition: ``what`` must hold ("healthy (URL)", "… written to FILE") and the probe that tells."""

    what: str
    probe: Probe


def http(url: str, tls: ssl.SSLContext | None = None) -> Check:
    """``url`` answers HTTP 200 (``tls``: the client context for an https URL)."""
    return Check(f"healthy ({url})", lambda: procs.probe(url, tls))


@dataclass(frozen=True)
class File:
    """A file a component reads, written before it starts (``mode`` 0600 for anything holding a key)."""

    path: Path
    text: str
    mode: int | None = None


@dataclass(frozen=True)
class Launch:
    """What one component is: how to start it and how to tell it is ready.

    ``health_url`` is recorded (``status`` probes it) and is the first readiness check (with ``tls`` for
    https); ``ready`` adds checks after it. ``env`` changes the inherited environment (None removes a
    variable). ``label`` names it in progress lines (default: ``name``).
    """

    name: str
    binary: Path
    args: tuple[str, ...]
    log: Path
    port: int = 0
    health_url: str = ""
    tls: ssl.SSLContext | None = None
    ready: tuple[Check, ...] = ()
    files: tuple[File, ...] = ()
    env: Mapping[str, str | None] = field(default_factory=dict)
    label: str = ""

    @property
    def checks(self) -> tuple[Check, ...]:
        return ((http(self.health_url, self.tls),) if self.health_url else ()) + self.ready


class Ledger(Protocol):
    """Where the records of started processes are kept (the world's ``state.json``, an add-on's record)."""

    def record(self, comp: Component) -> None:
        """Keep ``comp`` (called right after its spawn, before it is waited for)."""

    def forget(self) -> None:
        """Drop what this start recorded (called after a roll-back stopped all of it)."""


def write_files(files: Iterable[File]) -> None:
    for f in files:
        f.path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write(f.path, f.text, mode=f.mode)


def spawn(launch: Launch) -> Component:
    """Write ``launch``'s files, check its port is free, start it; its record."""
    write_files(launch.files)
    if launch.port:
        procs.require_free(launch.port, launch.name)
    return procs.spawn(launch.name, launch.binary, list(launch.args), launch.log, launch.health_url, launch.port,
                       env=dict(launch.env))


def wait_ready(comp: Component, checks: Sequence[Check], timeout: float) -> None:
    """Wait until every check passes, in order, within ``timeout`` in all; LocalWorldError naming what did not.

    Liveness is :func:`gpucluster.procs.gone`, not ``ours()``: right after a spawn ``/proc/<pid>/cmdline``
    is briefly empty (mid-exec), which a busy machine would read as "exited".
    """
    deadline = Deadline.after(timeout)
    for check in checks:
        def step(check: Check = check) -> tuple[bool, str]:
            if procs.gone(comp.pid):
                raise LocalWorldError(f"{comp.name} exited during start-up (waiting for: {check.what}); see its "
                                      f"log: {comp.log}\n{procs.tail(comp.log)}")
            return check.probe()

        wait_for(f"{comp.name}: {check.what}", step, timeout=deadline, every=0.25, error=LocalWorldError,
                 done=lambda seen: seen[0],
                 detail=lambda seen: f"{seen[1] or 'no answer'}; see its log: {comp.log}\n{procs.tail(comp.log)}")


def start(groups: Iterable[Sequence[Launch]], ledger: Ledger, *, timeout: float, say: Say | None = None,
          rollback: bool = True) -> dict[str, Component]:
    """Start ``groups`` in order (see the module docstring); the records of what was started, by name.

    ``timeout`` bounds each component's readiness. ``rollback=False`` leaves what started running when a
    later one fails (restarting parts of a world that keeps its data).
    """
    started: list[Component] = []
    try:
        for group in groups:
            spawned = []
            for launch in group:
                t0 = time.monotonic()
                comp = spawn(launch)
                started.append(comp)
                ledger.record(comp)
                spawned.append((launch, comp, t0))
            for launch, comp, t0 in spawned:
                wait_ready(comp, launch.checks, timeout)
                if say:
                    where = f" on {HOST}:{comp.port}" if comp.port else f" (pid {comp.pid})"
                    say(f"✓ {launch.label or comp.name} ready{where} ({time.monotonic() - t0:.1f} s)")
    except BaseException as err:
        if rollback:
            _roll_back(started, ledger, err)
        raise
    return {c.name: c for c in started}


def _roll_back(started: list[Component], ledger: Ledger, err: BaseException) -> None:
    try:
        stop_all(reversed(started))
    except LocalWorldError as stuck:  # the records stay, so `down` can try again
        err.add_note(f"rolling back: {stuck}")
        return
    ledger.forget()


def stop_all(comps: Iterable[Component]) -> list[str]:
    """Stop each recorded process still ours, one after the other in the order given (callers pass newest
    first); the names stopped. See :func:`stop_groups`."""
    return stop_groups([[c] for c in comps])


def stop_groups(groups: Iterable[Iterable[Component]]) -> list[str]:
    """Stop the recorded processes still ours, group after group; the names stopped, in order.

    The members of a group are signalled together and waited for together (:func:`procs.stop_many`), so
    a group takes its slowest member's shutdown, not the sum. Groups go one after the other: a process
    whose graceful shutdown needs another (the API server removes its endpoint lease from etcd as it
    stops, and waits far past its grace while etcd stops beside it) is in a group before that one.
    A record whose pid is gone or now another process's is skipped (a finished child of ours is reaped).
    One that will not stop is named in a LocalWorldError after the others were stopped.
    """
    stopped, stuck = [], []
    for group in groups:
        ours = []
        for comp in group:
            if comp.ours():
                ours.append(comp)
            else:
                procs.reap(comp.pid)  # a crashed child of this very process stays a zombie otherwise
        left = set(procs.stop_many([c.pid for c in ours]))
        stopped += [c.name for c in ours if c.pid not in left]
        stuck += [f"{c.name} (pid {c.pid})" for c in ours if c.pid in left]
    if stuck:
        raise LocalWorldError(f"could not stop {', '.join(stuck)}; stop it by hand")
    return stopped
