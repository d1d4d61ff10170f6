"""Read what a diagnosis needs from the API server (the only module of the doctor that does I/O).

For one pod: the pod, its namespace's events and quotas, every node, the pods that occupy nodes, the
PriorityClasses; Volcano's PodGroups and Queues when the pod is in a gang; ResourceSlices,
ResourceClaims, DeviceClasses and DeviceTaintRules when it uses claims. About a dozen LIST calls however many nodes;
on a 1,000-node cluster the node LIST dominates (``benchmarks/bench_doctor.py``).
"""

from __future__ import annotations

import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

from gpucluster import kube
from gpucluster.doctor.model import Obj, View
from gpucluster.doctor.objects import bound, extended_requests, group_of, wants_claims
from gpucluster.doctor.workloads import failed_creates, short_of_pods
from gpucluster.spec.features import DEVICE_TAINT_RULE_API
from gpucluster.spec.model import ClusterSpec

PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/podgroups"
#: Pods that hold or may hold node resources (finished ones hold nothing).
UNFINISHED = "?fieldSelector=" + urllib.parse.quote("status.phase!=Succeeded,status.phase!=Failed", safe="")
#: (apiVersion group, kind) -> (API path template of the workload), for FailedCreate owners.
OWNER_PATHS = {
    ("batch", "Job"): "/apis/batch/v1/namespaces/{ns}/jobs/{name}",
    ("apps", "ReplicaSet"): "/apis/apps/v1/namespaces/{ns}/replicasets/{name}",
    ("apps", "StatefulSet"): "/apis/apps/v1/namespaces/{ns}/statefulsets/{name}",
    ("apps", "DaemonSet"): "/apis/apps/v1/namespaces/{ns}/daemonsets/{name}",
    ("", "ReplicationController"): "/api/v1/namespaces/{ns}/replicationcontrollers/{name}",
    ("batch.volcano.sh", "Job"): "/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs/{name}",
}


def is_gpu_pod(pod: Obj) -> bool:
    """A pod that asks for GPU/RDMA extended resources or DRA claims."""
    return bool(extended_requests(pod)) or wants_claims(pod)


def pending(pod: Obj) -> bool:
    return pod.get("status", {}).get("phase") == "Pending" and not bound(pod)


def view(api: kube.Kube, spec: ClusterSpec, ns: str, subjects: list[Obj], *, nodes: bool = True) -> View:
    """Everything the rules read to diagnose ``subjects`` (pods of namespace ``ns``).

    ``nodes=False`` leaves out the node and pod LISTs (the largest) when no subject has a node the spec
    could place it on. The LISTs run concurrently: the API server serializes one while we decode another.
    """
    v = View(spec=spec, now=time.time())
    calls: dict[str, tuple[str, bool]] = {  # field -> (path, may be unserved)
        "events": (kube.namespaced(ns, "events"), False),
        "quotas": (kube.namespaced(ns, "resourcequotas"), False),
        "priority_classes": (kube.PRIORITY_CLASSES, False),
    }
    gangs = any(group_of(p) for p in subjects)
    if nodes:
        calls["nodes"] = (kube.NODES, False)
    if nodes or gangs:
        calls["pods"] = (kube.PODS + UNFINISHED, False)
    if gangs:
        calls |= {"podgroups": (PODGROUPS, True), "queues": (kube.VOLCANO_QUEUES, True),
                  "hypernodes": (kube.VOLCANO_HYPERNODES, True)}
    if any(wants_claims(p) for p in subjects):
        calls |= {"slices": (kube.RESOURCE_SLICES, True), "claims": (kube.RESOURCE_CLAIMS, True),
                  "device_classes": (kube.DEVICE_CLASSES, True)}
        if spec.kubernetes.minor[1] in DEVICE_TAINT_RULE_API:
            calls["taint_rules"] = (f"/apis/{DEVICE_TAINT_RULE_API[spec.kubernetes.minor[1]]}/devicetaintrules", True)
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = {f: pool.submit(api.list if optional else api.items, path) for f, (path, optional) in calls.items()}
        for field, future in futures.items():
            setattr(v, field, future.result())
    known = {p["metadata"].get("uid") for p in v.pods}
    v.pods += [p for p in subjects if p["metadata"].get("uid") not in known]
    return v


def owner_key(ref: Obj) -> tuple[str, str]:
    """(API group, kind) of an event's involvedObject."""
    api_version = ref.get("apiVersion", "")
    return (api_version.split("/")[0] if "/" in api_version else "", ref.get("kind", ""))


def load_owners(api: kube.Kube, v: View, ns: str, name: str | None = None) -> list[tuple[str, str]]:
    """Fetch the workloads with FailedCreate events in ``ns`` into ``v.owners``; (kind, name) of those
    still short of pods (all of them when ``name`` is given: the user asked about that one)."""
    out = []
    for (kind, wname), events in failed_creates(v, ns, name).items():
        group, _ = owner_key(events[-1].get("involvedObject") or {})
        path = OWNER_PATHS.get((group, kind))
        owner = api.get(path.format(ns=ns, name=wname)) if path else None
        if owner is not None:
            v.owners[(kind, ns, wname)] = owner
        if name is not None or short_of_pods(kind, owner):
            out.append((kind, wname))
    return out
