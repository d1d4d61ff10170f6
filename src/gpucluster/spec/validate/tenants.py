"""``tenants``: namespaces, priority classes, quotas, claim templates, queues, the GPU quota sum."""

from __future__ import annotations

import ipaddress

from gpucluster.spec import capacity
from gpucluster.spec.model import ClusterSpec
from gpucluster.spec.nvlink import compute_domains
from gpucluster.spec.validate.common import Collector, close
from gpucluster.upstream import DRA_CHART_DEVICE_CLASSES, DRA_COMPUTE_DOMAIN_CHANNEL_CLASS, DRA_EXTENDED_CLASS

#: Namespaces Kubernetes itself creates and uses.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


#: Namespaces of the pod networks tests/upstream/facts/cni.yaml weighs: flannel's chart and Calico's
#: operator chart (facts flannel-chart-install-namespace, calico-chart-namespace).
POD_NETWORK_NAMESPACES = ("kube-flannel", "tigera-operator")


#: Extended resource names the quota spells in its own fields.
IMPLICIT_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"


def reserved_namespaces(spec: ClusterSpec) -> dict[str, str]:
    """Namespaces a tenant must not take, each with what it belongs to.

    A tenant's objects there would put operator pods under the tenant's quota, default-deny network
    policy and admission policy, and hand the tenant's groups rights in the operator's namespace.
    """
    out = {ns: "a Kubernetes system namespace" for ns in SYSTEM_NAMESPACES}
    out |= {ns: "a pod network's namespace" for ns in POD_NETWORK_NAMESPACES}
    out[spec.gpu_operator.namespace] = "the GPU Operator's namespace (gpuOperator.namespace)"
    out[spec.dra.namespace] = "the DRA driver's namespace (dra.namespace)"
    out[spec.scheduling.volcano.namespace] = "Volcano's namespace (scheduling.volcano.namespace)"
    out[spec.networking.network_operator.namespace] = ("the network operator's namespace "
                                                       "(networking.networkOperator.namespace)")
    out[spec.monitoring.namespace] = "the monitoring namespace (monitoring.namespace)"
    return out


def check(spec: ClusterSpec, c: Collector, capacity_known: bool) -> None:
    c.duplicates("tenants", (t.name for t in spec.tenants))
    c.duplicates("tenants", (t.ns for t in spec.tenants), what="namespace")
    priorities = {p.name for p in spec.scheduling.priority_classes}
    classes = {dc.name for dc in spec.dra.device_classes} | set(DRA_CHART_DEVICE_CLASSES)
    if any(p.uses_dra for p in spec.gpu_pools):
        classes.add(DRA_EXTENDED_CLASS)
    if compute_domains(spec):  # the chart's ComputeDomain channel class (render/tenants.py device_classes)
        classes.add(DRA_COMPUTE_DOMAIN_CHANNEL_CLASS)
    templates = {t.name: t for t in spec.dra.claim_templates}
    reserved = reserved_namespaces(spec)
    offered = capacity.offered_resources(spec) if capacity_known else None  # unknown models: no offer to judge
    _queues_need_volcano(spec, c)
    for i, t in enumerate(spec.tenants):
        base = f"tenants[{i}]"
        if t.ns in reserved:
            c.error(f"{base}.namespace", f"tenant namespace {t.ns!r} is {reserved[t.ns]}",
                    f"give the tenant a namespace of its own, e.g. namespace: {t.name}-workloads")
        if t.pod_security == "privileged":
            c.warn(f"{base}.podSecurity", "privileged pods reach every GPU of the node they run on, outside "
                   "the tenant's quota", "use restricted (the default) or baseline")
        for j, p in enumerate(t.priority_classes):
            if p not in priorities:
                c.error(f"{base}.priorityClasses[{j}]", f"unknown PriorityClass {p!r}", close(p, priorities))
        for name in t.quota.device_classes:
            if name not in classes:
                c.error(f"{base}.quota.deviceClasses.{name}", f"unknown DeviceClass {name!r}", close(name, classes))
        _extended(c, f"{base}.quota.extended", t.quota.extended, offered)
        for j, name in enumerate(t.claim_templates):
            if name not in templates:
                c.error(f"{base}.claimTemplates[{j}]", f"unknown claim template {name!r}", close(name, templates))
                continue
            for alt in templates[name].alternatives:
                cls, count = alt.device_class, alt.count
                allowed = t.quota.device_classes.get(cls)
                if allowed is None and cls == DRA_EXTENDED_CLASS and t.quota.gpus:
                    allowed = t.quota.gpus  # allowed up to quota.gpus (render/tenants.py device_quota)
                if allowed is None:
                    c.error(f"{base}.claimTemplates[{j}]", f"claim template {name!r} claims DeviceClass {cls!r}, "
                            f"which tenant {t.name!r} may not claim", f"add quota.deviceClasses.{cls}: <devices>, or "
                            "drop the template")
                elif count > allowed:
                    c.error(f"{base}.claimTemplates[{j}]", f"claim template {name!r} claims {count} {cls!r} devices, "
                            f"above the tenant's quota of {allowed}", f"raise quota.deviceClasses.{cls} to {count}")
        for j, cidr in enumerate(t.egress_cidrs):
            try:
                ipaddress.ip_network(cidr, strict=True)
            except ValueError as err:
                c.error(f"{base}.egressCidrs[{j}]", f"invalid CIDR {cidr!r}: {err}",
                        "write it like 10.20.0.0/16 (host bits zero)")
        cap = t.queue.capability_gpus
        if cap is not None and t.quota.gpus and cap > t.quota.gpus:
            c.warn(f"{base}.queue.capabilityGpus", f"queue capability {cap} is above the namespace GPU quota "
                   f"{t.quota.gpus}", "the quota rejects pods before the queue could use it")
        if t.queue.guarantee_gpus > (cap if cap is not None else t.quota.gpus):
            c.error(f"{base}.queue.guaranteeGpus", "guarantee exceeds the queue capability",
                    "a queue cannot be guaranteed more than it may use")
    if not capacity_known:
        return
    gpus = capacity.cluster_gpu_capacity(spec)
    total = sum(t.quota.gpus for t in spec.tenants)
    if total > gpus:
        detail = ", ".join(f"{t.name}={t.quota.gpus}" for t in spec.tenants if t.quota.gpus)
        c.error("tenants", f"tenant GPU quotas add up to {total} ({detail}) but the cluster serves "
                f"{gpus} nvidia.com/gpu (device plugin and extendedResource DRA pools)",
                "lower the quotas or add GPU capacity")
    caps = sum(t.queue.capability_gpus if t.queue.capability_gpus is not None else t.quota.gpus
               for t in spec.tenants)
    if caps > gpus:
        c.warn("tenants", f"queue capabilities add up to {caps} GPUs, above the cluster's {gpus}",
               "fine for borrowing, but queues cannot all reach their capability at once")


#: Extended-resource domains whose every resource comes from this spec's pools (the device plugin's
#: GPUs, MIG instances and shared GPUs; the RDMA shared device plugin's resources).
SPEC_DOMAINS = ("nvidia.com/", "rdma/")


def _extended(c: Collector, path: str, extended: dict[str, int], offered: list[str] | None) -> None:
    """quota.extended keys are resource names as pods request them, of resources something offers; the GPU
    and DRA ones have own fields."""
    for name in extended:
        where = f"{path}.{name}"
        if name.startswith(("requests.", "limits.")):
            c.error(where, f"{name!r} is a quota key, not a resource name",
                    f"write the resource as pods request it: {name.split('.', 1)[1]}")
        elif name == "nvidia.com/gpu":
            c.error(where, "nvidia.com/gpu has its own field", "use quota.gpus")
        elif name.startswith(IMPLICIT_CLASS_PREFIX):
            c.error(where, f"{name!r} is a DeviceClass's extended resource",
                    f"use quota.deviceClasses.{name.removeprefix(IMPLICIT_CLASS_PREFIX)}")
        elif "/" not in name:
            c.error(where, f"{name!r} is not an extended resource name (domain/name)",
                    "e.g. nvidia.com/mig-1g.10gb or rdma/rdma_shared_device_a; cpu and memory have own fields")
        elif offered is not None and name not in offered:
            offers = f"the pools offer {', '.join(offered)}" if offered else \
                "the pools offer no extended resource besides nvidia.com/gpu"
            near = close(name, offered) if offered else ""
            if name.startswith(SPEC_DOMAINS):
                why = _why_not_offered(name)
                c.error(where, f"no node pool offers {name}{why}: the quota would allow what no node has",
                        f"{near + '; ' if near.startswith('did') else ''}{offers}; correct the name or remove it")
            else:
                c.warn(where, f"no node pool of this spec offers {name}", f"{offers}; the quota matters only if "
                       "something outside the spec advertises it (another device plugin)")


def _why_not_offered(name: str) -> str:
    """Why the pools offer no such resource, where the name says which setting would."""
    if name.startswith("nvidia.com/mig-"):
        return (" (MIG instances are their own resources only with gpuOperator.migStrategy: mixed, on "
                "device-plugin pools of MIG-capable models)")
    if name == "nvidia.com/gpu.shared":
        return " (only time-slicing or MPS pools with sharing.renameByDefault: true offer it)"
    if name.startswith("rdma/"):
        return " (RDMA resources are nodePools[].rdma.resourceName and networking.secondaryNetworks[].resourceName)"
    return ""


def _queues_need_volcano(spec: ClusterSpec, c: Collector) -> None:
    """Queue settings make Volcano queues; with Volcano off nothing reads them."""
    if spec.scheduling.volcano.enabled:
        return
    for i, t in enumerate(spec.tenants):
        if "queue" in t.model_fields_set:
            c.error(f"tenants[{i}].queue", "queue settings with scheduling.volcano.enabled: false: the queues "
                    "are Volcano's, and nothing would create or read them",
                    "remove the queue settings, or set scheduling.volcano.enabled: true")
