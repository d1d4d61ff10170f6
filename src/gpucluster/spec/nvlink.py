"""Multi-node NVLink (GB200 NVL72 class): which pools share NVLink across hosts, and their domains.

A pool on a platform with an NVLink domain (``data/platforms.yaml`` ``nvlinkDomain``) has hosts that share
one NVLink fabric with the other hosts of their domain, the domain named at ``topology.nvlinkTier``. There
GFD labels ``nvidia.com/gpu.clique`` from NVML's fabric info, and the DRA driver runs ComputeDomains (IMEX
channels across the domain), which need the host's own IMEX service off (roles/nvidia_driver).
Validation (:mod:`gpucluster.spec.validate.topology`), the render core, the inventory and verification
read these helpers; the simulator derives its NVML fabric answer on its own.
"""

from __future__ import annotations

from collections import defaultdict

from gpucluster import catalog
from gpucluster.spec.model import ClusterSpec, NodePool

#: The oldest NVIDIA driver the DRA driver's compute-domain kubelet plugin starts on while its gate
#: IMEXDaemonsWithDNSNames is on (the default, beta): dra-driver-nvidia-gpu v0.4.1
#: cmd/compute-domain-kubelet-plugin/main.go:44 (IMEXDaemonsWithDNSNamesMinDriverVersion), checked at start
#: in device_state.go:81-86. Every kubelet plugin pod of a release with ComputeDomains runs that plugin.
MIN_COMPUTE_DOMAIN_DRIVER = (570, 158, 1)


def nvlink_platform(pool: NodePool | None) -> catalog.Platform | None:
    """The pool's platform when its hosts share NVLink with other hosts (gb200-nvl72), else None."""
    plat = catalog.platform(pool.gpu.platform) if pool is not None and pool.gpu is not None else None
    return plat if plat is not None and plat.multi_node_nvlink else None


def nvlink_domains(spec: ClusterSpec) -> dict[str, list[str]]:
    """NVLink domain (a domain of ``topology.nvlinkTier``) → its hosts, in spec order ({} without the tier)."""
    tier = spec.topology.nvlink_tier
    out: dict[str, list[str]] = defaultdict(list)
    for host in spec.hosts:
        if tier and (domain := host.topology.get(tier)) is not None:
            out[domain].append(host.name)
    return dict(out)


#: The compute-domain controller's default most nodes per IMEX domain ("On GB200 and GB300 the limit is
#: 18", dra-driver-nvidia-gpu v0.4.1 cmd/compute-domain-controller/main.go:54-58): one NVL72 rack's trays.
MAX_NODES_PER_IMEX_DOMAIN = 18


def driver_numbers(version: str) -> tuple[int, ...] | None:
    parts = version.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def compute_domains(spec: ClusterSpec) -> bool:
    """Whether the DRA driver runs ComputeDomains: some DRA pool is on a multi-node NVLink platform."""
    return any(p.uses_dra and nvlink_platform(p) is not None for p in spec.node_pools)
