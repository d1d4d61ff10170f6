"""render/network_operator.py: NicClusterPolicy, nv-ipam IPPools, network attachments, NFD once."""

from __future__ import annotations

import json

from testkit import by_kind, pool

from gpucluster import components
from gpucluster import labels as L
from gpucluster.render import network_operator as network
from gpucluster.render import render
from gpucluster.spec.model import Rdma, SecondaryNetwork, Taint


def rdma_entries(spec) -> dict:
    ncp = network.nic_cluster_policy(spec)
    return {e["resourceName"]: e for e in json.loads(ncp["spec"]["rdmaSharedDevicePlugin"]["config"])["configList"]}


def test_network_objects(local):
    objs = network.objects(local)
    ncp = by_kind(objs, "NicClusterPolicy")
    assert len(ncp) == 1
    cfg = json.loads(ncp[0]["spec"]["rdmaSharedDevicePlugin"]["config"])
    assert cfg["configList"][0]["resourceName"] == "rdma_shared_device_a"
    assert cfg["configList"][0]["selectors"]["ifNames"] == ["ibp12s0", "ibp75s0"]
    nad = by_kind(objs, "NetworkAttachmentDefinition", "ib-fabric")[0]
    conf = json.loads(nad["spec"]["config"])
    # nv-ipam, the IPAM the operator deploys since 25.10 (whereabouts is gone from its API)
    assert conf["type"] == "ipoib" and conf["ipam"] == {"type": "nv-ipam", "poolName": "ib-fabric"}
    assert nad["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"] == "rdma/rdma_shared_device_a"
    assert network.values(local)["nfd"]["enabled"] is False


def test_one_ip_pool_per_network_in_the_operator_namespace(lab):
    objs = network.objects(lab)
    (ippool,) = by_kind(objs, "IPPool")
    (nad,) = by_kind(objs, "NetworkAttachmentDefinition")
    assert ippool["apiVersion"] == "nv-ipam.nvidia.com/v1alpha1"
    # nv-ipam watches the operator's namespace; the NAD's poolName is the pool's name
    assert ippool["metadata"]["namespace"] == lab.networking.network_operator.namespace
    assert json.loads(nad["spec"]["config"])["ipam"]["poolName"] == ippool["metadata"]["name"] == "ib-rail-0"
    spec = ippool["spec"]
    assert spec["subnet"] == "172.30.0.0/20"
    # 4094 addresses over 4 hosts: every pod that can hold rdma/* (rdmaHcaMax 63) gets one
    assert spec["perNodeBlockSize"] == lab.networking.rdma_hca_max == 63
    # only the pool whose RDMA NICs include ibp24s0 gets blocks
    assert spec["nodeSelector"] == {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": L.POOL, "operator": "In", "values": ["h100-train"]}]}]}
    assert "gateway" not in spec and "exclusions" not in spec


def test_ip_pool_carries_gateway_exclusions_and_an_explicit_block(lab):
    net = lab.networking.secondary_networks[0]
    lab.networking.secondary_networks[0] = SecondaryNetwork.model_validate({
        **net.model_dump(by_alias=True), "perNodeBlockSize": 100, "gateway": "172.30.0.1",
        "exclusions": [{"startIP": "172.30.15.0", "endIP": "172.30.15.254"}]})
    spec = network.ip_pool(lab, lab.networking.secondary_networks[0])["spec"]
    assert spec["perNodeBlockSize"] == 100
    assert spec["gateway"] == "172.30.0.1"
    assert spec["exclusions"] == [{"startIP": "172.30.15.0", "endIP": "172.30.15.254"}]


def test_default_block_shrinks_to_what_the_subnet_holds_for_every_carrier(lab):
    net = SecondaryNetwork(name="small", master="ibp24s0", cidr="10.9.0.0/26", resource_name="rdma_shared_device_a")
    lab.networking.secondary_networks.append(net)
    # 62 usable addresses, 4 hosts carry ibp24s0: 15 each (not the 63 pods that could use it)
    assert network.ip_pool(lab, net)["spec"]["perNodeBlockSize"] == 15


def test_network_on_an_unlisted_interface_selects_every_node(lab):
    net = SecondaryNetwork(name="storage", master="eth1", cidr="10.9.0.0/16")
    lab.networking.secondary_networks.append(net)
    spec = network.ip_pool(lab, net)["spec"]
    assert "nodeSelector" not in spec
    assert spec["perNodeBlockSize"] == 110  # no RDMA resource: as many as a node has pods


def test_nv_ipam_deployed_without_its_webhook_only_with_secondary_networks(lab):
    ncp = network.nic_cluster_policy(lab)
    pin = components.get("network-operator").chart
    assert pin is not None
    # the release names the images after itself (tests/upstream/test_network_upstream.py checks the facts)
    assert ncp["spec"]["nvIpam"] == {"image": "nvidia-k8s-ipam", "repository": "nvcr.io/nvidia/mellanox",
                                     "version": f"network-operator-v{pin.version}", "enableWebhook": False}
    lab.networking.secondary_networks = []
    assert "nvIpam" not in network.nic_cluster_policy(lab)["spec"]
    assert not by_kind_or_none(network.objects(lab), "IPPool")


def by_kind_or_none(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def test_pools_sharing_a_resource_name_merge_their_link_types(lab):
    # An IB pool and a RoCE pool with the same (default) resource name: one entry (names must be unique
    # in configList) whose selectors admit both pools' NICs; the plugin ANDs selectors.
    pool(lab, "l40s-infer").rdma = Rdma(interfaces=["ens1f0np0"], link_type="ether")
    (entry,) = rdma_entries(lab).values()
    assert entry["selectors"]["linkTypes"] == ["ether", "infiniband"]
    assert entry["selectors"]["ifNames"] == ["ibp24s0", "ibp64s0", "ibp79s0", "ibp94s0", "ens1f0np0"]


def test_pools_with_their_own_resource_names_keep_their_own_entries(lab):
    pool(lab, "l40s-infer").rdma = Rdma(interfaces=["ens1f0np0"], link_type="ether", resource_name="roce")
    entries = rdma_entries(lab)
    assert entries["roce"]["selectors"] == {"ifNames": ["ens1f0np0"], "linkTypes": ["ether"]}
    assert entries["rdma_shared_device_a"]["selectors"]["linkTypes"] == ["infiniband"]


def test_tolerations_cover_every_pools_taints(lab):
    pool(lab, "cpu").taints = [Taint(key="dedicated", value="storage", effect="NoExecute")]
    pool(lab, "h100-mig").taints = [Taint(key="dedicated", value="notebooks", effect="NoExecute"),
                                    Taint(key="example.com/maintenance", effect="NoSchedule")]
    tols = network.nic_cluster_policy(lab)["spec"]["tolerations"]
    assert tols == [
        {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"},  # once, for any value
        {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},  # the GPU pools' default
    ]


def test_network_operator_waits_for_the_gpu_operator_nfd(lab):
    assert network.after(lab) == ["gpu-operator"]
    lab.gpu_operator.nfd = False
    assert network.after(lab) == []


def test_exactly_one_nfd(lab):
    r = render(lab)
    nfd = [rel.name for rel in r.releases if rel.values.get("nfd", {}).get("enabled")]
    assert nfd == ["gpu-operator"]
