"""Driver upgrades by the GPU Operator: each node's ``nvidia.com/gpu-driver-upgrade-state``, with deadlines.

Check ``driver-upgrade``, one row per node the operator's upgrade controller tracks. The controller
(NVIDIA/k8s-operator-libs at the version gpu-operator v26.3.0 vendors) walks a node through
upgrade-required, cordon-required, wait-for-jobs-required, pod-deletion-required, drain-required,
pod-restart-required, validation-required, uncordon-required to upgrade-done (pkg/upgrade/consts.go:49),
or to upgrade-failed; it records every change as a Node event ``GPUDriverUpgrade`` "Successfully updated
node state label to STATE" (node_upgrade_state_provider.go, util.go:158), which is how long a node
has been in its state is read here (else from managedFields). A row fails when:

- the node is ``upgrade-failed`` (with the driver pod's state and how to recover);
- it sits in one step longer than the deadline; at ``upgrade-required`` only when the whole rollout has
  not moved for that long (a node waits there for its turn under maxParallelUpgrades);
- it is ``upgrade-done`` but its driver pod is not Running, Ready and at the DaemonSet's newest
  revision: the controller moves a failed node on only once its driver pod is in sync and Ready
  (common_manager.go:526, "ProcessUpgradeFailedNodes", via uncordon-required), so a node done without
  that has not recovered; its events name the jump from upgrade-failed when they still hold it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gpucluster import kube
from gpucluster.verify.model import Result, fail, ok
from gpucluster.verify.nodestate import age, labels_of

Obj = dict[str, Any]

STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
EVENT_REASON = "GPUDriverUpgrade"
DONE, FAILED, REQUIRED = "upgrade-done", "upgrade-failed", "upgrade-required"
#: The driver DaemonSet of the ClusterPolicy path (gpu-operator v26.3.0 controllers/state_manager.go:79).
DRIVER_DAEMONSET = "nvidia-driver-daemonset"
DEFAULT_DEADLINE = 3600.0
MOVED = re.compile(r"Successfully updated node state label to (\S*)")
HINTS = {
    "cordon-required": "the controller could not cordon the node: read the gpu-operator log",
    "wait-for-jobs-required": ("pods matching driver.upgradePolicy.waitForCompletion.podSelector still run, and "
                               "timeoutSeconds 0 waits for ever: let them finish, or set "
                               "gpuOperator.driver.upgradePolicy.waitForCompletion.timeoutSeconds in the spec"),
    "pod-deletion-required": ("GPU pods could not be deleted: pods without a controller or with emptyDir need "
                              "gpuPodDeletion.force / deleteEmptyDir in gpuOperator.driver.upgradePolicy"),
    "drain-required": ("the drain cannot evict a pod (a PodDisruptionBudget allows no disruption, or a pod needs "
                       "drain.force / deleteEmptyDir): `gpucluster drain NODE --dry-run` lists what blocks"),
    "node-maintenance-required": "the external maintenance operator has not finished with the node",
    "post-maintenance-required": "the external maintenance operator has not finished with the node",
    "pod-restart-required": "the driver pod has not restarted at the new revision: delete it to restart it",
    "validation-required": "the nvidia-operator-validator pod on the node is not Ready: read its init containers' logs",
    "uncordon-required": "the controller could not uncordon the node: `gpucluster uncordon NODE`",
}


@dataclass
class UpgradeInputs:
    """What the check reads besides nodes: the controller's events, driver pods and their revisions."""

    events: list[Obj] = field(default_factory=list)
    daemonsets: list[Obj] = field(default_factory=list)
    revisions: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    namespace: str = "gpu-operator"


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def history(events: list[Obj], node: str) -> list[tuple[float, str]]:
    """(time, state) of the latest recorded change of ``node`` into each state, oldest first.

    The recorder folds a repeated message into one Event (count, lastTimestamp), so each state appears
    once, at its latest time. Timestamps have whole seconds: two changes within one second are ordered
    by the Events' resourceVersion (the order the API server stored them).
    """
    out = []
    for e in events:
        ref = e.get("involvedObject") or {}
        m = MOVED.search(e.get("message") or "")
        when = _epoch(e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp"))
        if e.get("reason") == EVENT_REASON and ref.get("kind") == "Node" and ref.get("name") == node and m and when:
            rv = str(e.get("metadata", {}).get("resourceVersion", ""))
            out.append((when, int(rv) if rv.isdigit() else 0, m.group(1)))
    return [(when, state) for when, _, state in sorted(out)]


def latest_hashes(daemonsets: list[Obj], revisions: list[Obj]) -> dict[str, str]:
    """DaemonSet name -> hash of its newest ControllerRevision (k8s-operator-libs pod_manager.go:92)."""
    out = {}
    for ds in daemonsets:
        name = ds["metadata"]["name"]
        mine = [r for r in revisions if r["metadata"]["name"].startswith(f"{name}-")]
        if mine:
            newest = max(mine, key=lambda r: int(r.get("revision") or 0))
            out[name] = newest["metadata"]["name"][len(name) + 1:]
    return out


def _driver_pod(inputs: UpgradeInputs, node: str) -> tuple[Obj | None, str | None]:
    """The driver pod on ``node`` and its DaemonSet's newest revision hash."""
    hashes = latest_hashes([d for d in inputs.daemonsets if d["metadata"]["name"].startswith(DRIVER_DAEMONSET)],
                           inputs.revisions)
    for p in inputs.pods:
        owners = [o.get("name") for o in p["metadata"].get("ownerReferences") or [] if o.get("kind") == "DaemonSet"]
        if p.get("spec", {}).get("nodeName") == node and owners and owners[0] in hashes:
            return p, hashes[owners[0]]
    return None, None


def _pod_state(pod: Obj | None, want_hash: str | None) -> tuple[bool, str]:
    """(in sync and Ready, description) as k8s-operator-libs isDriverPodInSync judges it."""
    if pod is None:
        return False, "no driver pod on the node"
    name = pod["metadata"]["name"]
    have = (pod["metadata"].get("labels") or {}).get("controller-revision-hash")
    statuses = pod.get("status", {}).get("containerStatuses") or []
    ready = pod.get("status", {}).get("phase") == "Running" and bool(statuses) and all(s.get("ready") for s in statuses)
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    desc = (f"driver pod {name} {'Ready' if ready else 'not Ready'}, revision {have}"
            f"{'' if have == want_hash else f' (newest {want_hash})'}, {restarts} restarts")
    return ready and have == want_hash, desc


#: Why a DRA-only node of a mixed cluster passes through upgrade-failed on every driver upgrade.
DRA_ONLY_VALIDATION = (
    "on a DRA-only node of a mixed cluster the operator's validator never gets Ready (its plugin-validation "
    "waits for nvidia.com/gpu: NVIDIA/gpu-operator#2550), so the upgrade controller marks the node upgrade-failed "
    "after its 600 s validation timeout (k8s-operator-libs pkg/upgrade/validation_manager.go:32) and recovers it "
    "through uncordon-required once the driver pod is in sync and Ready (common_manager.go:526)")


def rows(nodes: list[Obj], inputs: UpgradeInputs, *, deadline: float = DEFAULT_DEADLINE,
         now: float = 0.0, dra_only: AbstractSet[str] = frozenset()) -> Iterator[Result]:
    """One ``driver-upgrade`` row per node with a non-empty upgrade state (pure). ``dra_only``: DRA-only nodes
    of a mixed cluster, which pass through upgrade-failed after validation (:data:`DRA_ONLY_VALIDATION`)."""
    tracked = [n for n in nodes if labels_of(n).get(STATE_LABEL)]
    since: dict[str, float | None] = {}
    for n in tracked:
        name = n["metadata"]["name"]
        moves = history(inputs.events, name)
        state = labels_of(n)[STATE_LABEL]
        at = [t for t, s in moves if s == state]
        held = now - at[-1] if at and now else age(n, STATE_LABEL, now)
        since[name] = held
    moved_last = min((h for h in since.values() if h is not None), default=None)  # the rollout's newest move
    ns = inputs.namespace
    for n in tracked:
        name, state = n["metadata"]["name"], labels_of(n)[STATE_LABEL]
        held = since[name]
        held_text = f" for {int(held)} s" if held is not None else ""
        want = f"{DONE} with the driver pod in sync and Ready"
        pod, want_hash = _driver_pod(inputs, name)
        in_sync, pod_text = _pod_state(pod, want_hash)
        states = [s for _, s in history(inputs.events, name)]
        if state == DONE:
            jumped = any(a == FAILED and b == DONE for a, b in itertools.pairwise(states))
            if in_sync:
                yield ok("driver-upgrade", name, want, f"{DONE}; {pod_text}")
            else:
                how = ("it went from upgrade-failed straight to upgrade-done (events), without the recovery through "
                       "uncordon-required; " if jumped else "")
                yield fail("driver-upgrade", name, want, f"{DONE}; {pod_text}",
                           f"{how}done without a recovered driver: fix the driver pod (kubectl -n {ns} logs "
                           f"{pod['metadata']['name'] if pod else '<driver pod>'}), then let the controller re-run "
                           f"the upgrade: kubectl label node {name} {STATE_LABEL}={REQUIRED} --overwrite")
        elif state == FAILED and name in dra_only and in_sync and states[-2:] == ["validation-required", FAILED]:
            yield ok("driver-upgrade", name, want, f"{FAILED}{held_text} after validation-required; {pod_text}: "
                     f"expected, {DRA_ONLY_VALIDATION}")
        elif state == FAILED:
            yield fail("driver-upgrade", name, want, f"{FAILED}{held_text}; {pod_text}",
                       f"the driver did not come up on {name}: read kubectl -n {ns} logs "
                       f"{pod['metadata']['name'] if pod else '<driver pod>'} --all-containers (kernel headers, "
                       "precompiled image, a GPU still in use); once the pod runs Ready at the new revision the "
                       "controller moves the node to uncordon-required by itself; delete the pod to retry")
        elif state == REQUIRED:
            stalled = moved_last is not None and moved_last >= deadline
            if stalled:
                yield fail("driver-upgrade", name, want, f"{REQUIRED}{held_text}",
                           f"no node has changed upgrade state for {int(moved_last or 0)} s (deadline {int(deadline)} "
                           "s): the rollout is stalled. Check driver.upgradePolicy.autoUpgrade, nodes stuck in another "
                           "state (their rows), and maxUnavailable (NotReady GPU nodes count against it)")
            else:
                yield ok("driver-upgrade", name, want, f"{REQUIRED}{held_text}: waiting its turn")
        elif held is not None and held >= deadline:
            hint = HINTS.get(state, "read the gpu-operator log")
            if state == "validation-required" and name in dra_only:
                hint = DRA_ONLY_VALIDATION
            yield fail("driver-upgrade", name, want, f"stuck at {state}{held_text}", hint + f" (node {name})")
        else:
            yield ok("driver-upgrade", name, want, f"in progress: {state}{held_text}")


def fetch(api: kube.Kube, namespace: str, nodes: list[Obj]) -> UpgradeInputs | None:
    """The inputs of :func:`rows`; None when no node carries an upgrade state (nothing to read)."""
    if not any(labels_of(n).get(STATE_LABEL) for n in nodes):
        return None
    selector = "?fieldSelector=" + "reason%3D" + EVENT_REASON
    return UpgradeInputs(
        events=api.items(kube.EVENTS + selector),
        daemonsets=api.items(kube.namespaced(namespace, "daemonsets", group="apps")),
        revisions=api.items(kube.namespaced(namespace, "controllerrevisions", group="apps")),
        pods=api.items(kube.namespaced(namespace, "pods")),
        namespace=namespace,
    )
