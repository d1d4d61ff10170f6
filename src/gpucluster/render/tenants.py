"""Tenants: Namespace with Pod Security labels, quota, limit range, RBAC, network policy, admission policy.

A tenant takes GPUs only within its quota, by any route (docs/tenants.md lists them):

- the ResourceQuota bounds every GPU-bearing resource the cluster can offer: ``nvidia.com/gpu``, the
  MIG resources of MIG-capable device-plugin pools, ``nvidia.com/gpu.shared``, the ``rdma/*`` resources,
  and for every DeviceClass that can exist (the spec's and the DRA chart's) the devices claimed and the
  class's implicit extended resource; zero wherever the spec gives nothing;
- admission policies (:mod:`gpucluster.render.tenant_admission`) refuse claims on other classes,
  other PriorityClasses, other Volcano queues and the NVIDIA runtime classes, naming the tenant;
- Pod Security (restricted by default) keeps privileged pods and host devices out;
- RBAC is least-privilege: tenant users manage workloads (pods, jobs, Volcano jobs, claims and claim
  templates) and read the rest; tenant admins add secrets and services. Neither may touch quotas,
  limit ranges, network policies, admission policies or RBAC: those come from the spec.
"""

from __future__ import annotations

import json

from gpucluster import labels as L
from gpucluster.render import dra_driver, tenant_admission
from gpucluster.render.common import Obj, obj
from gpucluster.render.dra_driver import tenant_claim_templates
from gpucluster.render.volcano import queue_capability
from gpucluster.spec.capacity import offered_resources
from gpucluster.spec.model import ClusterSpec, Tenant
from gpucluster.spec.nvlink import compute_domains
from gpucluster.upstream import (
    COMPUTE_DOMAIN_API,
    DRA_CHART_DEVICE_CLASSES,
    DRA_COMPUTE_DOMAIN_CHANNEL_CLASS,
    DRA_EXTENDED_CLASS,
)

RBAC = "rbac.authorization.k8s.io/v1"
READ = ["get", "list", "watch"]
WRITE = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
#: Quota keys of DRA (k8s.io/api v0.36.3 core/v1/types.go: ResourceClaimsPerClass, line 7786, and
#: ResourceImplicitExtendedClaimsPerClass, line 7788; tests/upstream/facts/kubernetes.yaml).
DEVICES_PER_CLASS = ".deviceclass.resource.k8s.io/devices"
IMPLICIT_PER_CLASS = "requests.deviceclass.resource.kubernetes.io/"
#: Where cluster DNS runs: kubeadm's CoreDNS Deployment and Service (kubernetes v1.36.3,
#: cmd/kubeadm/app/phases/addons/dns/manifests.go; facts kubeadm-dns-*).
DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS = {"k8s-app": "kube-dns"}

USER_RULES = [
    {"apiGroups": [""], "resources": ["pods", "configmaps", "persistentvolumeclaims"], "verbs": WRITE},
    {"apiGroups": [""], "resources": ["pods/log", "pods/status", "events", "resourcequotas", "limitranges",
                                      "services", "endpoints"], "verbs": READ},
    {"apiGroups": [""], "resources": ["pods/exec", "pods/portforward"], "verbs": ["create", "get"]},
    {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "replicasets"], "verbs": WRITE},
    {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": WRITE},
    {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": WRITE},
    {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"], "verbs": READ},
    # Templates are how Jobs and Deployments get claims; the admission policy checks them exactly as
    # it checks claims, so writing one grants nothing a claim does not.
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "resourceclaimtemplates"], "verbs": WRITE},
]
ADMIN_EXTRA = [
    {"apiGroups": [""], "resources": ["secrets", "services", "serviceaccounts"], "verbs": WRITE},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": READ},
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": READ},
]
ROLES = {"tenant-user": USER_RULES, "tenant-admin": USER_RULES + ADMIN_EXTRA}


def tenant_namespace(t: Tenant, spec: ClusterSpec) -> Obj:
    level = t.pod_security
    annotations = tenant_admission.namespace_annotations(spec, sorted(device_quota(spec, t)), t.priority_classes,
                                                         queue=t.name)
    return obj("v1", "Namespace", t.ns, annotations=annotations, labels={
        L.TENANT: t.name,
        L.POD_SECURITY_ENFORCE: level,
        L.POD_SECURITY_ENFORCE_VERSION: "latest",
        L.POD_SECURITY_AUDIT: level,
        L.POD_SECURITY_WARN: level,
    })


def device_classes(spec: ClusterSpec) -> list[str]:
    """Every DeviceClass that can exist in this cluster: the spec's, the DRA chart's own and ours for
    plain ``nvidia.com/gpu`` (rendered whenever the chart is installed), and the chart's ComputeDomain
    channel class where the release runs ComputeDomains."""
    ours = {DRA_EXTENDED_CLASS} if dra_driver.enabled(spec) and spec.dra.enabled else set()
    channels = {DRA_COMPUTE_DOMAIN_CHANNEL_CLASS} if compute_domains(spec) else set()
    return sorted({dc.name for dc in spec.dra.device_classes} | set(DRA_CHART_DEVICE_CLASSES) | ours | channels)


def compute_domain_quota(spec: ClusterSpec, t: Tenant) -> int | None:
    """How many ComputeDomains the tenant may hold: its IMEX channel devices
    (``quota.deviceClasses`` of the channel class; a ComputeDomain is used through at least one), 0 for a
    tenant without them, None where the release runs no ComputeDomains."""
    if not compute_domains(spec):
        return None
    return t.quota.device_classes.get(DRA_COMPUTE_DOMAIN_CHANNEL_CLASS, 0)


def device_quota(spec: ClusterSpec, t: Tenant) -> dict[str, int]:
    """The DeviceClasses a tenant may claim, with devices per class.

    Those of ``quota.deviceClasses``, plus the extended-resource class up to ``quota.gpus``: the scheduler
    creates a claim on it in the tenant's namespace for every plain ``nvidia.com/gpu`` pod it places on a
    DRA pool, and every claim on it also counts against ``requests.nvidia.com/gpu`` (the class names that
    resource; kubernetes v1.37.2 pkg/quota/v1/evaluator/core/resource_claims.go addExtendedResourceQuota),
    so allowing it gives no GPU beyond ``quota.gpus``.
    """
    out = dict(t.quota.device_classes)
    if t.quota.gpus and DRA_EXTENDED_CLASS in device_classes(spec):
        out.setdefault(DRA_EXTENDED_CLASS, t.quota.gpus)
    return out


def quota_hard(spec: ClusterSpec, t: Tenant) -> dict[str, str]:
    """The tenant's ResourceQuota ``spec.hard``.

    Extended resources are quota'd as ``requests.<name>`` only: the pod evaluator counts no
    ``limits.<extended>`` key (kubernetes v1.36.3 pkg/quota/v1/evaluator/core/pods.go:86-97), and
    requests of an extended resource always equal its limits.
    """
    hard: dict[str, str] = {"requests.nvidia.com/gpu": str(t.quota.gpus)}
    for name in sorted(set(offered_resources(spec)) | set(t.quota.extended)):
        hard[f"requests.{name}"] = str(t.quota.extended.get(name, 0))
    allowed = device_quota(spec, t)
    for cls in sorted(set(device_classes(spec)) | set(allowed)):
        n = str(allowed.get(cls, 0))
        hard[f"{cls}{DEVICES_PER_CLASS}"] = n  # devices claimed through ResourceClaims
        hard[f"{IMPLICIT_PER_CLASS}{cls}"] = n  # pods asking deviceclass.resource.kubernetes.io/<class>
    if t.quota.cpu:
        hard["requests.cpu"] = t.quota.cpu
        hard["limits.cpu"] = t.quota.cpu
    if t.quota.memory:
        hard["requests.memory"] = t.quota.memory
        hard["limits.memory"] = t.quota.memory
    if t.quota.pods is not None:
        hard["pods"] = str(t.quota.pods)
    if (domains := compute_domain_quota(spec, t)) is not None:
        group, plural, _ = COMPUTE_DOMAIN_API
        hard[f"count/{plural}.{group}"] = str(domains)
    return hard


def quota(spec: ClusterSpec, t: Tenant) -> Obj:
    return obj("v1", "ResourceQuota", "gpucluster-quota", t.ns,
               annotations={L.QUEUE_CAPABILITY: str(queue_capability(t))},
               spec={"hard": quota_hard(spec, t)})


def limit_range(t: Tenant) -> Obj:
    d = t.container_defaults
    return obj("v1", "LimitRange", "gpucluster-defaults", t.ns, spec={"limits": [{
        "type": "Container",
        "default": {"cpu": d.cpu_limit, "memory": d.memory_limit},
        "defaultRequest": {"cpu": d.cpu_request, "memory": d.memory_request},
    }]})


def compute_domain_rule(t: Tenant) -> list[dict]:
    """Write access to ComputeDomains for a tenant that may claim their IMEX channels, else none. The
    controller then creates the channel's ResourceClaimTemplate in the tenant's namespace, which the
    admission policy checks like the tenant's own and the quota counts."""
    if DRA_COMPUTE_DOMAIN_CHANNEL_CLASS not in t.quota.device_classes:
        return []
    group, plural, _ = COMPUTE_DOMAIN_API
    return [{"apiGroups": [group], "resources": [plural], "verbs": WRITE}]


def rbac(t: Tenant) -> list[Obj]:
    # fresh copies: the rule tables are shared constants whose rules share verb lists, and no part of
    # one rendered object may alias another (a YAML dump would write anchors)
    out = [obj(RBAC, "Role", name, t.ns, rules=json.loads(json.dumps(rules + compute_domain_rule(t))))
           for name, rules in ROLES.items()]
    for role, groups in (("tenant-admin", t.admins), ("tenant-user", t.users)):
        if groups:
            out.append(obj(RBAC, "RoleBinding", role, t.ns,
                           roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                           subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}
                                     for g in sorted(groups)]))
    return out


def network_policy(t: Tenant, monitoring_ns: str | None) -> Obj:
    """Default-deny in both directions, then: the namespace itself, cluster DNS, the monitoring namespace.

    GPU metrics need no allowance here: the DCGM exporter runs in the GPU Operator's namespace and
    reads the GPUs on the node, and Prometheus scrapes it there. The ingress from the monitoring
    namespace is for the tenant's own ``/metrics`` endpoints (PodMonitors).
    """
    ingress: list[dict] = [{"from": [{"podSelector": {}}]}]
    if monitoring_ns:
        ingress.append({"from": [{"namespaceSelector": {"matchLabels": {L.NAMESPACE_NAME: monitoring_ns}}}]})
    dns = {"namespaceSelector": {"matchLabels": {L.NAMESPACE_NAME: DNS_NAMESPACE}},
           "podSelector": {"matchLabels": dict(DNS_POD_LABELS)}}
    egress: list[dict] = [
        {"to": [{"podSelector": {}}]},
        {"to": [dns], "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
    ]
    egress += [{"to": [{"ipBlock": {"cidr": cidr}}]} for cidr in t.egress_cidrs]
    return obj("networking.k8s.io/v1", "NetworkPolicy", "gpucluster-isolate", t.ns, spec={
        "podSelector": {},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": ingress,
        "egress": egress,
    })


def objects(spec: ClusterSpec) -> list[Obj]:
    mon = spec.monitoring.namespace if spec.monitoring.enabled else None
    out: list[Obj] = []
    for t in spec.tenants:
        out += [tenant_namespace(t, spec), quota(spec, t), limit_range(t), *rbac(t), network_policy(t, mon),
                *tenant_claim_templates(spec, t)]
    return out + tenant_admission.objects(spec)
