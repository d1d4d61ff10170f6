"""NVIDIA's GFD over the captured NVML values labels a node as the real board labelled itself.

gpucluster/data/captures.yaml holds GFD's labels of a real H100 80GB HBM3 (driver 550.54.15, MIG
all-balanced, mixed strategy; NVIDIA's GPU Operator documentation). The simulator's NVML facts take the
captured values over go-nvml's mock (simulator/nvml.py); nvidia-oracle runs k8s-device-plugin's own GFD
labelers over them. Every label both publish must be equal: memory, multiprocessors, every engine count,
product names, counts, slices and the CUDA labels. The labels only the capture has are not GFD's (the
GPU Operator's deploy and upgrade labels, the MIG manager's, NFD's timestamp); the host's machine name is
the one label GFD reads from the host, not from NVML.
"""

from __future__ import annotations

from pathlib import Path

import yaml

import gpucluster
from gpucluster.simulator import nvml
from gpucluster.simulator.oracle import NodeRequest

CAPTURE = yaml.safe_load((Path(gpucluster.__file__).parent / "data" / "captures.yaml").read_text())[
    "captures"]["gpu-operator-docs-h100-mixed"]
#: Labels of the capture GFD does not write (the operator's, the MIG manager's, the daemon's timestamp) or
#: does not read from NVML (the host's DMI product name).
NOT_FROM_NVML = {"nvidia.com/gpu.machine", "nvidia.com/gfd.timestamp", "nvidia.com/gpu-driver-upgrade-state",
                 "nvidia.com/gpu.present", "nvidia.com/mig.config", "nvidia.com/mig.config.state"}


def test_gfd_over_the_captured_values_labels_as_the_real_h100_did(oracle) -> None:
    real = CAPTURE["labels"]
    layout = tuple(p for p in ("1g.10gb", "2g.20gb", "3g.40gb") for _ in range(int(real[f"nvidia.com/mig-{p}.count"])))
    gpu = nvml.gpu_request("H100-SXM5-80GB", count=1, mig_devices=layout)
    driver = CAPTURE["driver"]
    answer = oracle.node(NodeRequest(gpus=(gpu,), driver_version=driver,
                                     cuda_driver_version=nvml.cuda_driver_version(driver),
                                     config="version: v1\nflags:\n  migStrategy: mixed\n", mig_strategy="mixed"))
    assert answer.errors == {}
    compared = {k for k in real if not k.startswith("nvidia.com/gpu.deploy.")} - NOT_FROM_NVML
    assert {k: answer.labels.get(k, "(missing)") for k in sorted(compared)} == {k: real[k] for k in sorted(compared)}
    assert len([k for k in compared if k.startswith("nvidia.com/mig-")]) == 39  # 13 labels x 3 profiles
