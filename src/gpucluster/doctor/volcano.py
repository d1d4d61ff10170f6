"""Volcano: is the pod's gang complete, and does its queue have room under its capability?

A gang (PodGroup) runs only when ``spec.minMember`` pods can be placed at once; a queue's jobs hold at
most ``spec.capability`` (Volcano's proportion plugin refuses the rest and records "queue resource
quota insufficient" on the PodGroup: volcano v1.14.1 pkg/scheduler/plugins/proportion/proportion.go:413).
What a queue holds is computed here from the bound pods of the PodGroups in that queue, not taken from
the queue's status, so the answer does not depend on Volcano having written it.
"""

from __future__ import annotations

from gpucluster.doctor.model import Finding, Obj, View
from gpucluster.doctor.objects import bound, extended_requests, finished, group_of, quantity_map
from gpucluster.spec.model import ClusterSpec


def podgroup(pod: Obj, view: View) -> Obj | None:
    name = group_of(pod)
    ns = pod["metadata"]["namespace"]
    return next((g for g in view.podgroups or [] if g["metadata"]["name"] == name
                 and g["metadata"].get("namespace") == ns), None) if name else None


def members(group: Obj, view: View) -> list[Obj]:
    ns, name = group["metadata"]["namespace"], group["metadata"]["name"]
    return [p for p in view.pods if p["metadata"].get("namespace") == ns and group_of(p) == name
            and not p["metadata"].get("deletionTimestamp")]


def conditions(group: Obj) -> tuple[str, ...]:
    """The PodGroup's conditions as evidence lines (Volcano writes why a gang waits there)."""
    return tuple(f"PodGroup {group['metadata']['name']} {c.get('type')}: {c.get('message') or c.get('reason')}"
                 for c in (group.get("status") or {}).get("conditions") or [] if c.get("status") == "True")


def min_member(group: Obj) -> int:
    return int(group.get("spec", {}).get("minMember") or 1)


def gang_incomplete(group: Obj, view: View, owner_events: tuple[str, ...]) -> Finding | None:
    """Fewer pods exist than the gang's minMember: it can never start as it is."""
    have, need = len(members(group, view)), min_member(group)
    if have >= need:
        return None
    name = f"{group['metadata']['namespace']}/{group['metadata']['name']}"
    return Finding("gang-incomplete",
                   f"PodGroup {name} needs {need} pods placed together (minMember) but only {have} exist, so none "
                   "of them is placed",
                   "create the missing pods (check the owning job's events for pods it could not create), or lower "
                   "minAvailable to the number of pods the job really has",
                   conditions(group) + owner_events)


def _tenant_of_queue(spec: ClusterSpec, queue: str) -> tuple[int, str] | None:
    for i, t in enumerate(spec.tenants):
        if t.name == queue:
            return i, t.name
    return None


def queue_capability(group: Obj, view: View, requests: dict[str, int]) -> Finding | None:
    """The pod's queue cannot take its request without going over its capability."""
    if view.queues is None or not requests:
        return None
    qname = group.get("spec", {}).get("queue") or "default"
    queue = next((q for q in view.queues if q["metadata"]["name"] == qname), None)
    if queue is None:
        return Finding("queue-capability", f"Volcano queue {qname} (PodGroup {group['metadata']['name']}) does not "
                       "exist", "submit to the tenant's queue (spec.queue / the queue annotation)")
    if (queue.get("status") or {}).get("state") == "Closed":
        return Finding("queue-capability", f"Volcano queue {qname} is Closed: it admits no new jobs",
                       f"open it again (vcctl queue operate --name {qname} --action open)")
    capability = quantity_map((queue.get("spec") or {}).get("capability"))
    in_queue = {(g["metadata"].get("namespace"), g["metadata"]["name"]) for g in view.podgroups or []
                if (g.get("spec", {}).get("queue") or "default") == qname}
    used: dict[str, int] = {}
    for p in view.pods:
        if bound(p) and not finished(p) and (p["metadata"].get("namespace"), group_of(p)) in in_queue:
            for k, v in extended_requests(p).items():
                used[k] = used.get(k, 0) + v
    over = [(k, v) for k, v in requests.items() if k in capability and used.get(k, 0) + v > capability[k]]
    if not over:
        return None
    res, want = over[0]
    where = _tenant_of_queue(view.spec, qname)
    raise_it = (f"raise tenants[{where[0]}].queue.capabilityGpus in the spec (now {capability[res]})"
                if where and res == "nvidia.com/gpu" else f"raise the queue's capability for {res}")
    return Finding("queue-capability",
                   f"Volcano queue {qname} holds {used.get(res, 0)} of its capability {capability[res]} {res}; this "
                   f"pod needs {want} more, so the queue admits it only when its running jobs release some",
                   f"wait for the queue's running jobs to finish, or {raise_it}",
                   conditions(group))


def gang_does_not_fit(group: Obj, view: View, slots: int) -> Finding | None:
    """The gang's unplaced members need more places at once than the free nodes offer."""
    placed = sum(1 for p in members(group, view) if bound(p))
    need = min_member(group) - placed
    if need <= 1 or slots >= need:
        return None
    name = f"{group['metadata']['namespace']}/{group['metadata']['name']}"
    return Finding("gang-does-not-fit",
                   f"PodGroup {name} needs {need} more pods placed at once; the free capacity of the nodes that fit "
                   f"holds only {slots}, and a gang is never started in part",
                   "wait until enough GPUs are free together, or shrink the job (fewer workers or GPUs per worker)",
                   conditions(group))


def hard_topology(group: Obj) -> int | None:
    """The highest tier a hard-mode gang may span, or None when Volcano does not enforce one.

    Volcano enforces ``networkTopology`` only in hard mode with a numeric ``highestTierAllowed``
    (``IsHardTopologyMode``: volcano v1.14.1 pkg/scheduler/api/job_info.go:1196-1203); the mode defaults
    to hard (volcano.sh/apis v1.14.0 pkg/apis/scheduling/v1beta1/types.go:281-284).
    """
    nt = (group.get("spec") or {}).get("networkTopology") or {}
    tier = nt.get("highestTierAllowed")
    if (nt.get("mode") or "hard") != "hard" or tier is None:
        return None
    return int(tier)


def gang_topology(group: Obj, view: View, node_slots: dict[str, int]) -> Finding | None:
    """A hard-topology gang fits in the cluster's free capacity but inside no single allowed domain.

    The domains are the live HyperNodes of the gang's highest allowed tier, their nodes found from the
    members as the scheduler resolves them (:func:`gpucluster.verify.topology.membership`); each node
    counts the pods like this one it takes now (``node_slots``, from the doctor's per-node rules).
    """
    from gpucluster.verify.topology import membership

    tier = hard_topology(group)
    if tier is None or view.hypernodes is None:
        return None
    placed = sum(1 for p in members(group, view) if bound(p))
    need = min_member(group) - placed
    if need <= 0 or sum(node_slots.values()) < need:
        return None  # nothing to place, or too little anywhere (gang-does-not-fit says so)
    nodes = {n["metadata"]["name"]: n for n in view.nodes}
    per_domain: dict[str, int] = {h["metadata"]["name"]: 0 for h in view.hypernodes
                                  if int((h.get("spec") or {}).get("tier", 0)) == tier}
    for name, slots in node_slots.items():
        for domain in membership(view.hypernodes, nodes[name]).get(tier, []) if name in nodes else []:
            per_domain[domain] = per_domain.get(domain, 0) + slots
    if any(v >= need for v in per_domain.values()):
        return None
    tier_name = next((str((h.get("spec") or {}).get("tierName") or f"tier {tier}") for h in view.hypernodes
                      if int((h.get("spec") or {}).get("tier", 0)) == tier), f"tier {tier}")
    wider = sorted({int((h.get("spec") or {}).get("tier", 0)) for h in view.hypernodes} - set(range(tier + 1)))
    name = f"{group['metadata']['namespace']}/{group['metadata']['name']}"
    shown = ", ".join(f"{d}: {n}" for d, n in sorted(per_domain.items(), key=lambda kv: (-kv[1], kv[0]))[:6])
    return Finding("gang-topology",
                   f"PodGroup {name} must be placed inside one {tier_name} (networkTopology hard, highestTierAllowed "
                   f"{tier}) and needs {need} more pods at once; the free nodes that fit hold "
                   f"{sum(node_slots.values())} in the cluster but at most {max(per_domain.values(), default=0)} "
                   f"in any one {tier_name} ({shown or 'no HyperNode of that tier'})",
                   f"wait until one {tier_name} has room for the whole gang"
                   + (f", allow a wider tier (highestTierAllowed: {wider[0]})" if wider else "")
                   + ", or shrink the gang (fewer workers or GPUs per worker)",
                   conditions(group))
