"""Tenants: Namespace with Pod Security labels, quotas, limit range, RBAC and network policy.

RBAC is least-privilege: tenant users manage workloads (pods, jobs, Volcano jobs, claims) and read
the rest; tenant admins add secrets and services. Neither may touch quotas, limit ranges, network
policies or RBAC: those come from the spec and the platform team.
"""

from __future__ import annotations

from gpucluster import labels as L
from gpucluster.render.common import Obj, namespace, obj
from gpucluster.render.dra_driver import tenant_claim_templates
from gpucluster.render.volcano import queue_capability
from gpucluster.spec.model import ClusterSpec, Tenant

RBAC = "rbac.authorization.k8s.io/v1"
READ = ["get", "list", "watch"]
WRITE = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]

USER_RULES = [
    {"apiGroups": [""], "resources": ["pods", "configmaps", "persistentvolumeclaims"], "verbs": WRITE},
    {"apiGroups": [""], "resources": ["pods/log", "pods/status", "events", "resourcequotas", "limitranges",
                                      "services", "endpoints"], "verbs": READ},
    {"apiGroups": [""], "resources": ["pods/exec", "pods/portforward"], "verbs": ["create", "get"]},
    {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "replicasets"], "verbs": WRITE},
    {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": WRITE},
    {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": WRITE},
    {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"], "verbs": READ},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": WRITE},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaimtemplates"], "verbs": READ},
]
ADMIN_EXTRA = [
    {"apiGroups": [""], "resources": ["secrets", "services", "serviceaccounts"], "verbs": WRITE},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": READ},
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": READ},
]


def tenant_namespace(t: Tenant) -> Obj:
    level = t.pod_security
    return namespace(t.ns, labels={
        L.TENANT: t.name,
        L.POD_SECURITY_ENFORCE: level,
        L.POD_SECURITY_ENFORCE_VERSION: "latest",
        L.POD_SECURITY_AUDIT: level,
        L.POD_SECURITY_WARN: level,
    })


def quota(t: Tenant) -> Obj:
    hard: dict[str, str] = {
        "requests.nvidia.com/gpu": str(t.quota.gpus),
        "limits.nvidia.com/gpu": str(t.quota.gpus),
    }
    if t.quota.cpu:
        hard["requests.cpu"] = t.quota.cpu
        hard["limits.cpu"] = t.quota.cpu
    if t.quota.memory:
        hard["requests.memory"] = t.quota.memory
        hard["limits.memory"] = t.quota.memory
    if t.quota.pods is not None:
        hard["pods"] = str(t.quota.pods)
    for name, n in sorted(t.quota.device_classes.items()):
        hard[f"{name}.deviceclass.resource.k8s.io/devices"] = str(n)
    for name, n in sorted(t.quota.extended.items()):
        hard[f"requests.{name}"] = str(n)
    return obj("v1", "ResourceQuota", "gpucluster-quota", t.ns,
               annotations={L.QUEUE_CAPABILITY: str(queue_capability(t))},
               spec={"hard": hard})


def limit_range(t: Tenant) -> Obj:
    d = t.container_defaults
    return obj("v1", "LimitRange", "gpucluster-defaults", t.ns, spec={"limits": [{
        "type": "Container",
        "default": {"cpu": d.cpu_limit, "memory": d.memory_limit},
        "defaultRequest": {"cpu": d.cpu_request, "memory": d.memory_request},
    }]})


def rbac(t: Tenant) -> list[Obj]:
    out = [obj(RBAC, "Role", "tenant-user", t.ns, rules=USER_RULES),
           obj(RBAC, "Role", "tenant-admin", t.ns, rules=USER_RULES + ADMIN_EXTRA)]
    for role, groups in (("tenant-admin", t.admins), ("tenant-user", t.users)):
        if groups:
            out.append(obj(RBAC, "RoleBinding", role, t.ns,
                           roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                           subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}
                                     for g in sorted(groups)]))
    return out


def network_policy(t: Tenant, monitoring_ns: str | None) -> Obj:
    peers: list[dict] = [{"podSelector": {}}]  # same namespace
    if monitoring_ns:
        peers.append({"namespaceSelector": {"matchLabels": {L.NAMESPACE_NAME: monitoring_ns}}})
    return obj("networking.k8s.io/v1", "NetworkPolicy", "gpucluster-isolate", t.ns, spec={
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": peers}],
    })


def objects(spec: ClusterSpec) -> list[Obj]:
    mon = spec.monitoring.namespace if spec.monitoring.enabled else None
    out: list[Obj] = []
    for t in spec.tenants:
        out += [tenant_namespace(t), quota(t), limit_range(t), *rbac(t), network_policy(t, mon),
                *tenant_claim_templates(spec, t)]
    return out
