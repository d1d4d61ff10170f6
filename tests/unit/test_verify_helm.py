"""Helm release records are tenant-writable Secrets: verify reads them only where Helm keeps a release's
records (its own namespace), trusts one only for the release it names there, and never inflates more
than ``helm.MAX_RELEASE_BYTES``."""

from __future__ import annotations

import base64
import json
import tracemalloc
import zlib
from urllib.parse import unquote

import pytest

from gpucluster.render import releases
from gpucluster.verify import cluster, helm, snapshot
from gpucluster.verify.model import Verdict
from gpucluster.verify.snapshot import Snapshot


def record(name: str, namespace: str, chart: str, version: str, *, lives_in: str | None = None,
           config: dict | None = None) -> dict:
    """A deployed release's Secret as Helm 3 stores it; ``lives_in`` puts it in another namespace than it claims;
    ``config`` is the values it was installed with."""
    values = config or {}
    release = {"name": name, "namespace": namespace, "version": 1, "info": {"status": "deployed"},
               "chart": {"metadata": {"name": chart, "version": version}}, "config": values}
    return {"metadata": {"name": f"sh.helm.release.v1.{name}.v1", "namespace": lives_in or namespace,
                         "labels": {"owner": "helm", "name": name, "status": "deployed"}},
            "type": "helm.sh/release.v1", "data": {"release": helm.encode(release)}}


def rows(spec, secrets: list[dict]) -> dict[str, tuple[Verdict, str]]:
    return {r.subject: (r.verdict, r.reason) for r in cluster.chart_checks(spec, Snapshot(helm_releases=secrets))}


@pytest.fixture(scope="module")
def spec(lab_spec):
    return lab_spec


def installed(spec) -> list[dict]:
    return [record(r.name, r.namespace, r.chart, r.version, config=r.values) for r in releases(spec)]


def test_every_release_recorded_in_its_own_namespace_passes(spec):
    assert {v for v, _ in rows(spec, installed(spec)).values()} == {Verdict.passed}


def test_a_forged_record_in_a_tenant_namespace_is_ignored(spec):
    op = next(r for r in releases(spec) if r.name == "gpu-operator")
    tenant = spec.tenants[0].ns
    forged = record(op.name, op.namespace, op.chart, op.version, lives_in=tenant)
    forged["metadata"]["namespace"] = tenant
    others = [s for s in installed(spec) if s["metadata"]["labels"]["name"] != op.name]
    verdict, _ = rows(spec, [*others, forged])["release/gpu-operator"]
    assert verdict is Verdict.failed


def test_a_record_that_claims_another_namespace_is_ignored_and_the_row_says_so(spec):
    # A record in a release namespace (writable by whoever may create Secrets there) that claims the GPU
    # Operator's release in the GPU Operator's namespace.
    op = next(r for r in releases(spec) if r.name == "gpu-operator")
    other_ns = next(r.namespace for r in releases(spec) if r.namespace != op.namespace)
    claim = record(op.name, op.namespace, op.chart, op.version, lives_in=other_ns)
    others = [s for s in installed(spec) if s["metadata"]["labels"]["name"] != op.name]
    verdict, reason = rows(spec, [*others, claim])["release/gpu-operator"]
    assert verdict is Verdict.failed
    assert f"claims release {op.namespace}/{op.name}: ignored" in reason


class FakeKube:
    """Answers LISTs from a table of objects; records every path asked."""

    asked: list[str] = []
    secrets: list[dict] = []

    def __init__(self, *_a, **_k) -> None:
        pass

    def __enter__(self) -> FakeKube:
        return self

    def __exit__(self, *_exc) -> None:
        pass

    def list(self, path: str) -> list[dict]:
        FakeKube.asked.append(unquote(path))
        if "secrets" not in path:
            return []
        namespace = path.split("/namespaces/")[1].split("/")[0] if "/namespaces/" in path else None
        return [s for s in FakeKube.secrets if namespace in (None, s["metadata"]["namespace"])]

    def items(self, path: str) -> list[dict]:
        return self.list(path)

    def create(self, _path: str, _body: dict) -> dict:
        return {"status": {"allowed": False}}


def test_records_are_listed_only_in_the_release_namespaces(spec, monkeypatch):
    op = next(r for r in releases(spec) if r.name == "gpu-operator")
    tenant = spec.tenants[0].ns
    FakeKube.asked = []
    # only a forged record, in a tenant namespace, names the GPU Operator's release
    FakeKube.secrets = [record(op.name, op.namespace, op.chart, op.version, lives_in=tenant)]
    FakeKube.secrets[0]["metadata"]["namespace"] = tenant
    monkeypatch.setattr(snapshot.kube, "Kube", FakeKube)
    snap = cluster.fetch(spec, "unused")
    secret_lists = sorted(p for p in FakeKube.asked if "secrets" in p)
    assert secret_lists == sorted({f"/api/v1/namespaces/{r.namespace}/secrets?labelSelector=owner=helm,status=deployed"
                                   for r in releases(spec)})
    assert snap.helm_releases == []
    verdict, _ = {r.subject: (r.verdict, r.reason) for r in cluster.chart_checks(spec, snap)}["release/gpu-operator"]
    assert verdict is Verdict.failed


def _bomb(inflated: int) -> bytes:
    """gzip of ``inflated`` zero bytes, written piece by piece (never held whole)."""
    deflater = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1024 * 1024)
    parts = [deflater.compress(zeros) for _ in range(inflated // len(zeros))]
    return b"".join([*parts, deflater.flush()])


def test_a_gzip_bomb_is_refused_without_inflating_it():
    bomb = _bomb(128 * 1024 * 1024)  # 128 MiB of zeros, about 128 KiB compressed: fits a Secret
    assert len(bomb) < 1024 * 1024
    secret = {"metadata": {"namespace": "gpu-operator", "name": "sh.helm.release.v1.gpu-operator.v1",
                           "labels": {"name": "gpu-operator"}},
              "data": {"release": base64.b64encode(base64.b64encode(bomb)).decode()}}
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"decompresses to more than 16 MiB: refused unread"):
            helm.decode(secret)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the limit (16 MiB, in a growing buffer) plus one piece and the record: a quarter of what it inflates to
    assert peak < 32 * 1024 * 1024, peak


def test_a_large_real_record_still_decodes():
    # A record just under the limit decodes: the limit refuses bombs, not big charts.
    manifest = "x" * (helm.MAX_RELEASE_BYTES - 4096)
    secret = record("big", "gpu-operator", "gpu-operator", "v26.3.0")
    release = json.loads(helm.gunzip(base64.b64decode(base64.b64decode(secret["data"]["release"]))))
    release["manifest"] = manifest
    secret["data"]["release"] = helm.encode(release)
    assert helm.decode(secret).chart == "gpu-operator"


def test_a_truncated_record_is_not_a_record():
    data = base64.b64decode(base64.b64decode(record("a", "ns", "c", "1")["data"]["release"]))
    with pytest.raises(ValueError, match="ends early"):
        helm.gunzip(data[: len(data) // 2])
