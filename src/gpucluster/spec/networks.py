"""Address arithmetic of the secondary networks: which hosts carry one, and nv-ipam's per-node blocks.

nv-ipam's controller gives every node that its IPPool selects one block of ``perNodeBlockSize``
consecutive addresses, starting right after the network address and never ending on the broadcast
address (nvidia-k8s-ipam ``pkg/ipam-controller/allocator/allocator.go:64-193``, ``api/v1alpha1/helpers.go:57``);
a block that lies entirely inside an exclusion is skipped, and so is the gateway when the blocks are one
address long. A node that finds no free block gets no address, so every pod on it that asks for the
network fails. Validation (:mod:`gpucluster.spec.validate`) and the render core
(:mod:`gpucluster.render.network_operator`) both read the numbers from here.
"""

from __future__ import annotations

import ipaddress

from gpucluster.spec.model import ClusterSpec, NodePool, SecondaryNetwork

#: The kubelet's default maxPods: the most pods a node runs, so the most that can use a network there.
KUBELET_MAX_PODS = 110


def carrier_pools(spec: ClusterSpec, net: SecondaryNetwork) -> list[NodePool]:
    """Pools whose RDMA interfaces include the network's ``master`` (empty: the spec does not say)."""
    return [p for p in spec.node_pools if p.rdma and net.master in p.rdma.interfaces]


def carrier_hosts(spec: ClusterSpec, net: SecondaryNetwork) -> list[str]:
    """Hosts that need a block of the network: those of its carrier pools, else every host."""
    pools = carrier_pools(spec, net)
    if not pools:
        return [h.name for h in spec.hosts]
    return [h for p in pools for h in p.hosts]


def usable_addresses(cidr: str) -> int:
    """Host addresses of a subnet as nv-ipam counts them (IPv4 without network and broadcast)."""
    net = ipaddress.ip_network(cidr, strict=True)
    if net.prefixlen == net.max_prefixlen:
        return 1
    if net.prefixlen == net.max_prefixlen - 1:
        return 2
    return net.num_addresses - (2 if net.version == 4 else 1)


def pods_per_node(spec: ClusterSpec, net: SecondaryNetwork) -> int:
    """The most pods one node can attach to ``net``: the RDMA resource's share count, else maxPods."""
    return spec.networking.rdma_hca_max if net.resource_name else KUBELET_MAX_PODS


def free_blocks(net: SecondaryNetwork, block: int) -> int:
    """How many per-node blocks of ``block`` addresses nv-ipam can hand out in ``net.cidr``."""
    subnet = ipaddress.ip_network(net.cidr, strict=True)
    usable = usable_addresses(net.cidr)
    total = usable // block
    first = int(subnet.network_address) + (0 if subnet.prefixlen >= subnet.max_prefixlen - 1 else 1)
    skipped: list[tuple[int, int]] = []  # ranges of block indexes nv-ipam passes over
    for ex in net.exclusions:
        lo, hi = int(ipaddress.ip_address(ex.start_ip)), int(ipaddress.ip_address(ex.end_ip))
        # blocks [first + k*block, first + (k+1)*block - 1] lying entirely inside [lo, hi]
        k_lo = max(0, -(-(lo - first) // block))
        k_hi = min(total - 1, (hi - first + 1) // block - 1)
        if k_lo <= k_hi:
            skipped.append((k_lo, k_hi))
    if block == 1 and net.gateway:
        gw = int(ipaddress.ip_address(net.gateway)) - first
        if 0 <= gw < total:
            skipped.append((gw, gw))
    lost, end = 0, -1
    for lo_k, hi_k in sorted(skipped):  # count the union of the ranges once
        if hi_k > end:
            lost += hi_k - max(lo_k, end + 1) + 1
            end = hi_k
    return total - lost


def default_block_size(spec: ClusterSpec, net: SecondaryNetwork) -> int:
    """The per-node block when the spec sets none: enough for every pod that can use the network on a
    node, lowered (never below 1) so that every carrier host gets one."""
    hosts = max(1, len(carrier_hosts(spec, net)))
    return max(1, min(pods_per_node(spec, net), usable_addresses(net.cidr) // hosts))


def block_size(spec: ClusterSpec, net: SecondaryNetwork) -> int:
    """The network's per-node block: the spec's value or :func:`default_block_size`."""
    return net.per_node_block_size if net.per_node_block_size is not None else default_block_size(spec, net)
