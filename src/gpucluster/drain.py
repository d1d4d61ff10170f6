"""Drain a node for maintenance: cordon, then evict through the Eviction API, never splitting a running gang.

Evictions go through ``POST .../pods/NAME/eviction`` (policy/v1), so the API server enforces every
PodDisruptionBudget: a refused eviction is ``429 TooManyRequests`` "Cannot evict pod as it would
violate the pod's disruption budget." (kubernetes v1.37.2 pkg/registry/core/pod/storage/eviction.go:419),
retried until the deadline. Finished pods are not evicted (nothing to disrupt; the API server ignores
PDBs for them, eviction.go:392), nor mirror pods (the kubelet owns them) or DaemonSet pods (their
controller would put them back on the node at once; kubectl drain skips them too).

A Volcano gang (pods sharing a ``scheduling.k8s.io/group-name`` whose PodGroup has ``minMember`` > 1)
runs only as a whole: evicting one member leaves the others holding GPUs while the job cannot make
progress (or restarts every member). So a node holding a member of a running gang is not drained,
unless ``evict_gangs`` is given: then every running member of that gang, on any node, is checked by a
dry-run eviction first and evicted together only when all of them may go.

:func:`plan` is pure (pods in, decisions out); :func:`drain` does the calls. Used by ``gpucluster
drain`` and ``playbooks/upgrade.yml``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpucluster import kube
from gpucluster.errors import GpuclusterError, InputError
from gpucluster.poll import Deadline, poll

Obj = dict[str, Any]

PDB_REFUSED = 429
FINISHED = ("Succeeded", "Failed")
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/podgroups"
PDBS = "/apis/policy/v1/poddisruptionbudgets"


class DrainBlocked(GpuclusterError):
    """The node cannot be drained without breaking a promise (a gang, an unmanaged pod, a PDB in time)."""


def _name(pod: Obj) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def _node_of(pod: Obj) -> str:
    return pod.get("spec", {}).get("nodeName") or ""


def _running(pod: Obj) -> bool:
    return bool(_node_of(pod)) and pod.get("status", {}).get("phase") not in FINISHED


@dataclass
class Plan:
    """What draining ``node`` means: single evictions, whole gangs, what is left alone, what blocks."""

    node: str
    evict: list[Obj] = field(default_factory=list)
    gangs: dict[str, list[Obj]] = field(default_factory=dict)  # "ns/group" -> every running member
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (pod, why)
    blocked: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "evict": [_name(p) for p in self.evict],
                "gangs": {g: [f"{_name(p)}@{_node_of(p)}" for p in ms] for g, ms in self.gangs.items()},
                "skipped": [{"pod": p, "why": w} for p, w in self.skipped], "blocked": self.blocked}


def _controller(pod: Obj) -> Obj | None:
    return next((o for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")), None)


def plan(node: str, pods: list[Obj], podgroups: list[Obj] | None, *, evict_gangs: bool = False,
         force: bool = False) -> Plan:
    """Decide, for every pod bound to ``node``, whether it is evicted alone, with its gang, or left alone.

    ``pods`` are all the cluster's pods (a gang's members may run on other nodes); ``podgroups`` the
    Volcano PodGroups (None when Volcano's CRD is not served: then pods sharing a group name, more
    than one of them running, are taken for a gang).
    """
    out = Plan(node)
    min_member = {(g["metadata"]["namespace"], g["metadata"]["name"]): int(g.get("spec", {}).get("minMember") or 1)
                  for g in podgroups or []}
    members: dict[tuple[str, str], list[Obj]] = {}
    for p in pods:
        group = (p["metadata"].get("annotations") or {}).get(GROUP_ANNOTATION)
        if group and _running(p) and not p["metadata"].get("deletionTimestamp"):
            members.setdefault((p["metadata"]["namespace"], group), []).append(p)
    for p in sorted((p for p in pods if _node_of(p) == node), key=_name):
        name, meta = _name(p), p["metadata"]
        owner = _controller(p)
        if p.get("status", {}).get("phase") in FINISHED:
            out.skipped.append((name, "finished"))
            continue
        if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
            out.skipped.append((name, "static pod (the kubelet owns it)"))
            continue
        if owner and owner.get("kind") == "DaemonSet":
            out.skipped.append((name, f"DaemonSet {owner.get('name')} (it would come back on this node)"))
            continue
        group = (meta.get("annotations") or {}).get(GROUP_ANNOTATION)
        key = (meta["namespace"], group or "")
        running = members.get(key, [])
        is_gang = bool(group) and (min_member[key] > 1 if key in min_member else len(running) > 1)
        if is_gang:
            gname = f"{key[0]}/{key[1]}"
            if evict_gangs:
                out.gangs[gname] = sorted(running, key=_name)
            elif not any(gname in b for b in out.blocked):
                where = sorted({_node_of(m) for m in running})
                need = min_member.get(key, len(running))
                out.blocked.append(
                    f"{name} belongs to the running gang {gname} (minMember {need}; {len(running)} members on "
                    f"{', '.join(where)}): evicting it alone would split the gang. Wait for the job to finish, "
                    "or pass --evict-gangs to evict all its members together")
            continue
        if owner is None and not force:
            out.blocked.append(f"{name} has no controller, so nothing would recreate it: delete it yourself or pass "
                               "--force to evict it anyway")
            continue
        out.evict.append(p)
    return out


# -- calls --------------------------------------------------------------------------------------------
def _eviction(api: kube.Kube, pod: Obj, dry_run: bool) -> tuple[int, str]:
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    query = "?dryRun=All" if dry_run else ""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
    status, out = api.answer("POST", kube.namespaced(ns, "pods", name) + "/eviction" + query, body)
    return status, str(out.get("message", ""))


def _blocking_pdbs(api: kube.Kube, pod: Obj) -> list[str]:
    """PDBs of the pod's namespace whose selector matches it, with what they allow now."""
    ns, labels = pod["metadata"]["namespace"], pod["metadata"].get("labels") or {}
    out = []
    for pdb in api.items(kube.namespaced(ns, "poddisruptionbudgets", group="policy")):
        sel = pdb.get("spec", {}).get("selector") or {}
        if sel.get("matchLabels") and all(labels.get(k) == v for k, v in sel["matchLabels"].items()):
            st = pdb.get("status") or {}
            out.append(f"PodDisruptionBudget {ns}/{pdb['metadata']['name']} (healthy {st.get('currentHealthy')}, "
                       f"wants {st.get('desiredHealthy')}, allows {st.get('disruptionsAllowed')} disruption(s))")
    return out


def cordon(api: kube.Kube, node: str, on: bool = True) -> None:
    """Mark ``node`` unschedulable (``on``) or schedulable again."""
    if api.get(f"{kube.NODES}/{node}") is None:
        raise InputError(f"node {node} does not exist (kubectl get nodes)")
    api.patch(f"{kube.NODES}/{node}", {"spec": {"unschedulable": True if on else None}})


def _gone(api: kube.Kube, pod: Obj) -> bool:
    now = api.get(kube.namespaced(pod["metadata"]["namespace"], "pods", pod["metadata"]["name"]))
    return now is None or now["metadata"].get("uid") != pod["metadata"].get("uid")


def drain(api: kube.Kube, node: str, *, timeout: float = 300.0, evict_gangs: bool = False, force: bool = False,
          dry_run: bool = False, interval: float = 2.0, say: Callable[[str], None] = lambda _: None) -> Plan:
    """Cordon ``node`` and evict its pods (see the module docstring); the plan carried out.

    Raises :class:`DrainBlocked` when the plan is blocked or evictions are still refused at the
    deadline; the node stays cordoned either way (``gpucluster uncordon NODE`` lifts it).
    """
    if not dry_run:
        cordon(api, node)
        say(f"{node} cordoned")
    pods = api.items(kube.PODS)
    groups = api.list(PODGROUPS)
    p = plan(node, pods, groups, evict_gangs=evict_gangs, force=force)
    for pod_name, why in p.skipped:
        say(f"  left alone: {pod_name} ({why})")
    if p.blocked:
        raise DrainBlocked(f"{node} cannot be drained" + (" (it stays cordoned)" if not dry_run else "") + ":\n  - "
                           + "\n  - ".join(p.blocked))
    batches = [(f"gang {g}", ms) for g, ms in sorted(p.gangs.items())] + [(_name(x), [x]) for x in p.evict]
    deadline = Deadline.after(timeout)
    evicted: list[Obj] = []
    for label, batch in batches:
        def refusals(batch: list[Obj] = batch) -> list[tuple[Obj, str]]:
            return [(x, msg) for x in batch for status, msg in [_eviction(api, x, True)] if status == PDB_REFUSED]

        refused = poll(refusals, timeout=0 if dry_run else deadline, every=interval, done=lambda r: not r)
        if refused:
            reasons = [f"{_name(x)}: {msg} " + "; ".join(_blocking_pdbs(api, x)) for x, msg in refused]
            raise DrainBlocked(f"{node}: eviction of {label} refused" + (" (dry run)" if dry_run else
                               f" for {int(timeout)} s; {node} stays cordoned") + ":\n  - "
                               + "\n  - ".join(reasons))
        if dry_run:
            say(f"  would evict {label}")
            continue
        for x in batch:
            status, msg = _eviction(api, x, False)
            if status == 404:
                continue
            if not 200 <= status < 300:  # lost a race with another disruption after the dry run
                raise DrainBlocked(f"{node}: eviction of {_name(x)} refused after its dry run passed: {msg}")
            evicted.append(x)
        say(f"  evicted {label}")
    def terminating() -> list[Obj]:
        nonlocal evicted
        evicted = [x for x in evicted if not _gone(api, x)]
        return evicted

    if evicted and poll(terminating, timeout=deadline, every=interval, done=lambda left: not left):
        raise DrainBlocked(f"{node}: evicted pods still terminating after {int(timeout)} s: "
                           + ", ".join(_name(x) for x in evicted))
    return p

