"""The one runtime of every process we start: spawn with a record, readiness, ports, roll-back, stop by identity.

Components here are real short-lived Python processes: :data:`SERVER` answers ``GET /healthz`` on the
port it is given (printing the file named by ``--read`` first, when given), :data:`FAILING` prints a
line and exits. Every process a test starts is stopped by pid in the fixture's teardown.
"""

from __future__ import annotations

import socket
import stat
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster import procs
from gpucluster.errors import LocalWorldError
from gpucluster.local import addons, runtime
from gpucluster.local.runtime import Check, File, Launch
from gpucluster.procs import Component

SERVER = textwrap.dedent(
    """
    import http.server, pathlib, sys
    port = int(sys.argv[1])
    for arg in sys.argv[2:]:
        if arg.startswith("--read="):
            print("config:", pathlib.Path(arg.split("=", 1)[1]).read_text(), flush=True)

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/healthz" else 404)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
    """
)
FAILING = "import sys; print('flag --bogus: unknown flag', flush=True); sys.exit(3)"


class Records:
    """A ledger as the world's and the add-ons' are: what was recorded, in order, and whether it was forgotten."""

    def __init__(self) -> None:
        self.comps: dict[str, Component] = {}
        self.order: list[str] = []
        self.forgotten = False

    def record(self, comp: Component) -> None:
        self.comps[comp.name] = comp
        self.order.append(comp.name)

    def forget(self) -> None:
        self.forgotten = True


@pytest.fixture
def ledger() -> Iterator[Records]:
    records = Records()
    yield records
    for comp in records.comps.values():  # teardown: whatever still runs, by pid, only while ours
        if comp.ours():
            procs.stop(comp.pid, grace=2)


def server(tmp_path: Path, name: str, port: int, *extra: str, ready: tuple[Check, ...] = (),
           files: tuple[File, ...] = ()) -> Launch:
    return Launch(name, Path(sys.executable), ("-c", SERVER, str(port), *extra), tmp_path / "logs" / f"{name}.log",
                  port=port, health_url=f"http://127.0.0.1:{port}/healthz", ready=ready, files=files)


def failing(tmp_path: Path, name: str, port: int) -> Launch:
    return Launch(name, Path(sys.executable), ("-c", FAILING), tmp_path / "logs" / f"{name}.log", port=port,
                  health_url=f"http://127.0.0.1:{port}/healthz")


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_groups_start_in_order_each_recorded_at_its_spawn_and_ready_when_start_returns(
        tmp_path: Path, ledger: Records) -> None:
    ports = procs.free_ports(["a", "b", "c"])
    said: list[str] = []
    started = runtime.start([[server(tmp_path, "a", ports["a"])],
                             [server(tmp_path, "b", ports["b"]), server(tmp_path, "c", ports["c"])]],
                            ledger, timeout=30, say=said.append)
    assert list(started) == ledger.order == ["a", "b", "c"]
    assert all(listening(ports[n]) and started[n].ours() for n in started)
    assert started["b"].health_url == f"http://127.0.0.1:{ports['b']}/healthz" and started["b"].port == ports["b"]
    assert [line.split(" (")[0] for line in said] == [f"✓ {n} ready on 127.0.0.1:{ports[n]}" for n in "abc"]
    assert runtime.stop_all(reversed(started.values())) == ["c", "b", "a"]
    assert not any(c.ours() for c in started.values()) and not any(listening(p) for p in ports.values())
    assert not ledger.forgotten


def test_when_the_second_of_two_fails_the_first_is_stopped_and_the_record_forgotten(
        tmp_path: Path, ledger: Records) -> None:
    ports = procs.free_ports(["first", "second"])
    with pytest.raises(LocalWorldError) as err:
        runtime.start([[server(tmp_path, "first", ports["first"])], [failing(tmp_path, "second", ports["second"])]],
                      ledger, timeout=30)
    message = str(err.value)
    assert message.startswith("second exited during start-up (waiting for: healthy (http://127.0.0.1:")
    assert "flag --bogus: unknown flag" in message and str(tmp_path / "logs" / "second.log") in message
    assert ledger.order == ["first", "second"]  # both were recorded as they started
    assert not ledger.comps["first"].ours() and not listening(ports["first"])  # rolled back
    assert ledger.forgotten


def test_a_component_never_ready_times_out_naming_its_check_and_is_rolled_back(tmp_path: Path,
                                                                               ledger: Records) -> None:
    port = procs.free_port()
    never = Check("the operator's configuration written to /nowhere", lambda: (False, "not written yet"))
    with pytest.raises(LocalWorldError, match=r"timed out after 1 s waiting for slow: the operator's configuration "
                                              r"written to /nowhere: not written yet; see its log"):
        runtime.start([[server(tmp_path, "slow", port, ready=(never,))]], ledger, timeout=1)
    assert not ledger.comps["slow"].ours() and ledger.forgotten


def test_ctrl_c_while_waiting_rolls_back_too(tmp_path: Path, ledger: Records) -> None:
    port = procs.free_port()

    def interrupted() -> tuple[bool, str]:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runtime.start([[server(tmp_path, "a", port, ready=(Check("interrupted", interrupted),))]], ledger, timeout=30)
    assert not ledger.comps["a"].ours() and ledger.forgotten


def test_without_roll_back_what_started_keeps_running(tmp_path: Path, ledger: Records) -> None:
    ports = procs.free_ports(["kept", "broken"])
    with pytest.raises(LocalWorldError, match="broken exited during start-up"):
        runtime.start([[server(tmp_path, "kept", ports["kept"])], [failing(tmp_path, "broken", ports["broken"])]],
                      ledger, timeout=30, rollback=False)
    assert ledger.comps["kept"].ours() and not ledger.forgotten


def test_a_custom_probe_is_waited_for_after_the_health_url(tmp_path: Path, ledger: Records) -> None:
    port, seen = procs.free_port(), []

    def written() -> tuple[bool, str]:  # the third look finds the file
        seen.append(listening(port))
        return len(seen) >= 3, "not written yet"

    runtime.start([[server(tmp_path, "sim", port, ready=(Check("configuration written", written),))]], ledger,
                  timeout=30)
    assert seen == [True, True, True]  # asked only once the health URL answered, and until it held


def test_files_are_written_before_the_spawn_with_their_mode(tmp_path: Path, ledger: Records) -> None:
    port, config = procs.free_port(), tmp_path / "kubeconfigs" / "kwok"
    launch = server(tmp_path, "kwok", port, f"--read={config}", files=(File(config, "client-key-data: k", 0o600),))
    started = runtime.start([[launch]], ledger, timeout=30)
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert "config: client-key-data: k" in Path(started["kwok"].log).read_text()  # the process read it at start


def test_a_taken_port_is_refused_before_anything_starts(tmp_path: Path, ledger: Records) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(LocalWorldError, match=f"port {port} for etcd is in use on 127.0.0.1"):
            runtime.start([[server(tmp_path, "etcd", port)]], ledger, timeout=30)
        with pytest.raises(LocalWorldError, match=f"port {port} for kube-apiserver is in use"):
            procs.free_ports(["etcd"], pinned={"kube-apiserver": port})
    assert ledger.order == []


def test_free_ports_are_distinct_and_avoid_the_pinned_ones() -> None:
    pinned = procs.free_port()
    ports = procs.free_ports([f"p{i}" for i in range(20)], pinned={"kube-apiserver": pinned})
    assert ports["kube-apiserver"] == pinned and len(set(ports.values())) == 21


def test_stop_all_never_touches_a_pid_that_is_no_longer_ours(tmp_path: Path, ledger: Records) -> None:
    from dataclasses import replace

    port = procs.free_port()
    comp = runtime.start([[server(tmp_path, "etcd", port)]], ledger, timeout=30)["etcd"]
    reused = replace(comp, start_time=comp.start_time + 1)  # the pid as another process would have it
    assert runtime.stop_all([reused]) == []
    assert comp.ours() and listening(port)
    assert runtime.stop_all([comp]) == ["etcd"] and not comp.ours()


# On SIGTERM: note which of the other processes' marks exist (their SIGTERM, their exit), then exit.
NOTING = textwrap.dedent(
    """
    import os, signal, sys, time
    folder, me = sys.argv[1], sys.argv[2]
    def term(*_):
        seen = sorted(f for f in os.listdir(folder) if f.endswith((".term", ".exit")))
        open(os.path.join(folder, me + ".term"), "w").write(" ".join(seen))
        time.sleep(0.3)  # a graceful shutdown that takes a moment
        open(os.path.join(folder, me + ".exit"), "w").close()
        os._exit(0)
    signal.signal(signal.SIGTERM, term)
    open(os.path.join(folder, me + ".ready"), "w").close()
    while True:
        time.sleep(1)
    """
)


def test_stop_groups_signals_a_groups_members_together_and_the_next_group_once_they_are_gone(
        tmp_path: Path, ledger: Records) -> None:
    from gpucluster.poll import poll

    marks = tmp_path / "marks"
    marks.mkdir()
    names = ("kube-scheduler", "kwok", "kube-apiserver", "etcd")
    launches = [Launch(n, Path(sys.executable), ("-c", NOTING, str(marks), n), tmp_path / "logs" / f"{n}.log")
                for n in names]
    comps = runtime.start([launches], ledger, timeout=30)
    assert poll(lambda: len(list(marks.glob("*.ready"))) == 4, timeout=60, every=0.02)
    order = [["kube-scheduler", "kwok"], ["kube-apiserver"], ["etcd"]]
    assert runtime.stop_groups([comps[n] for n in group] for group in order) == list(names)
    seen = {n: (marks / f"{n}.term").read_text().split() for n in names}
    # The first group's two were both signalled before either exited (each saw at most the other's SIGTERM).
    assert {*seen["kube-scheduler"], *seen["kwok"]} <= {"kube-scheduler.term", "kwok.term"}
    # The API server only once both were gone, and etcd only once the API server was: the order a
    # world's control plane needs (an API server stopped beside its etcd hangs in its shutdown).
    assert {"kube-scheduler.exit", "kwok.exit"} <= set(seen["kube-apiserver"])
    assert "kube-apiserver.exit" not in seen["kube-apiserver"] and "etcd.term" not in seen["kube-apiserver"]
    assert "kube-apiserver.exit" in seen["etcd"]


def test_an_add_on_started_by_the_runtime_is_recorded_and_stopped_with_its_record(tmp_path: Path) -> None:
    ports = procs.free_ports(["vc-scheduler", "vc-controller-manager"])
    names = ("vc-scheduler", "vc-controller-manager")
    try:
        started = addons.start(tmp_path, "volcano", [[server(tmp_path, n, ports[n]) for n in names]], timeout=30)
        assert addons.load(tmp_path, "volcano") == started
        assert addons.running(tmp_path, "volcano", names)
        assert not addons.running(tmp_path, "volcano", (*names, "vc-webhook-manager"))
        assert addons.stop(tmp_path, "volcano") == ["vc-controller-manager", "vc-scheduler"]  # newest first
        assert addons.load(tmp_path, "volcano") == {} and not any(c.ours() for c in started.values())
        # a failed start leaves no record and nothing running
        groups = [[server(tmp_path, "vc-scheduler", ports["vc-scheduler"])],
                  [failing(tmp_path, "vc-controller-manager", ports["vc-controller-manager"])]]
        with pytest.raises(LocalWorldError, match="exited during start-up"):
            addons.start(tmp_path, "volcano", groups, timeout=30)
        assert addons.load(tmp_path, "volcano") == {} and not listening(ports["vc-scheduler"])
    finally:
        addons.stop_all(tmp_path)


BACKGROUND = ("import sys; from pathlib import Path; from gpucluster.local import addons; "
              "stop = addons.stop_event(Path(sys.argv[1])); print('waiting', flush=True); stop.wait(); "
              "print('stopped', flush=True)")


@pytest.mark.parametrize("how", ["sigterm", "world removed"])
def test_a_background_add_on_process_ends_on_sigterm_or_once_the_worlds_kubeconfig_is_gone(
        tmp_path: Path, how: str) -> None:
    import signal
    import subprocess

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\n")
    proc = subprocess.Popen([sys.executable, "-c", BACKGROUND, str(kubeconfig)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "waiting\n"  # its handler is in place
        if how == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:
            kubeconfig.unlink()
        assert proc.wait(timeout=30) == 0 and proc.stdout.read() == "stopped\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- the local world through the runtime: a fresh world whose API server fails leaves nothing behind -----------

FAKE_ETCD = textwrap.dedent(
    """
    import http.server, ssl, sys
    flags = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    host, port = flags["listen-client-urls"].rsplit("/", 1)[1].split(":")

    class Ready(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer((host, int(port)), Ready)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(flags["cert-file"], flags["key-file"])
    tls.load_verify_locations(flags["trusted-ca-file"])
    tls.verify_mode = ssl.CERT_REQUIRED  # as etcd's --client-cert-auth
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    server.serve_forever()
    """
)


def test_a_fresh_world_whose_api_server_fails_stops_its_etcd_and_keeps_no_state(tmp_path: Path, monkeypatch) -> None:
    from gpucluster.local import world as world_mod

    etcd = tmp_path / "bin" / "etcd"  # answers /readyz over TLS with the world's certificates, as etcd would
    etcd.parent.mkdir()
    etcd.write_text(f"#!{sys.executable}\n{FAKE_ETCD}")
    etcd.chmod(0o755)
    monkeypatch.setattr(world_mod, "path_of", lambda name: etcd if name == "etcd" else Path("/bin/false"))
    port = procs.free_port()
    folder = tmp_path / "w"
    try:
        with pytest.raises(LocalWorldError, match="kube-apiserver exited during start-up"):
            world_mod.World(folder, ports={"etcd": port}, timeout=30).up()
        assert (folder / "logs" / "etcd.log").is_file()  # the error names the API server: etcd was ready
        assert not listening(port), "etcd was left running"
        assert not (folder / "state.json").exists()
        assert world_mod.World(folder).status() == []
    finally:
        for pid in procs.find_leftovers(folder, [Path(sys.executable)]):
            procs.stop(pid, grace=2)


def test_stop_groups_and_add_on_stop_all_touch_only_what_this_project_recorded(tmp_path: Path) -> None:
    from dataclasses import replace

    ports = procs.free_ports(["vc-scheduler", "stranger"])
    stranger = runtime.start([[server(tmp_path, "stranger", ports["stranger"])]], Records(), timeout=30)["stranger"]
    try:
        started = addons.start(tmp_path, "volcano", [[server(tmp_path, "vc-scheduler", ports["vc-scheduler"])]],
                               timeout=30)
        foreign = tmp_path / addons.FOLDER / "not-ours.txt"
        foreign.write_text("a file this project did not write")
        # a record whose pid now belongs to another process (start time differs) in the same group as ours
        reused = replace(stranger, start_time=stranger.start_time + 1)
        assert runtime.stop_groups([[reused, started["vc-scheduler"]]]) == ["vc-scheduler"]
        assert stranger.ours() and listening(ports["stranger"])  # never signalled
        assert addons.stop_all(tmp_path) == []  # nothing of ours left running
        assert foreign.read_text() == "a file this project did not write"  # only the record file went
        assert not (tmp_path / addons.FOLDER / "volcano" / addons.RECORD).exists()
    finally:
        procs.stop(stranger.pid, grace=2)
