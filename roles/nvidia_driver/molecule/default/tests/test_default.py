"""nvidia_driver outcome, operator-managed: prerequisites only, no host driver, recorded mode."""

import json

testinfra_hosts = ["podman://gpuc-nvidia-driver"]


def test_operator_modules_persisted(host):
    conf = host.file("/etc/modules-load.d/gpucluster-nvidia-operator.conf").content_string
    assert [line for line in conf.splitlines() if line and not line.startswith("#")] == ["i2c_core", "ipmi_msghandler"]


def test_no_host_driver(host):
    for pkg in ("nvidia-driver", "nvidia-kernel-dkms"):
        assert not host.package(pkg).is_installed, pkg
    assert not host.file("/etc/apt/sources.list.d/gpucluster-nvidia.list").exists


def test_mode_recorded(host):
    fact = json.loads(host.file("/etc/ansible/facts.d/gpucluster_nvidia_driver.fact").content_string)
    assert fact["managed_by"] == "operator"
    assert fact["kernel"] == host.check_output("uname -r")
