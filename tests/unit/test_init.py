"""`gpucluster init ENV`: a new inventory for real hosts that validates as written, never over files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpucluster import scaffold
from gpucluster.spec import load_spec

REPO = Path(__file__).resolve().parents[2]


def test_init_writes_an_inventory_that_validates(cli, tmp_path):
    target = tmp_path / "inventories" / "prod"
    result = cli("init", target)
    assert result.exit_code == 0, result
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()) == sorted(scaffold.FILES)
    spec = load_spec(target)
    assert spec.metadata.name == "prod" and spec.metadata.environment == "production"
    assert [p.gpu.model for p in spec.gpu_pools] == [scaffold.DEFAULT_GPU_MODEL]
    checked = cli("validate", "-i", target)
    assert checked.exit_code == 0, checked
    assert checked.stdout.startswith("prod: valid (3 hosts, 1 pools, 16 GPUs, 1 tenants)")
    text = (target / "cluster.yaml").read_text()
    assert text.count("CHANGE") >= 4  # hosts, GPU model, endpoint, subnets, tenants, monitoring are marked


def test_the_inventory_plugin_reads_it_with_the_connection_settings(cli, tmp_path):
    """hosts.gpucluster.yml and group_vars/all.yml as Ansible reads them (the repository's ansible.cfg)."""
    target = tmp_path / "lab"
    assert cli("init", target, "--ssh-user", "admin").exit_code == 0
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    out = subprocess.run([str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(target), "--list"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=True)
    inv = json.loads(out.stdout)
    hostvars = inv["_meta"]["hostvars"]
    assert sorted(hostvars) == ["cp-1", "gpu-1", "gpu-2"]
    assert inv["control_plane"]["hosts"] == ["cp-1"] and sorted(inv["gpu"]["hosts"]) == ["gpu-1", "gpu-2"]
    for host in hostvars.values():
        assert host["ansible_user"] == "admin" and host["ansible_become"] is True
        # the plugin's values come marked unsafe (not templated): {"__ansible_unsafe": value}
        assert host["kubernetes_node_version"]["__ansible_unsafe"] == load_spec(target).kubernetes.version


def test_group_vars_show_the_repository_the_role_derives_for_the_specs_minor(cli, tmp_path):
    assert cli("init", tmp_path / "x").exit_code == 0
    minor = ".".join(load_spec(tmp_path / "x").kubernetes.version.split(".")[:2])
    shown = f"https://pkgs.k8s.io/core:/stable:/v{minor}/deb/"
    assert shown in (tmp_path / "x" / "group_vars" / "all.yml").read_text()
    # the role's default, from which it derives <base>/v<minor>/deb/
    defaults = yaml.safe_load((REPO / "roles" / "kubernetes_node" / "defaults" / "main.yml").read_text())
    assert shown.startswith(defaults["kubernetes_node_repo_base"] + "/v")


def test_init_refuses_a_folder_that_holds_files_and_changes_nothing(cli, tmp_path):
    target = tmp_path / "prod"
    target.mkdir()
    (target / "notes.txt").write_text("mine\n")
    result = cli("init", target)
    assert result.exit_code == 2, result
    assert f"{target} holds files (notes.txt)" in result.stderr
    assert sorted(os.listdir(target)) == ["notes.txt"] and (target / "notes.txt").read_text() == "mine\n"
    assert sorted(os.listdir(tmp_path)) == ["prod"]  # no staging folder left beside it


def test_init_fills_an_empty_folder(cli, tmp_path):
    (tmp_path / "prod").mkdir()
    assert cli("init", tmp_path / "prod").exit_code == 0
    assert (tmp_path / "prod" / "cluster.yaml").is_file()


@pytest.mark.parametrize(("args", "message"), [
    # the folder's name is not a DNS-1123 label: the hint is one that is
    (["Prod_1"], "the folder name 'Prod_1' (the cluster's default name): 'Prod_1' is not a valid cluster name"),
    (["ok", "--name", "-bad"], "--name: '-bad' is not a valid cluster name"),
    # a catalog key by prefix
    (["ok", "--gpu-model", "H100"], "hint: H100-SXM5-80GB, H100-NVL-94GB"),
    # a value that would break the YAML it is written into
    (["ok", "--ssh-user", "root\nx: 1"], "is not a login name"),
])
def test_bad_options_exit_2_and_write_nothing(cli, tmp_path, args, message):
    result = cli("init", tmp_path / args[0], *args[1:])
    assert result.exit_code == 2, result
    assert message in result.stderr
    assert os.listdir(tmp_path) == []


def test_a_failure_while_writing_leaves_nothing_behind(cli, tmp_path, monkeypatch):
    def broken(path):
        raise RuntimeError("disk full")

    monkeypatch.setattr("gpucluster.spec.load_spec", broken)
    result = cli("init", tmp_path / "prod")
    assert result.exit_code == 3
    assert os.listdir(tmp_path) == []


def test_json_output_names_the_files(cli, tmp_path):
    result = cli("init", tmp_path / "prod", "-o", "json")
    assert result.exit_code == 0, result
    data = json.loads(result.stdout)
    assert data == {"cluster": "prod", "inventory": str((tmp_path / "prod").resolve()), "files": list(scaffold.FILES)}


def test_what_it_writes_is_lint_clean_yaml(cli, tmp_path, monkeypatch):
    """The templates are not YAML files of the repository (yamllint does not see them): lint their output,
    written as the docs do it (`gpucluster init inventories/prod` in the checkout)."""
    monkeypatch.chdir(tmp_path)
    assert cli("init", "inventories/prod").exit_code == 0
    out = subprocess.run([str(Path(sys.executable).parent / "yamllint"), "--strict", "-c", str(REPO / ".yamllint"),
                          "inventories/prod"], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
