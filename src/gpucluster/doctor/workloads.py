"""Workloads whose pods could not be created: admission refused them, so no pod is there to be Pending.

A ResourceQuota, a ValidatingAdmissionPolicy or the Priority admission plugin refuses a pod at
creation; the controller that tried (Job, ReplicaSet, StatefulSet, Volcano Job) records a
``FailedCreate`` Warning event on itself with the API server's message. The doctor reads that event
and the objects it names:

- ``exceeded quota: NAME, requested: ..., used: ..., limited: ...`` (the quota admission plugin's
  wording): the tenant's quota is full, unless that quota is scoped to PriorityClasses and limits the
  pod count to 0, which is how quota forbids a PriorityClass;
- a refusal while the workload's pod template names a PriorityClass outside the tenant's list (the
  tenant's admission policy), or ``no PriorityClass with name X was found`` (the Priority plugin);
- anything else is reported with the API server's own message.
"""

from __future__ import annotations

import re

from gpucluster.doctor.model import Diagnosis, Finding, Obj, View
from gpucluster.doctor.objects import quantity_map
from gpucluster.spec.model import Tenant

QUOTA = re.compile(r"exceeded quota: ([^,]+), requested: (.*?), used: (.*?), limited: ([^\n]*)")
MISSING_PRIORITY = re.compile(r"no PriorityClass with name (\S+?) was found")
#: Kinds whose controllers create pods and report FailedCreate on themselves.
KINDS = ("Job", "ReplicaSet", "StatefulSet", "DaemonSet", "ReplicationController")
VOLCANO_JOB = ("batch.volcano.sh", "Job")


def _pairs(text: str) -> dict[str, str]:
    return dict(p.split("=", 1) for p in re.split(r",\s*", text.strip()) if "=" in p)


def template_spec(owner: Obj | None) -> Obj:
    """The pod spec the workload creates pods from (a Volcano Job's first task for Volcano)."""
    spec = (owner or {}).get("spec", {})
    if "tasks" in spec:
        tasks = spec.get("tasks") or [{}]
        return ((tasks[0].get("template") or {}).get("spec")) or {}
    return (spec.get("template") or {}).get("spec") or {}


def _tenant(view: View, ns: str) -> tuple[int, Tenant] | None:
    for i, t in enumerate(view.spec.tenants):
        if t.ns == ns:
            return i, t
    return None


def cause_of(message: str, ns: str, owner: Obj | None, view: View) -> Finding:
    """The finding one FailedCreate message stands for."""
    evidence = (f"FailedCreate: {message.strip()}",)
    tenant = _tenant(view, ns)
    priority = template_spec(owner).get("priorityClassName")
    m = MISSING_PRIORITY.search(message)
    if m:
        return Finding("priority-class-missing", f"PriorityClass {m.group(1)} does not exist, so the API server "
                       "refuses the workload's pods", "use an existing PriorityClass (kubectl get priorityclasses) or "
                       "add it to scheduling.priorityClasses in the spec", evidence)
    q = QUOTA.search(message)
    if q:
        name, requested, used, limited = q.group(1).strip(), _pairs(q.group(2)), _pairs(q.group(3)), _pairs(q.group(4))
        quota = next((o for o in view.quotas if o["metadata"]["name"] == name
                      and o["metadata"].get("namespace") == ns), None)
        scopes = [s for s in ((quota or {}).get("spec", {}).get("scopeSelector") or {}).get("matchExpressions") or []
                  if s.get("scopeName") == "PriorityClass"]
        if scopes and limited.get("pods") == "0":
            sc = scopes[0]
            scope = f"ResourceQuota {name} scoped to PriorityClass {sc.get('operator')} {sc.get('values')}"
            return _not_allowed(priority or "(the pod's)", tenant, (*evidence, scope))
        over = [k for k in requested if k in limited and k in used]
        # The quota's GPU key first (requests.* before limits.*: the spec's quota.gpus sets both alike).
        res = next((k for k in sorted(over, key=lambda k: (not k.startswith("requests."), k)) if "nvidia.com/" in k),
                   over[0] if over else "")
        hard = quantity_map((quota or {}).get("status", {}).get("hard") or (quota or {}).get("spec", {}).get("hard"))
        fix = f"free {res or 'resources'} in {ns} (kubectl get pods -n {ns}) or ask for less"
        if tenant and res.endswith("nvidia.com/gpu"):
            fix += f", or raise tenants[{tenant[0]}].quota.gpus in the spec (now {hard.get(res, limited.get(res))})"
        return Finding("quota-exceeded",
                       f"ResourceQuota {ns}/{name} is full: {res} used {used.get(res)} of {limited.get(res)}, "
                       f"a new pod asks for {requested.get(res)}", fix, evidence)
    if tenant and priority and priority not in tenant[1].priority_classes:
        return _not_allowed(priority, tenant, evidence)
    return Finding("create-refused", "the API server refuses the workload's pods", "read the message below", evidence)


def _not_allowed(priority: str, tenant: tuple[int, Tenant] | None, evidence: tuple[str, ...]) -> Finding:
    if tenant is None:
        return Finding("priority-class-not-allowed", f"PriorityClass {priority} is not allowed in this namespace",
                       "use a PriorityClass the namespace allows", evidence)
    i, t = tenant
    allowed = ", ".join(t.priority_classes) or "none"
    return Finding("priority-class-not-allowed",
                   f"tenant {t.name} may not use PriorityClass {priority} (allowed: {allowed}), so its pods "
                   "are refused at creation",
                   f"set priorityClassName to one of {allowed} in the workload, or add {priority} to "
                   f"tenants[{i}].priorityClasses in the spec", evidence)


def failed_creates(view: View, ns: str, name: str | None = None) -> dict[tuple[str, str], list[Obj]]:
    """(kind, name) -> its FailedCreate Warning events in ``ns`` (of one workload when ``name`` is given)."""
    out: dict[tuple[str, str], list[Obj]] = {}
    for e in view.events:
        ref = e.get("involvedObject") or {}
        if (e.get("reason") == "FailedCreate" and e.get("type") == "Warning" and ref.get("namespace", ns) == ns
                and (name is None or ref.get("name") == name)):
            out.setdefault((ref.get("kind", ""), ref.get("name", "")), []).append(e)
    return out


def short_of_pods(kind: str, owner: Obj | None) -> bool:
    """True while the workload still lacks pods it wants (its FailedCreate events are current)."""
    if owner is None:
        return False
    spec, status = owner.get("spec", {}), owner.get("status") or {}
    if kind == "Job" and "tasks" not in spec:
        done = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                   for c in status.get("conditions") or [])
        want = spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1
        return not done and int(status.get("active") or 0) < int(want)
    if "tasks" in spec:  # Volcano Job
        want = sum(int(t.get("replicas") or 0) for t in spec.get("tasks") or [])
        have = sum(int(status.get(k) or 0) for k in ("pending", "running", "succeeded", "failed"))
        return status.get("state", {}).get("phase") not in ("Completed", "Failed", "Terminated") and have < want
    if kind == "DaemonSet":
        return int(status.get("currentNumberScheduled") or 0) < int(status.get("desiredNumberScheduled") or 0)
    return int(status.get("replicas") or 0) < int(spec.get("replicas", 1) or 0)


def diagnose_workload(kind: str, ns: str, name: str, events: list[Obj], view: View) -> Diagnosis:
    """The diagnosis of a workload from its latest FailedCreate event."""
    latest = max(events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    owner = view.owners.get((kind, ns, name))
    finding = cause_of(latest.get("message", ""), ns, owner, view)
    count = sum(int(e.get("count") or 1) for e in events)
    finding = Finding(finding.cause, finding.summary, finding.fix,
                      (*finding.evidence, f"{count} refused pod creation(s) recorded on {kind} {name}"))
    return Diagnosis(f"{kind} {ns}/{name}", "NotCreated", finding)
