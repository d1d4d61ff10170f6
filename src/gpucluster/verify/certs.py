"""Row ``control-plane-certificates``: how long the API server's serving certificate and the kubeconfig's
client certificate stay valid, read from where verify already connects, with no host access.

kubeadm signs the control plane's certificates for one year (k8s.io/kubernetes v1.37.2
``cmd/kubeadm/app/constants/constants.go:47-48``, ``CertificateValidityPeriod``; ClusterConfiguration's
``certificateValidityPeriod`` may set another) and renews them only on ``kubeadm upgrade`` or
``kubeadm certs renew``. Once one expires, clients refuse the server's certificate and the API server refuses
the client's: the cluster is lost to its operators on a date known a year ahead. The row fails once a
certificate is expired (or not valid yet), warns within :data:`WARN_DAYS` of the end, and names the fix
(``playbooks/renew-certs.yml`` on a real cluster; a fresh local world, whose certificates
:mod:`gpucluster.local.pki` signs when it starts).

The handshake reads the server's certificate without verifying it: verify needs the dates of a certificate
that may already be expired, which verification would refuse before they could be read. Nothing is sent on
that connection and nothing read from it is trusted but those dates; the API calls of every other row
verify the server as the kubeconfig says. A server that cannot be reached leaves the row not measured,
never passed.
"""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.x509.oid import NameOID

from gpucluster.verify.model import Result, Verdict, fail, ok, skip, warn

if TYPE_CHECKING:
    from gpucluster.spec.model import ClusterSpec

#: A certificate that ends within this many days is a warning (kubeadm's are signed for 365).
WARN_DAYS = 30
#: How long the TLS handshake with the API server may take.
TIMEOUT_S = 10.0
EXPECTED = f"every certificate valid now and for more than {WARN_DAYS} days"
#: The playbook that renews a real cluster's control-plane certificates (run from the gpucluster checkout).
PLAYBOOK = "playbooks/renew-certs.yml"


@dataclass(frozen=True)
class Cert:
    """One certificate as the row names it, with its validity window (UTC)."""

    name: str
    not_before: dt.datetime
    not_after: dt.datetime


def of(name: str, cert: x509.Certificate) -> Cert:
    return Cert(name, cert.not_valid_before_utc, cert.not_valid_after_utc)


def served(host: str, port: int, server_name: str | None = None, timeout: float = TIMEOUT_S) -> x509.Certificate:
    """The certificate the TLS server at ``host:port`` presents (read, not verified: see the module doc)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, port), timeout=timeout) as sock, \
            context.wrap_socket(sock, server_hostname=server_name or host) as tls:
        der = tls.getpeercert(binary_form=True)
    if not der:
        raise ssl.SSLError(f"{host}:{port} presented no certificate")
    return x509.load_der_x509_certificate(der)


def fix_for(spec: ClusterSpec, inventory: Path | str | None = None) -> str:
    """How to renew the certificates of ``spec``'s cluster: the local world's or the playbook's command."""
    from gpucluster import inventory as inventories

    if inventories.is_local(spec):
        from gpucluster.local.pki import CA_DAYS, LEAF_DAYS

        return (f"the local world signs its certificates when a fresh world starts, valid {LEAF_DAYS} days (its CA "
                f"{CA_DAYS}): `gpucluster up --reset` starts a fresh one with new certificates and builds it again "
                "(its etcd data is deleted)")
    where = inventory or "inventories/<env>"
    return (f"renew them: `ansible-playbook -i {where} {PLAYBOOK}` from the gpucluster checkout (kubeadm certs renew "
            "all on each control-plane host, its control-plane static pods restarted, the admin kubeconfig "
            "fetched again; docs/operations.md#certificates)")


def _when(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC")


def _days(delta: dt.timedelta) -> str:
    n = int(delta.total_seconds() // 86400)
    return f"{n} day{'' if n == 1 else 's'}"


def judge(subject: str, certs: list[Cert], now: dt.datetime, fix: str) -> Result:
    """The row for ``certs`` at ``now``: fail, warn or pass, naming the certificate that decides it."""
    early = [c for c in certs if now < c.not_before]
    expired = [c for c in certs if now >= c.not_after]
    soon = [c for c in certs if c not in expired and c.not_after - now < dt.timedelta(days=WARN_DAYS)]
    if early or expired:
        parts = [f"{c.name} expired on {_when(c.not_after)} ({_days(now - c.not_after)} ago)" for c in expired]
        parts += [f"{c.name} is not valid before {_when(c.not_before)} (this machine's clock or the signer's is "
                  "wrong: check NTP on both)" for c in early]
        actual = "; ".join(parts)
        return fail("control-plane-certificates", subject, EXPECTED, actual,
                    f"clients and the API server refuse a certificate outside its validity; {fix}")
    if soon:
        soon.sort(key=lambda c: c.not_after)
        actual = "; ".join(f"{c.name} expires on {_when(c.not_after)} ({_days(c.not_after - now)} left)" for c in soon)
        return warn("control-plane-certificates", subject, EXPECTED, actual,
                    f"renew before {_when(soon[0].not_after)}; {fix}")
    first = min(certs, key=lambda c: c.not_after)
    return ok("control-plane-certificates", subject, EXPECTED,
              f"earliest expiry: {first.name} on {_when(first.not_after)} ({_days(first.not_after - now)} left); "
              f"{len(certs)} certificate{'' if len(certs) == 1 else 's'} read")


def _common_name(cert: x509.Certificate) -> str:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else cert.subject.rfc4514_string()


def rows(kubeconfig: str | Path | None, context: str | None, *, fix: str, now: dt.datetime | None = None,
         timeout: float = TIMEOUT_S) -> list[Result]:
    """The ``control-plane-certificates`` row of the cluster ``kubeconfig`` (its ``context``) reaches.

    The API server's serving certificate through one TLS handshake with the server the kubeconfig names,
    and the client certificate the kubeconfig holds, if any (a token or exec plugin has none). ``fix`` says
    how to renew (:func:`fix_for`). A certificate that cannot be read leaves the row not measured, unless
    one that was read already fails it.
    """
    from gpucluster import kube

    now = now or dt.datetime.now(dt.timezone.utc)
    with kube.Kube(kubeconfig, context=context) as api:
        cfg = api.configuration
    url = urllib.parse.urlsplit(cfg.host)
    subject = f"apiserver/{url.netloc or cfg.host}"
    if url.scheme != "https" or not url.hostname:
        return [skip("control-plane-certificates", subject,
                     f"the API server {cfg.host} is not served over TLS: it has no certificate to read")]
    certs: list[Cert] = []
    unread: list[str] = []
    try:
        certs.append(of(f"API server serving certificate ({url.netloc})",
                        served(url.hostname, url.port or 443, cfg.tls_server_name, timeout)))
    except (OSError, ValueError) as err:  # refused, timed out, no TLS, no parsable certificate
        unread.append(f"the API server's certificate at {url.netloc} could not be read: "
                      f"{kube.why_unreachable(err)}")
    if cfg.cert_file:
        try:
            client = x509.load_pem_x509_certificate(Path(cfg.cert_file).read_bytes())
            certs.append(of(f"kubeconfig client certificate ({_common_name(client)})", client))
        except (OSError, ValueError) as err:
            unread.append(f"the kubeconfig's client certificate could not be read: {err}")
    if not unread:
        return [judge(subject, certs, now, fix)]
    row = judge(subject, certs, now, fix) if certs else None
    if row is not None and row.verdict is Verdict.failed:
        return [fail(row.check, subject, row.expected, row.actual, f"{row.reason}; also: {'; '.join(unread)}")]
    seen = f" (read: {row.actual})" if row is not None else ""
    return [skip("control-plane-certificates", subject, "; ".join(unread) + seen)]
