"""Tenant checks: the whole rendered tenant state against the live one, and tenant RBAC by its effect.

- ``tenant-quota``: the quota's whole ``spec`` (``hard`` compared by value, so ``2Ti`` equals the
  API server's canonical form); a changed, missing or extra key fails.
- ``tenant-limitrange``: the LimitRange's whole ``spec``.
- ``tenant-queue``: the Volcano queue's whole ``spec`` (weight, reclaimable, capability, guarantee,
  deserved, and what the API server defaults: :data:`gpucluster.upstream.VOLCANO_QUEUE_DEFAULTS`).
- ``tenant-security``: the namespace's Pod Security labels, the NetworkPolicy's whole ``spec``, and
  no other NetworkPolicy in the namespace (policies add up, so any other one can only allow more).
- ``tenant-admission``: every tenant admission policy and its binding exactly as rendered, and per
  tenant the allowances its Namespace carries (what the policies read).
- ``tenant-rbac``: one SubjectAccessReview per question, per group the spec binds: each gets what its
  Role grants, and none may write (``deletecollection`` included) what bounds a tenant
  (:data:`PROTECTED_NAMESPACED`, :data:`PROTECTED_CLUSTER`) or act in another namespace
  (:data:`ELSEWHERE`: the other tenants', the operators', ``kube-system``), however the grant came about
  (an extra RoleBinding, a ClusterRoleBinding to ``cluster-admin``, a grant to ``system:authenticated``).

The rendered objects come from the render core; whether the live objects *do* what they say is
proven on a real API server by tests/integration/test_tenant_escape.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpucluster import labels as L
from gpucluster.quantity import parse_quantity
from gpucluster.render import tenant_admission, volcano
from gpucluster.render import tenants as render
from gpucluster.render.volcano import queue_capability
from gpucluster.spec.model import ClusterSpec, Tenant
from gpucluster.spec.nvlink import compute_domains
from gpucluster.upstream import COMPUTE_DOMAIN_API, DRA_COMPUTE_DOMAIN_CHANNEL_CLASS, VOLCANO_QUEUE_DEFAULTS
from gpucluster.verify.model import Result, differences, fail, ok, skip
from gpucluster.verify.snapshot import AccessQuestion, Snapshot

#: Writes no tenant group may be granted in its namespace: the objects that bound it, the scheduler's
#: say over claims and pods. Independent of the rendered Roles on purpose.
PROTECTED_NAMESPACED = [
    ("", "resourcequotas"), ("", "limitranges"), ("networking.k8s.io", "networkpolicies"),
    ("rbac.authorization.k8s.io", "roles"), ("rbac.authorization.k8s.io", "rolebindings"),
    ("resource.k8s.io", "resourceclaims/status"), ("", "pods/binding"),
]
#: Cluster-scoped objects no tenant group may write.
PROTECTED_CLUSTER = [
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
    ("rbac.authorization.k8s.io", "clusterroles"), ("rbac.authorization.k8s.io", "clusterrolebindings"),
    ("scheduling.k8s.io", "priorityclasses"), ("resource.k8s.io", "deviceclasses"),
    ("resource.k8s.io", "resourceslices"), ("node.k8s.io", "runtimeclasses"), ("", "nodes"),
    ("scheduling.volcano.sh", "queues"),
]
WRITES = ("create", "update", "patch", "delete", "deletecollection")
#: What no tenant group may do in any namespace but its own (another tenant's, an operator's,
#: kube-system): run or enter pods, read credentials, change configuration, grant roles, claim devices.
ELSEWHERE = [("get", "", "pods"), ("create", "", "pods"), ("create", "", "pods/exec"), ("delete", "", "pods"),
             ("deletecollection", "", "pods"), ("get", "", "secrets"), ("list", "", "secrets"),
             ("update", "", "configmaps"), ("create", "rbac.authorization.k8s.io", "rolebindings"),
             ("create", "resource.k8s.io", "resourceclaims")]
#: Verbs that lift a user above their own rights.
ESCALATIONS = [("impersonate", "", "users"), ("impersonate", "", "groups"), ("impersonate", "", "serviceaccounts"),
               ("escalate", "rbac.authorization.k8s.io", "clusterroles"),
               ("bind", "rbac.authorization.k8s.io", "clusterroles")]
#: Pod Security labels a tenant namespace carries.
PSA_LABELS = (L.POD_SECURITY_ENFORCE, L.POD_SECURITY_ENFORCE_VERSION, L.POD_SECURITY_AUDIT, L.POD_SECURITY_WARN)
ALLOWANCES = (L.ALLOWED_DEVICE_CLASSES, L.ALLOWED_PRIORITY_CLASSES, L.VOLCANO_QUEUE_NAME)


def _values(resources: dict) -> dict:
    """Quantities by value (``2Ti`` and ``2199023255552`` are equal); anything else as is."""
    out: dict = {}
    for key, value in resources.items():
        try:
            out[key] = parse_quantity(str(value))
        except ValueError:
            out[key] = value
    return out


def _queue_spec(spec: dict) -> dict:
    """A Queue's spec with its resource lists by value (``capability``, ``deserved``, ``guarantee.resource``)."""
    out = dict(spec)
    for key in ("capability", "deserved"):
        if isinstance(out.get(key), dict):
            out[key] = _values(out[key])
    if isinstance(out.get("guarantee"), dict) and isinstance(out["guarantee"].get("resource"), dict):
        out["guarantee"] = {**out["guarantee"], "resource": _values(out["guarantee"]["resource"])}
    return out


def _limits(spec: dict) -> dict:
    return {**spec, "limits": [{k: _values(v) if isinstance(v, dict) else v for k, v in item.items()}
                               for item in spec.get("limits", [])]}


def _row(check: str, subject: str, what: str, want: Any, got: Any) -> Result:
    if got is None:
        return fail(check, subject, what, "missing")
    diff = differences(want, got)
    if diff:
        return fail(check, subject, what, f"{len(diff)} difference(s)", "; ".join(diff[:6]))
    return ok(check, subject, what, "as rendered")


def tenant_checks(spec: ClusterSpec, snap: Snapshot) -> Iterator[Result]:
    quotas = {(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in snap.quotas}
    limits = {(lr["metadata"]["namespace"], lr["metadata"]["name"]): lr for lr in snap.limit_ranges}
    queues = {q["metadata"]["name"]: q for q in snap.queues or []}
    for t in spec.tenants:
        subject = f"tenants/{t.name}"
        want_q = render.quota(spec, t)
        live_q = quotas.get((t.ns, want_q["metadata"]["name"]))
        yield _row("tenant-quota", subject, f"ResourceQuota {t.ns}/{want_q['metadata']['name']} spec",
                   {**want_q["spec"], "hard": _values(want_q["spec"]["hard"])},
                   None if live_q is None else {**live_q["spec"], "hard": _values(live_q["spec"].get("hard", {}))})
        want_lr = render.limit_range(t)
        live_lr = limits.get((t.ns, want_lr["metadata"]["name"]))
        yield _row("tenant-limitrange", subject, f"LimitRange {t.ns}/{want_lr['metadata']['name']} spec",
                   _limits(want_lr["spec"]), None if live_lr is None else _limits(live_lr.get("spec", {})))
        if not spec.scheduling.volcano.enabled:
            continue
        if snap.queues is None:
            yield skip("tenant-queue", subject, "Volcano's Queue CRD is not installed")
            continue
        want_q = volcano.queue(t)
        live = queues.get(t.name)
        yield _row("tenant-queue", subject, f"Queue {t.name} spec (weight {want_q['spec']['weight']}, "
                   f"{queue_capability(t)} GPUs)", _queue_spec({**VOLCANO_QUEUE_DEFAULTS, **want_q["spec"]}),
                   None if live is None else _queue_spec({"parent": "root", **(live.get("spec") or {})}))


def security_checks(spec: ClusterSpec, snap: Snapshot) -> Iterator[Result]:
    """Pod Security labels, the NetworkPolicy's content, and no other NetworkPolicy, per tenant namespace."""
    namespaces = {n["metadata"]["name"]: n for n in snap.namespaces}
    mon = spec.monitoring.namespace if spec.monitoring.enabled else None
    for t in spec.tenants:
        subject = f"tenants/{t.name}"
        want_ns = render.tenant_namespace(t, spec)["metadata"]["labels"]
        live_ns = namespaces.get(t.ns)
        live_labels = (live_ns or {}).get("metadata", {}).get("labels", {})
        want_np = render.network_policy(t, mon)
        policies = {p["metadata"]["name"]: p for p in snap.network_policies if p["metadata"].get("namespace") == t.ns}
        live_np = policies.pop(want_np["metadata"]["name"], None)
        problems = [] if live_ns else [f"namespace {t.ns} missing"]
        problems += differences({k: want_ns[k] for k in PSA_LABELS}, {k: live_labels[k] for k in PSA_LABELS
                                                                     if k in live_labels}, "labels")
        problems += ["NetworkPolicy gpucluster-isolate missing"] if live_np is None else \
            differences(want_np["spec"], live_np.get("spec", {}), "networkpolicy")
        problems += [f"extra NetworkPolicy {name} (policies add up: it can only allow more)"
                     for name in sorted(policies)]
        what = f"pod-security={t.pod_security}, default-deny NetworkPolicy as rendered, no other"
        if problems:
            yield fail("tenant-security", subject, what, f"{len(problems)} difference(s)", "; ".join(problems[:6]))
        else:
            yield ok("tenant-security", subject, what, "as rendered")


def admission_checks(spec: ClusterSpec, snap: Snapshot) -> Iterator[Result]:
    """Each tenant admission policy with its binding as rendered; each tenant Namespace's allowances."""
    if not spec.tenants:
        return
    if snap.admission_policies is None or snap.admission_bindings is None:
        yield fail("tenant-admission", "admissionregistration.k8s.io/v1", "served", "not served",
                   "the API server has no ValidatingAdmissionPolicy v1 API (Kubernetes >= 1.30 has)")
        return
    policies = {p["metadata"]["name"]: p for p in snap.admission_policies}
    bindings = {b["metadata"]["name"]: b for b in snap.admission_bindings}
    rendered = tenant_admission.objects(spec)
    for want in (o for o in rendered if o["kind"] == "ValidatingAdmissionPolicy"):
        name = want["metadata"]["name"]
        want_b = next(o for o in rendered if o["kind"] == "ValidatingAdmissionPolicyBinding"
                      and o["spec"]["policyName"] == name)
        live, live_b = policies.get(name), bindings.get(want_b["metadata"]["name"])
        yield _row("tenant-admission", f"validatingadmissionpolicy/{name}", "policy and binding as rendered",
                   {"policy": want["spec"], "binding": want_b["spec"]},
                   None if live is None or live_b is None else {"policy": live["spec"], "binding": live_b["spec"]})
    namespaces = {n["metadata"]["name"]: n for n in snap.namespaces}
    for t in spec.tenants:
        meta = render.tenant_namespace(t, spec)["metadata"]
        want_a = {"annotations": {k: v for k, v in meta["annotations"].items() if k in ALLOWANCES},
                  "tenant": meta["labels"][L.TENANT]}
        live_meta = (namespaces.get(t.ns) or {}).get("metadata")
        got = None if live_meta is None else {
            "annotations": {k: v for k, v in (live_meta.get("annotations") or {}).items() if k in ALLOWANCES},
            "tenant": (live_meta.get("labels") or {}).get(L.TENANT)}
        yield _row("tenant-admission", f"tenants/{t.name}", f"namespace {t.ns} allowances", want_a, got)


def _grants(rules: list[dict]) -> set[tuple[str, str, str]]:
    """(verb, apiGroup, resource) a Role's rules grant, one representative verb per resource."""
    out = set()
    for rule in rules:
        verb = "create" if "create" in rule["verbs"] else rule["verbs"][0]
        out |= {(verb, g, r) for g in rule["apiGroups"] for r in rule["resources"]}
    return out


def other_namespaces(spec: ClusterSpec, t: Tenant, operators: list[str] | None = None) -> list[str]:
    """Namespaces a tenant's groups must not act in: the other tenants', the operators' (every release's and
    monitoring's: ``operators`` when already known) and ``kube-system``."""
    names = {o.ns for o in spec.tenants} | set(operator_namespaces(spec) if operators is None else operators)
    return sorted(names - {t.ns})


def operator_namespaces(spec: ClusterSpec) -> list[str]:
    """Where the operators run: every release's namespace, monitoring's, and ``kube-system``."""
    from gpucluster.render import releases

    names = {rel.namespace for rel in releases(spec)} | {"kube-system"}
    if spec.monitoring.enabled:
        names.add(spec.monitoring.namespace)
    return sorted(names)


def expected_access(spec: ClusterSpec) -> dict[AccessQuestion, bool]:
    """Every question ``tenant-rbac`` asks, with the answer the spec wants."""
    out: dict[AccessQuestion, bool] = {}
    operators = operator_namespaces(spec) if spec.tenants else []
    for t in spec.tenants:
        elsewhere = other_namespaces(spec, t, operators)
        for role, groups in (("tenant-admin", t.admins), ("tenant-user", t.users)):
            for group in groups:
                for verb, api, res in _grants(render.ROLES[role]):
                    out[AccessQuestion(group, verb, api, res, t.ns)] = True
                if compute_domains(spec):
                    # ComputeDomains: created by the tenants that may claim their IMEX channels, no other
                    group_, plural, _ = COMPUTE_DOMAIN_API
                    channels = DRA_COMPUTE_DOMAIN_CHANNEL_CLASS in t.quota.device_classes
                    out[AccessQuestion(group, "create", group_, plural, t.ns)] = channels
                for api, res in PROTECTED_NAMESPACED:
                    out.update({AccessQuestion(group, v, api, res, t.ns): False for v in WRITES})
                for api, res in PROTECTED_CLUSTER:
                    out.update({AccessQuestion(group, v, api, res): False for v in WRITES})
                out.update({AccessQuestion(group, v, "", "namespaces", name=t.ns): False
                            for v in ("update", "patch", "delete")})
                out.update({AccessQuestion(group, v, api, res): False for v, api, res in ESCALATIONS})
                out.update({AccessQuestion(group, v, api, res, ns): False for ns in elsewhere
                            for v, api, res in ELSEWHERE})
    return out


def access_questions(spec: ClusterSpec) -> list[AccessQuestion]:
    """The SubjectAccessReviews to send for ``spec`` (pass to :func:`gpucluster.verify.snapshot.fetch`)."""
    return list(expected_access(spec))


def _groups(t: Tenant) -> list[str]:
    return sorted(set(t.admins) | set(t.users))


def _say(q: AccessQuestion, allowed: bool) -> str:
    where = f" in {q.namespace}" if q.namespace else ""
    what = f"{q.resource}/{q.name}" if q.name else q.resource
    api = f".{q.api_group}" if q.api_group else ""
    return f"group {q.group} {'may' if allowed else 'may not'} {q.verb} {what}{api}{where}"


def rbac_checks(spec: ClusterSpec, snap: Snapshot) -> Iterator[Result]:
    """``tenant-rbac``: the answers of the API server's authorizer against what the spec grants."""
    want = expected_access(spec)
    for t in spec.tenants:
        subject = f"tenants/{t.name}"
        groups = _groups(t)
        if not groups:
            yield skip("tenant-rbac", subject, "the spec binds no group to this tenant: nobody to ask about")
            continue
        if snap.access is None:
            yield skip("tenant-rbac", subject, snap.access_error or "tenant access was not reviewed")
            continue
        mine = {q: a for q, a in want.items() if q.group in groups}
        wrong = [f"{_say(q, snap.access[q])} (the spec says it {'may' if a else 'may not'})"
                 for q, a in mine.items() if q in snap.access and snap.access[q] != a]
        unasked = [q for q in mine if q not in snap.access]
        what = f"{len(mine)} reviews for {', '.join(groups)}: the Roles' grants, no write to what bounds the tenant"
        if unasked:
            yield skip("tenant-rbac", subject, f"{len(unasked)} reviews were not asked")
        elif wrong:
            yield fail("tenant-rbac", subject, what, f"{len(wrong)} answer(s) differ", "; ".join(wrong[:6]))
        else:
            yield ok("tenant-rbac", subject, what, "as granted")
