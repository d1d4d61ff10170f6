"""playbooks/renew-certs.yml: it parses against a real inventory, its plays keep the order and the stop rule,
and its per-host tasks run for real on this machine against stand-ins.

The stand-ins: a ``kubeadm`` script that logs its arguments, and a *kubelet* thread that does what kubeadm's
documentation relies on (kubernetes/website kubeadm-certs.md, "Manual certificate renewal"): it runs a
component, a listener on the component's port (the API server's answers ``/livez`` over TLS), while the
component's manifest is in the manifests folder, and stops it once the manifest is gone. Real kubeadm, real
kubelet and real static pods only run on a real control-plane host: that part is not proven here
(docs/operations.md#certificates).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml
from tls_certs import server_context, signed

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLAYBOOK = REPO / "playbooks" / "renew-certs.yml"
HOST_TASKS = REPO / "playbooks" / "tasks" / "renew-certs-host.yml"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
#: How often the kubelet stand-in looks at the manifests folder.
CHECK_S = 2.5


def ansible(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), **(env or {}))
    return subprocess.run([str(BIN / "ansible-playbook"), *args], cwd=REPO, env=environ, capture_output=True,
                          text=True, timeout=300, check=False)


def test_syntax_against_the_lab_inventory_and_the_play_order() -> None:
    assert ansible("--syntax-check", "-i", "inventories/lab", str(PLAYBOOK)).returncode == 0
    proc = ansible("--list-tasks", "-i", "inventories/lab", str(PLAYBOOK))
    assert proc.returncode == 0, proc.stderr
    plays = proc.stdout.split("play #")[1:]
    assert [p.split("\n")[0].split(":")[0] for p in plays] == ["1 (all)", "2 (control_plane)", "3 (control_plane)"]
    order = [line.strip().split("\t")[0] for line in plays[1].splitlines()[2:] if line.strip()]
    steps = [next(i for i, t in enumerate(order) if t.startswith(prefix)) for prefix in (
        "Show the certificates' expiration before", "Renew every certificate", "Restart each control-plane static pod",
        "Wait until this host's API server answers /livez", "Show the certificates' expiration after")]
    assert steps == sorted(steps), order
    assert "Copy the renewed /etc/kubernetes/admin.conf from the init host" in plays[2]


def test_one_control_plane_host_at_a_time_and_the_first_failure_stops_the_run() -> None:
    plays = yaml.safe_load(PLAYBOOK.read_text())
    renew = next(p for p in plays if p.get("hosts") == "control_plane" and "serial" in p)
    assert (renew["serial"], renew["any_errors_fatal"], renew["max_fail_percentage"]) == (1, True, 0)
    tasks = {t["name"]: t for t in yaml.safe_load(HOST_TASKS.read_text())}
    renewal = tasks["Renew every certificate kubeadm manages on this host (unconditionally, as kubeadm does)"]
    assert renewal["ansible.builtin.command"]["argv"][1:] == ["certs", "renew", "all"]
    assert renewal["changed_when"] is True  # kubeadm renews unconditionally
    check = tasks["Show the certificates' expiration before renewing"]
    assert (check["changed_when"], check["check_mode"]) == (False, False)  # a read, in check mode too


class Kubelet:
    """Runs each component while its manifest is in ``manifests``, as kubelet runs static pods: it looks at the
    folder every :data:`CHECK_S` (kubelet: fileCheckFrequency, 20 s), so a manifest moved out and straight back
    goes unseen, as it would by kubelet, and only a play that waits for the pod to stop restarts it."""

    def __init__(self, manifests: Path, ports: dict[str, int], tls: ssl.SSLContext) -> None:
        self.manifests, self.ports, self.tls = manifests, ports, tls
        self.running: dict[str, HTTPServer | socket.socket] = {}
        self.events: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def start_component(self, name: str) -> None:
        if name == "kube-apiserver":
            class Livez(BaseHTTPRequestHandler):
                def do_GET(self) -> None:
                    self.send_response(200 if self.path == "/livez" else 404)
                    self.end_headers()

                def log_message(self, *args: object) -> None:
                    pass

            server = HTTPServer(("127.0.0.1", self.ports[name]), Livez)
            server.socket = self.tls.wrap_socket(server.socket, server_side=True)
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
            self.running[name] = server
        else:
            listener = socket.create_server(("127.0.0.1", self.ports[name]))
            listener.settimeout(0.1)
            self.running[name] = listener
        self.events.append(f"start {name}")

    def stop_component(self, name: str) -> None:
        thing = self.running.pop(name)
        if isinstance(thing, HTTPServer):
            thing.shutdown()
            thing.server_close()
        else:
            thing.close()
        self.events.append(f"stop {name}")

    def loop(self) -> None:
        looked = 0.0
        while not self.stop.is_set():
            if time.monotonic() - looked >= CHECK_S:
                looked = time.monotonic()
                self.look()
            for thing in list(self.running.values()):
                if isinstance(thing, socket.socket):  # answer and drop wait_for's probes
                    try:
                        conn, _ = thing.accept()
                        conn.close()
                    except OSError:
                        pass
            time.sleep(0.05)

    def look(self) -> None:
        for name in self.ports:
            present = (self.manifests / f"{name}.yaml").exists()
            if present and name not in self.running:
                self.start_component(name)
            elif not present and name in self.running:
                self.stop_component(name)

    def __enter__(self) -> Kubelet:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        for name in list(self.running):
            self.stop_component(name)


def free_ports(n: int) -> list[int]:
    socks = [socket.create_server(("127.0.0.1", 0)) for _ in range(n)]
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.fixture
def host(tmp_path: Path) -> Iterator[tuple[Path, Kubelet, dict[str, object]]]:
    """A control-plane host on this machine: a logging kubeadm, the manifests folder, a kubelet stand-in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "kubeadm.log"
    kubeadm = bin_dir / "kubeadm"
    kubeadm.write_text(f"#!/bin/sh\necho \"$*\" >> {log}\necho \"CERTIFICATE EXPIRES\"\n")
    kubeadm.chmod(0o755)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    ports = dict(zip(COMPONENTS, free_ports(len(COMPONENTS)), strict=True))
    tls = server_context(tmp_path, signed("kube-apiserver", ends_in=dt.timedelta(days=365)))
    extra = {"kubernetes_node_bin_dir": str(bin_dir), "renew_certs_manifests": str(manifests),
             "renew_certs_holding": str(tmp_path / "holding"), "renew_certs_apiserver_port": ports["kube-apiserver"],
             "renew_certs_components": [{"name": n, "port": p} for n, p in ports.items()],
             "renew_certs_wait_timeout": 30, "ansible_python_interpreter": sys.executable}
    with Kubelet(manifests, ports, tls) as kubelet:
        yield tmp_path, kubelet, extra


def settle(kubelet: Kubelet, started: int) -> None:
    """Wait until the kubelet stand-in has started ``started`` components (bounded)."""
    deadline = time.monotonic() + 10
    while len(kubelet.events) < started:
        assert time.monotonic() < deadline, kubelet.events
        time.sleep(0.05)


def run_host_tasks(tmp_path: Path, extra: dict[str, object], *flags: str) -> subprocess.CompletedProcess[str]:
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{"name": "One control-plane host", "hosts": "localhost", "gather_facts": False,
                                     "tasks": [{"name": "Renew", "ansible.builtin.import_tasks": str(HOST_TASKS)}]}]))
    return ansible("-i", "localhost,", "-c", "local", str(play), "-e", json.dumps(extra), *flags)


@pytest.mark.slow  # two ansible-playbook runs on this machine: about 40 s on a busy 2-core box
def test_each_static_pod_is_stopped_then_started_in_order_after_the_renewal(host) -> None:
    tmp_path, kubelet, extra = host
    # the API server and the controller manager run from their manifests; no etcd manifest at all (an external
    # etcd); the scheduler's manifest was left in the holding folder by a run that died (the pod is not running)
    for name in COMPONENTS[1:3]:
        (tmp_path / "manifests" / f"{name}.yaml").write_text(f"kind: Pod\nmetadata: {{name: {name}}}\n")
    (tmp_path / "holding").mkdir()
    (tmp_path / "holding" / "kube-scheduler.yaml").write_text("kind: Pod\n")
    settle(kubelet, 2)
    before = len(kubelet.events)
    proc = run_host_tasks(tmp_path, extra)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert (tmp_path / "kubeadm.log").read_text().splitlines() == [
        "certs check-expiration", "certs renew all", "certs check-expiration"]
    # each running one stopped once its manifest left and started again once it was back, one after the other;
    # the scheduler's manifest was put back; nothing was made up for etcd
    assert kubelet.events[before:] == ["stop kube-apiserver", "start kube-apiserver", "stop kube-controller-manager",
                                       "start kube-controller-manager", "start kube-scheduler"]
    assert sorted(p.name for p in (tmp_path / "manifests").iterdir()) == sorted(f"{n}.yaml" for n in COMPONENTS[1:])
    assert list((tmp_path / "holding").iterdir()) == []
    # check mode on the same host reads the expiration (twice) and stops no pod
    (tmp_path / "kubeadm.log").unlink()
    proc = run_host_tasks(tmp_path, extra, "--check")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert (tmp_path / "kubeadm.log").read_text().splitlines() == ["certs check-expiration", "certs check-expiration"]
    assert kubelet.events[before:][5:] == []
    assert len(list((tmp_path / "manifests").iterdir())) == 3
