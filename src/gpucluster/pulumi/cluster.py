"""What the target cluster offers and whether it has settled: API discovery, nodes, readiness.

Used before a stack runs (which kinds are served, which nodes exist) and after (quota status written
by the controller manager). Every request is bounded by a timeout and every wait by a deadline.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gpucluster import kube
from gpucluster.errors import ClusterError
from gpucluster.poll import poll
from gpucluster.pulumi.objects import Obj
from gpucluster.pulumi.plan import ClusterFacts

_TIMEOUT = 10  # seconds per request


def _client(kubeconfig: str | Path | None, context: str | None = None) -> kube.Kube:
    return kube.Kube(kubeconfig, context=context, timeout=_TIMEOUT)


def _get(api: kube.Kube, path: str) -> dict:
    return api.get(path) or {}


def served_kinds(api: kube.Kube) -> frozenset[tuple[str, str]]:
    """Every (apiVersion, kind) the API server serves, from discovery."""
    out: set[tuple[str, str]] = set()
    group_versions = ["v1"] + [v["groupVersion"] for g in _get(api, "/apis").get("groups", [])
                               for v in g.get("versions", [])]
    for gv in group_versions:
        path = "/api/v1" if gv == "v1" else f"/apis/{gv}"
        for res in _get(api, path).get("resources", []):
            if "/" not in res["name"]:  # skip subresources such as pods/status
                out.add((gv, res["kind"]))
    return frozenset(out)


def node_names(api: kube.Kube) -> frozenset[str]:
    """Names of the registered Nodes."""
    return frozenset(n["metadata"]["name"] for n in api.items(kube.NODES))


def served_kinds_of(kubeconfig: str | Path | None, context: str | None = None) -> frozenset[tuple[str, str]]:
    """Every (apiVersion, kind) the cluster of ``kubeconfig`` serves now."""
    api = _client(kubeconfig, context)
    try:
        return served_kinds(api)
    finally:
        api.close()


def discover(kubeconfig: str | Path | None, *, remote_charts: bool = True, context: str | None = None,
             simulated: bool = False) -> ClusterFacts:
    """Ask the cluster what it serves and which nodes it has."""
    api = _client(kubeconfig, context)
    try:
        return ClusterFacts(served=served_kinds(api), nodes=node_names(api), remote_charts=remote_charts,
                            simulated=simulated)
    finally:
        api.close()


def wait_ready(kubeconfig: str | Path | None, objects: Iterable[Obj], timeout: float = 60.0,
               context: str | None = None) -> list[str]:
    """Wait until the cluster has acted on what the stacks applied; return what is still not ready.

    Readiness here is observable controller work, not just the object existing: every Namespace is
    Active and every ResourceQuota's status lists the same hard limits as its spec (written by the
    controller manager's quota controller; until then quota admission cannot count usage).
    """
    api = _client(kubeconfig, context)
    pending = [o for o in objects if o["kind"] in ("Namespace", "ResourceQuota")]
    try:
        return poll(lambda: [_describe(o) for o in pending if not _ready(api, o)], timeout=timeout, every=0.5,
                    done=lambda waiting: not waiting)
    finally:
        api.close()


def _describe(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{obj['kind']} {meta.get('namespace', '') + '/' if meta.get('namespace') else ''}{meta['name']}"


def _ready(api: kube.Kube, obj: Obj) -> bool:
    meta = obj["metadata"]
    try:
        if obj["kind"] == "Namespace":
            live = _get(api, f"{kube.NAMESPACES}/{meta['name']}")
            return live.get("status", {}).get("phase") == "Active"
        live = _get(api, kube.namespaced(meta["namespace"], "resourcequotas", meta["name"]))
        hard = live.get("status", {}).get("hard") or {}
        return set(hard) == set(obj["spec"]["hard"])
    except ClusterError as err:
        if kube.transient(err):  # not ready yet; a refused read (403) will not become ready by waiting
            return False
        raise
