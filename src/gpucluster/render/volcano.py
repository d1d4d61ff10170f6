"""Volcano: scheduler configuration (Helm values), a Queue per tenant, and the PriorityClasses.

The actions are ``enqueue, allocate, backfill`` plus ``preempt``/``reclaim`` where the spec asks.
``proportion`` shares the cluster by queue weight (capped by each queue's ``capability``);
``capacity`` would be a second, conflicting share model, so it is never enabled alongside it.

Chart value keys (volcano chart 1.15): ``custom.scheduler_config_override`` replaces the whole
``volcano-scheduler.conf`` of the scheduler ConfigMap, ``custom.scheduler_feature_gates`` becomes
the scheduler's ``--feature-gates``, ``custom.enabled_admissions`` the webhook manager's admissions and
the webhook configurations the chart registers. What the chart makes of these values is
:mod:`gpucluster.render.volcano_chart`; the local world starts Volcano's three daemons from that mapping
(``gpucluster.addons.volcano``), so the tests exercise these very values.

Two settings the chart's defaults lack and a GPU cluster needs:

- ``/podgroups/mutate``: tenant Namespaces carry their queue, and Volcano's PodGroup webhook moves a
  PodGroup naming the ``default`` queue into it; the chart's default admissions do not include it, so
  without it a tenant pod that names no queue gets a PodGroup in ``default``, which our admission policy
  refuses, and the pod stays Pending.
- the DRA feature gates Volcano's older Kubernetes libraries have off (:func:`feature_gates`).
"""

from __future__ import annotations

import yaml

from gpucluster import labels as L
from gpucluster.render import topology, volcano_chart
from gpucluster.render.common import Obj, obj
from gpucluster.render.contract import Kind
from gpucluster.spec import features
from gpucluster.spec.model import ChartRef, ClusterSpec, Tenant
from gpucluster.spec.validate.kubernetes import used_features

QUEUE_API = "scheduling.volcano.sh/v1beta1"
#: Kinds whose CRDs the volcano chart installs (its ``crd/`` folder): their objects follow the release.
CHART_KINDS = frozenset({(QUEUE_API, "Queue"), (topology.API, topology.KIND)})
AFTER_KINDS: dict[Kind, Kind] = {}
BEFORE_OTHER_RELEASES = False
#: The scheduler name pods and Volcano Jobs carry in ``spec.schedulerName``.
SCHEDULER_NAME = "volcano"
#: Scheduler feature gate that makes vc-scheduler track ResourceClaims/ResourceSlices.
DRA_FEATURE_GATE = "DynamicResourceAllocation=true"
#: The admission the chart's default ``custom.enabled_admissions`` lacks and tenant routing needs.
PODGROUP_MUTATE = "/podgroups/mutate"


def uses_dra(spec: ClusterSpec) -> bool:
    """True when some pool is served by the DRA GPU driver (the scheduler must allocate claims)."""
    return spec.dra.enabled and any(p.uses_dra for p in spec.node_pools)


def actions(spec: ClusterSpec) -> list[str]:
    """Scheduler actions in execution order for one scheduling cycle."""
    v = spec.scheduling.volcano
    out = ["enqueue", "allocate"]
    if v.preempt:
        out.append("preempt")
    if v.reclaim:
        out.append("reclaim")
    out.append("backfill")
    return out


def scheduler_conf(spec: ClusterSpec) -> dict:
    """The ``volcano-scheduler.conf`` document as data.

    Tier 1 decides order and victims: ``priority`` (PriorityClass value orders jobs and limits
    preemption to lower-priority jobs), ``gang`` (a job runs only when ``minAvailable`` pods fit),
    ``conformance`` (never evicts system-critical pods). Gang's own preemptable vote is off so a
    single-pod batch job can still be preempted by online inference; training is protected by
    priority (batch cannot preempt it) and by its PriorityClass never preempting (no eviction loop).
    Tier 2 decides placement and shares: ``drf``, ``predicates`` (with DRA where pools use it),
    ``proportion`` (queue weights, capability), ``nodeorder``, ``binpack``, and
    ``network-topology-aware`` where the spec declares fabric tiers (:mod:`gpucluster.render.topology`).
    """
    predicates: dict = {"name": "predicates"}
    if uses_dra(spec):
        predicates["arguments"] = {"predicate.DynamicResourceAllocationEnable": True}
    placement = [{"name": "drf", "enablePreemptable": False}, predicates, {"name": "proportion"},
                 {"name": "nodeorder"}, {"name": "binpack"}]
    if topology.enabled(spec):
        placement.append(topology.scheduler_plugin())
    return {
        "actions": ", ".join(actions(spec)),
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False},
                         {"name": "conformance"}]},
            {"plugins": placement},
        ],
    }


def scheduler_conf_text(spec: ClusterSpec) -> str:
    """:func:`scheduler_conf` serialized as the scheduler reads it (YAML)."""
    return yaml.safe_dump(scheduler_conf(spec), sort_keys=False)


def feature_gates(spec: ClusterSpec) -> str:
    """The scheduler's ``--feature-gates`` value ("" when none are needed)."""
    if not uses_dra(spec):
        return ""
    # Volcano decides with its own libraries' feature table, where what we use may be off
    # (gpucluster.spec.features.volcano_gates says which and why).
    return ",".join([DRA_FEATURE_GATE, *(f"{g}=true" for g in features.volcano_gates(used_features(spec)))])


def enabled_admissions(spec: ClusterSpec) -> str:
    """``custom.enabled_admissions``: the chart's default list plus ``/podgroups/mutate`` (module docstring)."""
    chart = volcano_chart.ENABLED_ADMISSIONS.split(",")
    return ",".join([*chart, *([] if PODGROUP_MUTATE in chart else [PODGROUP_MUTATE])])


def values(spec: ClusterSpec) -> dict:
    """Helm values for the volcano chart (only keys we set; chart defaults cover the rest)."""
    custom: dict = {"scheduler_config_override": scheduler_conf_text(spec),
                    "enabled_admissions": enabled_admissions(spec)}
    gates = feature_gates(spec)
    if gates:
        custom["scheduler_feature_gates"] = gates
    return {"custom": custom}


def queue_capability(tenant: Tenant) -> int:
    """GPUs the tenant's queue may hold at once (defaults to the namespace GPU quota)."""
    cap = tenant.queue.capability_gpus
    return tenant.quota.gpus if cap is None else cap


def queue(tenant: Tenant) -> Obj:
    """The tenant's Queue: weight for proportion, capability cap, optional guarantee."""
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
        guarantee = {"nvidia.com/gpu": str(tenant.queue.guarantee_gpus)}
        spec["guarantee"] = {"resource": guarantee}
        # Volcano 1.15's Queue admission rejects a guarantee without a deserved share covering it
        # (validate_queue.go); proportion does not read deserved, so scheduling is unchanged.
        spec["deserved"] = dict(guarantee)
    return obj(QUEUE_API, "Queue", tenant.name, labels={L.TENANT: tenant.name}, spec=spec)


def priority_classes(spec: ClusterSpec) -> list[Obj]:
    """One PriorityClass per spec entry (value and preemption policy from the spec)."""
    out = []
    for p in spec.scheduling.priority_classes:
        o = obj("scheduling.k8s.io/v1", "PriorityClass", p.name, value=p.value, globalDefault=False,
                preemptionPolicy=p.preemption_policy)
        if p.description:
            o["description"] = p.description
        out.append(o)
    return out


def objects(spec: ClusterSpec) -> list[Obj]:
    """PriorityClasses always; Queues and the fabric's HyperNodes when Volcano is enabled."""
    out = priority_classes(spec)
    if spec.scheduling.volcano.enabled:
        out += [queue(t) for t in spec.tenants]
        out += topology.hypernodes(spec)
    return out


def enabled(spec: ClusterSpec) -> bool:
    return spec.scheduling.volcano.enabled


def after(spec: ClusterSpec) -> list[str]:
    return []


def namespace(spec: ClusterSpec) -> str:
    return spec.scheduling.volcano.namespace


def chart(spec: ClusterSpec) -> ChartRef:
    return spec.scheduling.volcano.chart
