"""procs: a process whose main thread ended still holds its ports until its last thread ends.

A SIGKILLed Go server shows ``Z`` in /proc while its other threads are still exiting (CI saw `up`
restart kube-apiserver on its old port and find the port busy). These tests make that state on
purpose: a Python process binds a port, starts a thread that blocks on stdin, and ends its main
thread with pthread_exit, so it stays a zombie holding the port until the test closes its stdin.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpucluster import procs
from gpucluster.errors import LocalWorldError
from gpucluster.poll import poll

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


def test_wait_gone_waits_for_a_killed_process_that_still_runs_until_its_last_thread_let_go_of_its_port() -> None:
    # Right after SIGKILL a process may not be a zombie yet while it still holds its socket: wait_exited
    # would not wait for it (above), wait_gone does.
    listener = HOLDER.replace("threading.Thread(target=sys.stdin.read).start()\n", "").replace(
        "ctypes.CDLL(None).pthread_exit(None)", "sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", listener], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    port = int(proc.stdout.readline())
    assert _state(proc.pid) != "Z"
    assert procs.wait_exited(proc.pid, timeout=0)  # what the test before this fix waited with
    assert not procs.wait_gone(proc.pid, timeout=0.2)  # running: not gone
    os.kill(proc.pid, signal.SIGKILL)
    assert procs.wait_gone(proc.pid, timeout=30)
    assert not Path(f"/proc/{proc.pid}").exists()  # reaped (our child)
    procs.require_free(port, "kube-apiserver")
    proc.stdin.close()
    proc.stdout.close()


# -- stopping a world's processes together --------------------------------------------------------------

# A process that, on SIGTERM, marks it got the signal and exits cleanly only once every sibling has got it
# too (a shutdown that needs the others signalled: the shape of "stopped together", not of a timing).
SIBLING = textwrap.dedent(
    """
    import os, signal, sys, time
    folder, me, n, stubborn = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    def term(*_):
        if stubborn:
            return
        open(os.path.join(folder, me + ".term"), "w").close()
        while len([f for f in os.listdir(folder) if f.endswith(".term")]) < n:
            time.sleep(0.01)
        open(os.path.join(folder, me + ".clean"), "w").close()
        os._exit(0)
    signal.signal(signal.SIGTERM, term)
    open(os.path.join(folder, me + ".ready"), "w").close()
    while True:
        time.sleep(1)
    """
)


def _siblings(tmp_path: Path, n: int, stubborn: int | None = None) -> list[subprocess.Popen]:
    kids = [subprocess.Popen([sys.executable, "-c", SIBLING, str(tmp_path), f"p{i}", str(n),
                              "1" if i == stubborn else "0"]) for i in range(n)]
    assert poll(lambda: len(list(tmp_path.glob("*.ready"))) == n, timeout=60, every=0.02)
    return kids


def test_stop_many_signals_every_process_before_waiting_so_each_shuts_down_cleanly(tmp_path: Path) -> None:
    kids = _siblings(tmp_path, 3)
    # One at a time (SIGTERM, wait for it, then the next) the first would never see its siblings signalled
    # and be SIGKILLed after the grace period, leaving no ".clean" mark.
    assert procs.stop_many([k.pid for k in kids], grace=30) == []
    assert sorted(f.name for f in tmp_path.glob("*.clean")) == ["p0.clean", "p1.clean", "p2.clean"]
    assert all(not Path(f"/proc/{k.pid}").exists() for k in kids)  # reaped: our children


def test_stop_many_kills_the_one_that_ignores_sigterm_and_still_lets_the_others_finish(tmp_path: Path) -> None:
    kids = _siblings(tmp_path, 3, stubborn=1)
    # p1 ignores SIGTERM: the other two wait for its ".term" mark, so all three are SIGKILLed after the grace.
    assert procs.stop_many([k.pid for k in kids], grace=0.5) == []
    assert all(not Path(f"/proc/{k.pid}").exists() for k in kids)
    assert sorted(f.name for f in tmp_path.glob("*.term")) == ["p0.term", "p2.term"]  # both got SIGTERM
    assert not list(tmp_path.glob("*.clean"))  # and neither exited on its own: SIGKILL ended all three


# -- ports a server can get back after it died ---------------------------------------------------------


def test_an_outgoing_connection_that_took_a_dead_servers_port_keeps_it_from_being_listened_on() -> None:
    """The kernel lets a connection take any free port of the ephemeral range as its local port, and a
    server's SO_REUSEADDR bind does not get past an established one: why world ports avoid that range."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.socket() as client:
            client.connect(server.getsockname())  # the kernel picks the client's local port
            taken = client.getsockname()[1]
            low, high = procs.ephemeral_range()
            assert low <= taken <= high
            assert not procs.port_free(taken)
            with pytest.raises(LocalWorldError, match=f"port {taken} for kube-apiserver is in use"):
                procs.require_free(taken, "kube-apiserver")


def test_free_ports_lie_outside_the_ephemeral_range_and_can_be_listened_on() -> None:
    low, high = procs.ephemeral_range()
    ports = [procs.free_port() for _ in range(50)]
    assert all(procs.LISTEN_FLOOR <= p < low or high < p <= 65535 for p in ports), ports
    assert len(set(ports)) > 40  # picked at random, not the same few
    for port in ports[:5]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
            sock.listen()


def test_a_range_covering_nearly_every_port_falls_back_to_a_kernel_pick() -> None:
    port = procs.free_port(ephemeral=(1024, 65535))
    assert procs.port_free(port)
    assert procs.free_port(ephemeral=(1024, 64000)) > 64000  # the room above the range is used instead


def test_the_ephemeral_range_is_read_from_the_kernel_file(tmp_path: Path) -> None:
    (tmp_path / "range").write_text("20000\t30000\n")
    assert procs.ephemeral_range(tmp_path / "range") == (20000, 30000)
    (tmp_path / "bad").write_text("many\n")
    assert procs.ephemeral_range(tmp_path / "bad") == (32768, 60999)
    assert procs.ephemeral_range(tmp_path / "missing") == (32768, 60999)


# -- which process is ours: pid, start time and executable, never a substring of the state dir ----------

SLEEPER = "import time; time.sleep(120)"


@pytest.fixture
def started():
    """Processes a test spawns (records), stopped by pid at the end while still ours."""
    comps: list[procs.Component] = []
    yield comps
    for comp in comps:
        if comp.ours():
            procs.stop(comp.pid, grace=2)


def _spawn(started, binary: Path, world: Path, *args: str) -> procs.Component:
    comp = procs.spawn("etcd", binary, ["-c", SLEEPER, *args], world / "logs" / "etcd.log")
    started.append(comp)
    # Until the child has exec'd, /proc shows the forked copy of this test's own command line (a busy
    # machine made the leftover test below miss the process that way).
    assert poll(lambda: SLEEPER in procs.cmdline(comp.pid), timeout=30, every=0.01), procs.cmdline(comp.pid)
    return comp


def test_spawn_records_the_start_time_and_executable(tmp_path: Path, started) -> None:
    comp = _spawn(started, Path(sys.executable), tmp_path)
    assert comp.exe == os.path.realpath(sys.executable)
    ticks = os.sysconf("SC_CLK_TCK")
    boot = float(next(line.split()[1] for line in Path("/proc/stat").read_text().splitlines()
                      if line.startswith("btime ")))
    assert abs(boot + comp.start_time / ticks - comp.started_at) < 5  # started just now
    assert comp.ours()


def test_the_world_in_x_w_never_stops_the_world_in_x_w2(tmp_path: Path, monkeypatch, started) -> None:
    from gpucluster import ownership
    from gpucluster.local import world as world_mod
    from gpucluster.local.state import State

    fake = tmp_path / "bin" / "etcd"  # named as the component, runs Python: a real process that sleeps
    fake.parent.mkdir()
    fake.symlink_to(sys.executable)
    monkeypatch.setattr(world_mod, "locate", lambda name: fake if name == "etcd" else None)
    recorded, leftover = {}, {}
    for name in ("w", "w2"):
        folder = ownership.claim(tmp_path / "x" / name, world_mod.FOLDER)
        recorded[name] = _spawn(started, fake, folder, f"--data-dir={folder}/etcd-data")
        State(dir=folder, ports={"etcd": 1}, components={"etcd": recorded[name]}).save()
        # and one its state.json no longer lists (a crashed run): found by executable and command line
        leftover[name] = _spawn(started, fake, folder, f"--cert-file={folder}/pki/etcd.crt")
    assert procs.find_leftovers(tmp_path / "x" / "w", [fake], under=world_mod.OWNED) == sorted(
        [recorded["w"].pid, leftover["w"].pid])
    assert world_mod.World(tmp_path / "x" / "w").down() == ["etcd", f"pid {leftover['w'].pid}"]
    assert not recorded["w"].ours() and not leftover["w"].ours()
    assert recorded["w2"].ours() and leftover["w2"].ours(), "stopping /x/w stopped a process of /x/w2"


def test_leftovers_count_paths_below_the_worlds_own_names_only(tmp_path: Path, started) -> None:
    nested = tmp_path / "w" / "projects" / "w"  # another world kept in a folder of the first
    comp = _spawn(started, Path(sys.executable), tmp_path, f"--data-dir={nested}/etcd-data")
    python = Path(sys.executable)
    assert comp.pid in procs.find_leftovers(tmp_path / "w", [python])
    assert comp.pid not in procs.find_leftovers(tmp_path / "w", [python], under=("etcd-data", "pki"))
    assert comp.pid in procs.find_leftovers(nested, [python], under=("etcd-data", "pki"))
    assert comp.pid not in procs.find_leftovers(tmp_path / "w", [Path("/bin/sh")])  # another executable


def test_a_reused_pid_is_not_ours(tmp_path: Path) -> None:
    from dataclasses import replace

    from gpucluster import ownership
    from gpucluster.local.state import State
    from gpucluster.local.world import FOLDER, World

    stranger = subprocess.Popen(["sleep", "120"])
    try:
        found = procs.identity(stranger.pid)
        assert found is not None
        start, exe = found
        record = procs.Component("etcd", stranger.pid, exe, ["120"], "", time.time(), start_time=start, exe=exe)
        assert record.ours()
        # the process we recorded ended and its pid went to another one: another start time
        reused = replace(record, start_time=start + 1)
        assert not reused.ours()
        assert not replace(record, exe="/opt/gpucluster/etcd").ours()  # same start, another program
        ownership.claim(tmp_path, FOLDER)
        State(dir=tmp_path, ports={"etcd": 1}, components={"etcd": reused}).save()
        assert World(tmp_path).down() == []
        assert stranger.poll() is None, "a process that is not ours was stopped"
    finally:
        stranger.kill()
        stranger.wait()


def test_a_record_of_an_earlier_version_is_matched_by_command_line_executable_and_start(tmp_path: Path) -> None:
    import json
    import shutil
    from dataclasses import replace

    from gpucluster.local.state import State

    sleep = shutil.which("sleep")
    assert sleep is not None
    proc = subprocess.Popen([sleep, "120"])
    try:
        # Popen returns once the child is in execve, where the kernel may not have set up the new argument
        # pages yet: /proc/<pid>/cmdline reads empty for that moment (seen under load in CI). A record of
        # an earlier version names a process that ran long before: wait for its command line.
        assert poll(lambda: procs.cmdline(proc.pid) == [sleep, "120"], timeout=30, every=0.01)
        # state.json as written before start_time and exe were kept
        State(dir=tmp_path, ports={}, components={"etcd": procs.Component("etcd", proc.pid, sleep, ["120"], "",
                                                                          time.time())}).save()
        data = json.loads((tmp_path / "state.json").read_text())
        for comp in data["components"].values():
            del comp["start_time"], comp["exe"]
        (tmp_path / "state.json").write_text(json.dumps(data))
        state = State.load(tmp_path)
        assert state is not None
        old = state.components["etcd"]
        assert (old.start_time, old.exe) == (0, "")
        assert old.ours()
        assert not replace(old, started_at=time.time() - 3600).ours()  # it started after the record: a reused pid
        assert not replace(old, args=["60"]).ours()
        assert not replace(old, binary="/bin/true").ours()
    finally:
        proc.kill()
        proc.wait()


def test_no_process_is_started_with_python_code_between_fork_and_exec() -> None:
    """A ``preexec_fn`` makes CPython fork (not vfork) and run Python code in the child; where gRPC is
    active (the Automation API's inline program server in `up`, the engine tests in pytest) the child
    then crashes now and then with ``epoll_wait error: Bad file descriptor`` (grpc/grpc#43055, grpcio
    1.80 and later; reproduced here with 1.85.3: 5 of 300 children died with a preexec_fn, 0 of 400
    with ``start_new_session``). Reset signals with ``env --default-signal`` instead."""
    import ast

    repo = Path(__file__).resolve().parents[2]
    found = []
    for folder in ("src", "tests", "scripts", "benchmarks"):
        for path in (repo / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.keyword) and node.arg == "preexec_fn":
                    found.append(f"{path.relative_to(repo)}:{node.value.lineno}")
    assert not found, f"subprocesses started with a preexec_fn: {found}"
