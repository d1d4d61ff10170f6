"""What the target cluster offers and whether it has settled: API discovery, nodes, readiness.

Used before a stack runs (which kinds are served, which nodes exist) and after (quota status written
by the controller manager). Every request is bounded by a timeout and every wait by a deadline.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

from gpucluster import kube
from gpucluster.errors import ClusterError
from gpucluster.poll import poll
from gpucluster.pulumi import ownership
from gpucluster.pulumi.objects import Obj
from gpucluster.pulumi.ownership import RELEASE, Ref
from gpucluster.pulumi.plan import ClusterFacts

_TIMEOUT = 10  # seconds per request


def _client(kubeconfig: str | Path | None, context: str | None = None) -> kube.Kube:
    return kube.Kube(kubeconfig, context=context, timeout=_TIMEOUT)


def _get(api: kube.Kube, path: str) -> dict:
    return api.get(path) or {}


def api_resources(api: kube.Kube) -> dict[tuple[str, str], tuple[str, bool]]:
    """Every (apiVersion, kind) the API server serves → (plural, namespaced), from discovery."""
    out: dict[tuple[str, str], tuple[str, bool]] = {}
    group_versions = ["v1"] + [v["groupVersion"] for g in _get(api, "/apis").get("groups", [])
                               for v in g.get("versions", [])]
    for gv in group_versions:
        path = "/api/v1" if gv == "v1" else f"/apis/{gv}"
        for res in _get(api, path).get("resources", []):
            if "/" not in res["name"]:  # skip subresources such as pods/status
                out.setdefault((gv, res["kind"]), (res["name"], bool(res.get("namespaced"))))
    return out


def served_kinds(api: kube.Kube) -> frozenset[tuple[str, str]]:
    """Every (apiVersion, kind) the API server serves, from discovery."""
    return frozenset(api_resources(api))


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
    """Ask the cluster what it serves, which nodes it has, and which cluster it is."""
    api = _client(kubeconfig, context)
    try:
        resources = api_resources(api)
        uid = str(_get(api, f"{kube.NAMESPACES}/kube-system").get("metadata", {}).get("uid", ""))
        return ClusterFacts(served=frozenset(resources), nodes=node_names(api), remote_charts=remote_charts,
                            simulated=simulated, resources=resources, uid=uid)
    finally:
        api.close()


def existing(kubeconfig: str | Path | None, refs: Collection[Ref],
             resources: Mapping[tuple[str, str], tuple[str, bool]], context: str | None = None) -> tuple[set[Ref], int]:
    """Which of ``refs`` exist on the cluster, and how many API calls it took to find out.

    Cheap by construction: metadata-only lists, one per kind and namespace (one per kind when
    cluster-scoped), none at all in a namespace that does not exist or for a kind the cluster does not
    serve (no such object can exist). ``resources``: discovery's (apiVersion, kind) → (plural,
    namespaced) (:func:`api_resources`). A Helm release exists when the release's namespace holds a
    Helm record of that name: a Secret (Helm's default storage) or a ConfigMap (``HELM_DRIVER=configmap``)
    labelled ``owner=helm``, ``name=<release>``, whatever its status (Helm refuses to install over any).
    """
    by_kind = _by_kind(resources)
    api = _client(kubeconfig, context)
    try:
        namespaces = {m.get("name") for m in api.metadata(kube.NAMESPACES) or []}
        calls = 1
        found = {r for r in refs if (r.group, r.kind) == ("", "Namespace") and r.name in namespaces}
        wanted: dict[tuple[str, str, str], set[str]] = {}
        for r in refs:
            if (r.group, r.kind) != ("", "Namespace") and (not r.namespace or r.namespace in namespaces):
                wanted.setdefault((r.group, r.kind, r.namespace), set()).add(r.name)
        for (group, kind, ns), names in sorted(wanted.items()):
            if (group, kind) == RELEASE:
                paths = [kube.with_selector(kube.namespaced(ns, plural), "owner=helm")
                         for plural in ("secrets", "configmaps")]
                label = "name"
            elif (group, kind) in by_kind:
                gv, plural, namespaced = by_kind[(group, kind)]
                base = "/api/v1" if gv == "v1" else f"/apis/{gv}"
                paths = [f"{base}/namespaces/{ns}/{plural}" if ns and namespaced else f"{base}/{plural}"]
                label = ""
            else:
                continue  # not served: no object of that kind exists
            present: set[str] = set()
            for path in paths:
                calls += 1
                metas = api.metadata(path) or []
                present |= {(m.get("labels") or {}).get(label, "") if label else m.get("name", "") for m in metas}
            found |= {Ref(kind, ns, n, group) for n in names & present}
        return found, calls
    finally:
        api.close()


def _by_kind(resources: Mapping[tuple[str, str], tuple[str, bool]]) -> dict[tuple[str, str], tuple[str, str, bool]]:
    """(group, kind) → (apiVersion, plural, namespaced), the first version discovery lists for each."""
    by_kind: dict[tuple[str, str], tuple[str, str, bool]] = {}
    for (gv, kind), (plural, namespaced) in resources.items():
        by_kind.setdefault((gv.split("/")[0] if "/" in gv else "", kind), (gv, plural, namespaced))
    return by_kind


def applied_by_provider(kubeconfig: str | Path | None, refs: Collection[Ref],
                        resources: Mapping[tuple[str, str], tuple[str, bool]], context: str | None = None) -> set[Ref]:
    """Which of ``refs`` (objects that exist) the Kubernetes provider applied, by their ``managedFields``
    (:func:`gpucluster.pulumi.ownership.applied_by_provider`): one GET each, only for the few objects the
    creates journal names. A Helm release, a kind not served or an object gone since is not one."""
    by_kind = _by_kind(resources)
    out: set[Ref] = set()
    api = _client(kubeconfig, context)
    try:
        for r in refs:
            if (r.group, r.kind) == RELEASE or (r.group, r.kind) not in by_kind:
                continue
            gv, plural, namespaced = by_kind[(r.group, r.kind)]
            base = "/api/v1" if gv == "v1" else f"/apis/{gv}"
            path = f"{base}/namespaces/{r.namespace}/{plural}/{r.name}" if r.namespace and namespaced else \
                f"{base}/{plural}/{r.name}"
            obj = api.get(path)
            if obj is not None and ownership.applied_by_provider(obj.get("metadata") or {}):
                out.add(r)
        return out
    finally:
        api.close()


def live_uids(kubeconfig: str | Path | None, wanted: Mapping[Ref, str], context: str | None = None) -> dict[Ref, str]:
    """The uid of each object of ``wanted`` (ref → apiVersion) that exists now: metadata-only lists, one
    per kind and namespace (one per kind when cluster-scoped), none for a kind the cluster does not serve."""
    api = _client(kubeconfig, context)
    try:
        resources = api_resources(api)
        groups: dict[tuple[str, str, str], dict[str, Ref]] = {}
        for ref, api_version in wanted.items():
            groups.setdefault((api_version, ref.kind, ref.namespace), {})[ref.name] = ref
        out: dict[Ref, str] = {}
        for (api_version, kind, ns), names in sorted(groups.items()):
            if (api_version, kind) not in resources:
                continue
            plural, namespaced = resources[(api_version, kind)]
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            path = f"{base}/namespaces/{ns}/{plural}" if ns and namespaced else f"{base}/{plural}"
            for meta in api.metadata(path) or []:
                if meta.get("name") in names:
                    out[names[meta["name"]]] = str(meta.get("uid", ""))
        return out
    finally:
        api.close()


def namespace_contents(kubeconfig: str | Path | None, namespaces: Iterable[str],
                       context: str | None = None) -> dict[str, tuple[int, int]]:
    """Pods and PersistentVolumeClaims in each namespace now (metadata-only lists; (0, 0) when it is gone)."""
    api = _client(kubeconfig, context)
    try:
        return {ns: (len(api.metadata(kube.namespaced(ns, "pods")) or []),
                     len(api.metadata(kube.namespaced(ns, "persistentvolumeclaims")) or []))
                for ns in namespaces}
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
