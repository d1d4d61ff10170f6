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
    # No GPU here: starting the unit (as boot would) must skip on its conditions, not fail the boot.
    assert not host.file("/dev/nvidiactl").exists
    host.run_expect([0], "systemctl start gpucluster-mig.service")
    assert host.check_output("systemctl show -p ConditionResult gpucluster-mig.service") == "ConditionResult=no"
    props = host.check_output("systemctl show -p ExecStart gpucluster-mig.service")
    assert "--selected-config ${MIG_PARTED_SELECTED_CONFIG}" in props
