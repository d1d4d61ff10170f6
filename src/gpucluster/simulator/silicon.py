"""What each simulated host physically has: the only facts the simulator takes from the spec."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from gpucluster import catalog
from gpucluster.catalog import GpuModel
from gpucluster.spec.model import ClusterSpec

#: Machine resources a simulated kubelet reports, besides the extended resources the agents add.
BASE_GPU_NODE = {"cpu": "128", "memory": "1Ti", "pods": "110", "ephemeral-storage": "3Ti"}
BASE_CPU_NODE = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "1Ti"}


def gpu_uuid(cluster: str, node: str, index: int, mig: str = "") -> str:
    """The UUID NVML reports for GPU ``index`` of ``node`` (or for its MIG device ``mig``), stable per cluster.

    Every simulated agent that names a device by UUID (the DCGM exporter, the DRA kubelet plugin)
    takes it from here, so the same GPU has the same UUID wherever it shows. Verification computes
    its expectations on its own (``gpucluster.devices``), with the same published formula.
    """
    raw = uuid.uuid5(uuid.NAMESPACE_URL, f"gpucluster://{cluster}/{node}/{index}/{mig}")
    return f"{'MIG' if mig else 'GPU'}-{raw}"


def pci_bus_id(index: int) -> str:
    """The PCI address (``domain:bus:device.function``, sysfs form) of GPU ``index`` on a simulated machine."""
    return f"0000:{0x18 + 0x10 * index:02x}:00.0"


def pcie_root(index: int) -> str:
    """The PCIe root complex above GPU ``index`` (``pci<domain>:<bus>``): two GPUs per root, as on
    an 8-GPU HGX board where GPU pairs share a PCIe switch."""
    return f"pci0000:{0x10 + 0x20 * (index // 2):02x}"


@dataclass(frozen=True)
class Silicon:
    """What a machine physically has: its GPUs and RDMA NICs."""

    node: str
    model: GpuModel | None = None
    count: int = 0
    nics: tuple[str, ...] = ()
    link_type: str = "infiniband"


def silicon_of(spec: ClusterSpec) -> dict[str, Silicon]:
    """What each host of ``spec`` physically has."""
    out: dict[str, Silicon] = {}
    for host in spec.hosts:
        pool = spec.pool_of(host.name)
        gpu = pool.gpu if pool else None
        rdma = pool.rdma if pool else None
        out[host.name] = Silicon(
            node=host.name,
            model=catalog.get(gpu.model) if gpu else None,
            count=gpu.count if gpu else 0,
            nics=tuple(rdma.interfaces) if rdma else (),
            link_type=rdma.link_type if rdma else "infiniband",
        )
    return out
