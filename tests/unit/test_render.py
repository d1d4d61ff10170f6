"""Renderers: assert real content for each component (not just that something came out)."""

from __future__ import annotations

import copy

import pytest
import yaml

from gpucluster import devices, expected
from gpucluster.render import dra_driver as dra
from gpucluster.render import gpu_operator, monitoring, render, tenants, volcano
from gpucluster.render import network_operator as network
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec


@pytest.fixture(scope="module")
def local() -> ClusterSpec:
    from pathlib import Path

    return load_spec(Path(__file__).resolve().parents[2] / "inventories" / "local")


@pytest.fixture(scope="module")
def lab() -> ClusterSpec:
    from pathlib import Path

    return load_spec(Path(__file__).resolve().parents[2] / "inventories" / "lab")


def pool(spec, name):
    return next(p for p in spec.node_pools if p.name == name)


def by_kind(objs, kind, name=None):
    hits = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert hits, f"no {kind} {name or ''}"
    return hits


def test_every_object_has_identity(local, lab):
    for spec in (local, lab):
        for o in render(spec).objects():
            assert o["apiVersion"] and o["kind"] and o["metadata"]["name"], o
            assert o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpucluster"


def test_mig_parted_all_1g_10gb(local):
    cfg = gpu_operator.mig_parted_config(local)
    assert cfg["version"] == "v1"
    assert cfg["mig-configs"]["all-1g.10gb"] == [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]
    assert cfg["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    cm = by_kind(gpu_operator.objects(local), "ConfigMap", gpu_operator.MIG_CONFIGMAP)[0]
    assert yaml.safe_load(cm["data"]["config.yaml"]) == cfg


def test_mig_parted_explicit_layout_gets_a_pool_named_config(lab):
    cfg = gpu_operator.mig_parted_config(lab)
    assert cfg["mig-configs"]["gpucluster-h100-mig"][0]["mig-devices"] == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    labels = expected.host_states(lab)["gpu-mig-01"].labels
    assert labels["nvidia.com/mig.config"] == "gpucluster-h100-mig"


def test_time_slicing_config_per_pool(local):
    cm = by_kind(gpu_operator.objects(local), "ConfigMap", gpu_operator.DEVICE_PLUGIN_CONFIGMAP)[0]
    assert set(cm["data"]) == {"default", "l4-infer"}
    l4 = yaml.safe_load(cm["data"]["l4-infer"])
    assert l4["version"] == "v1"
    assert l4["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert "sharing" not in yaml.safe_load(cm["data"]["default"])


def test_mps_pool_uses_mps_section(local):
    spec = local.model_copy(deep=True)
    pool(spec, "l4-infer").sharing.mode = "mps"
    cfg = gpu_operator.device_plugin_config(spec)["l4-infer"]
    want = {"renameByDefault": False, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}
    assert cfg["sharing"] == {"mps": want}


def test_l4_time_sliced_host_expects_16_gpus(local):
    states = expected.host_states(local)
    assert states["l4-1"].resources == {"nvidia.com/gpu": 16}
    assert states["l4-1"].labels["nvidia.com/gpu.product"] == "NVIDIA-L4-SHARED"
    assert states["l4-1"].labels["nvidia.com/gpu.replicas"] == "4"
    assert states["l4-1"].labels["nvidia.com/device-plugin.config"] == "l4-infer"


def test_expected_state_per_sharing_mode(local):
    s = expected.host_states(local)
    assert s["h200-1"].resources == {"nvidia.com/gpu": 8}
    assert s["a100-1"].resources == {"nvidia.com/mig-1g.10gb": 56}
    assert s["a100-1"].labels["nvidia.com/mig.config.state"] == "success"
    # DRA pool: no device-plugin resources, 8 devices, device plugin switched off by label
    assert "nvidia.com/gpu" not in s["h100-1"].resources
    assert s["h100-1"].resources == {"rdma/rdma_shared_device_a": 63}
    assert [d.name for d in s["h100-1"].devices] == [f"gpu-{i}" for i in range(8)]
    assert s["h100-1"].labels["nvidia.com/gpu.deploy.device-plugin"] == "false"
    assert s["h100-1"].devices[0].memory_bytes == 81559 * 2**20
    assert s["cp-1"].taints == [] and "node-role.kubernetes.io/control-plane" in s["cp-1"].labels
    assert s["h200-1"].taints == ["nvidia.com/gpu=present:NoSchedule"]


def test_mig_single_strategy(local):
    spec = local.model_copy(deep=True)
    spec.gpu_operator.mig_strategy = "single"
    s = expected.host_states(spec)["a100-1"]
    assert s.resources == {"nvidia.com/gpu": 56}
    assert s.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"
    assert s.labels["nvidia.com/gpu.memory"] == str(10 * 1024)


def test_rename_by_default_uses_shared_resource(local):
    spec = local.model_copy(deep=True)
    pool(spec, "l4-infer").sharing.rename_by_default = True
    s = expected.host_states(spec)["l4-1"]
    assert s.resources == {"nvidia.com/gpu.shared": 16}
    assert s.labels["nvidia.com/gpu.product"] == "NVIDIA-L4"


def test_dra_devices_for_mig_pool(local):
    from gpucluster import catalog

    devs = devices.dra_devices("c", "h", catalog.get("A100-80GB"), 2, {"1g.10gb": 7})
    assert len(devs) == 14 and {d.type for d in devs} == {"mig"}
    assert devs[0].profile == "1g.10gb" and devs[0].parent_uuid.startswith("GPU-")
    assert len({d.uuid for d in devs}) == 14 and len({d.name for d in devs}) == 14


def test_gpu_operator_values(local, lab):
    v = gpu_operator.values(local)
    assert v["devicePlugin"]["config"] == {"name": gpu_operator.DEVICE_PLUGIN_CONFIGMAP, "default": "default",
                                           "create": False}
    mig_config = {"name": gpu_operator.MIG_CONFIGMAP, "default": "all-disabled"}
    assert v["migManager"] == {"enabled": True, "config": mig_config}
    assert v["mig"]["strategy"] == "mixed" and v["cdi"]["enabled"] is True
    assert v["dcgmExporter"]["config"]["name"] == monitoring.DCGM_CONFIGMAP
    host = lab.model_copy(deep=True)
    host.gpu_operator.driver.managed_by = "host"
    assert gpu_operator.values(host)["driver"] == {"enabled": False}


def test_device_classes_select_by_attributes(local):
    classes = {o["metadata"]["name"]: o for o in dra.objects(local)}
    assert all(o["apiVersion"] == "resource.k8s.io/v1" for o in classes.values())
    expr = classes["gpu-80gb"]["spec"]["selectors"][0]["cel"]["expression"]
    assert "device.driver == 'gpu.nvidia.com'" in expr
    assert "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80G')) >= 0" in expr
    assert "architecture == 'Hopper'" in classes["hopper"]["spec"]["selectors"][0]["cel"]["expression"]
    mig = classes["mig-1g-10gb"]["spec"]["selectors"][0]["cel"]["expression"]
    assert ".type == 'mig'" in mig and ".profile == '1g.10gb'" in mig
    for o in classes.values():
        assert "index" not in o["spec"]["selectors"][0]["cel"]["expression"]


def test_compute_capability_is_semver(local):
    spec = local.model_copy(deep=True)
    spec.dra.device_classes[1].selector.min_compute_capability = "9.0"
    expr = dra.cel(spec.dra.device_classes[1])
    assert "cudaComputeCapability.compareTo(semver('9.0.0')) >= 0" in expr


def test_claim_templates_in_tenant_namespaces(local):
    t = by_kind(tenants.objects(local), "ResourceClaimTemplate", "one-80gb-gpu")
    assert [o["metadata"]["namespace"] for o in t] == ["ml-research"]
    req = t[0]["spec"]["spec"]["devices"]["requests"][0]
    assert req["exactly"] == {"deviceClassName": "gpu-80gb", "allocationMode": "ExactCount", "count": 1}


def test_dra_values_carry_override(local):
    v = dra.values(local)
    assert v["gpuResourcesEnabledOverride"] is True
    assert v["resources"]["gpus"]["enabled"] is True
    assert v["nvidiaDriverRoot"] == "/run/nvidia/driver"


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


def test_volcano_objects_and_conf(local):
    objs = volcano.objects(local)
    q = by_kind(objs, "Queue", "ml-research")[0]
    assert q["spec"]["weight"] == 60 and q["spec"]["capability"]["nvidia.com/gpu"] == "16"
    assert q["spec"]["guarantee"] == {"resource": {"nvidia.com/gpu": "4"}}
    pcs = {o["metadata"]["name"]: o for o in by_kind(objs, "PriorityClass")}
    assert pcs["online-inference"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert pcs["training"]["preemptionPolicy"] == "Never"
    assert pcs["online-inference"]["value"] > pcs["training"]["value"] > pcs["batch-inference"]["value"]
    conf = volcano.scheduler_conf(local)
    assert conf["actions"] == "enqueue, allocate, preempt, reclaim, backfill"
    plugins = [p["name"] for tier in conf["tiers"] for p in tier["plugins"]]
    assert "proportion" in plugins and "capacity" not in plugins and "gang" in plugins
    pred = next(p for t in conf["tiers"] for p in t["plugins"] if p["name"] == "predicates")
    assert pred["arguments"]["predicate.DynamicResourceAllocationEnable"] is True


def test_network_objects(local):
    objs = network.objects(local)
    ncp = by_kind(objs, "NicClusterPolicy")
    assert len(ncp) == 1
    import json

    cfg = json.loads(ncp[0]["spec"]["rdmaSharedDevicePlugin"]["config"])
    assert cfg["configList"][0]["resourceName"] == "rdma_shared_device_a"
    assert cfg["configList"][0]["selectors"]["ifNames"] == ["ibp12s0", "ibp75s0"]
    nad = by_kind(objs, "NetworkAttachmentDefinition", "ib-fabric")[0]
    conf = json.loads(nad["spec"]["config"])
    assert conf["type"] == "ipoib" and conf["ipam"] == {"type": "whereabouts", "range": "192.168.100.0/24"}
    assert nad["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"] == "rdma/rdma_shared_device_a"
    assert network.values(local)["nfd"]["enabled"] is False


def test_exactly_one_nfd(lab):
    r = render(lab)
    nfd = [rel.name for rel in r.releases if rel.values.get("nfd", {}).get("enabled")]
    assert nfd == ["gpu-operator"]


def test_monitoring_thresholds_come_from_spec(local):
    spec = local.model_copy(deep=True)
    spec.monitoring.alerts.temperature_celsius = 77
    rules = {r["alert"]: r for r in monitoring.alert_rules(spec)}
    assert rules["GPUTemperatureHigh"]["expr"] == "DCGM_FI_DEV_GPU_TEMP > 77"
    assert "< 8" in rules["GPUCountBelowSpec"]["expr"] and "h100-1|h100-2" in rules["GPUCountBelowSpec"]["expr"]


def test_releases_pinned(local):
    from gpucluster import versions

    rels = {r.name: r for r in render(local).releases}
    assert rels["gpu-operator"].version == versions.CHARTS["gpu-operator"].version
    assert rels["dra-driver"].version == "0.4.1"
    assert rels["volcano"].version == "1.15.1"


def test_render_is_pure(local):
    before = local.model_dump()
    a, b = render(local), render(copy.deepcopy(local))
    assert a.components == b.components
    assert local.model_dump() == before
