"""Untrusted spec input: every value another program reads as a name, an address or a count is refused
unless it is exactly that, through the CLI's one error handler: exit 2, the value's path, the value, a hint.

A spec arrives through pull requests (GitOps); each case below was accepted before its rule existed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpucluster.spec import load_spec

REPO = Path(__file__).resolve().parents[2]


def _set(path: str, value):
    """A mutation of the base spec: ``path`` like ``tenants.0.quota.extended`` set to ``value``."""

    def apply(spec: dict) -> None:
        *parents, last = path.split(".")
        node = spec
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        if last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value

    return apply


def _both(*mutations):
    def apply(spec: dict) -> None:
        for m in mutations:
            m(spec)

    return apply


ARABIC_TEN = "\u0661\u0660"
RDMA = _set("nodePools.0.rdma", {"interfaces": ["ibp12s0"]})
NETWORK = {"name": "rail0", "master": "ibp12s0", "cidr": "172.30.0.0/20"}

CASES = {
    # name: (mutation, path of the error, the value as the message shows it, a word of the hint)
    # -- names matched as a whole string: `match` with `$` let a trailing newline through --------------
    "name-newline": (_set("tenants.0.name", "team-a\n"), "tenants[0].name", r"'team-a\n'", "e.g. 'team-a'"),
    "label-value-newline": (_set("nodePools.0.labels", {"tier": "gold\n"}), "nodePools[0].labels",
                            r"'gold\n'", "label value"),
    "label-key-newline": (_set("nodePools.0.labels", {"tier\n": "gold"}), "nodePools[0].labels", r"'tier\n'",
                          "gpucluster.dev/tier"),
    # the label PrometheusRules carry for the Prometheus to select them was not checked at all
    "prometheus-label-newline": (_set("monitoring.prometheusLabel", {"release": "prometheus\n"}),
                                 "monitoring.prometheusLabel", r"'prometheus\n'", "label value"),
    "taint-newline": (_set("nodePools.0.taints", ["gpu=yes:NoSchedule\n"]), "nodePools[0].taints[0]",
                      r"'gpu=yes:NoSchedule\n'", "key=value:NoSchedule"),
    "memory-newline": (_set("tenants.0.quota.memory", "4Gi\n"), "tenants[0].quota.memory", r"'4Gi\n'", "256Gi"),
    "duration-newline": (_set("monitoring.alerts.lowUtilizationFor", "30m\n"), "monitoring.alerts.lowUtilizationFor",
                         r"'30m\n'", "30m"),
    # Arabic-Indic "10" matched \d, and Python's int() reads it; Kubernetes does not
    "cpu-foreign-digits": (_set("tenants.0.quota.cpu", ARABIC_TEN), "tenants[0].quota.cpu", repr(ARABIC_TEN),
                           "millicores"),
    # -- host addresses (what ssh and Ansible connect to) ------------------------------------------------
    "address-empty": (_set("hosts.1.address", ""), "hosts[1].address", "the address is empty", "IP address"),
    "address-option": (_set("hosts.1.address", "-oProxyCommand=touch /tmp/x"), "hosts[1].address",
                       "'-oProxyCommand=touch /tmp/x'", "10.20.0.11"),
    "address-ipv6-zone": (_set("hosts.1.address", "fe80::1%;id"), "hosts[1].address", "'fe80::1%;id'", "10.20.0.11"),
    "address-bad-ip": (_set("hosts.1.address", "10.0.0.256"), "hosts[1].address", "'10.0.0.256'", "10.20.0.11"),
    "address-duplicate": (_set("hosts.1.address", "10.0.0.1"), "hosts[1].address", "10.0.0.1:22", "its own address"),
    "ansible-host-duplicate": (_set("hosts.2.ansibleVars", {"ansible_host": "10.0.0.2"}),
                               "hosts[2].ansibleVars.ansible_host", "10.0.0.2:22", "its own address"),
    "ansible-host-option": (_set("hosts.2.ansibleVars", {"ansible_host": "-oProxyCommand=id"}),
                            "hosts[2].ansibleVars", "'-oProxyCommand=id'", "10.20.0.11"),
    "ansible-port": (_set("hosts.2.ansibleVars", {"ansible_port": "22 -oProxyCommand=id"}), "hosts[2].ansibleVars",
                     "'22 -oProxyCommand=id'", "1 to 65535"),
    "ansible-user": (_set("hosts.2.ansibleVars", {"ansible_user": "-oProxyCommand=id"}), "hosts[2].ansibleVars",
                     "'-oProxyCommand=id'", "ubuntu"),
    "address-in-pod-range": (_set("hosts.1.address", "10.244.3.4"), "hosts[1].address", "10.244.3.4",
                             "kubernetes.podSubnet"),
    "address-in-service-range": (_set("hosts.1.address", "10.96.0.10"), "hosts[1].address", "10.96.0.10",
                                 "kubernetes.serviceSubnet"),
    # -- a host twice in one pool: its GPUs counted twice, so an impossible quota passed -----------------
    "host-twice-in-pool": (_both(_set("nodePools.0.hosts", ["g1", "g1"]), _set("tenants.0.quota.gpus", 16)),
                           "nodePools[0].hosts[1]", "'g1' is listed twice", "once"),
    # -- interface names (RDMA NICs, secondary-network masters) ---------------------------------------
    "rdma-interface-semicolon": (_set("nodePools.0.rdma", {"interfaces": ["ib0;id"]}),
                                 "nodePools[0].rdma.interfaces[0]", "'ib0;id'", "ibp12s0"),
    "rdma-interface-option": (_set("nodePools.0.rdma", {"interfaces": ["-ib0"]}), "nodePools[0].rdma.interfaces[0]",
                              "'-ib0'", "ibp12s0"),
    "rdma-interface-too-long": (_set("nodePools.0.rdma", {"interfaces": ["ibp12s0f0np0abcd"]}),
                                "nodePools[0].rdma.interfaces[0]", "16 characters", "ibp12s0"),
    "master-semicolon": (_both(RDMA, _set("networking.secondaryNetworks", [{**NETWORK, "master": "ib0;id"}])),
                         "networking.secondaryNetworks[0].master", "'ib0;id'", "ens1f0np0"),
    "master-slash": (_both(RDMA, _set("networking.secondaryNetworks", [{**NETWORK, "master": "../ib0"}])),
                     "networking.secondaryNetworks[0].master", "'../ib0'", "ens1f0np0"),
    # -- tenants bound to Kubernetes' own groups ------------------------------------------------------
    "users-authenticated": (_set("tenants.0.users", ["system:authenticated"]), "tenants[0].users[0]",
                            "every user with valid credentials", "identity provider"),
    "users-unauthenticated": (_set("tenants.0.users", ["system:unauthenticated"]), "tenants[0].users[0]",
                              "every anonymous request", "identity provider"),
    "admins-masters": (_set("tenants.0.admins", ["system:masters"]), "tenants[0].admins[0]", "bypasses RBAC",
                       "identity provider"),
    "admins-any-system": (_set("tenants.0.admins", ["system:serviceaccounts:kube-system"]), "tenants[0].admins[0]",
                          "'system:serviceaccounts:kube-system'", "identity provider"),
    # -- quotas are counts, 0 or more ----------------------------------------------------------------
    "extended-negative": (_set("tenants.0.quota.extended", {"nvidia.com/mig-1g.10gb": -3}),
                          "tenants[0].quota.extended.nvidia.com/mig-1g.10gb", "-3 is negative", "0 or more"),
    "device-classes-negative": (_set("tenants.0.quota.deviceClasses", {"gpu.nvidia.com": -1}),
                                "tenants[0].quota.deviceClasses.gpu.nvidia.com", "-1 is negative", "0 or more"),
    # -- integers beyond 64 bits (5000 digits made Python's int() raise: exit 3) -----------------------
    "int-5000-digits": (_set("tenants.0.quota.pods", "BIG"), "tenants[0].quota.pods", "(5000 characters)", "quote it"),
    "int-beyond-int64": (_set("tenants.0.quota.pods", 2**63), "tenants[0].quota.pods", str(2**63), "quote it"),
}


@pytest.mark.parametrize("name", CASES)
def test_each_untrusted_input_exits_2_naming_path_value_and_hint(write_spec, base, cli, name):
    mutate, path, value, hint = CASES[name]
    mutate(base)
    folder = write_spec(base)
    spec_file = folder / "cluster.yaml"
    if name == "int-5000-digits":  # YAML's own integer: written as text, no Python int can be dumped
        spec_file.write_text(spec_file.read_text().replace("BIG", "9" * 5000))
    out = cli("validate", "-i", str(folder))
    assert out.exit_code == 2, out.output
    assert "internal error" not in out.output
    line = next((ln for ln in out.stderr.splitlines() if ln.strip().startswith(f"- {path}:")), None)
    assert line is not None, f"no error at {path}:\n{out.stderr}"
    assert value in line, line
    assert "hint: " in line and hint in line.split("hint: ", 1)[1], line


@pytest.mark.parametrize("address", ["10.20.0.11", "2001:db8::11", "gpu-01.lab.example.com", "GPU-01", "node7"])
def test_addresses_that_are_ip_addresses_or_host_names_pass(write_spec, base, address):
    base["hosts"][1]["address"] = address
    assert load_spec(write_spec(base)).hosts[1].address == address


@pytest.mark.parametrize("ifname", ["ibp12s0", "ens1f0np0", "bond0.100", "ib0.8001", "br-1a2b3c4d5e6f", "mlx_0"])
def test_real_interface_names_pass(write_spec, base, ifname):
    base["nodePools"][0]["rdma"] = {"interfaces": [ifname]}
    assert load_spec(write_spec(base)).node_pools[0].rdma.interfaces == [ifname]


def test_hosts_on_the_local_connection_or_in_the_local_world_may_share_an_address(write_spec, base):
    for host in base["hosts"]:
        host["address"] = "127.0.0.1"
        host["ansibleVars"] = {"ansible_connection": "local"}
    assert len(load_spec(write_spec(base)).hosts) == 3
    for host in base["hosts"]:
        host.pop("ansibleVars")
    base["metadata"]["environment"] = "local"  # the local world: simulated hosts on this machine
    assert len(load_spec(write_spec(base)).hosts) == 3


def test_one_address_on_another_port_is_another_host(write_spec, base):
    base["hosts"][1]["address"] = base["hosts"][2]["address"] = "10.0.0.9"
    base["hosts"][2]["ansibleVars"] = {"ansible_port": 2222}
    assert load_spec(write_spec(base)).hosts[2].ansible_vars["ansible_port"] == 2222


def test_an_unreadable_spec_file_exits_2(tmp_path, cli):
    # Reading /proc/self/mem from offset 0 fails with EIO, for root too (chmod 000 would not stop root).
    (tmp_path / "cluster.yaml").symlink_to("/proc/self/mem")
    out = cli("validate", "-i", str(tmp_path))
    assert out.exit_code == 2, out.output
    assert f"{tmp_path / 'cluster.yaml'}: cannot be read: Input/output error" in out.stderr
    assert "readable" in out.stderr and "internal error" not in out.output


def test_a_folder_where_the_spec_file_should_be_exits_2(tmp_path, cli):
    (tmp_path / "cluster.yaml").mkdir()
    out = cli("validate", "-i", str(tmp_path))
    assert out.exit_code == 2, out.output
    assert f"{tmp_path / 'cluster.yaml'}: a folder where the spec file should be" in out.stderr


def test_a_folder_given_for_an_input_file_exits_2(tmp_path, cli):
    out = cli("cost", "--snapshot", str(tmp_path))
    assert out.exit_code == 2, out.output
    assert "is a directory" in out.stderr and "internal error" not in out.output


def test_a_file_given_for_an_output_folder_exits_2(tmp_path, cli):
    (tmp_path / "ref.md").write_text("mine\n")
    out = cli("spec-reference", "--out-dir", str(tmp_path / "ref.md"))
    assert out.exit_code == 2, out.output
    assert "Invalid value for '--out-dir'" in out.stderr and "is a file" in out.stderr
    assert (tmp_path / "ref.md").read_text() == "mine\n"


def _repository_specs() -> list[str]:
    files = subprocess.run(["git", "ls-files", "*cluster.yaml"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    return [f for f in files if not f.startswith("tests/data/invalid")]


@pytest.mark.parametrize("spec_file", _repository_specs())
def test_every_spec_in_the_repository_still_validates(spec_file):
    # The local world and the podman-connected site scenario put every host at 127.0.0.1 on purpose.
    assert load_spec(REPO / spec_file).hosts
