"""render/gpu_operator.py: Helm values, the device-plugin and mig-parted ConfigMaps."""

from __future__ import annotations

import yaml

from gpucluster import expected
from gpucluster.render import gpu_operator, monitoring


def pool(spec, name):
    return next(p for p in spec.node_pools if p.name == name)


def by_kind(objs, kind, name=None):
    hits = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert hits, f"no {kind} {name or ''}"
    return hits


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
