"""The GPU stand-in's inputs: what NVIDIA's device plugin and the NVML stub get on a host without a GPU.

Its GPUs are the pool's, as NVML reports the model (simulator/data/nvml.yaml, cited facts); its config
file and environment are what the GPU Operator would hand the plugin on that node (the config
manager's choice among the ConfigMap the platform stack deploys, MIG_STRATEGY from mig.strategy).
"""

from __future__ import annotations

import pytest
import yaml

from gpucluster.errors import SimulatorError
from gpucluster.simulator import standin
from gpucluster.spec import load_spec

SITE = "molecule/site/inventory"


@pytest.fixture
def site():
    from pathlib import Path

    return load_spec(Path(__file__).resolve().parents[2] / SITE)


def test_the_site_spec_marks_one_stand_in_host(site) -> None:
    assert standin.hosts(site) == ["gpuc-site-l40s"]


def test_a_stand_in_reports_its_pools_gpus_as_nvml_does(site) -> None:
    s = standin.for_host(site, "gpuc-site-l40s")
    gpus = s.nvml["gpus"]
    assert len(gpus) == site.pool_of("gpuc-site-l40s").gpu.count == 2
    # NVIDIA's real-hardware capture of an L40S (nvml.yaml: qx-l40s): board name, memory, PCI device id.
    assert {(g["productName"], g["memoryMiB"], g["pciDeviceId"]) for g in gpus} == {("NVIDIA L40S", 46068, "0x26b9")}
    assert {(g["computeMajor"], g["computeMinor"], g["arch"]) for g in gpus} == {(8, 9, "ada-lovelace")}
    assert all("migProfiles" not in g and not g.get("migEnabled") for g in gpus)
    # One UUID per GPU, stable for the host and different across hosts.
    assert len(set(s.uuids)) == 2 and all(u.startswith("GPU-") for u in s.uuids)
    assert s.uuids == standin.for_host(site, "gpuc-site-l40s").uuids
    assert standin.gpu_uuid("other-host", 0) not in s.uuids
    # The driver the spec pins, and the CUDA version NVML reports for its branch (580 -> 13.0).
    assert (s.nvml["driverVersion"], s.nvml["cudaDriverVersion"]) == (site.gpu_operator.driver.version, 13000)
    assert s.nvml["eventsFile"] == standin.EVENTS_FILE


def test_the_plugin_gets_the_operators_settings(site) -> None:
    s = standin.for_host(site, "gpuc-site-l40s")
    # An exclusive pool: the config manager hands the default config (devicePlugin.config.default).
    flags = {"migStrategy": site.gpu_operator.mig_strategy}
    assert yaml.safe_load(s.plugin_config) == {"version": "v1", "flags": flags}
    env = dict(line.split("=", 1) for line in s.env_file().splitlines())
    assert env == {
        "MIG_STRATEGY": site.gpu_operator.mig_strategy,  # the operator's mig.strategy overrides the file's flag
        "FAIL_ON_INIT_ERROR": "true",
        "CONFIG_FILE": standin.PLUGIN_CONFIG,
        "CONTAINER_DRIVER_ROOT": standin.DRIVER_ROOT,
        "GPUCLUSTER_NVML_STUB_CONFIG": standin.NVML_CONFIG,
    }
    # The plugin's default device list strategy (envvar): no DEVICE_LIST_STRATEGY, no CDI.
    assert "DEVICE_LIST_STRATEGY" not in env


def test_a_time_sliced_pool_gets_its_own_config(write_spec, base) -> None:
    base["hosts"][2]["ansibleVars"] = {standin.HOST_VAR: True}  # g2
    spec = load_spec(write_spec(base))
    s = standin.for_host(spec, "g2")  # the l4 pool: time-slicing, 4 replicas
    config = yaml.safe_load(s.plugin_config)
    assert config["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert standin.hosts(spec) == ["g2"]


@pytest.mark.parametrize(("host", "says"), [
    ("gpuc-site-cp", "needs a host of a GPU pool"),
    ("gpuc-site-h100", "uses DRA; the stand-in runs the device plugin"),
    ("gpuc-site-a100", "shares its GPUs by mig"),
])
def test_hosts_the_plugin_cannot_stand_in_for_are_refused(site, host, says) -> None:
    with pytest.raises(SimulatorError, match=says):
        standin.for_host(site, host)


def test_only_a_true_host_var_marks_a_stand_in(write_spec, base) -> None:
    base["hosts"][2]["ansibleVars"] = {standin.HOST_VAR: "yes"}  # not the boolean: Ansible's string, not ours
    assert standin.hosts(load_spec(write_spec(base))) == []


def test_the_folder_holds_what_the_stand_in_playbook_installs(site, tmp_path) -> None:
    binaries = {name: tmp_path / f"built-{name}" for name in standin.BINARIES}
    for path in binaries.values():
        path.write_text("binary")
    out = tmp_path / "standin"
    assert standin.write_folder(site, out, binaries) == ["gpuc-site-l40s"]
    assert {p.name: p.resolve() for p in out.iterdir() if p.is_symlink()} == {n: p for n, p in binaries.items()}
    host = out / "gpuc-site-l40s"
    expected = standin.for_host(site, "gpuc-site-l40s")
    import json

    assert json.loads((host / "nvml-stub.json").read_text()) == expected.nvml
    assert (host / "device-plugin.env").read_text() == expected.env_file()
    assert (host / "device-plugin-config.yaml").read_text() == expected.plugin_config
    # The names the playbook installs them under are the ones the environment points at.
    assert f"GPUCLUSTER_NVML_STUB_CONFIG={standin.ROOT}/nvml-stub.json" in expected.env_file()
    assert f"CONFIG_FILE={standin.ROOT}/device-plugin-config.yaml" in expected.env_file()
    # Written again: the same folder (a second run replaces its links and files).
    assert standin.write_folder(site, out, binaries) == ["gpuc-site-l40s"]
