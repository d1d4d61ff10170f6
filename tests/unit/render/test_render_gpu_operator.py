"""render/gpu_operator.py: Helm values, the device-plugin and mig-parted ConfigMaps."""

from __future__ import annotations

import yaml
from testkit import by_kind, pool

from gpucluster import expected
from gpucluster.render import gpu_operator, monitoring


def test_mig_parted_all_1g_10gb(local):
    cfg = gpu_operator.mig_parted_config(local)
    assert cfg["version"] == "v1"
    # one config per pool, named after the pool (a layout name is not unique across GPU models)
    assert cfg["mig-configs"]["gpucluster-a100-mig"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]
    assert cfg["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    cm = by_kind(gpu_operator.objects(local), "ConfigMap", gpu_operator.MIG_CONFIGMAP)[0]
    assert yaml.safe_load(cm["data"]["config.yaml"]) == cfg


def test_one_named_layout_on_two_gpu_models_gets_two_configs(local):
    # all-balanced is 1g.10gb x2, 2g.20gb, 3g.40gb on an A100-80GB but 1g.5gb x2, 2g.10gb, 3g.20gb on an
    # A100-40GB: one shared config name would give one pool the other's layout (mig-parted then fails).
    local.hosts.append(local.hosts[-1].model_copy(update={"name": "a100-40-1"}))
    a100 = next(p for p in local.node_pools if p.name == "a100-mig")
    local.node_pools.append(a100.model_copy(deep=True, update={"name": "a100-40-mig", "hosts": ["a100-40-1"]}))
    local.node_pools[-1].gpu.model = "A100-40GB"
    for p in (a100, local.node_pools[-1]):
        p.sharing.mig.layout = "all-balanced"
    configs = gpu_operator.mig_parted_config(local)["mig-configs"]
    assert configs["gpucluster-a100-mig"][0]["mig-devices"] == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert configs["gpucluster-a100-40-mig"][0]["mig-devices"] == {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}


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


def test_device_plugin_is_off_when_every_gpu_pool_is_dra(local):
    # gpu-operator facts validator-plugin-validation-removed-only-cluster-wide: otherwise the
    # validator waits for nvidia.com/gpu on DRA-only nodes and crash-loops.
    assert gpu_operator.values(local)["devicePlugin"]["enabled"] is True
    for p in local.gpu_pools:
        p.dra, p.device_plugin = True, False
        p.sharing.mode = type(p.sharing.mode)("exclusive")
        p.sharing.replicas = None
        p.sharing.mig = None
    assert gpu_operator.values(local)["devicePlugin"]["enabled"] is False


def test_host_managed_mig_keeps_the_operators_mig_manager_away(local):
    from gpucluster import labels
    from gpucluster.render.nodes import node_config

    a100 = next(p for p in local.node_pools if p.name == "a100-mig")
    assert labels.DEPLOY_MIG_MANAGER not in node_config(local)[a100.hosts[0]]["labels"]
    a100.sharing.mig.managed_by = "host"
    assert node_config(local)[a100.hosts[0]]["labels"][labels.DEPLOY_MIG_MANAGER] == "false"
