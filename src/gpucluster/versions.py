"""Every pinned version in one place: charts, Kubernetes, the NVIDIA driver.

Bump a version here and nowhere else; the spec's defaults, the render lock file and the docs read it.
"""

from __future__ import annotations

from dataclasses import dataclass

KUBERNETES = "1.36.3"
# The driver the GPU Operator installs by default (and that simulated devices report). Hosts that
# manage their own driver on Debian 12 get the 535 series from non-free (see roles/nvidia_driver).
NVIDIA_DRIVER = "580.95.05"


@dataclass(frozen=True)
class ChartPin:
    chart: str
    version: str
    repository: str


CHARTS: dict[str, ChartPin] = {
    "gpu-operator": ChartPin("gpu-operator", "v26.3.0", "https://helm.ngc.nvidia.com/nvidia"),
    "dra-driver": ChartPin("nvidia-dra-driver-gpu", "0.4.1", "https://helm.ngc.nvidia.com/nvidia"),
    "volcano": ChartPin("volcano", "1.15.1", "https://volcano-sh.github.io/helm-charts"),
    "network-operator": ChartPin("network-operator", "26.4.1", "https://helm.ngc.nvidia.com/nvidia"),
}

# Images the NicClusterPolicy deploys; the network operator release names them after itself.
NETWORK_OPERATOR_IMAGES = {"repository": "nvcr.io/nvidia/mellanox", "version": "network-operator-v26.4.1"}
