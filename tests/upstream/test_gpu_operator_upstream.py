"""The GPU Operator's objects and labels against its source at v26.3.0 (and the mig-parted it bundles)."""

from __future__ import annotations

import yaml
from upstream_facts import fact, source

from gpucluster import catalog, components, inventory
from gpucluster import labels as L
from gpucluster.render import gpu_operator
from gpucluster.render.nodes import node_config
from gpucluster.spec.validate import gpu_operator as validate_gpu_operator


def _spec(env: str):
    return inventory.load(inventory.REPO_ROOT / "inventories" / env)


def test_chart_name_and_version_are_the_pinned_release() -> None:
    pin = components.get("gpu-operator").chart
    assert pin is not None
    assert (pin.name, pin.version) == (fact("gpu-operator", "chart-name"), fact("gpu-operator", "release-version"))


def test_mig_parted_config_has_upstreams_schema() -> None:
    """Every config we render is one mig-parted v0.14 accepts (spec.go: keys, required, devices, mig-devices)."""
    allowed_top = set(fact("gpu-operator", "mig-parted-spec-top-level-keys"))
    entry_keys = set(fact("gpu-operator", "mig-parted-entry-keys"))
    required = set(fact("gpu-operator", "mig-parted-entry-required"))
    for env in ("local", "lab"):
        spec = _spec(env)
        (cm,) = [o for o in gpu_operator.objects(spec) if o["metadata"]["name"] == gpu_operator.MIG_CONFIGMAP]
        # the MIG manager reads this key of a custom ConfigMap (CONFIG_FILE=/mig-parted-config/config.yaml)
        assert list(cm["data"]) == [fact("gpu-operator", "mig-manager-custom-config-env")["configmap-key"]]
        doc = yaml.safe_load(cm["data"]["config.yaml"])
        assert set(doc) <= allowed_top and doc["version"] == fact("gpu-operator", "mig-parted-spec-version")
        for name, entries in doc["mig-configs"].items():
            for entry in entries:
                assert required <= set(entry) <= entry_keys, (name, entry)
                assert entry["devices"] == "all" or all(isinstance(i, int) for i in entry["devices"])
                # mig-devices is required when mig-enabled and forbidden when not (spec.go)
                assert ("mig-devices" in entry) == bool(entry["mig-enabled"]), (name, entry)


def test_balanced_layouts_are_the_operators(monkeypatch) -> None:
    """all-balanced per model as the operator's default mig-parted ConfigMap defines it."""
    want = {"A100-40GB": fact("gpu-operator", "all-balanced-a100-40gb"),
            "A100-80GB": fact("gpu-operator", "all-balanced-a100-80gb-h100-80gb"),
            "H100-SXM5-80GB": fact("gpu-operator", "all-balanced-a100-80gb-h100-80gb"),
            "H200-141GB": fact("gpu-operator", "all-balanced-h200")}
    for key, layout in want.items():
        model = catalog.get(key)
        where = source("gpu-operator", "all-balanced-line")
        assert model.mig is not None and model.mig.balanced == layout, (key, where)


def test_node_labels_we_set_are_the_keys_the_operands_read() -> None:
    assert L.DEVICE_PLUGIN_CONFIG == fact("gpu-operator", "device-plugin-config-node-label")
    assert L.MIG_CONFIG == fact("gpu-operator", "mig-config-label")
    assert L.MIG_CONFIG_STATE == fact("gpu-operator", "mig-config-state-label")
    assert L.DEPLOY_MIG_MANAGER == fact("gpu-operator", "deploy-label-mig-manager")["key"]
    assert L.DEPLOY_DEVICE_PLUGIN in fact("gpu-operator", "daemonset-device-plugin-node-selector")
    assert L.GPU_PRESENT == fact("gpu-operator", "gpu-present-label")["key"]
    # every deploy label we set is one of an operand DaemonSet's selectors
    selectors = {sel.split(" ")[0] for sel in fact("gpu-operator", "daemonsets").values()}
    for env in ("local", "lab"):
        for host, cfg in node_config(_spec(env)).items():
            for key in cfg["labels"]:
                if key.startswith(L.DEPLOY_PREFIX):
                    assert key in selectors, (host, key)


def test_dcgm_metrics_configmap_key_is_the_one_the_operator_mounts() -> None:
    from gpucluster.render import monitoring

    assert monitoring.DCGM_CSV_KEY == fact("gpu-operator", "dcgm-exporter-metrics-configmap-key")


def test_driver_image_oses_are_the_ones_nvidia_builds() -> None:
    built = set(fact("gpu-operator", "driver-container-ci-dists"))
    assert set(validate_gpu_operator.DRIVER_IMAGE_OSES) <= built
    assert not any(os.startswith("debian") for os in built)
    assert fact("gpu-operator", "driver-container-no-debian-on-main") is True


def test_only_one_nfd_in_the_lab() -> None:
    """NFD defaults to on in the GPU Operator; the lab keeps the network operator's off."""
    assert fact("gpu-operator", "default-nfd-enabled") is True
    spec = _spec("lab")
    assert spec.gpu_operator.nfd and not spec.networking.network_operator.nfd
