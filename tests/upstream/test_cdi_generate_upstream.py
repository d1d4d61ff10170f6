"""The nvidia_container_toolkit role's `nvidia-ctk cdi generate`, run as the role runs it, with the real nvidia-ctk.

On a real H200 host (tests/data/captures/h200-580.159.04/host-cdi-nvidia.yaml) nvidia-ctk v1.18.0 wrote
the absolute path of the nvidia-cdi-hook it found at generation time into every hook of the spec: the
capture's hooks name the temporary folder the capture's binaries were on PATH from. It looks the hook up
on PATH and otherwise writes /usr/bin/nvidia-cdi-hook (internal/config/config.go:216-273), so a role
that installs the binaries elsewhere (`nvidia_container_toolkit_bin_dir`) must name the hook itself.

Here the role's own argv (read from roles/nvidia_container_toolkit/tasks/cdi.yml and rendered with its
variables) runs the real nvidia-ctk over the NVML stub: one simulated H200, the stub library in a driver
root and device nodes in a dev root of the test's own (the two root flags are the only additions). The
spec must name the hook the role installed and the devices the real host's spec names (index, UUID,
all). Without the role's hook flag, the same run writes /usr/bin/nvidia-cdi-hook: the fault it prevents.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

from gpucluster.simulator import nvml

REPO = Path(__file__).resolve().parents[2]
CAPTURED = REPO / "tests" / "data" / "captures" / "h200-580.159.04" / "host-cdi-nvidia.yaml"
UUID = "GPU-00000001-0000-0000-0000-000000000000"


def role_argv(bin_dir: Path, spec: Path) -> list[str]:
    tasks = yaml.safe_load((REPO / "roles" / "nvidia_container_toolkit" / "tasks" / "cdi.yml").read_text())
    task = next(t for t in tasks if t.get("name") == "Generate the CDI spec for the devices present")
    variables = {"nvidia_container_toolkit_bin_dir": str(bin_dir), "nvidia_container_toolkit_cdi_spec": str(spec)}
    return [jinja2.Template(a, undefined=jinja2.StrictUndefined).render(variables)
            for a in task["ansible.builtin.command"]["argv"]]


def hooks_and_devices(spec: dict) -> tuple[set[str], set[str]]:
    hooks = {h["path"] for h in spec["containerEdits"]["hooks"]}
    return hooks, {d["name"] for d in spec["devices"]}


@pytest.fixture
def host(tmp_path: Path, nvidia_ctk: Path, nvml_stub: Path) -> dict:
    """A driver root with the stub library, a dev root with the device nodes, the role's bin_dir."""
    lib = tmp_path / "driver-root" / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libnvidia-ml.so.1").symlink_to(nvml_stub)
    driver = "580.95.05"
    (lib / f"libcuda.so.{driver}").touch()  # nvidia-ctk roots the driver's files at libcuda's folder
    dev = tmp_path / "dev-root" / "dev"
    dev.mkdir(parents=True)
    for node in ("nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        os.mknod(dev / node, 0o600 | stat.S_IFCHR, os.makedev(195, 0))
    bin_dir = tmp_path / "opt" / "nvidia-container-toolkit" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("nvidia-ctk", "nvidia-cdi-hook"):
        shutil.copy2(nvidia_ctk.parent / tool, bin_dir / tool)
    gpu = dict(nvml.gpu_request("H200-141GB", 1).to_json(), uuid=UUID)
    (tmp_path / "stub.json").write_text(json.dumps({"driverVersion": driver, "cudaDriverVersion": 13000,
                                                    "gpus": [gpu]}))
    return {"tmp": tmp_path, "bin_dir": bin_dir,
            "env": {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                    "GPUCLUSTER_NVML_STUB_CONFIG": str(tmp_path / "stub.json")},
            "roots": [f"--driver-root={tmp_path / 'driver-root'}", f"--dev-root={tmp_path / 'dev-root'}"]}


def generate(host: dict, argv: list[str]) -> dict:
    out = subprocess.run(argv + host["roots"], env=host["env"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(Path(next(a for a in argv if a.startswith("--output=")).split("=", 1)[1]).read_text())


def test_the_roles_spec_names_the_hook_it_installed_and_the_devices_a_real_host_gets(host: dict) -> None:
    spec_file = host["tmp"] / "etc" / "cdi" / "nvidia.yaml"
    spec_file.parent.mkdir(parents=True)
    argv = role_argv(host["bin_dir"], spec_file)
    assert argv[0] == str(host["bin_dir"] / "nvidia-ctk") and argv[1:3] == ["cdi", "generate"]
    hooks, devices = hooks_and_devices(generate(host, argv))
    assert hooks == {str(host["bin_dir"] / "nvidia-cdi-hook")}
    assert devices == {"0", UUID, "all"}
    # the real H200 host's spec: the same kind of names for its one GPU (its UUID replaced in the capture)
    real_hooks, real_devices = hooks_and_devices(yaml.safe_load(CAPTURED.read_text()))
    assert real_devices == {"0", "GPU-00000000-0000-0000-0000-000000000000", "all"}
    assert len(real_hooks) == 1 and next(iter(real_hooks)).endswith("/nvidia-cdi-hook")  # one absolute path


def test_without_the_roles_hook_flag_the_spec_names_a_hook_that_is_not_there(host: dict) -> None:
    spec_file = host["tmp"] / "spec.yaml"
    argv = [a for a in role_argv(host["bin_dir"], spec_file) if not a.startswith("--nvidia-cdi-hook-path=")]
    hooks, _ = hooks_and_devices(generate(host, argv))
    assert hooks == {"/usr/bin/nvidia-cdi-hook"} and not Path("/usr/bin/nvidia-cdi-hook").exists()
