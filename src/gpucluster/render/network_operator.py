"""Networking: network-operator values, the NicClusterPolicy, nv-ipam IPPools and secondary networks.

Since network operator 24.10 the chart does not create the NicClusterPolicy, so we do; since 25.10 the
operator no longer deploys whereabouts, so secondary networks take their addresses from NVIDIA's
nv-ipam, which the NicClusterPolicy deploys (``spec.nvIpam``), with one ``IPPool`` per network in the
operator's namespace (nv-ipam watches that namespace). The policy also runs the RDMA shared device
plugin (one resource per RDMA resource name, selected by interface name and link type) and Multus.
"""

from __future__ import annotations

import json

from gpucluster import labels as L
from gpucluster import versions
from gpucluster.render.common import Obj, obj
from gpucluster.spec import networks
from gpucluster.spec.model import ChartRef, ClusterSpec, SecondaryNetwork

NIC_POLICY_NAME = "nic-cluster-policy"
NIC_POLICY_API = "mellanox.com/v1alpha1"
NAD_API = "k8s.cni.cncf.io/v1"
IPPOOL_API = "nv-ipam.nvidia.com/v1alpha1"

#: Kinds whose CRDs the network-operator chart installs (``deployment/network-operator/crds/``): they can
#: only be created once the release is.
CHART_KINDS = frozenset({(NIC_POLICY_API, "NicClusterPolicy"), (NAD_API, "NetworkAttachmentDefinition")})
#: Kinds whose CRDs the operator applies while it reconciles the NicClusterPolicy (``spec.nvIpam``:
#: ``manifests/state-nv-ipam-cni/005-nv-ipam.nvidia.com_ippools.yaml``), by the kind they wait for.
AFTER_KINDS = {(IPPOOL_API, "IPPool"): (NIC_POLICY_API, "NicClusterPolicy")}
BEFORE_OTHER_RELEASES = False


def _image(name: str) -> dict:
    return {"image": name, **versions.NETWORK_OPERATOR_IMAGES}


def rdma_config(spec: ClusterSpec) -> dict:
    """The RDMA shared device plugin's config: one entry per resource name.

    Resource names must be unique in configList, and the plugin ANDs an entry's selectors, so pools that
    share a resource name share one entry whose interface names and link types are the union of theirs.
    """
    resources: dict[str, dict] = {}
    for pool in spec.node_pools:
        if not pool.rdma:
            continue
        entry = resources.setdefault(pool.rdma.resource_name, {
            "resourceName": pool.rdma.resource_name,
            "rdmaHcaMax": spec.networking.rdma_hca_max,
            "selectors": {"ifNames": [], "linkTypes": []},
        })
        sel = entry["selectors"]
        for ifname in pool.rdma.interfaces:
            if ifname not in sel["ifNames"]:
                sel["ifNames"].append(ifname)
        sel["linkTypes"] = sorted({*sel["linkTypes"], pool.rdma.link_type})
    return {"configList": [resources[k] for k in sorted(resources)]}


def tolerations(spec: ClusterSpec) -> list[dict]:
    """Tolerations for the operator's DaemonSets: every pool's taints (key and effect, any value).

    Its DaemonSets tolerate only ``nvidia.com/gpu:NoSchedule`` of their own; any other taint keeps
    Multus, the CNI plugins and the RDMA plugin off that pool's nodes.
    """
    seen = sorted({(t.key, t.effect) for p in spec.node_pools for t in p.effective_taints})
    return [{"key": key, "operator": "Exists", "effect": effect} for key, effect in seen]


def nic_cluster_policy(spec: ClusterSpec) -> Obj:
    body: dict = {}
    config = rdma_config(spec)
    if config["configList"]:
        body["rdmaSharedDevicePlugin"] = {**_image("k8s-rdma-shared-dev-plugin"),
                                          "config": json.dumps(config, indent=2, sort_keys=True)}
    if spec.networking.multus:
        secondary: dict = {"cniPlugins": _image("plugins"), "multus": _image("multus-cni")}
        if any(n.type == "ipoib" for n in spec.networking.secondary_networks):
            secondary["ipoib"] = _image("ipoib-cni")
        body["secondaryNetwork"] = secondary
    if spec.networking.secondary_networks:
        # No webhook: it needs cert-manager, which the operator would otherwise require.
        body["nvIpam"] = {**_image("nvidia-k8s-ipam"), "enableWebhook": False}
    if tols := tolerations(spec):
        body["tolerations"] = tols
    return obj(NIC_POLICY_API, "NicClusterPolicy", NIC_POLICY_NAME, spec=body)


def ip_pool(spec: ClusterSpec, net: SecondaryNetwork) -> Obj:
    """The nv-ipam IPPool of one secondary network (named after it; the NAD's ``poolName``)."""
    body: dict = {"subnet": net.cidr, "perNodeBlockSize": networks.block_size(spec, net)}
    if net.gateway:
        body["gateway"] = net.gateway
    if net.exclusions:
        body["exclusions"] = [{"startIP": e.start_ip, "endIP": e.end_ip} for e in net.exclusions]
    pools = networks.carrier_pools(spec, net)
    if pools:
        body["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": L.POOL, "operator": "In", "values": sorted(p.name for p in pools)}]}]}
    return obj(IPPOOL_API, "IPPool", net.name, spec.networking.network_operator.namespace, spec=body)


def cni_config(net: SecondaryNetwork) -> dict:
    conf: dict = {"cniVersion": "0.3.1", "name": net.name, "type": net.type}
    if net.type == "host-device":
        conf["device"] = net.master
    else:
        conf["master"] = net.master
    if net.type == "macvlan":
        conf["mode"] = "bridge"
    conf["ipam"] = {"type": "nv-ipam", "poolName": net.name}
    return conf


def network_attachments(spec: ClusterSpec) -> list[Obj]:
    out = []
    for net in spec.networking.secondary_networks:
        annotations = {L.NAD_RESOURCE_NAME: f"rdma/{net.resource_name}"} if net.resource_name else None
        for ns in net.namespaces or ["default"]:
            out.append(obj(NAD_API, "NetworkAttachmentDefinition", net.name, ns,
                           annotations=annotations,
                           spec={"config": json.dumps(cni_config(net), sort_keys=True)}))
    return out


def enabled(spec: ClusterSpec) -> bool:
    n = spec.networking
    return n.network_operator.enabled and (any(p.rdma for p in spec.node_pools) or bool(n.secondary_networks))


def objects(spec: ClusterSpec) -> list[Obj]:
    if not enabled(spec):
        return []
    pools = [ip_pool(spec, net) for net in spec.networking.secondary_networks]
    return [nic_cluster_policy(spec), *pools, *network_attachments(spec)]


def values(spec: ClusterSpec) -> dict:
    # NFD: exactly one per cluster; validation rejects enabling it in both operators.
    return {
        "nfd": {"enabled": spec.networking.network_operator.nfd},
        "operator": {"resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}},
    }


def after(spec: ClusterSpec) -> list[str]:
    """Releases to install first: the GPU Operator's when its NFD serves the NodeFeatureRule CRD.

    The chart renders a NodeFeatureRule even with ``nfd.enabled=false`` (``nfd.deployNodeFeatureRules``
    defaults to true); without NFD's CRD in place its install fails.
    """
    gop = spec.gpu_operator
    if not spec.networking.network_operator.nfd and gop.enabled and gop.nfd:
        return ["gpu-operator"]
    return []


def namespace(spec: ClusterSpec) -> str:
    return spec.networking.network_operator.namespace


def chart(spec: ClusterSpec) -> ChartRef:
    return spec.networking.network_operator.chart
