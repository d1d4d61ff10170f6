"""Certificates for the local control plane: one self-signed CA, serving and client certificates.

Everything is written under ``<state>/pki`` with 0600 keys. Nothing here touches the network.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Client identities: file stem → (common name = user, organizations = groups).
CLIENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "admin": ("gpucluster-admin", ("system:masters",)),
    "apiserver-etcd-client": ("kube-apiserver-etcd-client", ()),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
    # kwok plays every kubelet (node status, leases, pod status and deletion): admin rights keep
    # it independent of the Node authorizer, which only knows real kubelets' per-node identities.
    "kwok": ("kwok", ("system:masters",)),
}

#: Names the API server answers to (in-cluster DNS names included for pods' service accounts).
APISERVER_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
LOOPBACK = ipaddress.ip_address("127.0.0.1")
#: Validity of every certificate the local world signs, and of its CA, in days: kubeadm's own defaults
#: (k8s.io/kubernetes v1.37.2 cmd/kubeadm/app/constants/constants.go:47-50, ``CertificateValidityPeriod``
#: and ``CACertificateValidityPeriod``). A fresh world (``gpucluster local up --reset``) gets new ones.
LEAF_DAYS = 365
CA_DAYS = 3650


@dataclass(frozen=True)
class Pki:
    """Paths of the generated material."""

    dir: Path

    def cert(self, stem: str) -> Path:
        return self.dir / f"{stem}.crt"

    def key(self, stem: str) -> Path:
        return self.dir / f"{stem}.key"

    @property
    def ca(self) -> Path:
        return self.cert("ca")

    @property
    def sa_private(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_public(self) -> Path:
        return self.dir / "sa.pub"


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(b"")
    path.chmod(0o600)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _validity(builder: x509.CertificateBuilder, days: int) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.timezone.utc)
    return builder.not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(
        now + dt.timedelta(days=days)
    )


def _sign_leaf(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    subject: x509.Name,
    usages: list[x509.ObjectIdentifier],
    sans: list[x509.GeneralName] | None = None,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return key, _validity(builder, LEAF_DAYS).sign(ca_key, hashes.SHA256())


def _write_pair(pki: Pki, stem: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
    _write_key(pki.key(stem), key)
    pki.cert(stem).write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def generate(directory: Path, service_ip: str) -> Pki:
    """Create the CA, the serving certs (API server, etcd), every client cert and the SA key pair.

    ``service_ip`` is the first address of the service range (the ``kubernetes`` Service), which
    in-cluster clients use to reach the API server.
    """
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    pki = Pki(directory)
    ca_key = _key()
    ca_subject = _name("gpucluster-local-ca")
    ca_cert = _validity(
        x509.CertificateBuilder()
        .subject_name(ca_subject)
        .issuer_name(ca_subject)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, True, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False),
        CA_DAYS,
    ).sign(ca_key, hashes.SHA256())
    _write_pair(pki, "ca", ca_key, ca_cert)

    server, client = ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH
    api_sans: list[x509.GeneralName] = [x509.DNSName(n) for n in APISERVER_NAMES]
    api_sans += [x509.IPAddress(LOOPBACK), x509.IPAddress(ipaddress.ip_address(service_ip))]
    _write_pair(pki, "apiserver", *_sign_leaf(ca_key, ca_cert, _name("kube-apiserver"), [server], api_sans))
    # etcd serves clients and its own (single) peer with the same loopback-only certificate.
    etcd_sans: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(LOOPBACK)]
    _write_pair(pki, "etcd", *_sign_leaf(ca_key, ca_cert, _name("etcd"), [server, client], etcd_sans))
    # Controller manager and scheduler serve /healthz with this one, so probes can verify them.
    _write_pair(
        pki, "serving", *_sign_leaf(ca_key, ca_cert, _name("gpucluster-loopback"), [server], etcd_sans)
    )
    for stem, (cn, orgs) in CLIENTS.items():
        _write_pair(pki, stem, *_sign_leaf(ca_key, ca_cert, _name(cn, orgs), [client]))

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(pki.sa_private, sa_key)
    pki.sa_public.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pki
