"""One answer per pod: what keeps it from running, and the fix (pure: objects in, a Diagnosis out).

The reasoning follows what decides where a GPU pod runs, outermost first:

1. did its node's kubelet refuse it (Topology Manager admission), or does it run already (then nothing is
   blamed);
2. Volcano: is its gang complete, and does its queue have room under its capability;
3. the spec: which pools could *ever* hold its extended resources and satisfy its node selector;
4. DRA: do its claims' DeviceClasses match a device nobody holds;
5. per node of those pools: registered and Ready, not cordoned, taints tolerated, GPUs advertised (or
   a MIG change in progress that withdrew them), enough free;
6. Volcano again: can the whole gang be placed at once.

Every check that fails becomes a :class:`Finding`; the blocking cause is the first in
:data:`gpucluster.doctor.model.CAUSES` order, the rest are listed as ``also``. Of the per-node causes
only the one most candidate nodes share competes for that place (one cordoned node among fifty busy
ones does not make the cordon the answer). When nothing fails but
the scheduler still reports the pod unschedulable, its own message is the answer (cause ``unknown``).
"""

from __future__ import annotations

from gpucluster import labels as L
from gpucluster.doctor import dra, volcano
from gpucluster.doctor.model import CAUSES, Diagnosis, Finding, Obj, View
from gpucluster.doctor.objects import (
    bound,
    extended_requests,
    finished,
    name_of,
    quantity_map,
    ready,
    taint_text,
    toleration_for,
    untolerated,
    used_by_node,
    wants_claims,
)
from gpucluster.doctor.pools import Pool, fits, largest, selected, spec_pools
from gpucluster.spec import resource_managers as rmlib
from gpucluster.verify.nodestate import MIG_FAILED, mig_change

#: Name prefix of the GPU Operator's device-plugin DaemonSet pods (gpu-operator v26.3.0; facts: daemonsets).
DEVICE_PLUGIN_POD = "nvidia-device-plugin-daemonset-"
#: Node-level causes, in the order one node is examined.
NODE_CAUSES = ("nodes-unavailable", "untolerated-taint", "mig-change-in-progress", "gpus-not-advertised",
               "insufficient-gpus")
FIX = {
    "nodes-unavailable": ("bring the nodes back: check kubelet and `kubectl describe node`; a cordon left by an "
                          "upgrade is lifted with `gpucluster uncordon NODE`"),
    "mig-change-in-progress": ("wait for the MIG manager to reach nvidia.com/mig.config.state=success; if the state "
                               "stays pending with the deploy labels paused, the node is wedged (gpu-operator issue "
                               "2833): `gpucluster verify` fails check mig-reconfig on it with the recovery steps"),
    "gpus-not-advertised": ("check the device plugin on these nodes (nvidia.com/gpu.deploy.device-plugin must be true, "
                            "its pod Running; `gpucluster verify` checks node-allocatable and mig-reconfig)"),
    "insufficient-gpus": ("wait for running pods to finish, or ask for fewer GPUs per pod; a higher PriorityClass "
                          "may preempt lower ones where the tenant is allowed one"),
}


def _events(view: View, kind: str, ns: str, name: str) -> list[Obj]:
    return [e for e in view.events if (e.get("involvedObject") or {}).get("kind") == kind
            and (e.get("involvedObject") or {}).get("name") == name
            and (e.get("involvedObject") or {}).get("namespace", ns) == ns]


def _stamp(event: Obj) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or "")


def scheduler_messages(pod: Obj, view: View) -> tuple[str, ...]:
    """The latest FailedScheduling message of the pod (the scheduler's own words), if any."""
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    evs = sorted((e for e in _events(view, "Pod", ns, name) if e.get("reason") == "FailedScheduling"), key=_stamp)
    return (f"scheduler: {evs[-1].get('message', '').strip()}",) if evs else ()


def _priority(pod: Obj, view: View) -> Finding | None:
    """A PriorityClass outside the tenant's list (the tenant's admission would refuse a new pod like it)."""
    ns = pod["metadata"]["namespace"]
    pc = pod.get("spec", {}).get("priorityClassName")
    for i, t in enumerate(view.spec.tenants):
        if t.ns == ns and pc and pc not in t.priority_classes:
            return Finding("priority-class-not-allowed",
                           f"PriorityClass {pc} is not one tenant {t.name} may use "
                           f"({', '.join(t.priority_classes) or 'none'})",
                           f"use one of {', '.join(t.priority_classes) or '(none)'}, or add {pc} to "
                           f"tenants[{i}].priorityClasses in the spec")
    return None


def plugin_pod(node: str, pods: list[Obj], namespace: str) -> str:
    """The GPU Operator's device-plugin pod on ``node``, as one phrase (its phase, readiness, why it waits)."""
    for p in pods:
        if (p["metadata"].get("namespace") == namespace and p.get("spec", {}).get("nodeName") == node
                and p["metadata"]["name"].startswith(DEVICE_PLUGIN_POD)):
            statuses = p.get("status", {}).get("containerStatuses") or []
            waiting = [s["state"]["waiting"].get("reason", "") for s in statuses if "waiting" in (s.get("state") or {})]
            restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
            ready = bool(statuses) and all(s.get("ready") for s in statuses)
            return (f"device-plugin pod {p['metadata']['name']} {p.get('status', {}).get('phase')}"
                    f"{', Ready' if ready else ', not Ready'}{' (' + ', '.join(waiting) + ')' if waiting else ''}"
                    f", {restarts} restarts")
    return f"no device-plugin pod on the node (namespace {namespace})"


def _node_reason(pod: Obj, name: str, node: Obj | None, pool: Pool, requests: dict[str, int],
                 used: dict[str, int], now: float, pods: list[Obj], namespace: str) -> tuple[str, str] | None:
    """Why one node cannot take the pod now (cause, one line), or None when it can."""
    if node is None:
        return "nodes-unavailable", f"{name}: not registered (no Node object)"
    if not ready(node):
        return "nodes-unavailable", f"{name}: NotReady"
    if node.get("spec", {}).get("unschedulable"):
        return "nodes-unavailable", f"{name}: cordoned (spec.unschedulable)"
    bad = untolerated(pod, node.get("spec", {}).get("taints") or [])
    if bad:
        return "untolerated-taint", f"{name}: {', '.join(taint_text(t) for t in bad)}"
    alloc = quantity_map(node.get("status", {}).get("allocatable"))
    for res, want in sorted(requests.items()):
        have = alloc.get(res, 0)
        if have >= want:
            continue
        change = mig_change(node, now)
        spec_has = pool.resources.get(res, 0)
        if change is not None and change.in_progress:
            return "mig-change-in-progress", f"{name}: advertises {have} {res} (spec: {spec_has}); {change.describe()}"
        if change is not None and change.state == MIG_FAILED:
            return "gpus-not-advertised", (f"{name}: advertises {have} {res} (spec: {spec_has}); the MIG change "
                                           f"failed ({change.describe()})")
        plugin = (node["metadata"].get("labels") or {}).get(L.DEPLOY_DEVICE_PLUGIN, "(unset)")
        return "gpus-not-advertised", (f"{name}: advertises {have} {res} (spec: {spec_has}); "
                                       f"{L.DEPLOY_DEVICE_PLUGIN}={plugin}; {plugin_pod(name, pods, namespace)}")
    for res, want in sorted(requests.items()):
        free = alloc.get(res, 0) - used.get(res, 0)
        if free < want:
            return "insufficient-gpus", f"{name}: {max(free, 0)} of {alloc.get(res, 0)} {res} free"
    return None


def _slots(node: Obj, requests: dict[str, int], used: dict[str, int]) -> int:
    """How many more pods like this one fit on a node that can take one now."""
    alloc = quantity_map(node.get("status", {}).get("allocatable"))
    if not requests:
        return 1
    return min((alloc.get(k, 0) - used.get(k, 0)) // v for k, v in requests.items())


def _no_pool(requests: dict[str, int], pools: list[Pool], fitting: list[Pool], pod: Obj) -> Finding:
    if fitting:  # the resources fit somewhere, the selector excludes it
        spec = pod.get("spec", {})
        sel = spec.get("nodeSelector") or (spec.get("affinity") or {}).get("nodeAffinity") or {}
        return Finding("no-pool-fits",
                       f"the pod's node selector {sel} matches none of the pools that could hold it "
                       f"({', '.join(p.name for p in fitting)})",
                       f"select a label those pools carry (e.g. {L.POOL}={fitting[0].name})")
    parts, best = [], ""
    for res, want in sorted(requests.items()):
        most, pool = largest(pools, res)
        if most == 0:
            offered = sorted({k for p in pools for k in p.resources})
            parts.append(f"no pool offers {res} (pools offer {', '.join(offered) or 'no extended resources'})")
        elif most < want:
            parts.append(f"it asks for {want} {res} but the largest node advertises {most} (pool {pool})")
            best = f"ask for at most {most} {res} per pod (split the work over several pods), or "
    return Finding("no-pool-fits", f"no pool of the spec can ever hold this pod: {'; '.join(parts)}",
                   f"{best}add a pool whose nodes offer it (nodePools in the spec)")


def _node_finding(cause: str, lines: list[str], pod: Obj, nodes: dict[str, Obj]) -> Finding:
    n = len(lines)
    shown = lines[:5] + ([f"... and {n - 5} more"] if n > 5 else [])
    if cause == "untolerated-taint":
        taints: dict[str, Obj] = {}
        for name in (ln.split(":", 1)[0] for ln in lines):
            for t in untolerated(pod, (nodes.get(name) or {}).get("spec", {}).get("taints") or []):
                taints.setdefault(taint_text(t), t)
        fix = "add to the pod spec: tolerations: [" + ", ".join(toleration_for(t) for t in taints.values()) + "]"
        return Finding(cause, f"every node that can hold the pod ({n}) has a taint it does not tolerate: "
                       f"{', '.join(taints)}", fix, tuple(shown))
    summary = {
        "nodes-unavailable": f"the {n} node(s) that can hold the pod are not available",
        "mig-change-in-progress": (f"the {n} node(s) that can hold the pod advertise no GPUs while a MIG "
                                   "reconfiguration is in progress"),
        "gpus-not-advertised": f"the {n} node(s) that can hold the pod do not advertise the GPUs the spec gives them",
        "insufficient-gpus": f"the {n} node(s) that can hold the pod have too few free GPUs",
    }[cause]
    return Finding(cause, summary, FIX[cause], tuple(shown))


def candidates(pod: Obj, pools: list[Pool]) -> tuple[list[Pool], dict[str, Pool]]:
    """The pools whose empty nodes could hold the pod, and the hosts of those its node selector accepts."""
    requests, claims = extended_requests(pod), wants_claims(pod)
    fitting = [p for p in pools if fits(p, requests) and (p.dra or not claims)]
    return fitting, {h: p for p in fitting for h in selected(p, pod)}


def _pick(findings: list[Finding]) -> tuple[Finding, tuple[Finding, ...]]:
    ordered = sorted(findings, key=lambda f: CAUSES.index(f.cause))
    return ordered[0], tuple(ordered[1:])


#: The reason the kubelet gives a pod its Topology Manager refuses at admission: the pod goes Failed with it
#: (k8s.io/kubernetes v1.37.2 pkg/kubelet/cm/topologymanager/topology_manager.go:43, pkg/kubelet/kubelet.go:2640
#: rejectPod: phase Failed, this reason, "Pod was rejected: Resources cannot be allocated with Topology locality").
TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"


def _topology_affinity(pod: Obj, view: View) -> Finding | None:
    """The kubelet refused the pod because its resources cannot share the NUMA nodes its pool's policy demands."""
    status = pod.get("status") or {}
    if status.get("phase") != "Failed" or status.get("reason") != TOPOLOGY_AFFINITY_ERROR:
        return None
    node = pod["spec"].get("nodeName", "")
    pool = view.spec.pool_of(node) if node else None
    rm = pool.resource_managers if pool is not None else None
    policy = rm.topology_manager_policy if rm is not None else None
    where = f"the topologyManagerPolicy {policy} of pool {pool.name}" if pool is not None and policy else (
        "its kubelet's Topology Manager policy")
    most = rmlib.gpus_per_numa_node(pool) if pool is not None else None
    if policy == "single-numa-node" and most and pool is not None and pool.gpu is not None:
        fix = (f"ask for at most {most} GPUs per pod (what one NUMA node of {pool.gpu.platform} holds), or set "
               f"topologyManagerPolicy: restricted for pool {pool.name!r} (nodePools[].resourceManagers; joined "
               "nodes are removed and added back)")
    else:
        fix = ("ask for fewer GPUs or whole CPUs per pod, so they fit the NUMA nodes the policy allows, or relax the "
               "pool's topologyManagerPolicy (nodePools[].resourceManagers); a controller's replacement pods are "
               "refused the same way")
    return Finding("topology-affinity",
                   f"the kubelet on {node or 'its node'} refused the pod at admission: its GPUs, CPUs or memory "
                   f"cannot be aligned on NUMA nodes under {where}",
                   fix, (f"pod status: {status.get('reason')}: {status.get('message', '')}",))


def diagnose_pod(pod: Obj, view: View, pools: list[Pool] | None = None) -> Diagnosis:
    """The blocking cause of one pod, or why nothing blocks it."""
    subject, phase = name_of(pod), pod.get("status", {}).get("phase", "Unknown")
    notes = [f for f in (_priority(pod, view),) if f is not None]
    rejected = _topology_affinity(pod, view)
    if rejected is not None:
        return Diagnosis(subject, phase, rejected, tuple(notes), pod["spec"].get("nodeName", ""))
    if bound(pod) or finished(pod):
        node = pod["spec"].get("nodeName", "")
        what = {"Running": f"runs on {node}", "Succeeded": "finished successfully",
                "Failed": "ended (Failed): the scheduler is not what stopped it"}.get(
            phase, f"is bound to {node} and starting (phase {phase})")
        return Diagnosis(subject, phase, Finding("running", f"the pod {what}; nothing blocks it"), tuple(notes), node)
    findings: list[Finding] = []
    requests = extended_requests(pod)
    group = volcano.podgroup(pod, view)
    if group is not None:
        owner = tuple(f"{e['involvedObject']['kind']} {e['involvedObject']['name']}: {e.get('message', '')}"
                      for o in group["metadata"].get("ownerReferences") or []
                      for e in _events(view, o.get("kind", ""), group["metadata"]["namespace"], o.get("name", ""))
                      if e.get("type") == "Warning")
        findings += [f for f in (volcano.gang_incomplete(group, view, owner),
                                 volcano.queue_capability(group, view, requests)) if f]
    pools = spec_pools(view.spec) if pools is None else pools
    fitting, hosts = candidates(pod, pools)
    slots = 0
    node_slots: dict[str, int] = {}  # node -> more pods like this one it takes now
    others: list[Finding] = []  # node causes fewer nodes share: listed, never the blocking cause
    if not hosts:
        findings.append(_no_pool(requests, pools, fitting, pod))
    else:
        result = dra.check(pod, view)
        if result.finding is not None:
            findings.append(result.finding)
        elif result.nodes is not None:
            hosts = {h: p for h, p in hosts.items() if h in result.nodes}
        if result.finding is None:
            nodes = {n["metadata"]["name"]: n for n in view.nodes}
            used = used_by_node(view.pods)
            reasons: dict[str, list[str]] = {}
            for name, pool in sorted(hosts.items()):
                why = _node_reason(pod, name, nodes.get(name), pool, requests, used.get(name, {}), view.now,
                                   view.pods, view.spec.gpu_operator.namespace)
                if why is None:
                    node_slots[name] = _slots(nodes[name], requests, used.get(name, {}))
                    slots += node_slots[name]
                else:
                    reasons.setdefault(why[0], []).append(why[1])
            if not slots and reasons:
                # The cause most nodes share; ties go to the one examined first on a node.
                cause = max(reasons, key=lambda c: (len(reasons[c]), -NODE_CAUSES.index(c)))
                findings.append(_node_finding(cause, reasons[cause], pod, nodes))
                others = [_node_finding(c, ls, pod, nodes) for c, ls in reasons.items() if c != cause]
    if group is not None and slots:
        gang = volcano.gang_does_not_fit(group, view, slots) or volcano.gang_topology(group, view, node_slots)
        if gang:
            findings.append(gang)
    said = scheduler_messages(pod, view)
    if findings:
        first, also = _pick(findings)
        first = Finding(first.cause, first.summary, first.fix, first.evidence + said)
        return Diagnosis(subject, phase, first, also + tuple(others) + tuple(notes))
    if said:
        return Diagnosis(subject, phase, Finding(
            "unknown", "the scheduler reports the pod unschedulable for a reason the doctor does not model "
            "(CPU, memory, pod affinity, volumes, ...)", "read the scheduler's message below "
            f"(kubectl describe pod -n {pod['metadata']['namespace']} {pod['metadata']['name']})", said),
            tuple(notes))
    where = f"{slots} more pod(s) like it fit now" if slots else "nothing the doctor checks stops it"
    return Diagnosis(subject, phase, Finding("schedulable", f"the pod is waiting for the scheduler: {where}"),
                     tuple(notes))
