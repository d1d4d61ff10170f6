"""render/tenants.py and render/tenant_admission.py: what bounds each tenant, object by object.

What the objects *do* on a real API server is proven in tests/integration/test_tenant_escape.py;
these tests pin the shape: every GPU-bearing resource is in every quota, RBAC stays least-privilege,
the network policy denies both directions but DNS, the policies read the Namespace's allowances.
"""

from __future__ import annotations

from testkit import by_kind

from gpucluster.render import tenant_admission, tenants


def hard_of(objs, ns):
    return next(o for o in by_kind(objs, "ResourceQuota") if o["metadata"]["namespace"] == ns)["spec"]["hard"]


def test_quota_bounds_every_gpu_resource_and_every_device_class(local):
    objs = tenants.objects(local)
    ml, inf = hard_of(objs, "ml-research"), hard_of(objs, "inference")
    assert ml["requests.nvidia.com/gpu"] == "16" and ml["requests.memory"] == "2Ti"
    # every class that can exist: the spec's and the DRA chart's, by claim and as extended resource
    for cls in ("gpu-80gb", "hopper", "mig-1g-10gb", "gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"):
        assert inf[f"{cls}.deviceclass.resource.k8s.io/devices"] == "0"
        assert inf[f"requests.deviceclass.resource.kubernetes.io/{cls}"] == "0"
    assert ml["gpu-80gb.deviceclass.resource.k8s.io/devices"] == "8"
    assert ml["requests.deviceclass.resource.kubernetes.io/gpu-80gb"] == "8"
    assert ml["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"] == "0"
    # MIG: every profile of the MIG-capable device-plugin models (A100-80GB, H200), '+' written as '.'
    assert inf["requests.nvidia.com/mig-1g.10gb"] == "0" and inf["requests.nvidia.com/mig-1g.10gb.me"] == "0"
    assert inf["requests.nvidia.com/mig-7g.141gb"] == "0"
    assert not any("+" in k for k in inf)
    assert ml["requests.rdma/rdma_shared_device_a"] == "16" and inf["requests.rdma/rdma_shared_device_a"] == "0"
    # no pool renames: no gpu.shared; and no dead limits.<extended> key (Kubernetes never counts one)
    assert "requests.nvidia.com/gpu.shared" not in inf
    assert not [k for k in inf if k.startswith("limits.") and "/" in k]


def test_renamed_shared_gpus_and_single_strategy(local):
    next(p for p in local.node_pools if p.name == "l4-infer").sharing.rename_by_default = True
    local.gpu_operator.mig_strategy = "single"
    local.node_pools = [p for p in local.node_pools if p.name != "a100-mig"]  # single cannot mix profiles
    hard = hard_of(tenants.objects(local), "inference")
    assert hard["requests.nvidia.com/gpu.shared"] == "0"
    assert not [k for k in hard if "mig-" in k and k.startswith("requests.nvidia.com/")]  # MIG is nvidia.com/gpu


def test_spec_extended_entries_override_zero(local):
    inf = next(t for t in local.tenants if t.name == "inference")
    inf.quota.extended = {"nvidia.com/mig-1g.10gb": 7, "example.com/fpga": 2}
    hard = hard_of(tenants.objects(local), "inference")
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "7" and hard["requests.example.com/fpga"] == "2"


def test_rbac_is_least_privilege(local):
    objs = tenants.objects(local)
    roles = {o["metadata"]["name"]: o for o in objs
             if o["kind"] == "Role" and o["metadata"]["namespace"] == "inference"}
    assert set(roles) == {"tenant-user", "tenant-admin"}
    protected = {"resourcequotas", "limitranges", "networkpolicies", "roles", "rolebindings"}
    for role in roles.values():
        for rule in role["rules"]:
            if protected & set(rule["resources"]):
                assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
            assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
            writes = set(rule["verbs"]) - {"get", "list", "watch"}
            assert not (writes and [r for r in rule["resources"] if r.endswith("/status")]), rule
            assert rule["apiGroups"] != ["admissionregistration.k8s.io"]
    user = {r for rule in roles["tenant-user"]["rules"] for r in rule["resources"] if "create" in rule["verbs"]}
    assert {"pods", "resourceclaims", "resourceclaimtemplates", "jobs"} <= user
    assert "secrets" not in user
    binding = next(o for o in objs if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "ml-research"
                   and o["metadata"]["name"] == "tenant-user")
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ml-research"}]


def test_network_policy_denies_both_ways_but_namespace_dns_and_monitoring(local):
    local.tenants[0].egress_cidrs = ["10.20.0.0/16"]
    np = by_kind(tenants.objects(local), "NetworkPolicy")[0]["spec"]
    assert np["podSelector"] == {} and np["policyTypes"] == ["Ingress", "Egress"]
    assert np["ingress"] == [{"from": [{"podSelector": {}}]},
                             {"from": [{"namespaceSelector": {"matchLabels": {
                                 "kubernetes.io/metadata.name": "monitoring"}}}]}]
    assert np["egress"][0] == {"to": [{"podSelector": {}}]}
    dns = np["egress"][1]
    assert dns["to"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                          "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}]
    assert dns["ports"] == [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    assert np["egress"][2:] == [{"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]}]
    local.monitoring.enabled = False
    assert len(by_kind(tenants.objects(local), "NetworkPolicy")[0]["spec"]["ingress"]) == 1


def test_namespace_carries_the_allowances_the_policies_read(local):
    ns = by_kind(tenants.objects(local), "Namespace", "ml-research")[0]["metadata"]
    assert ns["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert ns["labels"]["gpucluster.dev/tenant"] == "ml-research"
    # dra-nvidia-gpu up to quota.gpus: the scheduler claims it for plain nvidia.com/gpu pods on DRA pools.
    assert ns["annotations"] == {"gpucluster.dev/allowed-device-classes": "dra-nvidia-gpu,gpu-80gb,hopper,mig-1g-10gb",
                                 "gpucluster.dev/allowed-priority-classes": "batch-inference,notebooks,training",
                                 "scheduling.volcano.sh/queue-name": "ml-research"}


def test_admission_policies_one_per_kind_shared_by_every_tenant(local):
    objs = tenants.objects(local)
    policies = {o["metadata"]["name"]: o for o in by_kind(objs, "ValidatingAdmissionPolicy")}
    bindings = {o["metadata"]["name"]: o for o in by_kind(objs, "ValidatingAdmissionPolicyBinding")}
    names = {f"gpucluster-tenant-{k}" for k in ("pods", "resourceclaims", "resourceclaimtemplates", "volcano-jobs",
                                                "podgroups")}
    assert set(policies) == set(bindings) == names
    for name, p in policies.items():
        spec = p["spec"]
        assert spec["failurePolicy"] == "Fail"
        assert spec["matchConstraints"]["namespaceSelector"] == {"matchExpressions": [
            {"key": "gpucluster.dev/tenant", "operator": "Exists"}]}
        assert bindings[name]["spec"] == {"policyName": name, "validationActions": ["Deny"]}
        assert all(v.get("reason") == "Forbidden" and v.get("message") for v in spec["validations"])
    claims = policies["gpucluster-tenant-resourceclaims"]["spec"]
    assert claims["matchConstraints"]["resourceRules"] == [{
        "apiGroups": ["resource.k8s.io"], "apiVersions": ["v1"], "operations": ["CREATE"],
        "resources": ["resourceclaims"], "scope": "Namespaced"}]
    pods = policies["gpucluster-tenant-pods"]["spec"]["validations"]
    assert any("runtimeClassName.startsWith('nvidia')" in v["expression"] for v in pods)
    assert any("k.substring(35)" in v["expression"] for v in pods)  # len('deviceclass.resource.kubernetes.io/')
    # without Volcano: no Volcano kinds, no queue rule on pods
    local.scheduling.volcano.enabled = False
    objs = tenants.objects(local)
    assert {o["metadata"]["name"] for o in by_kind(objs, "ValidatingAdmissionPolicy")} == \
        names - {"gpucluster-tenant-volcano-jobs", "gpucluster-tenant-podgroups"}
    assert "scheduling.volcano.sh/queue-name" not in by_kind(objs, "Namespace", "ml-research")[0]["metadata"][
        "annotations"]
    # without tenants: nothing
    local.tenants = []
    assert tenant_admission.objects(local) == []


def test_objects_are_not_shared_between_places(local):
    """No dict appears twice (YAML would write anchors and a mutation in one place would leak)."""
    seen: dict[int, str] = {}

    def walk(node, where):
        if isinstance(node, dict | list):
            assert id(node) not in seen or not node, f"{where} is the same object as {seen.get(id(node))}"
            seen[id(node)] = where
            for k, v in (node.items() if isinstance(node, dict) else enumerate(node)):
                walk(v, f"{where}.{k}")

    for o in tenants.objects(local):
        walk(o, f"{o['kind']}/{o['metadata']['name']}")
