"""The NVML stub library, judged by NVIDIA's own code reading it through NVML's C interface.

The stub (tools/nvidia-oracle/nvmlstub, the toolchain's ``nvml-stub``) is libnvidia-ml.so.1 for the
site scenario's GPU stand-in: NVIDIA's device plugin binary loads it as it loads the real driver's.
What it reports is go-nvml's mock (tools/nvidia-oracle/mocknvml), so the question here is whether the
C layer carries all of it: nvidia-oracle answers each node twice, once over the mock handed to
upstream code directly and once with go-nvml opening the stub library (``nvmlLibrary``), and GPU
Feature Discovery's labels (every NVML fact it reads: name, memory, compute capability, architecture,
driver and CUDA versions, MIG mode and profiles) and the device plugin's resources must be identical,
for every GPU model with NVML facts, whole and with MIG devices.

The real device plugin binary is run too: it finds the stub's GPUs, and a broken stub config stops it
with the stub's message instead of a crash. Its health check and Allocate need a kubelet; the site
scenario (molecule/site/tests/test_gpu_standin.py) runs them against a real one.

Skipped without the built tools; failing instead under GPUCLUSTER_REQUIRE_TOOLS=1.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from gpucluster import versions
from gpucluster.simulator import nvml
from gpucluster.simulator.agents import device_plugin
from gpucluster.simulator.oracle import NodeRequest, Oracle

DRIVER = "580.95.05"
#: internal/plugin/server.go logs "Starting GRPC server for ..." or "Could not start device plugin for ...".
PLUGIN_SAYS = "for 'nvidia.com/gpu'"


def requests() -> list[tuple[str, NodeRequest]]:
    """Two GPUs of every model: whole, and with MIG devices under both MIG strategies where NVML has a table."""
    out = []
    for name, model in sorted(nvml.models().items()):
        out.append((f"{name} whole", device_plugin.request(name, [[], []], range(2), config="", mig_strategy="none",
                                                           driver_version=DRIVER, mps_root="")))
        if model.mig is None:
            continue
        smallest = min(model.mig.profiles, key=lambda p: p.memory_mib)
        largest = max(model.mig.profiles, key=lambda p: p.memory_mib)
        uniform = [[smallest.name] * smallest.instances] * 2
        out.append((f"{name} single {smallest.name}", device_plugin.request(
            name, uniform, range(2), config="", mig_strategy="single", driver_version=DRIVER, mps_root="")))
        out.append((f"{name} mixed", device_plugin.request(
            name, [[smallest.name] * smallest.instances, [largest.name]], range(2), config="",
            mig_strategy="mixed", driver_version=DRIVER, mps_root="")))
    return out


def test_upstream_reads_the_same_through_the_stub_as_from_the_mock(oracle: Oracle, nvml_stub: Path) -> None:
    cases = requests()
    assert len(cases) > len(nvml.models())  # MIG tables are among them
    mock = oracle.nodes([r for _, r in cases])
    via_stub = oracle.nodes([dataclasses.replace(r, nvml_library=str(nvml_stub)) for _, r in cases])
    differ = {}
    for (label, _), a, b in zip(cases, mock, via_stub, strict=True):
        assert a.resources or a.errors, f"{label}: the mock answer publishes nothing"
        if (a.labels, a.resources, a.errors) != (b.labels, b.resources, b.errors):
            differ[label] = {k: (a.labels.get(k), b.labels.get(k)) for k in set(a.labels) | set(b.labels)
                             if a.labels.get(k) != b.labels.get(k)} | {
                "resources": (a.resources, b.resources), "errors": (a.errors, b.errors)}
    assert differ == {}


def test_the_stub_gives_each_node_its_own_gpus(oracle: Oracle, nvml_stub: Path) -> None:
    # One process answers both: the library rebuilds its GPUs when the config it is given changes.
    h100, l40s = (NodeRequest(gpus=(nvml.gpu_request(m, n),), driver_version=DRIVER,
                              cuda_driver_version=nvml.cuda_driver_version(DRIVER), nvml_library=str(nvml_stub))
                  for m, n in (("H100-SXM5-80GB", 8), ("L40S", 2)))
    a, b = oracle.nodes([h100, l40s])
    assert (a.labels["nvidia.com/gpu.count"], a.labels["nvidia.com/gpu.product"]) == ("8", "NVIDIA-H100-80GB-HBM3")
    assert (b.labels["nvidia.com/gpu.count"], b.labels["nvidia.com/gpu.product"]) == ("2", "NVIDIA-L40S")
    assert b.resources == {"nvidia.com/gpu": 2}


def _run_plugin(binary: Path, stub: Path, tmp_path: Path, config: dict | str | None) -> tuple[int | None, str]:
    """Start NVIDIA's device plugin over the stub: (its exit code, or None when it went on to serve GPUs; its log)."""
    lib = tmp_path / "driver-root" / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libnvidia-ml.so.1").symlink_to(stub)
    if config is not None:
        (tmp_path / "nvml-stub.json").write_text(config if isinstance(config, str) else json.dumps(config))
    env = {**os.environ, "GPUCLUSTER_NVML_STUB_CONFIG": str(tmp_path / "nvml-stub.json"),
           "CONTAINER_DRIVER_ROOT": str(tmp_path / "driver-root"), "KUBELET_SOCKET": str(tmp_path / "kubelet.sock")}
    proc = subprocess.Popen([str(binary)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines, serving = [], False
    try:
        for line in proc.stderr:  # until it serves (or fails to serve) the GPUs, or its stderr ends
            lines.append(line)
            if PLUGIN_SAYS in line:
                serving = True
                break
        if serving:  # it found GPUs and goes on (retrying without a kubelet): stop it
            proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=60)  # stderr ended: the plugin is exiting, wait for its status
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return (None if serving else proc.returncode), "".join(lines) + rest


def test_nvidias_device_plugin_finds_the_stubs_gpus(device_plugin_binary: Path, nvml_stub: Path,
                                                    tmp_path: Path) -> None:
    gpus = [dict(nvml.gpu_request("L40S", 1).to_json(), uuid=f"GPU-0000000{i}-0000-0000-0000-000000000000")
            for i in range(2)]
    code, log = _run_plugin(device_plugin_binary, nvml_stub, tmp_path,
                            {"driverVersion": DRIVER, "cudaDriverVersion": 13000, "gpus": gpus})
    assert code is None, log  # it found GPUs and went on to serve them
    assert "gpucluster NVML stub: 2 SIMULATED GPU(s)" in log and all(g["uuid"] in log for g in gpus), log
    assert PLUGIN_SAYS in log, log
    assert f'"Starting NVIDIA Device Plugin" version="{versions.K8S_DEVICE_PLUGIN}"' in log, log  # the pinned release


@pytest.mark.parametrize(("config", "says"), [
    (None, "no such file or directory (set GPUCLUSTER_NVML_STUB_CONFIG"),
    ({"driverVersion": DRIVER, "cudaDriverVersion": 13000, "gpus": [], "gpu": []}, 'unknown field "gpu"'),
    ({"driverVersion": DRIVER, "gpus": []}, "driverVersion and cudaDriverVersion are required"),
])
def test_a_broken_stub_config_stops_the_plugin_with_the_stubs_message(
        device_plugin_binary: Path, nvml_stub: Path, tmp_path: Path, config: dict | None, says: str) -> None:
    code, log = _run_plugin(device_plugin_binary, nvml_stub, tmp_path, config)
    assert code == 1, log  # FAIL_ON_INIT_ERROR (the default): NVML did not initialise
    assert "gpucluster NVML stub: cannot initialise:" in log and says in log, log
    assert "Failed to initialize NVML: ERROR_DRIVER_NOT_LOADED" in log, log  # internal/plugin/factory.go
