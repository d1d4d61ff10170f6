"""Per-pool kubelet settings: the Topology, CPU and Memory Manager policies of ``nodePools[].resourceManagers``.

Data, not objects: the host layer writes :func:`kubelet_patch` as a kubeadm patch of the node's
KubeletConfiguration (``/etc/kubernetes/patches/kubeletconfiguration+merge.yaml``, named in the Init- and
JoinConfiguration's ``patches.directory``). kubeadm applies a ``kubeletconfiguration`` patch to the
configuration it writes to that node's /var/lib/kubelet/config.yaml, not to the cluster-wide kubelet-config
ConfigMap (k8s.io/kubernetes v1.37.2 cmd/kubeadm/app/util/patches/patches.go:81-82 names the target;
cmd/kubeadm/app/phases/kubelet/config.go WriteConfigToDisk applies it), so each pool keeps its own.

The Memory Manager's Static policy needs ``reservedMemory`` summed over NUMA nodes to equal the Node
Allocatable reservation, kubeReserved + systemReserved + the hard eviction threshold of memory.available
(k8s.io/kubernetes v1.37.2 pkg/kubelet/cm/memorymanager/memory_manager.go:433-468, validateReservedMemory),
whose default is 100Mi (pkg/kubelet/eviction/defaults_linux.go:22-23). The spec gives one amount per NUMA
node; :func:`kubelet_patch` reserves it on every NUMA node of the pool's platform and sets systemReserved so
that the sums agree.
"""

from __future__ import annotations

from decimal import Decimal

from gpucluster.spec.model import NodePool
from gpucluster.spec.resource_managers import numa_nodes, system_reserved_memory


def _bytes(amount: Decimal) -> str:
    whole = int(amount)
    return f"{whole // 2**20}Mi" if whole % 2**20 == 0 else str(whole)


def kubelet_patch(pool: NodePool | None) -> dict:
    """The KubeletConfiguration fields the pool's resourceManagers set ({} when it sets none)."""
    if pool is None or pool.resource_managers is None:
        return {}
    rm = pool.resource_managers
    patch: dict = {
        "topologyManagerPolicy": rm.topology_manager_policy,
        "topologyManagerScope": rm.topology_manager_scope,
        "cpuManagerPolicy": rm.cpu_manager_policy,
        "memoryManagerPolicy": rm.memory_manager_policy,
    }
    if rm.reserved_system_cpus is not None:
        patch["reservedSystemCPUs"] = rm.reserved_system_cpus
    if rm.memory_manager_policy == "Static" and rm.reserved_memory_per_numa_node is not None:
        patch["reservedMemory"] = [{"numaNode": n, "limits": {"memory": rm.reserved_memory_per_numa_node}}
                                   for n in numa_nodes(pool)]
        patch["systemReserved"] = {"memory": _bytes(system_reserved_memory(pool))}
    return patch
