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

import pytest
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


# -- an H200 this project captured (tests/data/captures/h200-580.159.04): GFD ran on the real board ----------

H200_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "captures" / "h200-580.159.04"
H200_DRIVER = "580.159.04"


def _gfd_file(strategy: str) -> dict[str, str]:
    text = (H200_DIR / f"gfd-labels-{strategy}.txt").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if line)


@pytest.mark.parametrize("strategy", ["none", "single", "mixed"])
def test_gfd_over_the_simulated_h200_labels_as_gfd_labelled_the_real_board(oracle, strategy: str) -> None:
    """The same GFD release, once on the real H200 (MIG off; each MIG strategy) and once in nvidia-oracle over
    the simulator's NVML facts for an H200: the same label set and values. The board's DMI name is the one
    label GFD reads from the host (the capture's machine had none: "unknown"). No nvidia.com/gpu.clique: the
    board's fabric reported no state (NVML GPU_FABRIC_STATE_NOT_SUPPORTED), so GFD wrote none."""
    real = _gfd_file(strategy)
    gpu = nvml.gpu_request("H200-141GB", count=1)
    answer = oracle.node(NodeRequest(gpus=(gpu,), driver_version=H200_DRIVER,
                                     cuda_driver_version=nvml.cuda_driver_version(H200_DRIVER),
                                     config=f"version: v1\nflags:\n  migStrategy: {strategy}\n",
                                     mig_strategy=strategy))
    assert answer.errors == {}
    host = {"nvidia.com/gpu.machine"}
    assert {k: v for k, v in answer.labels.items() if k not in host} == {k: v for k, v in real.items() if k not in host}
    assert "nvidia.com/gpu.clique" not in real and real["nvidia.com/gpu.memory"] == "143771"


def test_the_h200_mig_table_taken_from_the_board_is_named_by_gfd_as_nvidia_smi_names_it(oracle) -> None:
    """With MIG on (which the capture did not change), GFD over the board's own profile table names and
    sizes each profile as the board's nvidia-smi listed it: go-nvlib derives names from the memory and the
    board's total, and the oracle refuses a request whose names it would derive differently."""
    layout = ("1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb")
    gpu = nvml.gpu_request("H200-141GB", count=1, mig_devices=layout)
    answer = oracle.node(NodeRequest(gpus=(gpu,), driver_version=H200_DRIVER,
                                     cuda_driver_version=nvml.cuda_driver_version(H200_DRIVER),
                                     config="version: v1\nflags:\n  migStrategy: mixed\n", mig_strategy="mixed"))
    assert answer.errors == {}
    lgip = {r["name"]: r for r in yaml.safe_load((Path(gpucluster.__file__).parent / "data" / "captures.yaml")
                                                 .read_text())["captures"]["gpucluster-h200-lgip"]["profiles"]}
    for name in set(layout):
        assert answer.labels[f"nvidia.com/mig-{name}.count"] == str(layout.count(name))
        assert f"{int(answer.labels[f'nvidia.com/mig-{name}.memory']) / 1024:.2f}" == lgip[name]["memoryGiB"]
        assert answer.labels[f"nvidia.com/mig-{name}.multiprocessors"] == str(lgip[name]["sm"])
    assert answer.resources == {"nvidia.com/mig-1g.18gb": 2, "nvidia.com/mig-2g.35gb": 1, "nvidia.com/mig-3g.71gb": 1}
