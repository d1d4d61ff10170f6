"""What Helm says is installed: the release records Helm 3 keeps in Secrets.

Helm's storage driver (``secret``, the default; Pulumi's ``helm.v3.Release`` uses it too) stores each
revision of a release as a Secret of type ``helm.sh/release.v1`` named
``sh.helm.release.v1.<release>.v<revision>`` in the release's own namespace, labelled ``owner=helm``,
``name=<release>``, ``status=<deployed|superseded|failed|...>`` (helm/helm ``pkg/storage/driver/
secrets.go``). Its ``release`` key holds the release as JSON, gzip-compressed and base64-encoded by Helm
(``pkg/storage/driver/util.go`` ``encodeRelease``; ``decodeRelease`` skips decompression without the
gzip magic), and base64-encoded once more by the API, like every Secret value. Read from it: the chart's
identity (``chart.metadata.name`` and ``.version``), the revision and the values it was installed with
(``config``). Where several records of one release say ``deployed`` (Helm's own note: concurrent runs
corrupt its history), the highest revision is the release, as Helm takes it (helm v3.18.6
``pkg/storage/storage.go:126``).

Anyone who may create Secrets in a namespace can write such a record, so verification trusts one only
where Helm itself would look for it:

- records are listed only in the namespaces the spec installs releases into (:func:`deployed_in`),
  never cluster-wide, so a tenant admin's Secret in the tenant's namespace is never read;
- a record counts only for the release it names in the namespace it lives in: one whose body claims
  another namespace or release than its Secret is ignored (:func:`decode` says why);
- at most :data:`MAX_RELEASE_BYTES` are decompressed, inflated piece by piece, so a gzip bomb (a
  Secret holds up to 1 MiB, which gzip can inflate a thousandfold) is refused before it is inflated.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from gpucluster import kube

#: Deployed revisions only: one per installed release.
SELECTOR = "owner=helm,status=deployed"
#: The most a record may inflate to. "Individual Secrets are limited to 1MiB in size" (Kubernetes docs,
#: Secrets, "Size limit"), so 16 MiB allows a real record sixteenfold compression.
MAX_RELEASE_BYTES = 16 * 1024 * 1024
_GZIP_MAGIC = b"\x1f\x8b\x08"
#: Output taken from the inflater at a time, so refusing a bomb holds at most the limit plus this.
_PIECE = 1024 * 1024


@dataclass(frozen=True)
class Installed:
    """One deployed Helm release."""

    name: str
    namespace: str
    chart: str
    version: str
    revision: int
    #: The values the release was installed with (Helm's ``config``: what the installer passed, not the
    #: chart's defaults; helm v3.18.6 pkg/release/release.go:31, the version the Kubernetes provider uses).
    config: dict[str, Any] = field(default_factory=dict)


def deployed_in(namespace: str) -> str:
    """The LIST of the deployed release records in one namespace (where Helm keeps that namespace's)."""
    return kube.with_selector(kube.namespaced(namespace, "secrets"), SELECTOR)


def gunzip(data: bytes, limit: int = MAX_RELEASE_BYTES) -> bytes:
    """``data`` decompressed, never holding more than ``limit`` + 1 bytes of output; ValueError beyond it."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip framing
    out = bytearray()
    pending = data
    while not inflater.eof:
        piece = inflater.decompress(pending, min(_PIECE, limit + 1 - len(out)))
        out += piece
        if len(out) > limit:
            raise ValueError(f"decompresses to more than {limit // (1024 * 1024)} MiB: refused unread (a Helm "
                             "release record is far smaller; a gzip bomb?)")
        pending = inflater.unconsumed_tail
        if not piece and not pending:
            raise ValueError("the gzip data ends early")
    return bytes(out)


def decode(secret: dict[str, Any], limit: int = MAX_RELEASE_BYTES) -> Installed:
    """The release a Helm storage Secret records; ValueError when it is not one Helm wrote for its namespace."""
    meta = secret.get("metadata") or {}
    where = f"secret {meta.get('namespace')}/{meta.get('name')}"
    raw = (secret.get("data") or {}).get("release")
    if not raw:
        raise ValueError(f"{where} has no release data")
    try:
        payload = base64.b64decode(base64.b64decode(raw))
        if payload[:3] == _GZIP_MAGIC:  # Helm compresses, but older records may be plain JSON
            payload = gunzip(payload, limit)
        elif len(payload) > limit:
            raise ValueError(f"holds more than {limit // (1024 * 1024)} MiB")
        release = json.loads(payload)
    except (binascii.Error, OSError, zlib.error, ValueError) as err:
        raise ValueError(f"{where}: not a Helm release record ({err})") from None
    if not isinstance(release, dict):
        raise ValueError(f"{where}: not a Helm release record (not a JSON object)")
    name, namespace = str(release.get("name", "")), str(release.get("namespace", ""))
    label = str((meta.get("labels") or {}).get("name", ""))
    if namespace != meta.get("namespace") or name != label:
        raise ValueError(f"{where} claims release {namespace}/{name}: ignored (Helm keeps a release's records in "
                         "its own namespace, under its own name)")
    chart = (release.get("chart") or {}).get("metadata") or {}
    config = release.get("config")
    return Installed(name=name, namespace=namespace, chart=str(chart.get("name", "")),
                     version=str(chart.get("version", "")), revision=int(release.get("version") or 0),
                     config=config if isinstance(config, dict) else {})


def encode(release: dict[str, Any]) -> str:
    """A Secret's ``release`` value for a release dict, as Helm writes it (for tests and fault injection)."""
    helm = base64.b64encode(gzip.compress(json.dumps(release).encode())).decode()
    return base64.b64encode(helm.encode()).decode()
