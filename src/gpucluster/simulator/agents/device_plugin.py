"""The device plugin and GPU Feature Discovery: what to ask NVIDIA's own code (nvidia-oracle) for a node.

Neither agent's logic is written here. A node becomes a :class:`~gpucluster.simulator.oracle.NodeRequest`:
its GPUs as NVML reports them (:mod:`gpucluster.simulator.nvml`) with the MIG devices the MIG
manager created, the config file the config manager chose, and the settings the GPU Operator passes
(MIG_STRATEGY, the MPS root). The oracle answers with GFD's labels and the plugin's resources,
computed by k8s-device-plugin v0.19.0 itself; a config it rejects is an answer too (the agent does
not start), named in :attr:`NodeAnswer.errors`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpucluster.simulator import nvml
from gpucluster.simulator.oracle import GpuRequest, NodeRequest

PLUGIN = "nvidia-device-plugin"
GFD = "gpu-feature-discovery"


def gpus(model: str, layout: Sequence[Sequence[str]], indices: Iterable[int], *,
         fabric: tuple[str, int] | None = None) -> tuple[GpuRequest, ...]:
    """The GPUs ``indices`` of a node, grouped into runs with the same MIG devices (NVML order kept).

    ``fabric``: the NVLink fabric (cluster UUID, clique ID) every GPU of the node reports (a GB200 NVL72
    node); None: none."""
    runs: list[tuple[tuple[str, ...], int]] = []
    for i in indices:
        devices = tuple(layout[i])
        if runs and runs[-1][0] == devices:
            runs[-1] = (devices, runs[-1][1] + 1)
        else:
            runs.append((devices, 1))
    return tuple(nvml.gpu_request(model, count, mig_devices=devices, fabric=fabric) for devices, count in runs)


def request(
    model: str,
    layout: Sequence[Sequence[str]],
    indices: Iterable[int],
    *,
    config: str,
    mig_strategy: str,
    driver_version: str,
    mps_root: str,
    fabric: tuple[str, int] | None = None,
) -> NodeRequest:
    """What the agents on a node with GPUs ``indices`` see (all GPUs for GFD and capacity, the
    healthy ones for allocatable). ``fabric``: the NVLink fabric (cluster UUID, clique ID) of the
    node's GPUs (see :func:`gpus`)."""
    return NodeRequest(
        gpus=gpus(model, layout, indices, fabric=fabric),
        driver_version=driver_version,
        cuda_driver_version=nvml.cuda_driver_version(driver_version),
        config=config,
        mig_strategy=mig_strategy,
        plugin_args=(f"--mps-root={mps_root}",) if mps_root else (),
    )
