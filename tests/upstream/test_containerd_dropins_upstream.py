"""The host layer's CRI settings survive the NVIDIA Container Toolkit on containerd 1.7 and 2.x.

Real code on every side, in a folder instead of /etc/containerd: the role's own tasks
(roles/container_runtime/tasks/configure.yml, through ansible-playbook) write the main config and our
drop-in for the containerd release at hand; the real `nvidia-ctk runtime configure --config-source=command`
(the engine the GPU Operator's toolkit container runs, NVIDIA/nvidia-container-toolkit, built by
scripts/nvidia-container-toolkit-build.sh) writes its 99-nvidia.toml with a full copy of the CRI runtime
section from `containerd config dump`; then the role runs again with one CRI setting changed. The merged
configuration is what containerd itself prints (`containerd --config FILE config dump`, the binaries
built from containerd's Go modules at 1.7.35, 2.0.14 and 2.4.2). Debian 12's containerd 1.6.20 goes
through the same steps in the container_runtime Molecule scenario.

A second containerd run over the toolkit's file as the toolkit left it shows the fault the re-merge
fixes: containerd still takes the toolkit's frozen copy of the setting.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]

TOOLKIT_RUNTIME = "/usr/local/nvidia/toolkit/nvidia-container-runtime"  # where the GPU Operator installs it


def dump(binary: Path, config: Path) -> dict:
    out = subprocess.run([binary, "--config", config, "config", "dump"], capture_output=True, text=True, check=True)
    return tomllib.loads(out.stdout)


def role_play(binary: Path, etc: Path, log_line_size: int, *, expect_unchanged: bool = False) -> dict:
    play = {
        "name": f"container_runtime with max_container_log_line_size {log_line_size}",
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars": {"container_runtime_service_manage": False, "container_runtime_containerd_binary": str(binary),
                 "container_runtime_config_file": str(etc / "config.toml"),
                 "container_runtime_dropin_dir": str(etc / "conf.d"),
                 "container_runtime_cri_settings": {"max_container_log_line_size": log_line_size}},
        "tasks": [{"name": "Configure containerd", "ansible.builtin.include_role":
                   {"name": "container_runtime", "tasks_from": "configure"}}],
    }
    if expect_unchanged:  # a second run with the same settings changes nothing (Molecule's idempotence)
        play["tasks"].append({"name": "Nothing changed", "ansible.builtin.assert": {
            "that": ["container_runtime_remerge is not changed"], "quiet": True}})
    return play


def toolkit_play(nvidia_ctk: Path, binary: Path, etc: Path) -> dict:
    # `containerd config dump` of this folder's config, as the toolkit runs it against /etc/containerd
    wrapper = etc.parent / "containerd-here"
    wrapper.write_text(f'#!/bin/sh\nexec {binary} --config {etc / "config.toml"} "$@"\n')
    wrapper.chmod(0o755)
    return {"name": "The NVIDIA Container Toolkit configures containerd", "hosts": "localhost",
            "connection": "local", "gather_facts": False, "tasks": [
                {"name": "nvidia-ctk runtime configure", "ansible.builtin.command": {"argv": [
                    str(nvidia_ctk), "runtime", "configure", "--runtime=containerd",
                    f"--config={etc / 'config.toml'}", f"--drop-in-config={etc / 'conf.d' / '99-nvidia.toml'}",
                    "--config-source=command", f"--executable-path={wrapper}",
                    f"--nvidia-runtime-path={TOOLKIT_RUNTIME}", "--cdi.enabled"]}},
                {"name": "Keep the toolkit's file as it wrote it", "ansible.builtin.copy": {
                    "src": str(etc / "conf.d" / "99-nvidia.toml"), "dest": str(etc.parent / "99-nvidia.as-written"),
                    "mode": "0644"}}]}


def runtime_section(cfg: dict) -> dict:
    plugins = cfg["plugins"]
    return plugins.get("io.containerd.cri.v1.runtime") or plugins["io.containerd.grpc.v1.cri"]


def test_a_changed_cri_setting_reaches_containerd_past_the_toolkits_copy(containerd, nvidia_ctk, tmp_path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    plays = [role_play(containerd, etc, 16384), toolkit_play(nvidia_ctk, containerd, etc),
             role_play(containerd, etc, 32768), role_play(containerd, etc, 32768, expect_unchanged=True)]
    (tmp_path / "site.yml").write_text(yaml.safe_dump(plays, sort_keys=False))
    env = os.environ | {"ANSIBLE_ROLES_PATH": str(REPO / "roles"), "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
                        "ANSIBLE_PYTHON_INTERPRETER": sys.executable, "ANSIBLE_NOCOLOR": "1"}
    run = subprocess.run([Path(sys.executable).parent / "ansible-playbook", "-i", "localhost,", tmp_path / "site.yml"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, check=False, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]

    merged = dump(containerd, etc / "config.toml")
    cri = runtime_section(merged)
    assert cri["max_container_log_line_size"] == 32768  # our change, after the toolkit copied 16384
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["BinaryName"] == TOOLKIT_RUNTIME  # the toolkit's
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
    assert cri["containerd"]["default_runtime_name"] == "runc"
    images = merged["plugins"].get("io.containerd.cri.v1.images")
    sandbox = images["pinned_images"]["sandbox"] if images else cri["sandbox_image"]
    assert sandbox == "registry.k8s.io/pause:3.10.2"
    # Every file in the config version of this containerd (its own `config dump`): none is migrated.
    files = (etc / "config.toml", etc / "conf.d" / "10-gpucluster-cri.toml", etc / "conf.d" / "99-nvidia.toml")
    versions = {f.name: tomllib.loads(f.read_text())["version"] for f in files}
    assert set(versions.values()) == {merged["version"]}, versions

    # The fault: the toolkit's file as it wrote it still holds 16384, and containerd takes it over ours.
    (etc / "conf.d" / "99-nvidia.toml").write_text((tmp_path / "99-nvidia.as-written").read_text())
    assert runtime_section(dump(containerd, etc / "config.toml"))["max_container_log_line_size"] == 16384
