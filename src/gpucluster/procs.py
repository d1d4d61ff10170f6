"""Processes we start and their records: loopback ports, spawning daemons, health probes, stopping by pid.

A :class:`Component` records one process (pid, argv, log, health URL). Anything gpucluster starts in
the background — the local control plane, its add-ons — is recorded the same way, and is only ever
treated as ours while ``/proc/<pid>/cmdline`` still shows the binary and the state folder we started
it with (pids get reused).
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from gpucluster.errors import LocalWorldError

HOST = "127.0.0.1"


@dataclass
class Component:
    """One process we started."""

    name: str
    pid: int
    binary: str
    args: list[str]
    log: str
    started_at: float
    port: int = 0
    health_url: str = ""

    def cmdline_matches(self, state_dir: Path) -> bool:
        """True when ``pid`` is alive and is still this process (not a reused pid)."""
        try:
            raw = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        argv = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
        if not argv or Path(argv[0]).name != Path(self.binary).name:
            return False
        return any(str(state_dir) in a for a in argv[1:])

    def is_zombie(self) -> bool:
        """True for a dead process not yet reaped (``/proc/<pid>/stat`` state ``Z``)."""
        return _zombie(self.pid)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def require_free(port: int, what: str) -> None:
    """Raise a clear error when ``port`` (pinned by the user) is already taken on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the servers themselves bind (Go sets SO_REUSEADDR): connections of a stopped server that
        # linger in TIME_WAIT do not make its port busy.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as err:
            reason = "is in use" if err.errno == errno.EADDRINUSE else f"cannot be bound ({err.strerror})"
            raise LocalWorldError(
                f"port {port} for {what} {reason} on {HOST}; pick another port or leave it unset to get a free one"
            ) from None


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
    return Component(
        name=name,
        pid=proc.pid,
        binary=str(binary),
        args=args,
        log=str(log),
        started_at=time.time(),
        port=port,
        health_url=health_url,
    )


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
    deadline = time.monotonic() + timeout
    while not gone(pid) and _zombie(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def stop(pid: int, grace: float = 10.0) -> bool:
    """SIGTERM ``pid``, then SIGKILL after ``grace`` seconds; True when it is gone."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if gone(pid):
                return True
            time.sleep(0.05)
    return gone(pid)


def find_leftovers(state_dir: Path, binaries: set[str]) -> list[int]:
    """Pids of processes running one of ``binaries`` with ``state_dir`` in their arguments.

    Used when state.json is lost or corrupt, so a crashed run can still be stopped by pid.
    """
    found = []
    marker = str(state_dir)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            continue
        if argv and Path(argv[0]).name in binaries and any(marker in a for a in argv[1:]):
            found.append(int(entry.name))
    return sorted(found)


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


def wait_healthy(comp: Component, ca: Path, cert: Path, key: Path, state_dir: Path, timeout: float) -> None:
    """Poll ``comp.health_url`` until 200; raise naming the component and its log on failure."""
    ctx = tls_context(ca, cert, key) if comp.health_url.startswith("https") else None
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        # Not cmdline_matches: right after spawn /proc/<pid>/cmdline is briefly empty (mid-exec), which
        # would read as "exited" on a busy machine.
        if gone(comp.pid):
            raise LocalWorldError(f"{comp.name} exited during start-up; see its log: {comp.log}\n{tail(comp.log)}")
        ok, last = probe(comp.health_url, ctx)
        if ok:
            return
        time.sleep(0.25)
    raise LocalWorldError(
        f"{comp.name} did not become healthy within {timeout:.0f} s ({comp.health_url}: {last}); "
        f"see its log: {comp.log}\n{tail(comp.log)}"
    )


def tail(log: str | Path, lines: int = 12) -> str:
    """The last lines of a log, indented, for error messages."""
    try:
        text = Path(log).read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "\n".join("    " + line[:300] for line in text)
