"""Volcano: scheduler configuration (Helm values), a Queue per tenant, and the PriorityClasses.

The actions are ``enqueue, allocate, backfill`` plus ``preempt``/``reclaim`` where the spec asks.
``proportion`` shares the cluster by queue weight; ``capacity`` would be a second, conflicting
share model, so it is never enabled alongside it.
"""

from __future__ import annotations

import yaml

from gpucluster.render.common import Obj, obj
from gpucluster.spec.model import ClusterSpec, Tenant

QUEUE_API = "scheduling.volcano.sh/v1beta1"


def actions(spec: ClusterSpec) -> list[str]:
    v = spec.scheduling.volcano
    out = ["enqueue", "allocate"]
    if v.preempt:
        out.append("preempt")
    if v.reclaim:
        out.append("reclaim")
    out.append("backfill")
    return out


def scheduler_conf(spec: ClusterSpec) -> dict:
    dra = spec.dra.enabled and any(p.uses_dra for p in spec.node_pools)
    predicates: dict = {"name": "predicates"}
    if dra:
        predicates["arguments"] = {"predicate.DynamicResourceAllocationEnable": True}
    return {
        "actions": ", ".join(actions(spec)),
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False},
                         {"name": "conformance"}]},
            {"plugins": [{"name": "drf", "enablePreemptable": False}, predicates, {"name": "proportion"},
                         {"name": "nodeorder"}, {"name": "binpack"}]},
        ],
    }


def values(spec: ClusterSpec) -> dict:
    dra = spec.dra.enabled and any(p.uses_dra for p in spec.node_pools)
    v: dict = {
        "basic": {"scheduler_config_file": "volcano-scheduler.conf"},
        "custom": {"scheduler_config_override": yaml.safe_dump(scheduler_conf(spec), sort_keys=False)},
    }
    if dra:
        v["custom"]["scheduler_feature_gates"] = "DynamicResourceAllocation=true"
    return v


def queue_capability(tenant: Tenant) -> int:
    cap = tenant.queue.capability_gpus
    return tenant.quota.gpus if cap is None else cap


def queue(tenant: Tenant) -> Obj:
    spec: dict = {
        "weight": tenant.queue.weight,
        "reclaimable": tenant.queue.reclaimable,
        "capability": {"nvidia.com/gpu": str(queue_capability(tenant))},
    }
    if tenant.quota.cpu:
        spec["capability"]["cpu"] = tenant.quota.cpu
    if tenant.quota.memory:
        spec["capability"]["memory"] = tenant.quota.memory
    if tenant.queue.guarantee_gpus:
        spec["guarantee"] = {"resource": {"nvidia.com/gpu": str(tenant.queue.guarantee_gpus)}}
    return obj(QUEUE_API, "Queue", tenant.name, labels={"gpucluster.dev/tenant": tenant.name}, spec=spec)


def priority_classes(spec: ClusterSpec) -> list[Obj]:
    out = []
    for p in spec.scheduling.priority_classes:
        o = obj("scheduling.k8s.io/v1", "PriorityClass", p.name, value=p.value, globalDefault=False,
                preemptionPolicy=p.preemption_policy)
        if p.description:
            o["description"] = p.description
        out.append(o)
    return out


def objects(spec: ClusterSpec) -> list[Obj]:
    out = priority_classes(spec)
    if spec.scheduling.volcano.enabled:
        out += [queue(t) for t in spec.tenants]
    return out
