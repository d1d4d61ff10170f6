"""mig_host outcome: the mig-parted config, the selected layout and the boot unit."""

import yaml

testinfra_hosts = ["podman://gpuc-mig-host"]


def test_config_document(host):
    doc = yaml.safe_load(host.file("/etc/nvidia-mig-manager/config.yaml").content_string)
    assert doc["version"] == "v1"
    assert doc["mig-configs"]["all-1g.10gb"] == [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]


def test_layout_selected(host):
    env = host.file("/etc/default/gpucluster-mig").content_string
    assert "MIG_PARTED_SELECTED_CONFIG=all-1g.10gb" in env


def test_unit_enabled_but_condition_skips_without_gpu(host):
    unit = host.service("gpucluster-mig")
    assert unit.is_enabled
    assert host.check_output("systemd-analyze verify /etc/systemd/system/gpucluster-mig.service 2>&1 || true") == ""
    # No GPU here: the unit's ConditionPathExists keeps it from running (never a silent success).
    assert not host.file("/dev/nvidiactl").exists
