"""Bring the local control plane up, report on it, and tear it down.

``World(state_dir).up()`` starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
kwok on 127.0.0.1 with fresh certificates, waits until each is healthy and writes an admin
kubeconfig. A previous run that crashed (dead or reused pids) is cleaned up first; one that is
running and healthy is left alone. ``down()`` stops every process it started, by pid.

The state folder is ours only with its marker (:mod:`gpucluster.ownership`, kind ``local-world``): ``up``
marks a missing or empty folder and refuses one holding anything else; ``down`` and a fresh ``up``
remove only :data:`OWNED`, and only from a marked folder. A folder an earlier gpucluster made is known
by holding nothing but those names (plus ``.lock`` and ``pulumi``) and our lock file (in it or in
``pulumi/``) or a ``state.json`` of our format, and is marked then. :meth:`World.hold` keeps the world
for a whole command (``gpucluster up``/``down``, ``local up``/``down``, ``local monitoring up``), so
another command that would change it stops at once, naming the holder.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpucluster import lockfile, ownership, procs
from gpucluster.errors import GpuclusterError, LocalWorldError
from gpucluster.local import addons, components, pki, runtime
from gpucluster.local.state import FORMAT, STATE_FILE, State, default_state_dir
from gpucluster.procs import Component
from gpucluster.toolchain import locate, path_of
from gpucluster.toolchain.versions import KUBERNETES

#: Files and folders ``up`` creates in the state directory; ``down`` removes exactly these (add-ons
#: keep theirs under ``addons/``, see :mod:`gpucluster.local.addons`).
OWNED = ("state.json", "pki", "etcd-data", "logs", "kubeconfig", "kubeconfigs", "scheduler.yaml", "kwok.yaml",
         addons.FOLDER, "etcd-data.before-restore", "etcd-data.restoring")  # the last two: local/etcdsnap.py


def _earlier_world(root: Path) -> bool:
    """An earlier version's world: our lock file in it or in its stacks' folder, or a state.json of our format."""
    if lockfile.written_by_us(root) or lockfile.written_by_us(root / "pulumi"):
        return True
    try:
        data = json.loads((root / STATE_FILE).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT


#: The marker kind of a world's state folder (what it may hold besides OWNED: its lock, the stacks' state).
FOLDER = ownership.Kind("local-world", "a local world's state folder",
                        frozenset({*OWNED, "pulumi", f"{STATE_FILE}.tmp"}), _earlier_world)

#: Binary (toolchain name) of each component.
BINARIES = {name: name for name in components.ORDER}


def missing_tools(extra: tuple[str, ...] = ("crds",)) -> list[str]:
    """Toolchain entries a local world needs (its components plus ``extra``) that are not built."""
    return [name for name in (*BINARIES.values(), *extra) if locate(name) is None]


def executables() -> list[Path]:
    """The built binaries of the world's components (what a leftover process of ours runs)."""
    return [p for p in (locate(name) for name in BINARIES.values()) if p is not None]


Say = Callable[[str], None]


@dataclass
class ComponentStatus:
    """What ``status`` reports for one component."""

    name: str
    pid: int
    running: bool
    healthy: bool
    port: int
    uptime_s: float
    log: str
    detail: str = ""


@dataclass
class UpResult:
    """Outcome of ``up``: the state, and what it had to do.

    ``already_running``: nothing changed. ``fresh``: a new world (new certificates, empty etcd) was
    created. Otherwise ``restarted`` names the components that had died and were started again on the
    same data; ``recovered`` names processes of a discarded world that were stopped (``reset``).
    """

    state: State
    already_running: bool
    seconds: float = 0.0
    recovered: list[str] = field(default_factory=list)
    fresh: bool = True
    restarted: list[str] = field(default_factory=list)


class World:
    """The local control plane rooted at one state directory."""

    def __init__(
        self,
        state_dir: Path | None = None,
        *,
        ports: dict[str, int] | None = None,
        timeout: float = 90.0,
        say: Say | None = None,
    ) -> None:
        self.dir = (state_dir or default_state_dir()).expanduser().resolve()
        self.pinned = dict(ports or {})
        self.timeout = timeout
        self.say: Say = say or (lambda _msg: None)
        unknown = set(self.pinned) - set(components.PORT_NAMES)
        if unknown:
            raise LocalWorldError(f"unknown port name(s) {sorted(unknown)}; known: {', '.join(components.PORT_NAMES)}")

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def pki(self) -> pki.Pki:
        return pki.Pki(self.dir / "pki")

    def state(self) -> State | None:
        """The recorded state (None when nothing was started); corrupt state.json raises."""
        return State.load(self.dir)

    # -- status -------------------------------------------------------------------------------
    def status(self) -> list[ComponentStatus]:
        """One entry per recorded component (empty when nothing was started)."""
        state = self.state()
        if state is None:
            return []
        alive = state.alive()
        out = []
        for name in components.ORDER:
            comp = state.components.get(name)
            if comp is None:
                continue
            healthy, detail = False, "not running"
            if alive[name]:
                healthy, detail = self._probe(comp)
            uptime = time.time() - comp.started_at if alive[name] else 0.0
            out.append(
                ComponentStatus(
                    name,
                    comp.pid,
                    alive[name],
                    healthy,
                    comp.port,
                    uptime,
                    comp.log,
                    "" if healthy else detail.strip()[:200],
                )
            )
        return out

    def healthy(self) -> bool:
        """True when every component is recorded, running and healthy."""
        report = self.status()
        return len(report) == len(components.ORDER) and all(c.healthy for c in report)

    def _layout(self, ports: dict[str, int]) -> components.Layout:
        return components.Layout(self.dir, self.pki, ports)

    def _probe(self, comp: Component) -> tuple[bool, str]:
        return self._check(comp).probe()

    def _check(self, comp: Component) -> runtime.Check:
        """A recorded component's readiness: its health URL, probed with the admin client's TLS for https."""
        https = comp.health_url.startswith("https")
        tls = procs.tls_context(self.pki.ca, self.pki.cert("admin"), self.pki.key("admin")) if https else None
        return runtime.http(comp.health_url, tls)

    # -- up -----------------------------------------------------------------------------------
    def up(self, extra_tools: tuple[str, ...] = (), *, reset: bool = False) -> UpResult:
        """Start the control plane (or confirm it already runs); see the module docstring.

        A world that exists keeps its data: components that died are started again on the same
        certificates, ports and etcd data, and one that runs but answers its health probe slowly is
        waited for. Only ``reset`` discards a world (its etcd data with it) and starts a fresh one.
        ``extra_tools`` are toolchain entries the caller needs next (the operators' ``crds``): their
        absence is reported together with missing component binaries, before anything starts.
        """
        with self.hold():
            return self._up(extra_tools, reset)

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Keep this world for the duration: its folder made ours, then ``<state>/.lock`` held.

        Another command that would change the world (``up``, ``down``, ``--reset``, add-ons) stops at
        once with :class:`~gpucluster.errors.StateLocked` naming this one (pid, command line, since when)
        instead of pulling the world from under it. Re-entrant within one process.
        """
        ownership.claim(self.dir, FOLDER)
        with lockfile.hold(self.dir, "the local world"):
            yield

    def _up(self, extra_tools: tuple[str, ...], reset: bool) -> UpResult:
        start = time.monotonic()
        state = self.state()
        if state is not None and not reset and self.healthy():
            return UpResult(state, already_running=True, fresh=False)
        if state is not None and state.components and not reset:
            restarted = self._recover(state, self._binaries(extra_tools))
            return UpResult(state, already_running=False, seconds=time.monotonic() - start, fresh=False,
                            restarted=restarted)
        recovered = self._clean(state)
        if recovered:
            self.say(f"cleaned up a stale previous run ({', '.join(recovered)})")
        binaries = self._binaries(extra_tools)
        ports = procs.free_ports(components.PORT_NAMES, self.pinned)
        self.dir.mkdir(parents=True, exist_ok=True)
        pki.generate(self.dir / "pki", components.SERVICE_IP)
        layout = self._layout(ports)
        runtime.write_files([components.kubeconfig_file(layout, "admin")])
        state = State(dir=self.dir, ports=ports, kubernetes_version=KUBERNETES)
        state.save()
        launches = [[components.BUILDERS[name](layout, binaries[name]) for name in group]
                    for group in components.GROUPS]
        runtime.start(launches, _Records(state), timeout=self.timeout, say=self.say)
        return UpResult(state, already_running=False, seconds=time.monotonic() - start, recovered=recovered)

    def _recover(self, state: State, binaries: dict[str, Path]) -> list[str]:
        """Bring an existing world back without losing its data; returns the components restarted.

        Running components get the full start-up timeout to answer their health probe (a busy machine
        answers slowly; that is no reason to discard anything). Dead ones are started again, in
        order, with the arguments, ports and files they had.
        """
        alive = state.alive()
        for name in components.ORDER:
            comp = state.components.get(name)
            if comp is not None and alive.get(name):
                try:
                    runtime.wait_ready(comp, [self._check(comp)], self.timeout)
                except LocalWorldError as err:
                    raise LocalWorldError(
                        f"the local world at {self.dir} runs but {name} is not healthy: {err}\n"
                        "Its data is kept. `gpucluster local down` stops it; `gpucluster local up --reset` "
                        "starts a fresh world (its etcd data is deleted)."
                    ) from None
        restarted = []
        layout = self._layout(state.ports)
        for name in components.ORDER:
            comp = state.components.get(name)
            if comp is not None and alive.get(name):
                continue
            port = state.ports[name]
            if comp is not None and not procs.wait_exited(comp.pid, self.timeout):
                raise LocalWorldError(
                    f"{name} (pid {comp.pid}) died but has not finished exiting after {self.timeout:.0f} s; "
                    f"its port {port} is still held. Run `gpucluster up` again once pid {comp.pid} is gone."
                )
            if port and not procs.port_free(port):
                raise LocalWorldError(
                    f"{name} died and cannot be restarted: its port {port} on {procs.HOST} is now taken by another "
                    "socket, and the world's kubeconfigs and components name that port. Its data is kept. Free the "
                    "port, or stop the world (`gpucluster local down`) and start a fresh one "
                    "(`gpucluster local up --reset`; its etcd data is deleted)."
                )
            launch = components.BUILDERS[name](layout, binaries[name])
            if comp is not None:  # as it ran: its recorded arguments, the files it already has
                launch = replace(launch, args=tuple(comp.args), files=())
            launch = replace(launch, label=f"{name} (restarted, data kept)")
            # Restarting one part never stops the others: a failure leaves the world as it was.
            runtime.start([[launch]], _Records(state), timeout=self.timeout, say=self.say, rollback=False)
            restarted.append(name)
        return restarted

    def _binaries(self, extra_tools: tuple[str, ...] = ()) -> dict[str, Path]:
        found: dict[str, Path] = {}
        missing: list[str] = []
        for name, tool in [*BINARIES.items(), *((t, t) for t in extra_tools)]:
            try:
                found[name] = path_of(tool)
            except GpuclusterError:
                missing.append(tool)
        if missing:
            raise LocalWorldError(
                f"missing binaries: {', '.join(missing)}. Run `gpucluster tools install` "
                "(builds them from Go modules; tens of minutes the first time)."
            )
        return found

    # -- down ---------------------------------------------------------------------------------
    def down(self, *, force: bool = False) -> list[str]:
        """Stop every process of this world by pid and remove its files; returns what was stopped.

        ``force`` also proceeds when state.json is corrupt (processes are then found by their
        executables and command lines, which name this state directory). A folder that holds files but
        is not a world's raises :class:`~gpucluster.errors.NotOurs`; a missing or empty one: nothing to do.
        """
        if not ownership.owned(self.dir, FOLDER):
            return []
        with self.hold():
            try:
                state = self.state()
            except LocalWorldError:
                if not force:
                    raise
                state = None
            return self._clean(state)

    def _clean(self, state: State | None) -> list[str]:
        """Stop what ``state`` lists (if still ours) and any leftovers; remove owned files."""
        stopped = addons.stop_all(self.dir)
        stopped += self._stop_all(state) if state else []
        for pid in procs.find_leftovers(self.dir, executables(), under=OWNED):
            procs.stop(pid)
            stopped.append(f"pid {pid}")
        ownership.remove(self.dir, FOLDER, OWNED)
        return stopped

    def stop_control_plane(self) -> list[str]:
        """Stop the control plane's processes, newest first, keeping their records: the next :meth:`up`
        starts them again as they ran (an etcd restore swaps the data directory in between)."""
        state = self.state()
        return self._stop_all(state) if state else []

    def _stop_all(self, state: State) -> list[str]:
        # Newest group first, each group's members together (the API server before etcd: see stop_groups).
        return runtime.stop_groups([state.components[n] for n in group if n in state.components]
                                   for group in reversed(components.GROUPS))


class _Records:
    """The world's ledger for the runtime: ``state.json``, rewritten as each component starts."""

    def __init__(self, state: State) -> None:
        self.state = state

    def record(self, comp: Component) -> None:
        self.state.components[comp.name] = comp
        self.state.save()

    def forget(self) -> None:
        """A fresh world that did not come up: nothing of it runs, its state.json goes (the rest with `down`)."""
        ownership.remove(self.state.dir, FOLDER, [STATE_FILE])
