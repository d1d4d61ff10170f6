"""The doctor: why a GPU pod is Pending (or was never created), and what to do about it.

``gpucluster doctor pod NS/NAME`` and ``gpucluster doctor pending -n NS`` give one answer per pod: the
blocking cause, the fix, and the objects it was read from. The reasoning is pure (:mod:`.diagnose`
for pods, :mod:`.workloads` for pods admission refused, :mod:`.dra` and :mod:`.volcano` for claims
and gangs, :mod:`.pools` for what the spec can ever offer); :mod:`.fetch` alone reads the cluster.
"""

from __future__ import annotations

from gpucluster import kube
from gpucluster.doctor.diagnose import candidates, diagnose_pod
from gpucluster.doctor.fetch import is_gpu_pod, load_owners, pending, view
from gpucluster.doctor.model import CAUSES, Diagnosis, Finding, Obj, View
from gpucluster.doctor.pools import Pool, spec_pools
from gpucluster.doctor.workloads import diagnose_workload, failed_creates
from gpucluster.errors import InputError
from gpucluster.spec.model import ClusterSpec

__all__ = ["CAUSES", "Diagnosis", "Finding", "View", "diagnose_pod", "pending_in", "pod"]


def _namespace(api: kube.Kube, ns: str) -> None:
    if api.get(f"{kube.NAMESPACES}/{ns}") is None:
        raise InputError(f"namespace {ns} does not exist (kubectl get namespaces)")


def _placeable(obj: Obj, pools: list[Pool]) -> bool:
    """A pod waiting for a node that some pool of the spec offers: the nodes must be read."""
    return pending(obj) and bool(candidates(obj, pools)[1])


def pod(api: kube.Kube, spec: ClusterSpec, ns: str, name: str) -> Diagnosis:
    """Diagnose pod ``ns/name``; a name with no pod but refused creations diagnoses that workload."""
    _namespace(api, ns)
    obj = api.get(kube.namespaced(ns, "pods", name))
    pools = spec_pools(spec)
    v = view(api, spec, ns, [obj] if obj else [], nodes=obj is not None and _placeable(obj, pools))
    if obj is not None:
        return diagnose_pod(obj, v, pools)
    load_owners(api, v, ns, name)
    refused = failed_creates(v, ns, name)
    if not refused:
        raise InputError(f"no pod {ns}/{name}, and no workload of that name whose pods were refused "
                         f"(kubectl get pods -n {ns}; `gpucluster doctor pending -n {ns}` lists every Pending GPU pod)")
    (kind, wname), events = sorted(refused.items())[0]
    return diagnose_workload(kind, ns, wname, events, v)


def pending_in(api: kube.Kube, spec: ClusterSpec, ns: str) -> list[Diagnosis]:
    """Every Pending GPU pod of ``ns`` and every workload there whose pods are being refused."""
    _namespace(api, ns)
    pods = [p for p in api.items(kube.namespaced(ns, "pods")) if pending(p) and is_gpu_pod(p)
            and not p["metadata"].get("deletionTimestamp")]
    pools = spec_pools(spec)
    v = view(api, spec, ns, pods, nodes=any(_placeable(p, pools) for p in pods))
    out = [diagnose_pod(p, v, pools) for p in sorted(pods, key=lambda p: p["metadata"]["name"])]
    refused = failed_creates(v, ns)
    for kind, wname in sorted(load_owners(api, v, ns)):
        out.append(diagnose_workload(kind, ns, wname, refused[(kind, wname)], v))
    return out
