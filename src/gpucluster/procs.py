"""Processes we start and their records: loopback ports, spawning daemons, health probes, stopping by pid.

These are the primitives; :mod:`gpucluster.local.runtime` runs components with them (start, record, wait until
ready, roll back, stop).

A :class:`Component` records one process (pid, argv, log, health URL, and what identifies it: its start
time and executable). Anything gpucluster starts in the background — the local control plane, its
add-ons — is recorded the same way, and is only ever treated as ours while the process with that pid
is the one we started (:meth:`Component.ours`): pids get reused.

Upstream facts (Linux ``Documentation/filesystems/proc.rst``, table 1-4 "Contents of the stat files",
and "Miscellaneous kernel statistics in /proc/stat"): ``/proc/<pid>/stat`` field 22 ``start_time`` is
when the process started, in clock ticks after boot (``sysconf(_SC_CLK_TCK)``); the second field, the
command name, is in parentheses and may itself hold spaces or parentheses, so fields are counted after
the last ``)``. ``/proc/stat``'s ``btime`` is the boot time in seconds since the epoch.
``/proc/<pid>/exe`` links to the executable; once that file is removed or replaced the link reads
``<path> (deleted)`` (seen on the build machine's kernel).
"""

from __future__ import annotations

import errno
import os
import random
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from gpucluster.errors import LocalWorldError
from gpucluster.poll import poll

HOST = "127.0.0.1"


#: Seconds a process of an older record may seem to have started after the record was written: ``btime``
#: is whole seconds, ``start_time`` whole clock ticks.
CLOCK_SLACK_S = 2.0


@dataclass
class Component:
    """One process we started.

    ``start_time`` (``/proc/<pid>/stat`` field 22: clock ticks after boot) and ``exe`` (``/proc/<pid>/exe``)
    are read right after the spawn. Records written before gpucluster kept them have 0 and "" there.
    """

    name: str
    pid: int
    binary: str
    args: list[str]
    log: str
    started_at: float
    port: int = 0
    health_url: str = ""
    start_time: int = 0
    exe: str = ""

    def ours(self) -> bool:
        """True while ``pid`` runs (not a zombie) and is the very process we started, never a reused pid.

        It is when its start time and executable are the recorded ones. A record of an earlier version
        (no start time) is matched as strictly as its fields allow: the command line is exactly
        ``binary`` + ``args``, the executable is ``binary`` resolved, and the process started no later
        than the record says it was started (``started_at``): a pid belongs to one running process at a
        time, so a process that already ran with this pid then is the one we started.
        """
        found = identity(self.pid)
        if found is None:
            return False
        start, exe = found
        if self.start_time:
            return start == self.start_time and _same_exe(exe, self.exe)
        return (cmdline(self.pid) == [self.binary, *self.args]
                and _same_exe(exe, str(Path(self.binary).resolve()))
                and _started_at(start) <= self.started_at + CLOCK_SLACK_S)


def identity(pid: int) -> tuple[int, str] | None:
    """(start time in clock ticks after boot, executable) of a running process; None if gone, a zombie, unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        exe = os.readlink(f"/proc/{pid}/exe")
        if fields[0] == "Z":
            return None
        return int(fields[19]), exe  # field 22; fields[0] is field 3 (the state)
    except (OSError, IndexError, ValueError):
        return None


def cmdline(pid: int) -> list[str]:
    """The arguments of ``pid`` ([] when gone or unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    parts = raw.split(b"\0")
    if parts[-1] == b"":  # the kernel ends every argument with a NUL
        parts.pop()
    return [a.decode(errors="replace") for a in parts]


def _same_exe(now: str, recorded: str) -> bool:
    # A binary replaced on disk after the start (a toolchain rebuild) reads "<path> (deleted)"; the pid and
    # start time already pin the process, the path says it was started from the recorded file.
    return bool(recorded) and Path(now.removesuffix(" (deleted)")) == Path(recorded)


def _started_at(ticks: int) -> float:
    """Seconds since the epoch at which a process with ``start_time`` ``ticks`` started."""
    boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                if line.startswith("btime "))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LISTEN_FLOOR = 10000  # below: ports that well-known and registered services are configured on


def ephemeral_range(path: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections (Linux's default when unreadable).

    Linux ``Documentation/networking/ip-sysctl.rst``, ``ip_local_port_range``: "Defines the local port
    range that is used by TCP and UDP to choose the local port"; default 32768 60999.
    """
    try:
        low, high = (int(x) for x in path.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def _bind_error(port: int) -> OSError | None:
    """What binding ``port`` on 127.0.0.1 as a server would fail with now, or None.

    Bound as the servers themselves bind (Go sets SO_REUSEADDR): connections of a stopped server that
    linger in TIME_WAIT do not make its port busy.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as err:
            return err
        return None


def port_free(port: int) -> bool:
    """Whether a server could listen on ``port`` of 127.0.0.1 now."""
    return _bind_error(port) is None


def free_port(ephemeral: tuple[int, int] | None = None) -> int:
    """A TCP port on 127.0.0.1 that nothing uses right now, outside the kernel's ephemeral range.

    A server restarted on its recorded port (a world's API server after a crash) must find it free. A port
    from the ephemeral range (what binding port 0 gives) is free for anyone's next outgoing connection to
    take as its local port while the server is down, and an established connection keeps it from being
    listened on again (CI saw exactly that: "port 56305 for kube-apiserver is in use"). So ports come from
    below that range (or above it, where the range leaves too little below), picked at random and checked
    free; binding port 0 is the last resort when the range covers nearly every port.
    """
    low, high = ephemeral if ephemeral is not None else ephemeral_range()
    windows = [(a, b) for a, b in ((LISTEN_FLOOR, low - 1), (high + 1, 65535)) if b - a >= 1000]
    rng = random.SystemRandom()
    for _ in range(100 if windows else 0):
        a, b = rng.choice(windows)
        port = rng.randint(a, b)
        if port_free(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def free_ports(names: Iterable[str], pinned: Mapping[str, int] | None = None) -> dict[str, int]:
    """A distinct port on 127.0.0.1 for each of ``names``: ``pinned`` ones checked free (:func:`require_free`),
    the others free right now and different from each other and from the pinned ones."""
    ports: dict[str, int] = {}
    for name, port in (pinned or {}).items():
        require_free(port, name)
        ports[name] = port
    for name in names:
        while name not in ports:
            port = free_port()
            if port not in ports.values():
                ports[name] = port
    return ports


def require_free(port: int, what: str) -> None:
    """Raise a clear error when ``port`` (pinned by the user) is already taken on 127.0.0.1."""
    err = _bind_error(port)
    if err is not None:
        reason = "is in use" if err.errno == errno.EADDRINUSE else f"cannot be bound ({err.strerror})"
        raise LocalWorldError(
            f"port {port} for {what} {reason} on {HOST}; pick another port or leave it unset to get a free one"
        )


def spawn(name: str, binary: Path, args: list[str], log: Path, health_url: str = "", port: int = 0,
          env: dict[str, str | None] | None = None) -> Component:
    """Start ``binary args`` detached (own session, output to ``log``) and describe it.

    ``env`` changes the inherited environment: a value sets a variable, None removes it.
    """
    environ = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as fh:
        fh.write(f"\n==> {time.strftime('%Y-%m-%dT%H:%M:%S')} {binary} {' '.join(args)}\n".encode())
        fh.flush()
        proc = subprocess.Popen(
            [str(binary), *args],
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # survives the CLI; Ctrl-C in the terminal does not reach it
            close_fds=True,
            env=environ,
        )
    start, exe = _after_exec(proc.pid) or (0, "")
    return Component(
        name=name,
        pid=proc.pid,
        binary=str(binary),
        args=args,
        log=str(log),
        started_at=time.time(),
        port=port,
        health_url=health_url,
        start_time=start,
        exe=exe,
    )


def _after_exec(pid: int, timeout: float = 5.0) -> tuple[int, str] | None:
    """:func:`identity` of a child Popen just started, read once its execve has finished.

    Popen returns as soon as the child is inside execve (the vfork is released), before the kernel has
    switched it to the new program's memory: for that moment /proc still shows the old executable and an
    empty command line (seen under load: 98 of 200 spawns read an empty one). An exec is finished once the
    command line reads non-empty; a child that already ended gives None.
    """
    deadline = time.monotonic() + timeout
    while not cmdline(pid) and identity(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.001)
    return identity(pid)


def reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is a finished child of ours; otherwise do nothing."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def gone(pid: int) -> bool:
    """True when ``pid`` no longer runs: every one of its threads has ended, so its ports are free.

    For a child of ours that means reaped. /proc shows a Go process as ``Z`` as soon as its main
    thread ends, while its other threads are still exiting and it still holds its files and ports;
    until they end, ``/proc/<pid>/task`` lists them beside the main thread.
    """
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        return waited == pid
    except ChildProcessError:
        pass  # not our child (started by an earlier `up`): its parent reaps it
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        threads = os.listdir(f"/proc/{pid}/task")
    except (OSError, IndexError):
        return True
    return state == "Z" and threads == [str(pid)]


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[:1] == ["Z"]
    except OSError:
        return False


def wait_exited(pid: int, timeout: float) -> bool:
    """Wait until a process that died (``Z``: its main thread ended) has ended every thread; reap it if ours.

    True once nothing of it runs; a pid that is not a zombie (ended and reaped, or reused by a process
    that is not ours) is not waited for. A SIGKILLed Go server keeps its listening socket until its
    last thread is gone, so a restart on the same port waits here first.
    """
    return poll(lambda: gone(pid) or not _zombie(pid), timeout=timeout, every=0.05)


def wait_gone(pid: int, timeout: float) -> bool:
    """Wait until ``pid``, which was just sent SIGKILL, has ended every thread (reaped, if ours).

    Unlike :func:`wait_exited` it waits for a process that still shows as running: between the signal and
    its main thread turning ``Z``, a large Go server may still answer nothing yet hold its listening
    socket (CI saw a bind on a just-killed API server's port fail with EADDRINUSE in that window).
    """
    return poll(lambda: gone(pid), timeout=timeout, every=0.05)


def stop(pid: int, grace: float = 10.0) -> bool:
    """SIGTERM ``pid``, then SIGKILL after ``grace`` seconds; True when it is gone."""
    return not stop_many([pid], grace)


def stop_many(pids: Sequence[int], grace: float = 10.0) -> list[int]:
    """SIGTERM every pid in ``pids`` (in that order), wait for them together, SIGKILL those still running
    after ``grace`` seconds; the pids that still run after that (none, normally).

    Signalled together, a world's processes shut down side by side: the wait is the slowest one's
    graceful shutdown, not the sum of all of them.
    """
    left = list(dict.fromkeys(pids))
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        poll(partial(_all_gone, tuple(left)), timeout=wait, every=0.05)
        left = [p for p in left if not gone(p)]
        if not left:
            break
    return left


def _all_gone(pids: Sequence[int]) -> bool:
    return all(gone(p) for p in pids)


def find_leftovers(state_dir: Path, executables: Iterable[Path], under: Iterable[str] | None = None) -> list[int]:
    """Pids of processes running one of ``executables`` whose arguments name a path inside ``state_dir``.

    Used when the records are lost, corrupt or stale, so a crashed run can still be stopped by pid.
    Executables are compared as resolved paths. Paths in the arguments (``PATH`` or ``--flag=PATH``)
    are compared with ``state_dir`` component by component, so ``/x/w`` never matches ``/x/w2``; with
    ``under``, only paths below those top-level names of ``state_dir`` count (a world kept in a
    subfolder of another world's folder is not that world's).
    """
    root = Path(state_dir).resolve()
    wanted = {Path(p).resolve() for p in executables}
    children = None if under is None else set(under)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        ident = identity(pid)
        if ident is None or Path(ident[1].removesuffix(" (deleted)")) not in wanted:
            continue
        if any(_names_inside(arg, root, children) for arg in cmdline(pid)[1:]):
            found.append(pid)
    return sorted(found)


def _names_inside(arg: str, root: Path, children: set[str] | None) -> bool:
    for text in (arg, arg.split("=", 1)[1] if "=" in arg else ""):
        if not text.startswith("/"):
            continue
        parts = Path(os.path.normpath(text)).parts
        n = len(root.parts)
        if parts[:n] == root.parts and (children is None or (len(parts) > n and parts[n] in children)):
            return True
    return False


def tls_context(ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


def probe(url: str, ctx: ssl.SSLContext | None, timeout: float = 2.0) -> tuple[bool, str]:
    """GET ``url``; (True, body) on HTTP 200, else (False, what went wrong)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as resp:
            return resp.status == 200, resp.read(2000).decode(errors="replace")
    except urllib.error.HTTPError as err:
        return False, f"HTTP {err.code}: {err.read(500).decode(errors='replace').strip()}"
    except (urllib.error.URLError, OSError) as err:
        return False, str(getattr(err, "reason", err))


def tail(log: str | Path, lines: int = 12) -> str:
    """The last lines of a log, indented, for error messages."""
    try:
        text = Path(log).read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "\n".join("    " + line[:300] for line in text)
