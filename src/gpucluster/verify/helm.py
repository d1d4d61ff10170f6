"""What Helm says is installed: the release records Helm 3 keeps in Secrets.

Helm's storage driver (``secret``, the default; Pulumi's ``helm.v3.Release`` uses it too) stores each
revision of a release as a Secret of type ``helm.sh/release.v1`` labelled ``owner=helm``,
``name=<release>``, ``status=<deployed|superseded|failed|...>``. Its ``release`` key holds the release
as gzip-compressed JSON, base64-encoded by Helm (and base64-encoded once more by the API, like every
Secret value). Only the chart's identity is read from it: ``chart.metadata.name`` and ``.version``.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
from dataclasses import dataclass
from typing import Any

from gpucluster import kube

#: Deployed revisions only: one per installed release.
DEPLOYED = kube.with_selector("/api/v1/secrets", "owner=helm,status=deployed")


@dataclass(frozen=True)
class Installed:
    """One deployed Helm release."""

    name: str
    namespace: str
    chart: str
    version: str
    revision: int


def decode(secret: dict[str, Any]) -> Installed:
    """The release a Helm storage Secret records; ValueError when it is not one Helm wrote."""
    meta = secret.get("metadata") or {}
    raw = (secret.get("data") or {}).get("release")
    if not raw:
        raise ValueError(f"secret {meta.get('namespace')}/{meta.get('name')} has no release data")
    try:
        payload = base64.b64decode(base64.b64decode(raw))
        if payload[:3] == b"\x1f\x8b\x08":  # Helm compresses, but older records may be plain JSON
            payload = gzip.decompress(payload)
        release = json.loads(payload)
    except (binascii.Error, OSError, ValueError) as err:
        raise ValueError(f"secret {meta.get('namespace')}/{meta.get('name')}: not a Helm release record "
                         f"({err})") from None
    chart = (release.get("chart") or {}).get("metadata") or {}
    return Installed(name=str(release.get("name", "")), namespace=str(release.get("namespace", "")),
                     chart=str(chart.get("name", "")), version=str(chart.get("version", "")),
                     revision=int(release.get("version") or 0))


def encode(release: dict[str, Any]) -> str:
    """A Secret's ``release`` value for a release dict, as Helm writes it (for tests and fault injection)."""
    helm = base64.b64encode(gzip.compress(json.dumps(release).encode())).decode()
    return base64.b64encode(helm.encode()).decode()
