"""procs: a process whose main thread ended still holds its ports until its last thread ends.

A SIGKILLed Go server shows ``Z`` in /proc while its other threads are still exiting (CI saw `up`
restart kube-apiserver on its old port and find the port busy). These tests make that state on
purpose: a Python process binds a port, starts a thread that blocks on stdin, and ends its main
thread with pthread_exit, so it stays a zombie holding the port until the test closes its stdin.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpucluster import procs
from gpucluster.errors import LocalWorldError

HOLDER = textwrap.dedent(
    """
    import ctypes, socket, sys, threading
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen()
    print(s.getsockname()[1], flush=True)
    threading.Thread(target=sys.stdin.read).start()
    ctypes.CDLL(None).pthread_exit(None)
    """
)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]


def _wait_zombie(pid: int) -> None:
    # pthread_exit in the main thread happens right after the port is printed; the stat file says when.
    for _ in range(2000):
        if _state(pid) == "Z":
            return
        os.sched_yield()
    raise AssertionError(f"pid {pid} never became a zombie: {_state(pid)}")


def test_a_child_zombie_with_threads_left_is_not_gone_and_holds_its_port() -> None:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    port = int(proc.stdout.readline())
    _wait_zombie(proc.pid)
    assert len(os.listdir(f"/proc/{proc.pid}/task")) == 2
    assert not procs.gone(proc.pid)
    with pytest.raises(LocalWorldError, match=f"port {port} for kube-apiserver is in use"):
        procs.require_free(port, "kube-apiserver")
    assert not procs.wait_exited(proc.pid, timeout=0.2)  # the thread still blocks on stdin
    proc.stdin.close()  # the last thread ends
    assert procs.wait_exited(proc.pid, timeout=30)
    assert not Path(f"/proc/{proc.pid}").exists()  # reaped by wait_exited (our child)
    procs.require_free(port, "kube-apiserver")


def test_a_zombie_of_another_parent_is_gone_only_when_its_last_thread_ended() -> None:
    # The holder's parent is a shell that waits for it, so it is not our child (as a component started
    # by an earlier `up` is not): only /proc can tell whether it still runs.
    shell = subprocess.Popen(
        ["/bin/sh", "-c", f'{sys.executable} -c "$0"; cat', HOLDER],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    assert shell.stdout is not None and shell.stdin is not None
    port = int(shell.stdout.readline())
    (holder,) = (int(p) for p in Path(f"/proc/{shell.pid}/task/{shell.pid}/children").read_text().split())
    _wait_zombie(holder)
    with pytest.raises(ChildProcessError):
        os.waitpid(holder, os.WNOHANG)
    assert not procs.gone(holder)
    assert not procs.wait_exited(holder, timeout=0.2)
    shell.stdin.close()  # the holder's thread reads EOF and ends; the shell reaps it, then `cat` ends
    assert procs.wait_exited(holder, timeout=30)
    procs.require_free(port, "kube-apiserver")
    assert shell.wait(timeout=30) == 0


def test_wait_exited_does_not_wait_for_a_live_process_that_is_not_a_zombie() -> None:
    # A recorded pid reused by an unrelated running process: nothing to wait for.
    with subprocess.Popen(["/bin/sh", "-c", "read x"], stdin=subprocess.PIPE) as proc:
        assert procs.wait_exited(proc.pid, timeout=0)
        assert proc.poll() is None
        proc.stdin.close()  # type: ignore[union-attr]
