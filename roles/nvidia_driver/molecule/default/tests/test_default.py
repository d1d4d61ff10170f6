"""nvidia_driver outcome, operator-managed: prerequisites only, no host driver, recorded mode; on a
multi-node NVLink host, the host's nvidia-imex.service (prepare.yml's stand-in) stopped, disabled, masked."""

import json
from pathlib import Path

import yaml

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


IMEX_UNIT = "/lib/systemd/system/nvidia-imex.service"


def _standin_unit() -> str:
    """The stand-in unit file exactly as prepare.yml wrote it."""
    plays = yaml.safe_load((Path(__file__).resolve().parents[1] / "prepare.yml").read_text())
    tasks = [t for play in plays for t in play.get("tasks", [])]
    return next(t["ansible.builtin.copy"]["content"] for t in tasks
                if t.get("ansible.builtin.copy", {}).get("dest") == IMEX_UNIT)


def test_host_imex_service_masked_and_not_running(host):
    # upstream: `systemctl disable --now nvidia-imex.service && systemctl mask nvidia-imex.service`
    enabled = host.run("systemctl is-enabled nvidia-imex.service")
    assert enabled.stdout.strip() == "masked", enabled.stdout + enabled.stderr
    active = host.run("systemctl is-active nvidia-imex.service")
    assert active.stdout.strip() == "inactive", active.stdout + active.stderr
    assert host.check_output("systemctl show -p MainPID --value nvidia-imex.service") == "0"
    mask = host.file("/etc/systemd/system/nvidia-imex.service")
    assert mask.is_symlink and mask.linked_to == "/dev/null"
    # disabled before the mask: the package's wants link is gone too, so an unmask does not bring it back at boot
    assert not host.file("/etc/systemd/system/multi-user.target.wants/nvidia-imex.service").exists


def test_vendor_imex_unit_untouched(host):
    unit = host.file(IMEX_UNIT)
    assert unit.is_file and not unit.is_symlink
    assert (unit.user, unit.group, unit.mode) == ("root", "root", 0o644)
    assert unit.content_string == _standin_unit()
