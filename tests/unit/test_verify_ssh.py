"""``verify --hosts ssh``: where it connects (the inventory's own settings, as Ansible merges them) and an
argument list no spec value can turn into an ssh option or a shell command."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpucluster.errors import InputError, SpecError
from gpucluster.spec import load_spec
from gpucluster.verify import ssh
from gpucluster.verify.ssh import SshHost, SshUnreachable, Target

REPO = Path(__file__).resolve().parents[2]
OPTION_ADDRESS = "-oProxyCommand=touch {marker}"


def test_options_end_before_the_address():
    argv = ssh.argv(Target("g1", "10.0.0.2", port=2222, user="ubuntu", key_file="/k"), "true")
    assert argv[:1] == ["ssh"] and argv[-3:] == ["--", "10.0.0.2", "true"]
    assert argv.index("--") == len(argv) - 3  # every option (-p, -l, -i, -o) comes before it
    assert {"-p", "-l", "-i"} <= set(argv[: argv.index("--")])


def test_an_option_like_address_is_refused_by_validation(write_spec, base, tmp_path):
    base["hosts"][1]["address"] = OPTION_ADDRESS.format(marker=tmp_path / "x")
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(base))
    assert [p.path for p in info.value.problems] == ["hosts[1].address"]


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no ssh client on this machine (openssh-client)")
def test_an_option_like_address_that_reached_the_argv_builder_runs_nothing(tmp_path):
    # Validation refuses such an address; this is the second line: past it, ssh still reads a host name.
    marker = tmp_path / "ran"
    target = Target("g1", OPTION_ADDRESS.format(marker=marker))
    with pytest.raises(SshUnreachable):
        SshHost(target).run("true")
    assert not marker.exists()
    # The same argument list without "--" (what testinfra's ssh backend builds) runs the ProxyCommand: the
    # check above would catch a builder that dropped it.
    argv = ssh.argv(target, "true")
    argv.remove("--")
    subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False)
    assert marker.exists()


def test_a_host_ansible_reaches_another_way_is_not_reached_over_ssh():
    with pytest.raises(InputError, match=r"'podman' connection, not ssh; use verify --hosts podman"):
        ssh.argv(Target("g1", "gpuc-site-h100", connection="podman"), "true")


@pytest.mark.parametrize("hostvars, problem", [
    ({"ansible_host": "-oProxyCommand=id"}, "neither an IP address nor a host name"),
    ({"ansible_host": "{{ lookup('env', 'X') }}"}, "Jinja template"),
    ({"ansible_port": "22 -oProxyCommand=id"}, "not a TCP port"),
    ({"ansible_port": 70000}, "not a TCP port"),
    ({"ansible_user": "-oProxyCommand=id"}, "not a login name"),
    ({"ansible_ssh_private_key_file": "/k\n-oX"}, "not a path"),
])
def test_unusable_connection_settings_are_refused(hostvars, problem):
    with pytest.raises(ValueError, match=problem):
        ssh.target_of("g1", hostvars, "10.0.0.2")


def test_the_ssh_plugins_later_variable_wins():
    # ansible-core 2.19's ssh plugin: host from [ansible_host, ansible_ssh_host], the last one set wins.
    target = ssh.target_of("g1", {"ansible_host": "10.0.0.7", "ansible_ssh_host": "10.0.0.8",
                                  "ansible_port": {"__ansible_unsafe": "2200"}, "ansible_ssh_user": "ops"},
                           "10.0.0.2")
    assert (target.address, target.port, target.user) == ("10.0.0.8", 2200, "ops")


@pytest.fixture(scope="module")
def inventory(tmp_path_factory) -> Path:
    """An inventory folder as an operator keeps one: the spec, the plugin config, group_vars and host_vars."""
    folder = tmp_path_factory.mktemp("inventory")
    spec = yaml.safe_load((REPO / "tests" / "data" / "dra" / "cluster.yaml").read_text())
    spec["hosts"][1]["ansibleVars"] = {"ansible_host": "192.0.2.7", "ansible_port": 2222}
    (folder / "cluster.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (folder / "hosts.gpucluster.yml").write_text("plugin: gpucluster\n")
    (folder / "group_vars").mkdir()
    (folder / "group_vars" / "all.yml").write_text("ansible_user: ubuntu\nansible_ssh_private_key_file: ~/.ssh/lab\n")
    (folder / "host_vars").mkdir()
    (folder / "host_vars" / "cp-1.yml").write_text("ansible_user: admin\n")
    return folder


def test_verify_hosts_ssh_connects_where_the_inventory_says(inventory, monkeypatch, tmp_path, cli):
    from gpucluster.verify import certs, hosts, watchdog
    from gpucluster.verify import cluster as verify_cluster
    from gpucluster.verify.snapshot import Snapshot

    monkeypatch.setattr(verify_cluster, "fetch", lambda *a, **k: Snapshot())
    monkeypatch.setattr(watchdog, "live_rows", lambda *a, **k: [])
    monkeypatch.setattr(certs, "rows", lambda *a, **k: [])
    reached: dict[str, Target] = {}

    def record(host, mode, target=None):
        reached[host.name] = target
        raise ConnectionRefusedError("not dialled in a unit test")

    monkeypatch.setattr(hosts, "connect", record)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("unused: the snapshot is stubbed\n")
    out = cli("verify", "-i", str(inventory), "--kubeconfig", str(kubeconfig), "--hosts", "ssh", "-o", "json")
    assert out.stdout.strip(), out.output[-2000:]
    moved = load_spec(inventory).hosts[1].name
    # the spec's ansibleVars (address, port), group_vars/all.yml (user, key) and host_vars/cp-1.yml (user)
    key = str(Path("~/.ssh/lab").expanduser())
    assert (reached[moved].address, reached[moved].port, reached[moved].user) == ("192.0.2.7", 2222, "ubuntu")
    assert (reached["cp-1"].address, reached["cp-1"].port, reached["cp-1"].user) == ("127.0.0.1", None, "admin")
    assert reached["cp-1"].key_file == key
    assert ssh.argv(reached[moved], "true")[-5:] == ["-i", key, "--", "192.0.2.7", "true"]
    rows = {(r["check"], r["subject"]): r["verdict"] for r in json.loads(out.stdout)["results"]}
    assert rows[("host-reachable", moved)] == "fail"


def test_a_bad_setting_in_the_operators_group_vars_exits_2_before_any_check(inventory, tmp_path, cli):
    bad = tmp_path / "inventory"
    shutil.copytree(inventory, bad)
    (bad / "host_vars" / "cp-1.yml").write_text("ansible_user: '-oProxyCommand=id'\n")
    out = cli("verify", "-i", str(bad), "--kubeconfig", str(tmp_path / "none"), "--hosts", "ssh")
    assert out.exit_code == 2, out.output
    assert "cp-1: user '-oProxyCommand=id' is not a login name" in out.stderr
