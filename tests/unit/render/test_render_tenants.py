"""render/tenants.py: namespace, quota, limit range, RBAC, network policy per tenant."""

from __future__ import annotations

from gpucluster.render import tenants


def pool(spec, name):
    return next(p for p in spec.node_pools if p.name == name)


def by_kind(objs, kind, name=None):
    hits = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert hits, f"no {kind} {name or ''}"
    return hits


def test_tenant_objects(local):
    objs = tenants.objects(local)
    ns = by_kind(objs, "Namespace", "ml-research")[0]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    q = next(o for o in by_kind(objs, "ResourceQuota") if o["metadata"]["namespace"] == "ml-research")
    hard = q["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "16" and hard["limits.nvidia.com/gpu"] == "16"
    assert hard["gpu-80gb.deviceclass.resource.k8s.io/devices"] == "8"
    assert hard["requests.memory"] == "2Ti"
    roles = {o["metadata"]["name"]: o for o in objs
             if o["kind"] == "Role" and o["metadata"]["namespace"] == "inference"}
    # least privilege: nobody in the tenant may edit quotas, limit ranges, policies or RBAC
    for role in roles.values():
        for rule in role["rules"]:
            if {"resourcequotas", "limitranges", "networkpolicies", "roles", "rolebindings"} & set(rule["resources"]):
                assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
            assert "*" not in rule["verbs"] and "*" not in rule["resources"]
    np = by_kind(objs, "NetworkPolicy")[0]
    assert np["spec"]["policyTypes"] == ["Ingress"] and {"podSelector": {}} in np["spec"]["ingress"][0]["from"]
