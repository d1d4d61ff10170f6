"""The host-layer phase of `gpucluster up` with the real ansible-playbook and the repo's progress callback.

The playbooks here are small stand-ins run on this machine (local connection), so the phase's own
parts are measured: the inventory plugin source, per-play and per-host progress, the counts that make
a re-run report "no changes", the kubeconfig fetch (private file, a new cluster noticed by its CA),
and a failed task named with its host and message. The real site playbook and its kubeconfig
playbook run in the Molecule site scenario (molecule/site/converge.yml).
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest
import yaml

from gpucluster import hostlayer
from gpucluster.errors import InputError

REPO = Path(__file__).resolve().parents[2]

SITE = """
- name: Prepare hosts
  hosts: all
  gather_facts: false
  tasks:
    - name: Write a marker once
      ansible.builtin.copy:
        dest: "{{ marker_dir }}/{{ inventory_hostname }}"
        content: "{{ inventory_hostname }}\\n"
        mode: "0644"
    - name: Fail where asked
      ansible.builtin.fail:
        msg: "cannot prepare {{ inventory_hostname }}: asked to fail"
      when: inventory_hostname == (fail_on | default(''))
- name: Bootstrap the control plane
  hosts: control_plane
  gather_facts: false
  tasks:
    - name: Nothing to change
      ansible.builtin.command: "true"
      changed_when: false
"""

KUBECONFIG = """
- name: Fetch the admin kubeconfig
  hosts: control_plane
  gather_facts: false
  tasks:
    - name: Copy the admin kubeconfig from the init host
      ansible.builtin.fetch:
        src: "{{ admin_conf }}"
        dest: "{{ gpucluster_kubeconfig }}"
        flat: true
      when: inventory_hostname == kubernetes_node_init_host
"""


def admin_conf(ca: bytes) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": [
        {"name": "c", "cluster": {"server": "https://127.0.0.1:6443",
                                  "certificate-authority-data": base64.b64encode(ca).decode()}}]})


@pytest.fixture
def world(tmp_path, monkeypatch):
    """An Ansible folder with stand-in playbooks, and an inventory of three local-connection hosts."""
    base = tmp_path / "ansible"
    (base / "playbooks").mkdir(parents=True)
    (base / "playbooks" / "site.yml").write_text(SITE)
    (base / "playbooks" / "kubeconfig.yml").write_text(KUBECONFIG)
    (base / "ansible.cfg").write_text((REPO / "ansible.cfg").read_text())
    (base / "plugins").symlink_to(REPO / "plugins")
    (base / "roles").symlink_to(REPO / "roles")
    monkeypatch.setenv(hostlayer.PLAYBOOKS_ENV, str(base))
    spec = yaml.safe_load((REPO / "molecule" / "site" / "inventory" / "cluster.yaml").read_text())
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    for host in spec["hosts"]:
        host["ansibleVars"] = local
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "cluster.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (inventory / "hosts.gpucluster.yml").write_text("plugin: gpucluster\n")
    (tmp_path / "markers").mkdir()
    conf = tmp_path / "admin.conf"
    conf.write_text(admin_conf(b"first CA"))
    group_vars = {"marker_dir": str(tmp_path / "markers"), "admin_conf": str(conf)}
    (inventory / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars))
    hosts = [h["name"] for h in spec["hosts"]]
    return {"inventory": inventory, "conf": conf, "group_vars": group_vars, "hosts": hosts,
            "kubeconfig": tmp_path / "state" / "admin.conf"}


def run(world, lines=None):
    return hostlayer.run(world["inventory"], world["kubeconfig"], (lines if lines is not None else []).append)


def test_first_run_changes_second_run_does_not(world):
    lines: list[str] = []
    first = run(world, lines)
    assert set(first.hosts) == set(world["hosts"]) and first.plays == 3
    # one change per host (its marker), plus the kubeconfig fetched on the init host
    assert first.changed == len(world["hosts"]) + 1
    assert all(c["failures"] == 0 for c in first.hosts.values())
    # progress: one line per play, naming every host the play ran on
    prepare = next(line for line in lines if line.startswith("Prepare hosts:"))
    assert all(h in prepare for h in world["hosts"])
    assert any(line.startswith("Fetch the admin kubeconfig:") for line in lines)
    assert re.search(r" \(\d+ s\)$", prepare), prepare  # the play's wall time
    # the timed record of the run: every task start and result, private, next to the kubeconfig
    record = hostlayer.events_path(world["kubeconfig"])
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    events = [json.loads(line) for line in record.read_text().splitlines()]
    marker = [e for e in events if e.get("task") == "Write a marker once" and e["event"] == "result"]
    assert {e["host"] for e in marker} == set(world["hosts"])
    seconds = [e["s"] for e in events]
    assert seconds == sorted(seconds) and seconds[-1] > 0
    assert events[-1]["event"] == "stats"
    again = run(world)
    assert again.changed == 0 and set(again.hosts) == set(world["hosts"])
    assert not again.new_cluster


def test_kubeconfig_is_fetched_private_and_a_new_cluster_is_noticed(world):
    first = run(world)
    assert first.kubeconfig == world["kubeconfig"]
    assert first.kubeconfig.read_text() == world["conf"].read_text()
    assert stat.S_IMODE(first.kubeconfig.stat().st_mode) == 0o600
    assert stat.S_IMODE(first.kubeconfig.parent.stat().st_mode) == 0o700
    assert not first.new_cluster  # nothing was fetched before
    world["conf"].write_text(admin_conf(b"another CA"))  # kubeadm init ran again: a new cluster
    again = run(world)
    assert again.new_cluster and again.changed == 1


def test_a_failed_task_names_host_task_and_message(world):
    world["group_vars"]["fail_on"] = world["hosts"][1]
    (world["inventory"] / "group_vars" / "all.yml").write_text(yaml.safe_dump(world["group_vars"]))
    with pytest.raises(hostlayer.HostLayerFailed) as caught:
        run(world)
    message = str(caught.value)
    assert f"failed on {world['hosts'][1]}" in message and "'Fail where asked'" in message
    assert f"cannot prepare {world['hosts'][1]}: asked to fail" in message
    assert caught.value.exit_code == 1


def test_an_inventory_without_a_plugin_source_is_a_user_error(world):
    (world["inventory"] / "hosts.gpucluster.yml").unlink()
    with pytest.raises(InputError, match="no Ansible inventory source") as caught:
        run(world)
    assert caught.value.exit_code == 2


def test_missing_playbooks_are_a_user_error(world, monkeypatch, tmp_path):
    monkeypatch.setenv(hostlayer.PLAYBOOKS_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(InputError, match="--skip-hosts"):
        run(world)


def test_the_checkout_holds_the_real_playbooks(monkeypatch):
    monkeypatch.delenv(hostlayer.PLAYBOOKS_ENV, raising=False)
    base = hostlayer.ansible_dir()
    for name in hostlayer.PLAYBOOKS:
        assert (base / "playbooks" / name).is_file()
    assert (base / "plugins" / "callback" / "gpucluster_progress.py").is_file()
    assert os.access(base / "ansible.cfg", os.R_OK)


def test_up_stops_at_a_failed_host_task_before_any_stack(world, cli, tmp_path):
    """`gpucluster up` on real hosts: the host layer's failure is the run's, exit 1, and no stack ran."""
    world["group_vars"]["fail_on"] = world["hosts"][2]
    (world["inventory"] / "group_vars" / "all.yml").write_text(yaml.safe_dump(world["group_vars"]))
    state = tmp_path / "up-state"
    result = cli("up", "-i", world["inventory"], "--state-dir", state, "--no-chart-repositories")
    assert result.exit_code == 1, result
    assert f"phase 'host layer' failed: failed on {world['hosts'][2]}, task 'Fail where asked'" in result.stderr
    assert "asked to fail" in result.stderr
    assert not (state / "backend").exists() and not (state / "work").exists()


def test_up_skip_hosts_does_not_run_the_host_layer(world, cli, tmp_path):
    """--skip-hosts starts at the stacks: no playbook runs (here the stacks then find no cluster)."""
    state = tmp_path / "up-state"
    result = cli("up", "-i", world["inventory"], "--state-dir", state, "--skip-hosts",
                 "--kubeconfig", tmp_path / "missing.conf")
    assert result.exit_code == 2, result
    assert "host layer" not in result.stderr
    assert not any((tmp_path / "markers").iterdir())


def test_up_limit_changes_only_the_named_host_then_goes_on_to_the_stacks(world, cli, tmp_path):
    """`up --limit HOST` passes the limit to ansible-playbook: the stand-in site writes a marker on that host
    alone (a run without it writes one per host: test_first_run_changes_second_run_does_not), the init host
    is not contacted (no kubeconfig fetched), and the run goes on to the stacks (here: no cluster, exit 2)."""
    host = world["hosts"][-1]
    state = tmp_path / "up-state"
    result = cli("up", "-i", world["inventory"], "--state-dir", state, "--limit", host,
                 "--kubeconfig", tmp_path / "missing.conf")
    assert sorted(p.name for p in (tmp_path / "markers").iterdir()) == [host]
    # The progress line wraps at the console's width, wherever the temporary path's length puts the break.
    assert f"limited to {host}" in " ".join(result.stderr.split())
    assert not world["kubeconfig"].exists()
    assert result.exit_code == 2 and "missing.conf" in result.stderr, result


@pytest.mark.parametrize("args, message", [
    (("--limit", "nosuch"), "--limit nosuch: no such host in the spec of"),
    (("--limit", "{host}", "--skip-hosts"), "it cannot go with --skip-hosts"),
    (("--limit", "{host}", "--only", "tenants"), "it cannot go with --only"),
    (("--only", "tenants"), "--only tenants: the platform stack of"),
])
def test_up_limit_and_only_mistakes_stop_before_any_host_or_stack(world, cli, tmp_path, args, message):
    """Exit 2 naming the mistake, before the host layer (no marker) and before any stack state exists."""
    state = tmp_path / "up-state"
    args = tuple(a.format(host=world["hosts"][0]) for a in args)
    result = cli("up", "-i", world["inventory"], "--state-dir", state, *args,
                 "--kubeconfig", tmp_path / "missing.conf")
    assert result.exit_code == 2, result
    assert message in result.stderr
    assert not any((tmp_path / "markers").iterdir())
    assert not (state / "backend" / ".pulumi" / "stacks").exists()


def test_up_limit_on_the_local_world_is_refused(cli, tmp_path):
    result = cli("up", "-i", REPO / "inventories" / "local", "--world-dir", tmp_path / "w", "--limit", "cp-1")
    assert result.exit_code == 2, result
    assert "the local world, which has no host layer" in result.stderr
    assert not (tmp_path / "w").exists()
