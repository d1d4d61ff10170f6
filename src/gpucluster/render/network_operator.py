"""Networking: network-operator values, the NicClusterPolicy and secondary networks.

Since network operator 25.10 the chart no longer creates the NicClusterPolicy, so we do. It runs the
RDMA shared device plugin (one resource per RDMA pool, selected by interface name) and Multus; IP
addresses on secondary networks come from whereabouts (``ipam.type: whereabouts``).
"""

from __future__ import annotations

import json

from gpucluster import labels as L
from gpucluster import versions
from gpucluster.render.common import Obj, obj
from gpucluster.spec.model import ChartRef, ClusterSpec, SecondaryNetwork

NIC_POLICY_NAME = "nic-cluster-policy"


def _image(name: str) -> dict:
    return {"image": name, **versions.NETWORK_OPERATOR_IMAGES}


def rdma_config(spec: ClusterSpec) -> dict:
    resources: dict[str, dict] = {}
    for pool in spec.node_pools:
        if not pool.rdma:
            continue
        entry = resources.setdefault(pool.rdma.resource_name, {
            "resourceName": pool.rdma.resource_name,
            "rdmaHcaMax": spec.networking.rdma_hca_max,
            "selectors": {"ifNames": [], "linkTypes": [pool.rdma.link_type]},
        })
        for ifname in pool.rdma.interfaces:
            if ifname not in entry["selectors"]["ifNames"]:
                entry["selectors"]["ifNames"].append(ifname)
    return {"configList": [resources[k] for k in sorted(resources)]}


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
    return obj("mellanox.com/v1alpha1", "NicClusterPolicy", NIC_POLICY_NAME, spec=body)


def cni_config(net: SecondaryNetwork) -> dict:
    conf: dict = {"cniVersion": "0.3.1", "name": net.name, "type": net.type}
    if net.type == "host-device":
        conf["device"] = net.master
    else:
        conf["master"] = net.master
    if net.type == "macvlan":
        conf["mode"] = "bridge"
    conf["ipam"] = {"type": "whereabouts", "range": net.cidr}
    return conf


def network_attachments(spec: ClusterSpec) -> list[Obj]:
    out = []
    for net in spec.networking.secondary_networks:
        annotations = {L.NAD_RESOURCE_NAME: f"rdma/{net.resource_name}"} if net.resource_name else None
        for ns in net.namespaces or ["default"]:
            out.append(obj("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", net.name, ns,
                           annotations=annotations,
                           spec={"config": json.dumps(cni_config(net), sort_keys=True)}))
    return out


def enabled(spec: ClusterSpec) -> bool:
    n = spec.networking
    return n.network_operator.enabled and (any(p.rdma for p in spec.node_pools) or bool(n.secondary_networks))


def objects(spec: ClusterSpec) -> list[Obj]:
    if not enabled(spec):
        return []
    return [nic_cluster_policy(spec), *network_attachments(spec)]


def values(spec: ClusterSpec) -> dict:
    # NFD: exactly one per cluster; validation rejects enabling it in both operators.
    return {
        "nfd": {"enabled": spec.networking.network_operator.nfd},
        "operator": {"resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}},
    }


def namespace(spec: ClusterSpec) -> str:
    return spec.networking.network_operator.namespace


def chart(spec: ClusterSpec) -> ChartRef:
    return spec.networking.network_operator.chart
