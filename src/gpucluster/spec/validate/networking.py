"""``networking``: the pod network, secondary networks (nv-ipam blocks, host-device on RDMA NICs), NFD."""

from __future__ import annotations

import ipaddress

from gpucluster.spec import networks
from gpucluster.spec.model import ClusterSpec, SecondaryNetwork
from gpucluster.spec.validate.common import Collector, close


def check(spec: ClusterSpec, c: Collector) -> None:
    _pod_network(spec, c)
    nets = spec.networking.secondary_networks
    c.duplicates("networking.secondaryNetworks", (n.name for n in nets))
    namespaces = {t.ns for t in spec.tenants}
    rdma_nics = {nic: p.name for p in spec.node_pools if p.rdma for nic in p.rdma.interfaces}
    for i, n in enumerate(nets):
        base = f"networking.secondaryNetworks[{i}]"
        for j, ns in enumerate(n.namespaces):
            if ns not in namespaces:
                c.error(f"{base}.namespaces[{j}]", f"no tenant has namespace {ns!r}", close(ns, namespaces))
        if n.type == "host-device":
            # Multus hands host-device the RDMA plugin's device ID ("0".."rdmaHcaMax-1") as pciBusID,
            # and host-device moves the whole netdev into one pod: neither fits a shared HCA.
            if n.resource_name:
                c.error(f"{base}.resourceName", f"host-device network {n.name!r} cannot use the shared RDMA "
                        f"resource rdma/{n.resource_name}: Multus would pass its device ID as a PCI address",
                        "use type: macvlan (RoCE) or ipoib (InfiniBand) for shared RDMA NICs, or drop resourceName")
            elif n.master in rdma_nics:
                c.error(f"{base}.master", f"host-device network {n.name!r} would move {n.master}, an RDMA NIC "
                        f"shared by pool {rdma_nics[n.master]!r}, into a single pod",
                        "use type: macvlan or ipoib on shared RDMA NICs")
        _ip_pool(spec, c, base, n)
    nop, gop = spec.networking.network_operator, spec.gpu_operator
    has_work = any(p.rdma for p in spec.node_pools) or bool(nets)  # else no network-operator release
    if nop.enabled and has_work and not nop.nfd and not (gop.enabled and gop.nfd):
        c.warn("networking.networkOperator.nfd", "no NFD is installed by either operator, but the network "
               "operator's chart creates a NodeFeatureRule (it labels the Mellanox NICs its DaemonSets select)",
               "run an external NFD >= v0.13.2 with the NodeFeature API, or set gpuOperator.nfd: true")


def _pod_network(spec: ClusterSpec, c: Collector) -> None:
    _policy_enforcement(spec, c)
    if spec.networking.pod_network.plugin != "flannel":
        return
    try:
        subnet = ipaddress.ip_network(spec.kubernetes.pod_subnet, strict=True)
    except ValueError:
        return  # reported by kubernetes.check
    if subnet.version != 4:
        c.error("kubernetes.podSubnet", f"flannel's podCidr is IPv4, but podSubnet is {subnet}",
                "use an IPv4 podSubnet, or networking.podNetwork.plugin: none with a CNI of your own")


def _policy_enforcement(spec: ClusterSpec, c: Collector) -> None:
    """Tenants are isolated by NetworkPolicies: something must enforce them, or every tenant reaches every other."""
    net = spec.networking.pod_network
    if not spec.tenants:
        return
    path = "networking.podNetwork.networkPolicyEnforcement"
    tenants = f"{len(spec.tenants)} tenant(s) ({', '.join(t.name for t in spec.tenants)})"
    if net.network_policy_enforcement == "none":
        c.error(path, f"none: nothing enforces the NetworkPolicies that isolate the {tenants}, so every tenant "
                "could reach every other tenant's pods", "use pod-network (flannel's kube-network-policies "
                "add-on), or bring-your-own if the cluster runs an enforcer of its own")
    elif net.plugin == "none" and net.network_policy_enforcement == "pod-network":
        c.error(path, f"pod-network, but plugin: none installs no pod network, so nothing gpucluster installs "
                f"enforces the NetworkPolicies that isolate the {tenants}",
                "if the cluster's own CNI (or a separate enforcer) enforces NetworkPolicy, say so with "
                "networkPolicyEnforcement: bring-your-own; otherwise use plugin: flannel")


def _ip_pool(spec: ClusterSpec, c: Collector, base: str, net: SecondaryNetwork) -> None:
    """nv-ipam's own IPPool checks, plus: every host that carries the network gets a block."""
    try:
        subnet = ipaddress.ip_network(net.cidr, strict=True)
    except ValueError:
        return  # reported by kubernetes.check
    ok = True

    def inside(path: str, value: str) -> bool:
        try:
            addr = ipaddress.ip_address(value)
        except ValueError:
            c.error(path, f"{value!r} is not an IP address", f"an address inside {subnet}")
            return False
        if addr not in subnet:
            c.error(path, f"{addr} is not inside the network's cidr {subnet}", f"an address inside {subnet}")
            return False
        return True

    if net.gateway is not None:
        ok = inside(f"{base}.gateway", net.gateway) and ok
    for j, ex in enumerate(net.exclusions):
        lo_ok = inside(f"{base}.exclusions[{j}].startIP", ex.start_ip)
        hi_ok = inside(f"{base}.exclusions[{j}].endIP", ex.end_ip)
        if lo_ok and hi_ok and int(ipaddress.ip_address(ex.end_ip)) < int(ipaddress.ip_address(ex.start_ip)):
            c.error(f"{base}.exclusions[{j}]", f"endIP {ex.end_ip} is before startIP {ex.start_ip}",
                    "swap them")
            hi_ok = False
        ok = ok and lo_ok and hi_ok
    if not ok:
        return
    usable = networks.usable_addresses(net.cidr)
    block = networks.block_size(spec, net)
    path = f"{base}.perNodeBlockSize"
    if block > usable:
        c.error(path, f"network {net.name!r}: {block} addresses per node exceed the {usable} that {subnet} "
                "holds", "lower perNodeBlockSize or widen cidr")
        return
    hosts = networks.carrier_hosts(spec, net)
    blocks = networks.free_blocks(net, block)
    if blocks < len(hosts):
        pools = [p.name for p in networks.carrier_pools(spec, net)]
        who = f"pools {', '.join(pools)}" if pools else "the cluster (no pool lists it in rdma.interfaces)"
        c.error(path, f"network {net.name!r}: {subnet} holds {blocks} blocks of {block} addresses, but "
                f"{len(hosts)} hosts of {who} carry {net.master} and each needs one",
                f"set perNodeBlockSize to at most {max(1, usable // max(1, len(hosts)))}, widen cidr or "
                "shrink exclusions")
        return
    pods = networks.pods_per_node(spec, net)
    if block < pods:
        what = f"rdma/{net.resource_name} (rdmaHcaMax)" if net.resource_name else "a node (maxPods)"
        c.warn(path, f"network {net.name!r}: {block} addresses per node, but up to {pods} pods can hold "
               f"{what}; pods beyond {block} on a node get no address", "widen cidr or lower the pods per node")
