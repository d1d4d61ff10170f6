"""Row ``control-plane-certificates``: real certificates served over real TLS on 127.0.0.1, each validity
window next to its neighbour (expired, 10 days left, 300 days left, not yet valid), and nothing listening.

The certificates are signed here with ``cryptography``; a thread serves one with the ``ssl`` module on an
ephemeral port, and a kubeconfig names that server (and, where a case needs it, a client certificate).
The row is read through the same code ``gpucluster verify`` runs (:func:`gpucluster.verify.certs.rows`).
"""

from __future__ import annotations

import base64
import datetime as dt
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from tls_certs import NOW, server_context, signed

from gpucluster.verify import certs
from gpucluster.verify.model import Verdict, problems

FIX = "FIX: run the renewal"
#: An hour past the whole day, so that "N days left" reads N however long the test takes.
SLACK = dt.timedelta(hours=1)


@contextmanager
def tls_server(tmp_path: Path, pair: tuple[bytes, bytes]) -> Iterator[int]:
    """Serve ``pair`` over TLS on 127.0.0.1 (an ephemeral port) until the block ends; yields the port."""
    context = server_context(tmp_path, pair)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                try:
                    with context.wrap_socket(conn, server_side=True) as tls:
                        tls.recv(1)  # the client reads the certificate and closes
                except (OSError, ssl.SSLError):
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def kubeconfig(tmp_path: Path, port: int, client: tuple[bytes, bytes] | None = None) -> Path:
    """A kubeconfig naming https://127.0.0.1:PORT, with ``client`` embedded as its user's certificate."""
    user = {"token": "not-a-certificate"} if client is None else {
        "client-certificate-data": base64.b64encode(client[0]).decode(),
        "client-key-data": base64.b64encode(client[1]).decode()}
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "t",
           "clusters": [{"name": "t", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                  "insecure-skip-tls-verify": True}}],
           "users": [{"name": "t", "user": user}],
           "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def row_for(tmp_path: Path, server: tuple[bytes, bytes], client: tuple[bytes, bytes] | None = None):
    with tls_server(tmp_path, server) as port:
        [row] = certs.rows(kubeconfig(tmp_path, port, client), None, fix=FIX)
    return row, port


def day(delta: dt.timedelta) -> str:
    return (NOW + delta).strftime("%Y-%m-%d %H:%M UTC")


@pytest.mark.parametrize(("ends_in", "verdict", "says"), [
    # expired five days ago: fails, naming the date, how long ago, and the fix
    (dt.timedelta(days=-5) - SLACK, Verdict.failed, "expired on {date} (5 days ago)"),
    # ten days left: passes today, but warns with the date, the days left and the fix
    (dt.timedelta(days=10) + SLACK, Verdict.warned, "expires on {date} (10 days left)"),
    # 300 days left: passes, the earliest expiry in the detail
    (dt.timedelta(days=300) + SLACK, Verdict.passed,
     "earliest expiry: API server serving certificate (127.0.0.1:{port}) on {date} (300 days left); "
     "1 certificate read"),
])
def test_the_served_certificate_decides_by_its_end(tmp_path: Path, ends_in, verdict, says) -> None:
    row, port = row_for(tmp_path, signed("kube-apiserver", ends_in=ends_in))
    assert (row.check, row.subject, row.verdict) == ("control-plane-certificates", f"apiserver/127.0.0.1:{port}",
                                                     verdict)
    assert says.format(date=day(ends_in), port=port) in row.actual
    if verdict is not Verdict.passed:
        assert f"API server serving certificate (127.0.0.1:{port})" in row.actual and FIX in row.reason
    if verdict is Verdict.warned:
        assert row.reason == f"renew before {day(ends_in)}; {FIX}"
    # only a failure fails the run; a warning passes it
    assert bool(problems([row], {})) is (verdict is Verdict.failed)


def test_a_certificate_not_valid_yet_fails(tmp_path: Path) -> None:
    starts = dt.timedelta(days=2)
    row, port = row_for(tmp_path, signed("kube-apiserver", starts_in=starts, ends_in=dt.timedelta(days=300)))
    assert row.verdict is Verdict.failed
    assert f"(127.0.0.1:{port}) is not valid before {day(starts)}" in row.actual and "NTP" in row.actual


def test_the_kubeconfigs_client_certificate_counts_too(tmp_path: Path) -> None:
    server = signed("kube-apiserver", ends_in=dt.timedelta(days=300) + SLACK)
    # the same healthy server, with a client certificate ten days from its end: a warning naming the client's
    ten = dt.timedelta(days=10) + SLACK
    row, _ = row_for(tmp_path, server, signed("gpucluster-admin", ends_in=ten))
    assert row.verdict is Verdict.warned
    assert row.actual == f"kubeconfig client certificate (gpucluster-admin) expires on {day(ten)} (10 days left)"
    # an expired client certificate fails
    gone = signed("gpucluster-admin", ends_in=dt.timedelta(days=-1) - SLACK)
    row, _ = row_for(tmp_path, server, gone)
    assert row.verdict is Verdict.failed and row.actual.startswith("kubeconfig client certificate (gpucluster-admin) "
                                                                   "expired on")
    # a healthy one passes, the server's being the earliest end; both are counted
    fine = signed("gpucluster-admin", ends_in=dt.timedelta(days=364))
    row, _ = row_for(tmp_path, server, fine)
    assert row.verdict is Verdict.passed and row.actual.startswith("earliest expiry: API server serving")
    assert row.actual.endswith("2 certificates read")


def test_nothing_listening_is_not_measured_never_passed(tmp_path: Path) -> None:
    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now
    [row] = certs.rows(kubeconfig(tmp_path, port), None, fix=FIX, timeout=2)
    assert row.verdict is Verdict.skipped
    assert row.reason == f"the API server's certificate at 127.0.0.1:{port} could not be read: connection refused"
    assert problems([row], {}).startswith("1 row(s) not measured (control-plane-certificates")
    # an expired client certificate still fails the row: the server being unreachable does not hide it
    gone = signed("gpucluster-admin", ends_in=dt.timedelta(days=-1) - SLACK)
    [row] = certs.rows(kubeconfig(tmp_path, port, gone), None, fix=FIX, timeout=2)
    assert row.verdict is Verdict.failed and "also: the API server's certificate" in row.reason
    # and a healthy one with an unreachable server is not measured, saying what was read
    fine = signed("gpucluster-admin", ends_in=dt.timedelta(days=300))
    [row] = certs.rows(kubeconfig(tmp_path, port, fine), None, fix=FIX, timeout=2)
    assert row.verdict is Verdict.skipped and "(read: earliest expiry: kubeconfig client certificate" in row.reason


def test_a_server_without_tls_is_not_measured(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, 8080)
    path.write_text(path.read_text().replace("https://", "http://"))
    [row] = certs.rows(path, None, fix=FIX)
    assert row.verdict is Verdict.skipped and "not served over TLS" in row.reason


def test_the_fix_names_the_playbook_or_the_local_worlds_fresh_start(local, lab) -> None:
    repo = Path(__file__).resolve().parents[2]
    real = certs.fix_for(lab, "inventories/lab")
    assert "`ansible-playbook -i inventories/lab playbooks/renew-certs.yml`" in real
    assert (repo / certs.PLAYBOOK).is_file()
    assert "`ansible-playbook -i inventories/<env> playbooks/renew-certs.yml`" in certs.fix_for(lab)
    from gpucluster.local.pki import LEAF_DAYS

    here = certs.fix_for(local)
    assert f"valid {LEAF_DAYS} days" in here and "`gpucluster up --reset`" in here and "ansible" not in here
