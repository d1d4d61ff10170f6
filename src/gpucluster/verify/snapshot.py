"""A snapshot of the cluster state verification needs, fetched with a handful of LIST calls.

Responses are read as raw JSON through the client's REST layer: building the client's model objects
for thousands of nodes costs more than the LIST itself. Besides the LISTs, the caller may pass
:class:`AccessQuestion` s (who may do what): each is one SubjectAccessReview, answered by the API
server's own authorizer, so RBAC is checked by its effect rather than by reading Roles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import astuple, dataclass, field, fields
from pathlib import Path
from typing import Any

from gpucluster import kube
from gpucluster.errors import ApiError, ClusterUnreachable
from gpucluster.verify import helm

Obj = dict[str, Any]
#: SubjectAccessReviews in flight at once (each is one small POST).
REVIEW_THREADS = 8
#: LISTs in flight at once.
LIST_THREADS = 8


@dataclass(frozen=True)
class AccessQuestion:
    """May a member of ``group`` do ``verb`` on ``resource`` (``res/sub`` for a subresource)?"""

    group: str
    verb: str
    api_group: str
    resource: str
    namespace: str | None = None
    name: str | None = None

    def review(self) -> Obj:
        """The SubjectAccessReview that asks it, as a user in ``group`` (and every authenticated user's group)."""
        res, _, sub = self.resource.partition("/")
        attrs: Obj = {"verb": self.verb, "group": self.api_group, "resource": res}
        if sub:
            attrs["subresource"] = sub
        if self.namespace:
            attrs["namespace"] = self.namespace
        if self.name:
            attrs["name"] = self.name
        return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "user": f"gpucluster-verify:{self.group}", "groups": [self.group, "system:authenticated"],
            "resourceAttributes": attrs}}


@dataclass
class Snapshot:
    nodes: list[Obj] = field(default_factory=list)
    resource_slices: list[Obj] | None = None  # None: the API does not serve resource.k8s.io/v1
    device_classes: list[Obj] | None = None
    daemonsets: list[Obj] = field(default_factory=list)
    quotas: list[Obj] = field(default_factory=list)
    limit_ranges: list[Obj] = field(default_factory=list)
    queues: list[Obj] | None = None  # None: Volcano CRDs absent
    hypernodes: list[Obj] | None = None  # None: Volcano's HyperNode CRD absent
    prometheus_rules: list[Obj] | None = None  # None: prometheus-operator CRDs absent
    namespaces: list[Obj] = field(default_factory=list)
    network_policies: list[Obj] = field(default_factory=list)
    priority_classes: list[Obj] = field(default_factory=list)
    admission_policies: list[Obj] | None = None  # None: admissionregistration.k8s.io/v1 not served
    admission_bindings: list[Obj] | None = None
    helm_releases: list[Obj] | None = None  # deployed Helm release records; None: secrets not readable
    helm_error: str = ""  # why ``helm_releases`` is None
    helm_namespaces: tuple[str, ...] = ()  # where the records were read: the spec's release namespaces
    resource_claims: list[Obj] | None = None  # None: resource.k8s.io/v1 not served
    device_taint_rules: list[Obj] | None = None  # None: DeviceTaintRules not served at the spec's version
    access: dict[AccessQuestion, bool] | None = None  # None: not asked, or reviews not allowed
    access_error: str = ""  # why ``access`` is None when questions were asked
    operator_pods: list[Obj] | None = None  # the GPU Operator namespace's pods; None: not read (no operator)
    operator_pods_error: str = ""  # why ``operator_pods`` is None when they were asked for
    #: What the GPU health sources served: ``{"source", "node", "text", "error", "status"}`` per scrape of a
    #: DCGM exporter (``"url": True`` for a --metrics-url endpoint) — see :mod:`gpucluster.verify.health`.
    dcgm: list[Obj] = field(default_factory=list)
    prometheus_url: str = ""  # a Prometheus whose loaded rules were read ("" when none was)
    prometheus_loaded: list[Obj] | None = None  # its rule groups (``/api/v1/rules``); None: not read
    prometheus_error: str = ""  # why ``prometheus_loaded`` is None when a Prometheus was given
    #: Node -> the KubeletConfiguration its kubelet runs with (its /configz), or why it could not be read;
    #: None: not read (no pool sets resourceManagers, or the local world) — see verify/kubelet.py.
    kubelet_configs: dict[str, dict[str, Any] | str] | None = None
    calls: int = 0  # LIST calls
    reviews: int = 0  # SubjectAccessReviews


def to_data(snap: Snapshot) -> dict[str, Any]:
    """The snapshot as JSON-able data (a recorded snapshot: tests replay it with :func:`from_data`).

    Objects keep what verify reads; their ``managedFields`` (the field managers' bookkeeping, often the
    larger part of an object) are dropped.
    """
    out: dict[str, Any] = {}
    for f in fields(Snapshot):
        value = getattr(snap, f.name)
        if f.name == "access":
            value = None if value is None else [[*astuple(q), answer] for q, answer in value.items()]
        elif isinstance(value, list):
            value = [_trim(o) for o in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def from_data(data: dict[str, Any]) -> Snapshot:
    """The snapshot :func:`to_data` recorded; ValueError naming a key that is not a snapshot field."""
    known = {f.name for f in fields(Snapshot)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"not snapshot fields: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    values = dict(data)
    if values.get("access") is not None:
        values["access"] = {AccessQuestion(*row[:-1]): bool(row[-1]) for row in values["access"]}
    if "helm_namespaces" in values:
        values["helm_namespaces"] = tuple(values["helm_namespaces"])
    return Snapshot(**values)


def _trim(obj: Any) -> Any:
    if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict) and "managedFields" in obj["metadata"]:
        return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "managedFields"}}
    return obj


#: Snapshot field → the LIST that fills it.
PATHS = {
    "nodes": kube.NODES,
    "resource_slices": kube.RESOURCE_SLICES,
    "device_classes": kube.DEVICE_CLASSES,
    "daemonsets": kube.DAEMONSETS,
    "quotas": kube.RESOURCE_QUOTAS,
    "limit_ranges": kube.LIMIT_RANGES,
    "queues": kube.VOLCANO_QUEUES,
    "hypernodes": kube.VOLCANO_HYPERNODES,
    "prometheus_rules": kube.PROMETHEUS_RULES,
    "namespaces": kube.NAMESPACES,
    "network_policies": kube.NETWORK_POLICIES,
    "priority_classes": kube.PRIORITY_CLASSES,
    "admission_policies": kube.ADMISSION_POLICIES,
    "admission_bindings": kube.ADMISSION_POLICY_BINDINGS,
    "resource_claims": kube.RESOURCE_CLAIMS,
    "device_taint_rules": kube.DEVICE_TAINT_RULES,
}
#: Core APIs every Kubernetes API server serves: absent means it is not one.
REQUIRED = ("nodes", "daemonsets", "quotas", "limit_ranges", "namespaces")


def fetch(kubeconfig: str | Path | None = None, context: str | None = None,
          questions: Sequence[AccessQuestion] = (), paths: dict[str, str] | None = None,
          helm_namespaces: Sequence[str] = (), operator_namespace: str | None = None,
          then: Callable[[kube.Kube, Snapshot], None] | None = None) -> Snapshot:
    """One LIST each: nodes, ResourceSlices, DeviceClasses, DaemonSets, quotas, limit ranges, Volcano
    queues and HyperNodes, PrometheusRules, namespaces, NetworkPolicies, PriorityClasses, admission policies
    and their bindings, ResourceClaims and DeviceTaintRules (16 calls); Helm's deployed release records in each of
    ``helm_namespaces`` (the namespaces the spec installs releases into: never cluster-wide, where any
    tenant admin could plant one); the pods of ``operator_namespace`` (the GPU Operator's: its DCGM
    exporters and validators); then one SubjectAccessReview per question, and ``then(api, snap)`` (the
    GPU health scrapes). ``paths`` replaces the LIST of a field (an API version that depends on the
    cluster's)."""
    snap = Snapshot()
    lists = {**PATHS, **(paths or {})}
    snap.helm_namespaces = tuple(dict.fromkeys(helm_namespaces))
    helm_paths = [helm.deployed_in(namespace) for namespace in snap.helm_namespaces]
    with kube.Kube(kubeconfig, context=context, timeout=60) as api, ThreadPoolExecutor(LIST_THREADS) as pool:
        # The LISTs are independent: asked at once, they cost about the slowest one, not the sum.
        answers = dict(zip([*lists, *helm_paths], pool.map(lambda path: _list(api, path),
                                                             [*lists.values(), *helm_paths]), strict=True))
        for attr, path in lists.items():
            items = answers[attr]
            if isinstance(items, ApiError):
                if items.status not in (401, 403):
                    raise items
                raise ApiError(f"{items}; verification needs read access to nodes, DRA objects, quotas and the "
                               "operators' CRs", items.status, items.reason) from None
            snap.calls += 1
            if items is None and attr in REQUIRED:
                raise ClusterUnreachable(f"{path} is not served; is this a Kubernetes API server?")
            setattr(snap, attr, items)
        records: list[Obj] = []
        for path in helm_paths:
            items = answers[path]
            if isinstance(items, ApiError):
                snap.helm_error = (f"{items}; reading installed chart versions needs list on Secrets labelled "
                                   f"owner=helm in {', '.join(snap.helm_namespaces)}")
                break
            records += items or []
            snap.calls += 1
        else:
            snap.helm_releases = records
        if operator_namespace:
            try:
                snap.operator_pods = api.items(kube.namespaced(operator_namespace, "pods"))
                snap.calls += 1
            except ApiError as err:
                if err.status not in (401, 403):
                    raise
                snap.operator_pods_error = (f"{err}; reading GPU health from the GPU Operator's exporter and "
                                            f"validator pods needs list on pods in {operator_namespace}")
        if questions:
            review_access(api, snap, questions)
        if then is not None:
            then(api, snap)
    return snap


def _list(api: kube.Kube, path: str) -> list[Obj] | ApiError | None:
    """One LIST; a refusal is returned (the caller words it), anything else (unreachable) raises."""
    try:
        return api.list(path)
    except ApiError as err:
        return err


def review_access(api: kube.Kube, snap: Snapshot, questions: Sequence[AccessQuestion]) -> None:
    """Ask every question (a few at once); a refused review leaves ``snap.access`` None with the reason."""

    def ask(q: AccessQuestion) -> bool:
        out = api.create(kube.SUBJECT_ACCESS_REVIEWS, q.review())
        return bool(out.get("status", {}).get("allowed"))

    try:
        with ThreadPoolExecutor(REVIEW_THREADS) as pool:
            answers = list(pool.map(ask, questions))
    except ApiError as err:
        snap.access_error = (f"{err}; checking tenant RBAC needs create on subjectaccessreviews "
                             "(authorization.k8s.io)")
        return
    snap.access = dict(zip(questions, answers, strict=True))
    snap.reviews = len(questions)
