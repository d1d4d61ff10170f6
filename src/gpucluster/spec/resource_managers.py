"""What ``nodePools[].resourceManagers`` implies beyond its fields: the NUMA nodes reserved on, and the
systemReserved memory that makes the kubelet's Memory Manager reservations add up (render/kubelet.py writes
them; validation refuses a reservation that cannot add up)."""

from __future__ import annotations

from decimal import Decimal

from gpucluster import catalog
from gpucluster.quantity import parse_quantity
from gpucluster.spec.model import NodePool

#: The kubelet's default hard eviction threshold for memory.available (k8s.io/kubernetes v1.37.2
#: pkg/kubelet/eviction/defaults_linux.go:23), which the Memory Manager counts as reserved.
EVICTION_HARD_MEMORY = Decimal(100 * 2**20)


def numa_nodes(pool: NodePool) -> list[int]:
    """The NUMA nodes of the pool's hosts as far as the spec knows them: its platform's sockets (the cited
    layout of ``data/platforms.yaml``), else node 0 alone (every Linux host has it)."""
    plat = catalog.platform(pool.gpu.platform if pool.gpu else None)
    if plat is None:
        return [0]
    return sorted({g.numa_node for g in plat.gpus})


def system_reserved_memory(pool: NodePool) -> Decimal:
    """Bytes of systemReserved.memory that make the per-NUMA reservations add up (see the module doc)."""
    rm = pool.resource_managers
    if rm is None or rm.reserved_memory_per_numa_node is None:
        return Decimal(0)
    return parse_quantity(rm.reserved_memory_per_numa_node) * len(numa_nodes(pool)) - EVICTION_HARD_MEMORY


def gpus_per_numa_node(pool: NodePool) -> int | None:
    """The most of the pool's GPUs that share one NUMA node on its platform (4 of 8 on a DGX H100): the most
    one pod may ask for under the Topology Manager's single-numa-node policy. None without a platform."""
    plat = catalog.platform(pool.gpu.platform if pool.gpu else None)
    if plat is None or pool.gpu is None:
        return None
    per_node: dict[int, int] = {}
    for g in plat.gpus[:pool.gpu.count]:
        per_node[g.numa_node] = per_node.get(g.numa_node, 0) + 1
    return max(per_node.values())
