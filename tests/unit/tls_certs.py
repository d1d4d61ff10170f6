"""Certificates for tests that need real TLS: self-signed with ``cryptography``, valid over a chosen window."""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

#: The moment every window is counted from (the test session's start).
NOW = dt.datetime.now(dt.timezone.utc)


def signed(cn: str, *, ends_in: dt.timedelta, starts_in: dt.timedelta | None = None) -> tuple[bytes, bytes]:
    """A self-signed certificate for ``cn`` valid from ``NOW + starts_in`` (default: a year before its end) to
    ``NOW + ends_in``: (cert, key) PEM."""
    starts_in = ends_in - dt.timedelta(days=365) if starts_in is None else starts_in
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(NOW + starts_in).not_valid_after(NOW + ends_in)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def server_context(folder: Path, pair: tuple[bytes, bytes]) -> ssl.SSLContext:
    """A TLS server context presenting ``pair`` (written into ``folder``); OpenSSL loads an expired one too."""
    (folder / "srv.crt").write_bytes(pair[0])
    (folder / "srv.key").write_bytes(pair[1])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "srv.crt", folder / "srv.key")
    return context
