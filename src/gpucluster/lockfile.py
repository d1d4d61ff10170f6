"""One writer per state folder: an advisory lock that says who holds it.

``hold(folder, what)`` takes ``<folder>/.lock`` with ``flock`` (released by the kernel when the process
ends, however it ends) and writes the holder into it: pid, command line, start time. A second
process gets :class:`~gpucluster.errors.StateLocked` naming that holder instead of racing on the
same state.

The thread that holds a folder's lock may take it again (a command that holds the local world for its
whole run calls ``World.up`` inside): the inner ``hold`` passes through and the lock is released when
the outermost one ends. Another thread of the same process is refused like another process.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpucluster.errors import StateLocked

LOCK_FILE = ".lock"
#: Folders this process holds the lock of: resolved path -> [holding thread, nesting depth].
_HELD: dict[Path, list[int]] = {}


def holder(folder: Path) -> dict[str, object]:
    """Who holds (or last held) the lock of ``folder`` ({} when unknown)."""
    try:
        data = json.loads((Path(folder) / LOCK_FILE).read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def written_by_us(folder: Path) -> bool:
    """True when ``<folder>/.lock`` holds what :func:`hold` writes (how an earlier version's state folder is known)."""
    info = holder(folder)
    return (set(info) == {"pid", "command", "started"} and isinstance(info["pid"], int)
            and isinstance(info["command"], str) and isinstance(info["started"], (int, float)))


def describe(info: dict[str, object]) -> str:
    if not info:
        return "another process"
    since = time.strftime("%H:%M:%S", time.localtime(float(str(info.get("started", 0)))))
    return f"pid {info.get('pid')} (`{info.get('command', '?')}`, since {since})"


@contextmanager
def hold(folder: Path, what: str) -> Iterator[None]:
    """Hold the lock of ``folder`` for the duration; ``what`` names the state in the error."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    key = folder.resolve()
    if key in _HELD and _HELD[key][0] == threading.get_ident():
        _HELD[key][1] += 1
        try:
            yield
        finally:
            _HELD[key][1] -= 1
        return
    if key in _HELD:
        raise StateLocked(f"{describe(holder(folder))} is working on {what} ({folder}) in another thread of this "
                          "process; wait for it to finish")
    path = folder / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    with os.fdopen(fd, "r+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateLocked(f"{describe(holder(folder))} is working on {what} ({folder}); wait for it to finish, "
                              "or stop it and run again") from None
        argv = " ".join(["gpucluster", *sys.argv[1:]]) if sys.argv and "gpucluster" in sys.argv[0] else \
            " ".join(sys.argv)
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "command": argv[:200], "started": time.time()}) + "\n")
        fh.flush()
        _HELD[key] = [threading.get_ident(), 1]
        try:
            yield
        finally:
            del _HELD[key]
