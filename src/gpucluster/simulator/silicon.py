"""What each simulated host physically has: the only facts the simulator takes from the spec."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

from gpucluster import catalog
from gpucluster.catalog import GpuModel
from gpucluster.spec.model import ClusterSpec, Host

#: PyYAML's C parser where it is built (the wheels ship it): the same safe loading, ~10x faster on
#: the packaged data files that every command reads.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

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


@cache
def _platforms() -> dict[str, dict]:
    """The raw platform table ``data/platforms.yaml``, read once: the simulator reads the cited table itself."""
    raw = yaml.load(resources.files("gpucluster").joinpath("data/platforms.yaml").read_text(), Loader=_LOADER)
    return dict(raw["platforms"])


@cache
def _layouts() -> dict[str, tuple[tuple[str, str], ...]]:
    """Platform key -> (pciBusID, pcieRoot) per GPU index, read from the cited table ``data/platforms.yaml``.

    The simulator reads the table itself: verification's expectation (:mod:`gpucluster.devices`, through
    :func:`gpucluster.catalog.platform`) shares the cited data, not this lookup.
    """
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    for key, platform in _platforms().items():
        if all("pciBusID" in g and "pcieRoot" in g for g in platform["gpus"]):
            out[key] = tuple((str(g["pciBusID"]), str(g["pcieRoot"])) for g in platform["gpus"])
    return out  # a platform without cited bus IDs (gb200-nvl72) has no layout: generic IDs, no root


def _cited(platform: str | None, count: int) -> tuple[tuple[str, str], ...] | None:
    slots = _layouts().get(platform) if platform else None
    return slots if slots is not None and count <= len(slots) else None


def pci_bus_id(platform: str | None, count: int, index: int) -> str:
    """The PCI address (``domain:bus:device.function``, sysfs form) of GPU ``index`` of a simulated machine
    with ``count`` GPUs on ``platform`` (the pool's ``gpu.platform``).

    From the platform's cited layout (``data/platforms.yaml``: ``dgx-h100``, GPU0 at ``0000:1b:00.0``). A
    machine without one (or with more GPUs than its platform holds) gets a GENERIC address, not a vendor
    layout: ``0000:<0x18 + 0x10*index>:00.0``, which only has to be well-formed and unique.
    """
    cited = _cited(platform, count)
    return cited[index][0] if cited else generic_pci_bus_id(index)


def generic_pci_bus_id(index: int) -> str:
    """A well-formed, unique bus ID for GPU ``index`` where no layout is cited: generic, not a vendor layout."""
    return f"0000:{0x18 + 0x10 * index:02x}:00.0"


def pcie_root(platform: str | None, count: int, index: int) -> str | None:
    """The PCIe root (host bridge, ``pci<domain>:<bus>``) above GPU ``index``, or None where no layout is cited.

    On DGX H100 every GPU has its own root, shared only with its rail NIC. Without a cited layout the
    simulator publishes no ``pcieRoot``, as the driver does when sysfs cannot resolve it
    (dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/nvlib.go:539-544): a claim constrained on it then
    stays pending there, instead of being satisfied by an invented topology.
    """
    cited = _cited(platform, count)
    return cited[index][1] if cited else None


@dataclass(frozen=True)
class Silicon:
    """What a machine physically has: its GPUs and RDMA NICs."""

    node: str
    model: GpuModel | None = None
    count: int = 0
    nics: tuple[str, ...] = ()
    link_type: str = "infiniband"
    #: The server platform (the pool's ``gpu.platform``): where its GPUs sit on PCIe (``data/platforms.yaml``).
    platform: str | None = None
    #: The NVLink fabric NVML reports on every GPU, (cluster UUID, clique ID), on a multi-node NVLink
    #: platform in a domain of ``topology.nvlinkTier``; None (NVML: fabric info NOT_SUPPORTED) elsewhere.
    fabric: tuple[str, int] | None = None


#: The clique ID the simulated fabric manager gives every NVLink domain's one partition: NVIDIA's own
#: GB200 mock uses 0 too (NVIDIA/k8s-test-infra pkg/gpu/mocknvml/configs/mock-nvml-config-gb200.yaml,
#: fabric.clique_id); a real rack's is whatever its fabric manager assigned (2 in NVIDIA's capture).
SIMULATED_CLIQUE_ID = 0


@cache
def _multi_node_nvlink() -> frozenset[str]:
    """Platforms whose hosts share NVLink across hosts (``nvlinkDomain`` in ``data/platforms.yaml``), read
    from the table itself."""
    return frozenset(k for k, p in _platforms().items() if p.get("nvlinkDomain"))


def fabric_of(spec: ClusterSpec, host: Host, platform: str | None) -> tuple[str, int] | None:
    """What NVML reports as the fabric of ``host``'s GPUs: registered (state COMPLETED) in the NVLink domain
    the spec puts the host in, one cluster UUID per domain (stable per cluster), or None (not supported)."""
    tier = spec.topology.nvlink_tier
    if platform not in _multi_node_nvlink() or not tier:
        return None
    domain = host.topology.get(tier)
    if domain is None:
        return None
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpucluster://{spec.metadata.name}/nvlink/{domain}")), \
        SIMULATED_CLIQUE_ID


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
            platform=gpu.platform if gpu else None,
            fabric=fabric_of(spec, host, gpu.platform) if gpu else None,
        )
    return out
