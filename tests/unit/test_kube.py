"""The Kubernetes client's errors (gpucluster.kube) against a small API server on 127.0.0.1: a refused call
carries its HTTP status and reason, an unreachable server is a different error, and the simulator retries
only what another attempt can clear."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpucluster import kube
from gpucluster.errors import AlreadyExists, ApiError, ClusterError, ClusterUnreachable
from gpucluster.simulator.reconcile import Simulator, retryable
from gpucluster.spec import load_spec

LOCAL = Path(__file__).resolve().parents[2] / "inventories" / "local"


class FakeApi:
    """Answers every request with ``status`` and ``body``; counts requests, signals after ``signal_after``."""

    def __init__(self) -> None:
        self.status, self.body = 200, b"{}"
        self.requests: list[tuple[str, str]] = []
        self.signal_after = 0
        self.reached = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                api.requests.append((self.command, self.path))
                if api.signal_after and len(api.requests) >= api.signal_after:
                    api.reached.set()
                self.send_response(api.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(api.body)))
                self.end_headers()
                self.wfile.write(api.body)

            do_GET = do_POST = do_PATCH = do_DELETE = _answer

            def log_message(self, *_args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def refuse(self, status: int, reason: str, message: str) -> None:
        self.status = status
        self.body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                                "reason": reason, "code": status}).encode()


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": server}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
        "users": [{"name": "t", "user": {"token": "x"}}],
    }))
    return path


@pytest.fixture
def api() -> Iterator[FakeApi]:
    fake = FakeApi()
    yield fake
    fake.httpd.shutdown()
    fake.httpd.server_close()


@pytest.fixture
def client(api: FakeApi, tmp_path: Path) -> Iterator[kube.Kube]:
    with kube.Kube(kubeconfig(tmp_path / "kubeconfig", api.url), timeout=5) as k:
        yield k


@pytest.mark.parametrize(("status", "reason", "transient"), [
    (403, "Forbidden", False),   # RBAC says no: the same next time
    (422, "Invalid", False),     # the object is wrong: the same next time
    (401, "Unauthorized", False),
    (409, "Conflict", True),     # someone else wrote first
    (429, "TooManyRequests", True),
    (500, "InternalError", True),
    (503, "ServiceUnavailable", True),
])
def test_a_refused_call_carries_its_status_and_reason(api, client, status, reason, transient):
    api.refuse(status, reason, f"nodes \"n1\" is {reason.lower()}")
    with pytest.raises(ApiError) as err:
        client.patch(f"{kube.NODES}/n1", {"metadata": {"labels": {"a": "b"}}})
    assert err.value.status == status and err.value.reason == reason
    assert not isinstance(err.value, ClusterUnreachable)
    assert str(err.value) == f"PATCH /api/v1/nodes/n1: HTTP {status} {reason}: nodes \"n1\" is {reason.lower()}"
    assert kube.transient(err.value) is transient
    assert client.writes == 0


def test_a_create_that_finds_the_object_is_already_exists(api, client):
    api.refuse(409, "AlreadyExists", 'nodes "n1" already exists')
    with pytest.raises(AlreadyExists) as err:
        client.create(kube.NODES, {"metadata": {"name": "n1"}})
    assert err.value.status == 409 and err.value.reason == "AlreadyExists"


def test_an_error_body_that_is_not_a_status_is_quoted(api, client):
    api.status, api.body = 502, b"<html>bad gateway</html>"
    with pytest.raises(ApiError, match=r"GET /api/v1/nodes: HTTP 502: <html>bad gateway</html>") as err:
        client.items(kube.NODES)
    assert err.value.status == 502 and err.value.reason == ""


def test_a_missing_object_is_none_not_an_error(api, client):
    api.refuse(404, "NotFound", 'nodes "n1" not found')
    assert client.get(f"{kube.NODES}/n1") is None
    assert client.reads == 1


def test_an_unreachable_server_is_not_an_api_error(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with kube.Kube(kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}"), timeout=5) as k, \
            pytest.raises(ClusterUnreachable, match=f"cannot reach the API server at http://127.0.0.1:{port}") as err:
        k.get(f"{kube.NODES}/n1")
    assert not isinstance(err.value, ApiError) and kube.transient(err.value)


def _simulator(api: FakeApi, tmp_path: Path) -> Simulator:
    return Simulator(load_spec(LOCAL / "cluster.yaml"), kubeconfig(tmp_path / "kubeconfig", api.url))


def test_the_simulator_stops_on_a_forbidden_call_instead_of_retrying_forever(api, tmp_path):
    api.refuse(403, "Forbidden", 'configmaps is forbidden: User "x" cannot get resource "configmaps"')
    sim = _simulator(api, tmp_path)
    try:
        with pytest.raises(ApiError, match="HTTP 403 Forbidden") as err:
            sim.run(interval=0.01, stop=threading.Event())
    finally:
        sim.close()
    assert err.value.status == 403
    assert len(api.requests) == 1  # one refused read, no second attempt


def test_the_simulator_retries_while_the_server_is_unavailable(api, tmp_path):
    api.refuse(503, "ServiceUnavailable", "the server is currently unable to handle the request")
    api.signal_after = 3
    sim = _simulator(api, tmp_path)
    stop = threading.Event()
    failures: list[BaseException] = []

    def loop() -> None:
        try:
            sim.run(interval=0.01, stop=stop)
        except BaseException as exc:  # the test asserts there is none
            failures.append(exc)

    worker = threading.Thread(target=loop)
    worker.start()
    try:
        assert api.reached.wait(30), f"the simulator gave up after {len(api.requests)} requests"
    finally:
        stop.set()
        worker.join(30)
        sim.close()
    assert not failures and not worker.is_alive()


@pytest.mark.parametrize(("err", "expected"), [
    (ApiError("x", 404, "NotFound"), True),    # deleted between the sync's list and its write
    (ApiError("x", 409, "Conflict"), True),
    (ApiError("x", 422, "Invalid"), False),
    (ApiError("x", 403, "Forbidden"), False),
    (ClusterUnreachable("x"), True),
])
def test_the_simulators_retry_rule(err: ClusterError, expected: bool):
    assert retryable(err) is expected
