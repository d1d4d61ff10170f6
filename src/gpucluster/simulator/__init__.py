"""The GPU simulator: kwok nodes that publish what NVIDIA's node agents would (SIMULATED GPUs).

It stands in the local world where real GPUs, drivers and kubelets would be: for every host of a
spec it registers a Node as kubelet would, then does what GPU Feature Discovery, the device plugin,
the MIG manager, the DRA kubelet plugin and the RDMA shared device plugin would do on it, reading
their configuration from the cluster (one module per agent under :mod:`.agents`). Only the silicon
(GPU model and count, NICs) comes from the spec. It reaches the cluster only through a kubeconfig;
the local world runs it in the background as an add-on (:mod:`gpucluster.addons.gpu_simulator`).

- :mod:`.reconcile`: :class:`Simulator` (sync, faults, keep current)
- :mod:`.agents`: what each agent publishes, from deployed objects (pure)
- :mod:`.objects`: the Node and ResourceSlice objects (pure)
- :mod:`.silicon`: what each host physically has
- :mod:`.dcgm`: a DCGM-exporter-style metrics endpoint for the simulated GPUs
- :mod:`.oracle`: client of nvidia-oracle, NVIDIA's own GFD / device-plugin code over a mock NVML
- :mod:`.nvml`: what NVML reports per GPU model (``data/nvml.yaml``, from upstream sources)
"""

from gpucluster.simulator.reconcile import BANNER, FAULTS, Simulator, SyncReport, attach

__all__ = ["BANNER", "FAULTS", "Simulator", "SyncReport", "attach"]
