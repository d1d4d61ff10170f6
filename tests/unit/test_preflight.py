"""The host layer's preflight (roles/preflight, first play of playbooks/preflight.yml) with the real
ansible-playbook on local-connection hosts.

One run over ten hosts of this machine: one clean, each other with exactly one problem made real:

- unreachable: the ssh connection to a closed port of 127.0.0.1;
- privilege escalation fails: the become executable does not exist;
- not root: the become executable runs the command as nobody (``setpriv``), as a wrong
  ``ansible_become_user`` would;
- no Python: ``ansible_python_interpreter`` names a missing file;
- unsupported OS: the host's roles declare only Ubuntu 24.04 (``preflight_platforms``), and this
  machine runs Debian 12;
- clock: the host's shell finds a ``date`` one hour behind;
- package repository: the Kubernetes repository of the minor answers 404 (a local HTTP server; the
  clean host gets the index and key from the same server, under the path the role derives from the
  spec's version);
- free disk: containerd's path needs more than any disk holds;
- local source: the controller folder of kubeadm and kubelet is empty.

The run goes through :func:`gpucluster.hostlayer.run` (the `up` phase), so the failure it raises is
the preflight's one message. The judgements are also unit-tested as plain functions below.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import re
import shutil
import sys
import threading
from pathlib import Path

import pytest
import yaml

from gpucluster import hostlayer

REPO = Path(__file__).resolve().parents[2]
SPEC_VERSION = "1.37.2"


def _filters():
    spec = importlib.util.spec_from_file_location("preflight_filters",
                                                  REPO / "roles" / "preflight" / "filter_plugins" / "preflight.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


F = _filters()

#: host -> (its variables, a fragment of the one problem it must get). The first is the clean host.
LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}


def _hosts(tmp: Path, port: int) -> dict[str, tuple[dict, str]]:
    served = f"http://127.0.0.1:{port}/served"
    return {
        "ok-cp": ({"kubernetes_node_source": "repository", "kubernetes_node_repo_base": served}, ""),
        "unreachable": ({"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1},
                        "unreachable over SSH: Failed to connect to the host via ssh"),
        "become-fails": ({"ansible_become": True, "ansible_become_user": "nobody",
                          "ansible_become_exe": "/nonexistent/sudo"},
                         "privilege escalation failed: Premature end of stream waiting for become success"),
        "not-root": ({"ansible_become": True, "ansible_become_user": "nobody",
                      "ansible_become_exe": str(tmp / "sudo-as-nobody")},
                     "tasks would run as uid 65534, not root"),
        "no-python": ({"ansible_python_interpreter": "/nonexistent/python3"},
                      "Ansible modules cannot run (Python): The module interpreter '/nonexistent/python3' was not "
                      "found"),
        "old-os": ({"preflight_platforms": {"container_runtime": [{"name": "Ubuntu", "versions": ["noble"]}]}},
                   "which container_runtime does not support (supported: Ubuntu noble"),
        "clock": ({"ansible_shell_executable": str(tmp / "skewed-sh")}, "s behind this controller's"),
        "repo-404": ({"kubernetes_node_source": "repository",
                      "kubernetes_node_repo_base": f"http://127.0.0.1:{port}/missing"},
                     f"the Kubernetes package repository for 1.37 does not answer from this host: GET "
                     f"http://127.0.0.1:{port}/missing/v1.37/deb/InRelease: Status code was 404"),
        "disk": ({"container_runtime_free_disk": [{"path": "/var/lib/containerd", "gib": 10**6, "why": "images"}]},
                 "GiB free, needs 1e+06 GiB: /var/lib/containerd 1e+06 GiB for container_runtime (images)"),
        "no-kubeadm": ({"kubernetes_node_local_dir": str(tmp / "empty")},
                       f"kubernetes_node_local_dir ({tmp / 'empty'}, on this controller) lacks kubeadm and kubelet"),
    }


def _fakes(tmp: Path) -> None:
    (tmp / "empty").mkdir()
    (tmp / "bin").mkdir()
    for name in ("kubeadm", "kubelet"):
        (tmp / "bin" / name).write_text("#!/bin/sh\n")
    (tmp / "sudo-as-nobody").write_text(
        "#!/bin/sh\n# sudo's stand-in: `... -u USER /bin/sh -c CMD` runs CMD as nobody\n"
        'while [ $# -gt 0 ] && [ "$1" != /bin/sh ]; do shift; done\n'
        'exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"\n')
    (tmp / "skew").mkdir()
    (tmp / "skew" / "date").write_text('#!/bin/sh\necho $(( $(/bin/date +%s) - 3600 ))\n')
    (tmp / "skewed-sh").write_text(f'#!/bin/sh\nPATH="{tmp / "skew"}:$PATH" exec /bin/sh "$@"\n')
    for name in ("sudo-as-nobody", "skew/date", "skewed-sh"):
        (tmp / name).chmod(0o755)
    repo = tmp / "www" / "served" / "v1.37" / "deb"
    repo.mkdir(parents=True)
    (repo / "InRelease").write_text("Origin: stand-in\n")
    (repo / "Release.key").write_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\n")


def _inventory(folder: Path, hosts: dict[str, dict], group_vars: dict) -> Path:
    spec = {"apiVersion": "gpucluster.dev/v1alpha1", "kind": "Cluster",
            "metadata": {"name": "preflight", "environment": "test"},
            "kubernetes": {"version": SPEC_VERSION}, "monitoring": {"enabled": False},
            "hosts": [{"name": name, "address": f"127.0.0.{10 + i}",
                       "roles": ["control-plane"] if i == 0 else ["worker"], "ansibleVars": {**LOCAL, **extra}}
                      for i, (name, extra) in enumerate(hosts.items())]}
    (folder / "group_vars").mkdir(parents=True)
    (folder / "cluster.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (folder / "hosts.gpucluster.yml").write_text("plugin: gpucluster\n")
    (folder / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars))
    return folder


@pytest.fixture(scope="module")
def http_root(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("preflight")
    _fakes(tmp)
    handler = functools.partial(type("Quiet", (http.server.SimpleHTTPRequestHandler,),
                                     {"log_message": lambda *a: None}), directory=str(tmp / "www"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield tmp, server.server_address[1]
    server.shutdown()


def _group_vars(tmp: Path) -> dict:
    return {"kubernetes_node_source": "local", "kubernetes_node_local_dir": str(tmp / "bin")}


@pytest.fixture(scope="module")
def ran(http_root, monkeypatch_module):
    """The preflight over every host once: (message of the failure, {host: [problems]}, hosts)."""
    tmp, port = http_root
    monkeypatch_module.delenv(hostlayer.PLAYBOOKS_ENV, raising=False)
    hosts = _hosts(tmp, port)
    inventory = _inventory(tmp / "inventory", {h: v for h, (v, _) in hosts.items()}, _group_vars(tmp))
    lines: list[str] = []
    with pytest.raises(hostlayer.HostLayerFailed) as caught:
        hostlayer.run(inventory, tmp / "state" / "admin.conf", lines.append, playbooks=hostlayer.PREFLIGHT)
    message = str(caught.value)
    found: dict[str, list[str]] = {}
    for line in message.splitlines()[1:]:
        m = re.match(r"  (\S+) \(127\.0\.0\.\d+\): (.*)$", line)
        assert m, f"not a host line: {line!r}\n{message}"
        found.setdefault(m[1], []).append(m[2])
    return message, found, hosts, caught.value


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


FAULTS = ["unreachable", "become-fails", "not-root", "no-python", "old-os", "clock", "repo-404", "disk", "no-kubeadm"]


@pytest.mark.parametrize("host", FAULTS)
def test_each_problem_is_named_on_its_host_alone(ran, host):
    _, found, hosts, _ = ran
    assert len(found.get(host, [])) == 1, found.get(host)
    assert hosts[host][1] in found[host][0], found[host][0]


def test_a_clean_host_passes_with_the_repository_derived_from_the_spec_version(ran):
    """ok-cp fetches <base>/v1.37/deb/InRelease and Release.key (the only path served): no problem."""
    _, found, _, _ = ran
    assert "ok-cp" not in found


def test_every_host_and_problem_in_one_message(ran):
    message, found, hosts, err = ran
    assert message.splitlines()[0] == (f"preflight found {len(FAULTS)} problems on {len(FAULTS)} of {len(hosts)} "
                                       "hosts; no host was changed:")
    assert sorted(found) == sorted(FAULTS)
    assert err.exit_code == 1
    # the unreachable host is reported by name in the message, not as Ansible's abort of the run
    assert not message.startswith("unreachable on")


def test_the_clock_offset_reads_the_hosts_clock_between_two_of_the_controllers():
    reach = {"stdout_lines": ["gpucluster-preflight 0 1000"]}
    # a probe that took 50 s: the host read its clock inside the window, nothing is skew
    assert F.probe_problems(reach, {}, 990.0, 1040.0, 30) == []
    # 31 s before the window opened
    assert "31 s behind" in F.probe_problems(reach, {}, 1031.0, 1032.0, 30)[0]
    # 40 s after it closed
    assert "40 s ahead of" in F.probe_problems(reach, {}, 950.0, 960.0, 30)[0]


def test_disk_needs_add_up_per_filesystem():
    mounts = [{"mount": "/", "size_available": 30 * F.GIB},
              {"mount": "/var/lib/containerd", "size_available": 5 * F.GIB},
              {"mount": "/var", "size_available": 12 * F.GIB}]
    needs = [{"path": "/var/lib/containerd", "gib": 4, "role": "container_runtime", "why": "images"},
             {"path": "/var/lib/etcd", "gib": 5, "role": "kubernetes_node", "why": "etcd"},
             {"path": "/var/lib/kubelet", "gib": 8, "role": "x", "why": "pods"}]
    # /var holds etcd and kubelet (13 GiB > 12), containerd has its own mount (4 <= 5)
    (problem,) = F.disk_problems(needs, mounts)
    assert problem.startswith("/var has 12.0 GiB free, needs 13 GiB: /var/lib/etcd 5 GiB")
    assert F.disk_problems(needs[:1], mounts) == []


def test_the_os_check_reads_the_roles_declared_platforms():
    roles = REPO / "roles"
    platforms = {r: F.role_platforms(r, str(roles)) for r in ("host_prep", "container_runtime", "kubernetes_node")}
    assert {"name": "Debian", "versions": ["bookworm"]} in platforms["container_runtime"]
    debian = {"os_family": "Debian", "distribution": "Debian", "distribution_release": "bookworm",
              "distribution_version": "12.8", "distribution_major_version": "12"}
    assert F.os_problems(debian, platforms) == []
    rocky = {"os_family": "RedHat", "distribution": "Rocky", "distribution_release": "Blue Onyx",
             "distribution_version": "9.5", "distribution_major_version": "9"}
    # host_prep declares EL 9; the other two do not
    (problem,) = F.os_problems(rocky, platforms)
    assert "which container_runtime, kubernetes_node do not support" in problem


# --- `up` stops before any other play --------------------------------------------------------------

MARKER_PLAY = """
- name: Prepare hosts
  hosts: all
  gather_facts: false
  tasks:
    - name: Write a marker
      ansible.builtin.copy:
        dest: "{{ marker_dir }}/{{ inventory_hostname }}"
        content: "changed\\n"
        mode: "0644"
"""


def test_up_stops_at_the_preflight_before_any_other_play(http_root, tmp_path, monkeypatch, cli):
    """site.yml's order with a stand-in for the plays that change hosts: validate, preflight, prepare."""
    tmp, _ = http_root
    base = tmp_path / "ansible"
    (base / "playbooks").mkdir(parents=True)
    for name in ("validate.yml", "preflight.yml", "kubeconfig.yml"):
        shutil.copy(REPO / "playbooks" / name, base / "playbooks" / name)
    (base / "playbooks" / "prepare.yml").write_text(MARKER_PLAY)
    site = yaml.safe_load((REPO / "playbooks" / "site.yml").read_text())
    (base / "playbooks" / "site.yml").write_text(yaml.safe_dump(site[:3], sort_keys=False))
    shutil.copy(REPO / "ansible.cfg", base / "ansible.cfg")
    (base / "plugins").symlink_to(REPO / "plugins")
    (base / "roles").symlink_to(REPO / "roles")
    monkeypatch.setenv(hostlayer.PLAYBOOKS_ENV, str(base))
    markers = tmp_path / "markers"
    markers.mkdir()
    group_vars = {**_group_vars(tmp), "marker_dir": str(markers)}
    inventory = _inventory(tmp_path / "inventory", {
        "ok-cp": {}, "disk": _hosts(tmp, 1)["disk"][0],
        "unreachable": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1}}, group_vars)
    state = tmp_path / "state"
    result = cli("up", "-i", inventory, "--state-dir", state)
    assert result.exit_code == 1, result
    assert "phase 'host layer' failed: preflight found 2 problems on 2 of 3 hosts" in result.stderr
    assert "disk (127.0.0.11): / has" in result.stderr or "disk (127.0.0.11): /var" in result.stderr
    assert "unreachable (127.0.0.1): unreachable over SSH" in result.stderr  # its ansible_host, named
    assert not any(markers.iterdir()), "a play after the preflight changed a host"
    assert not (state / "backend").exists() and not (state / "admin.conf").exists()


def test_site_runs_validate_then_preflight_before_every_play_that_changes_hosts():
    site = yaml.safe_load((REPO / "playbooks" / "site.yml").read_text())
    assert [p["ansible.builtin.import_playbook"] for p in site[:2]] == ["validate.yml", "preflight.yml"]
    first = yaml.safe_load((REPO / "playbooks" / "preflight.yml").read_text())[0]
    assert first["hosts"] == "all" and first["any_errors_fatal"] is True
    assert first["roles"] == [{"role": "preflight"}] and "always" in first["tags"]


def test_up_dry_run_checks_the_hosts_and_stops_before_the_stacks_without_a_cluster(http_root, tmp_path, monkeypatch,
                                                                                 cli):
    """On real hosts `up --dry-run` runs validate.yml and the preflight (they change nothing); with no
    cluster built yet there is nothing to preview the stacks against, which it says instead of failing."""
    tmp, _ = http_root
    monkeypatch.delenv(hostlayer.PLAYBOOKS_ENV, raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.kube/config
    inventory = _inventory(tmp_path / "inventory", {"ok-cp": {}}, _group_vars(tmp))
    state = tmp_path / "state"
    result = cli("up", "-i", inventory, "--state-dir", state, "--dry-run", "-o", "json")
    assert result.exit_code == 0, result
    report = json.loads(result.stdout)
    assert [p["phase"] for p in report["phases"]] == ["validate", "preflight"]
    assert any("no cluster to preview the stacks against yet" in n for n in report["notes"]), report
    assert report["stacks"] == [] and not (state / "backend").exists()
