"""Reading Kubernetes objects the way the scheduler does: requests, tolerations, selectors, readiness.

Pure functions of API objects (dicts). The semantics follow the Kubernetes API documentation of the
fields they read (``core/v1`` Toleration, NodeSelectorRequirement, ResourceRequirements): a
toleration with an empty key and ``Exists`` tolerates every taint, ``Equal`` is the default operator,
an empty effect matches every effect; extended resources are requested through limits (requests
default to them); an init container's request counts only when it is larger than the sum of the
app containers'.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpucluster.quantity import parse_quantity

Obj = dict[str, Any]

#: Extended resources the doctor reasons about (the device plugin's and the RDMA plugin's).
EXTENDED_PREFIXES = ("nvidia.com/", "rdma/")
#: Pod annotation Volcano (and kube-batch before it) sets to tie a pod to its PodGroup.
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
#: Taint effects that keep a pod off a node (PreferNoSchedule only lowers a score).
HARD_EFFECTS = ("NoSchedule", "NoExecute")


def name_of(obj: Obj) -> str:
    meta = obj.get("metadata", {})
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta.get("name"))


def _int(value: Any) -> int:
    return int(parse_quantity(str(value)))


def extended_requests(pod: Obj) -> dict[str, int]:
    """The pod's GPU/RDMA extended resources (what the scheduler needs free on one node)."""
    spec = pod.get("spec", {})

    def of(container: Obj) -> dict[str, int]:
        res = container.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {k: _int(v) for k, v in merged.items() if k.startswith(EXTENDED_PREFIXES)}

    total: dict[str, int] = {}
    for c in spec.get("containers") or []:
        for k, v in of(c).items():
            total[k] = total.get(k, 0) + v
    for c in spec.get("initContainers") or []:
        for k, v in of(c).items():
            total[k] = max(total.get(k, 0), v)
    return {k: v for k, v in total.items() if v > 0}


def quantity_map(resources: dict[str, Any] | None) -> dict[str, int]:
    """Extended resources of a node's capacity/allocatable (or a quota's hard/used) as integers."""
    return {k: _int(v) for k, v in (resources or {}).items() if k.startswith(EXTENDED_PREFIXES)}


def tolerates(tolerations: Iterable[Obj], taint: Obj) -> bool:
    """True when one of ``tolerations`` tolerates ``taint`` (core/v1 Toleration semantics)."""
    for t in tolerations:
        op = t.get("operator") or "Equal"
        key = t.get("key") or ""
        if key and key != taint.get("key"):
            continue
        if not key and op != "Exists":
            continue
        if op == "Equal" and (t.get("value") or "") != (taint.get("value") or ""):
            continue
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        return True
    return False


def untolerated(pod: Obj, taints: Iterable[Obj]) -> list[Obj]:
    """The node's NoSchedule/NoExecute taints the pod does not tolerate."""
    tols = pod.get("spec", {}).get("tolerations") or []
    return [t for t in taints if t.get("effect") in HARD_EFFECTS and not tolerates(tols, t)]


def taint_text(taint: Obj) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint['key']}{value}:{taint['effect']}"


def toleration_for(taint: Obj) -> str:
    """The toleration that admits ``taint``, as one line of pod-spec YAML."""
    if taint.get("value"):
        return (f"{{key: {taint['key']}, operator: Equal, value: {taint['value']}, "
                f"effect: {taint['effect']}}}")
    return f"{{key: {taint['key']}, operator: Exists, effect: {taint['effect']}}}"


def _requirement(req: Obj, labels: dict[str, str]) -> bool:
    key, op, values = req.get("key", ""), req.get("operator", ""), req.get("values") or []
    have = labels.get(key)
    if op == "In":
        return have is not None and have in values
    if op == "NotIn":
        return have is None or have not in values
    if op == "Exists":
        return have is not None
    if op == "DoesNotExist":
        return have is None
    if op in ("Gt", "Lt") and have is not None and values:
        try:
            a, b = int(have), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def selects(pod: Obj, labels: dict[str, str]) -> bool:
    """True when the pod's nodeSelector and required node affinity accept a node with ``labels``."""
    spec = pod.get("spec", {})
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    # Terms are ORed; a term's expressions are ANDed (matchFields are about metadata.name only).
    for term in terms:
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        name = labels.get("kubernetes.io/hostname", "")
        if all(_requirement(e, labels) for e in exprs) and all(
                _requirement({**f, "key": "metadata.name"}, {"metadata.name": name}) for f in fields):
            return True
    return False


def ready(node: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in node.get("status", {}).get("conditions") or [])


def bound(pod: Obj) -> bool:
    return bool(pod.get("spec", {}).get("nodeName"))


def finished(pod: Obj) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def used_by_node(pods: Iterable[Obj]) -> dict[str, dict[str, int]]:
    """Extended resources held on each node by bound pods that have not finished."""
    out: dict[str, dict[str, int]] = {}
    for p in pods:
        if not bound(p) or finished(p):
            continue
        held = out.setdefault(p["spec"]["nodeName"], {})
        for k, v in extended_requests(p).items():
            held[k] = held.get(k, 0) + v
    return out


def group_of(pod: Obj) -> str | None:
    """The Volcano PodGroup a pod belongs to (its annotation), if any."""
    return (pod.get("metadata", {}).get("annotations") or {}).get(GROUP_ANNOTATION)


def claim_names(pod: Obj) -> list[str]:
    """Names of the ResourceClaims the pod uses (generated ones from its status)."""
    generated = {s.get("name"): s.get("resourceClaimName")
                 for s in pod.get("status", {}).get("resourceClaimStatuses") or []}
    out = []
    for ref in pod.get("spec", {}).get("resourceClaims") or []:
        name = ref.get("resourceClaimName") or generated.get(ref.get("name"))
        if name:
            out.append(name)
    return out


def wants_claims(pod: Obj) -> bool:
    return bool(pod.get("spec", {}).get("resourceClaims"))
