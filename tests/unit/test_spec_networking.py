"""Networking rules of the spec: nv-ipam blocks that must fit, host-device vs shared RDMA, the pod network.

Each rule is fed a bad spec and must name the path, the network and how to fix it; the block arithmetic
is checked against nv-ipam's allocator rules (nvidia-k8s-ipam network-operator-v26.4.1,
``pkg/ipam-controller/allocator/allocator.go``: blocks start after the network address, end before the
broadcast address, skip blocks entirely inside an exclusion, and skip the gateway when one address long).
"""

from __future__ import annotations

import pytest
from testkit import find, problems

from gpucluster.spec import load_spec, networks, warnings_of
from gpucluster.spec.model import SecondaryNetwork


@pytest.fixture
def rdma(base) -> dict:
    """The base spec with both GPU hosts on InfiniBand NIC ib0 and one network on it."""
    for p in base["nodePools"]:
        p["rdma"] = {"interfaces": ["ib0"]}
    base["networking"] = {"secondaryNetworks": [
        {"name": "fabric", "type": "ipoib", "master": "ib0", "cidr": "192.168.50.0/24",
         "namespaces": ["team-a"], "resourceName": "rdma_shared_device_a"}]}
    return base


def net(rdma: dict) -> dict:
    return rdma["networking"]["secondaryNetworks"][0]


PATH = "networking.secondaryNetworks[0]"


def test_the_rdma_fixture_is_valid(write_spec, rdma):
    spec = load_spec(write_spec(rdma))
    n = spec.networking.secondary_networks[0]
    assert networks.carrier_hosts(spec, n) == ["g1", "g2"]
    assert networks.block_size(spec, n) == 63  # 254 addresses, 2 hosts: rdmaHcaMax fits
    assert warnings_of(spec) == []


def test_blocks_that_do_not_fit_every_carrier_name_the_network(write_spec, rdma):
    net(rdma).update(cidr="192.168.50.0/29", perNodeBlockSize=4)  # 6 usable: one block of 4
    p = find(problems(write_spec, rdma), f"{PATH}.perNodeBlockSize")
    assert "'fabric'" in p.message and "1 blocks of 4" in p.message and "2 hosts" in p.message
    assert "ib0" in p.message and "h100, l4" in p.message
    assert "at most 3" in p.hint


def test_block_larger_than_the_subnet(write_spec, rdma):
    net(rdma).update(cidr="192.168.50.0/29", perNodeBlockSize=7)
    p = find(problems(write_spec, rdma), f"{PATH}.perNodeBlockSize")
    assert "7 addresses per node exceed the 6" in p.message


def test_block_size_below_one_is_refused(write_spec, rdma):
    net(rdma).update(perNodeBlockSize=0)
    p = find(problems(write_spec, rdma), f"{PATH}.perNodeBlockSize")
    assert p.message == "0 is below the minimum of 1" and p.hint == "give 1 or more"


def test_exclusions_that_swallow_blocks_count(write_spec, rdma):
    # /27: 30 usable, blocks of 10 at .1-.10, .11-.20, .21-.30; excluding .1-.20 leaves one block
    net(rdma).update(cidr="192.168.50.0/27", perNodeBlockSize=10,
                     exclusions=[{"startIP": "192.168.50.1", "endIP": "192.168.50.20"}])
    p = find(problems(write_spec, rdma), f"{PATH}.perNodeBlockSize")
    assert "1 blocks of 10" in p.message
    # a partly excluded block is still handed out (nv-ipam skips only whole blocks)
    net(rdma)["exclusions"] = [{"startIP": "192.168.50.2", "endIP": "192.168.50.20"}]
    spec = load_spec(write_spec(rdma))
    assert networks.free_blocks(spec.networking.secondary_networks[0], 10) == 2


def test_default_block_below_the_pods_that_can_use_it_warns(write_spec, rdma):
    net(rdma).update(cidr="192.168.50.0/28")  # 14 usable over 2 hosts: 7 each, rdmaHcaMax is 63
    spec = load_spec(write_spec(rdma))
    (w,) = [w for w in warnings_of(spec) if w.path == f"{PATH}.perNodeBlockSize"]
    assert "7 addresses per node" in w.message and "63 pods" in w.message
    assert networks.block_size(spec, spec.networking.secondary_networks[0]) == 7


@pytest.mark.parametrize("field, value, path, text", [
    ("gateway", "10.1.1.1", "gateway", "not inside the network's cidr 192.168.50.0/24"),
    ("gateway", "nonsense", "gateway", "not an IP address"),
    ("exclusions", [{"startIP": "192.168.50.20", "endIP": "192.168.50.10"}], "exclusions[0]", "before startIP"),
    ("exclusions", [{"startIP": "192.168.50.10", "endIP": "192.168.51.10"}], "exclusions[0].endIP", "not inside"),
])
def test_gateway_and_exclusions_inside_the_subnet(write_spec, rdma, field, value, path, text):
    net(rdma)[field] = value
    p = find(problems(write_spec, rdma), f"{PATH}.{path}")
    assert text in p.message


def test_host_device_with_a_shared_rdma_resource_is_refused(write_spec, rdma):
    net(rdma).update(type="host-device")
    p = find(problems(write_spec, rdma), f"{PATH}.resourceName")
    assert "host-device" in p.message and "PCI address" in p.message
    assert "macvlan" in p.hint


def test_host_device_on_a_shared_rdma_nic_is_refused(write_spec, rdma):
    net(rdma).update(type="host-device")
    del net(rdma)["resourceName"]
    p = find(problems(write_spec, rdma), f"{PATH}.master")
    assert "ib0" in p.message and "single pod" in p.message


def test_host_device_on_a_nic_of_its_own_is_fine(write_spec, rdma):
    net(rdma).update(type="host-device", master="eth7")
    del net(rdma)["resourceName"]
    load_spec(write_spec(rdma))


def test_flannel_needs_an_ipv4_pod_subnet(write_spec, base):
    base["kubernetes"] = {"podSubnet": "fd00:10::/56", "serviceSubnet": "fd00:20::/112"}
    p = find(problems(write_spec, base), "kubernetes.podSubnet")
    assert "IPv4" in p.message and "plugin: none" in p.hint
    base["networking"] = {"podNetwork": {"plugin": "none", "networkPolicyEnforcement": "bring-your-own"}}
    load_spec(write_spec(base))


# -- what enforces the tenants' NetworkPolicies -------------------------------------------------------

ENFORCEMENT = "networking.podNetwork.networkPolicyEnforcement"


def test_no_pod_network_of_ours_and_no_enforcer_declared_is_refused_with_tenants(write_spec, base):
    base["networking"] = {"podNetwork": {"plugin": "none"}}
    p = find(problems(write_spec, base), ENFORCEMENT)
    assert "plugin: none installs no pod network" in p.message and "team-a" in p.message
    assert "bring-your-own" in p.hint and "plugin: flannel" in p.hint


def test_no_enforcer_at_all_is_refused_with_tenants(write_spec, base):
    base["networking"] = {"podNetwork": {"networkPolicyEnforcement": "none"}}
    p = find(problems(write_spec, base), ENFORCEMENT)
    assert "nothing enforces" in p.message and "1 tenant(s) (team-a)" in p.message
    assert "pod-network" in p.hint and "bring-your-own" in p.hint


@pytest.mark.parametrize("pod_network", [
    {},  # flannel with its kube-network-policies add-on (the default)
    {"plugin": "none", "networkPolicyEnforcement": "bring-your-own"},  # the owner's CNI enforces them
    {"networkPolicyEnforcement": "bring-your-own"},  # flannel, and an enforcer of the owner's next to it
])
def test_an_enforcer_gpucluster_installs_or_the_owner_declares_is_accepted(write_spec, base, pod_network):
    base["networking"] = {"podNetwork": pod_network}
    load_spec(write_spec(base))


@pytest.mark.parametrize("pod_network", [{"plugin": "none"}, {"networkPolicyEnforcement": "none"}])
def test_without_tenants_nothing_needs_enforcing(write_spec, base, pod_network):
    base["networking"] = {"podNetwork": pod_network}
    del base["tenants"]
    load_spec(write_spec(base))


def test_cli_validate_exits_2_naming_the_enforcement_key(write_spec, base, cli):
    base["networking"] = {"podNetwork": {"plugin": "none"}}
    out = cli("validate", "-i", str(write_spec(base)))
    assert out.exit_code == 2
    assert ENFORCEMENT in out.output and "bring-your-own" in out.output
    assert "Traceback" not in out.output


def test_unknown_pod_network_plugin(write_spec, base):
    base["networking"] = {"podNetwork": {"plugin": "calico"}}
    p = find(problems(write_spec, base), "networking.podNetwork.plugin")
    assert p.message == "'calico' is not allowed" and p.hint == "one of: 'flannel' or 'none'"


def test_no_nfd_anywhere_warns_about_the_node_feature_rule(write_spec, rdma):
    rdma["gpuOperator"] = {"nfd": False}
    spec = load_spec(write_spec(rdma))
    (w,) = [w for w in warnings_of(spec) if w.path == "networking.networkOperator.nfd"]
    assert "NodeFeatureRule" in w.message and "v0.13.2" in w.hint


def test_cli_validate_exits_2_naming_the_network(write_spec, rdma, cli):
    net(rdma).update(cidr="192.168.50.0/29", perNodeBlockSize=4)
    out = cli("validate", "-i", str(write_spec(rdma)))
    assert out.exit_code == 2
    assert f"{PATH}.perNodeBlockSize" in out.output and "'fabric'" in out.output
    assert "Traceback" not in out.output


# -- the block arithmetic on its own ------------------------------------------------------------------


@pytest.mark.parametrize("cidr, usable", [
    ("10.0.0.0/24", 254), ("10.0.0.0/31", 2), ("10.0.0.7/32", 1), ("fd00::/120", 255)])
def test_usable_addresses_as_nv_ipam_counts_them(cidr, usable):
    # api/v1alpha1/helpers.go GetPossibleIPCount: IPv4 minus network and broadcast, IPv6 minus network
    assert networks.usable_addresses(cidr) == usable


def test_gateway_is_skipped_only_with_one_address_blocks():
    n = SecondaryNetwork(name="n", master="ib0", cidr="10.0.0.0/29", gateway="10.0.0.1")  # 6 usable
    assert networks.free_blocks(n, 1) == 5
    assert networks.free_blocks(n, 2) == 3  # the gateway lies inside the first block, which is kept
