"""A GPU host without silicon for a real kubelet: NVIDIA's device plugin over gpucluster's NVML stub.

The local world's kwok nodes get their devices from the simulator. A real node (the Molecule site
scenario's podman hosts run real kubelets) can have them published by NVIDIA's own device plugin
binary (k8s-device-plugin ``cmd/nvidia-device-plugin`` at ``versions.K8S_DEVICE_PLUGIN``, built by the
toolchain as ``nvidia-device-plugin``) loading ``libnvidia-ml.so.1`` from the toolchain's
``nvml-stub``: go-nvml's mock GPUs (``tools/nvidia-oracle/mocknvml``) behind NVML's C interface. The
GPUs, the driver and what the GPU Operator hands the plugin come from here:

- the pool's GPUs as NVML reports them (:mod:`gpucluster.simulator.nvml`, each fact cited in
  ``data/nvml.yaml``), one UUID per GPU derived from the host's name;
- the config file the operator's config manager picks for the node (the ``nvidia.com/device-plugin.config``
  label we apply, else ``devicePlugin.config.default``) from the ConfigMap the platform stack deploys;
- the environment the operator sets on the plugin container: ``MIG_STRATEGY`` from ``mig.strategy``
  (gpu-operator ``controllers/object_controls.go:2673``) and ``FAIL_ON_INIT_ERROR=true``.

One deliberate difference: the device list strategy stays the plugin's default ``envvar``. With CDI on,
the operator sets ``cdi-annotations,cdi-cri`` (``object_controls.go:1458``), and the plugin then writes
a CDI spec from the driver's files, which a host without a driver does not have.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.errors import SimulatorError
from gpucluster.labels import DEVICE_PLUGIN_CONFIG
from gpucluster.simulator import nvml
from gpucluster.simulator.agents.operator import Operator
from gpucluster.spec.model import ClusterSpec, SharingMode

#: The Ansible variable (a host's ``ansibleVars`` in the spec) that marks a host as a GPU stand-in.
HOST_VAR = "gpucluster_gpu_standin"
#: Where the stand-in lives on the host (molecule/site/prepare.yml installs it there).
ROOT = "/opt/gpucluster-standin"
#: The stub's config (its GPUs) and the plugin's config file.
NVML_CONFIG = f"{ROOT}/nvml-stub.json"
PLUGIN_CONFIG = f"{ROOT}/device-plugin-config.yaml"
#: The plugin's --container-driver-root: only the stub library lives there (usr/lib/x86_64-linux-gnu).
DRIVER_ROOT = f"{ROOT}/driver-root"
#: Lines appended here reach the plugin's health check as NVML XID events ({"uuid": ..., "xid": ...}).
#: It lies in the unit's RuntimeDirectory, so a restart of the stand-in starts with no faults.
EVENTS_FILE = "/run/gpucluster-standin/xid-events"


@dataclass(frozen=True)
class StandIn:
    """What one stand-in host runs: the stub's GPUs, and the device plugin's config file and environment."""

    host: str
    nvml: dict[str, Any]
    #: The config file the config manager would hand the plugin ("" when it would hand none).
    plugin_config: str
    plugin_env: dict[str, str] = field(default_factory=dict)

    @property
    def uuids(self) -> tuple[str, ...]:
        return tuple(g["uuid"] for g in self.nvml["gpus"])

    def env_file(self) -> str:
        """The plugin's environment (the operator's settings, where the stub and its driver root are) as a
        systemd EnvironmentFile."""
        return "".join(f"{k}={v}\n" for k, v in sorted(self.plugin_env.items()))


def hosts(spec: ClusterSpec) -> list[str]:
    """The spec's hosts marked as GPU stand-ins (``ansibleVars: {gpucluster_gpu_standin: true}``)."""
    return [h.name for h in spec.hosts if h.ansible_vars.get(HOST_VAR) is True]


def gpu_uuid(host: str, index: int) -> str:
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpucluster/standin/{host}/gpu/{index}"))


def for_host(spec: ClusterSpec, host: str) -> StandIn:
    """The stand-in for ``host``: a GPU host of a device-plugin pool with whole GPUs."""
    from gpucluster.render import gpu_operator
    from gpucluster.render.nodes import node_config

    pool = spec.pool_of(host)
    if pool is None or pool.gpu is None:
        raise SimulatorError(f"{host}: a GPU stand-in needs a host of a GPU pool")
    if not pool.uses_device_plugin:
        raise SimulatorError(f"{host}: pool {pool.name} uses DRA; the stand-in runs the device plugin")
    if pool.sharing.mode not in (SharingMode.exclusive, SharingMode.time_slicing):
        # MIG devices are found through /proc/driver/nvidia/capabilities and MPS needs NVIDIA's control
        # daemon on real GPUs: neither can stand in here.
        raise SimulatorError(f"{host}: pool {pool.name} shares its GPUs by {pool.sharing.mode.value}; the "
                             "stand-in serves whole GPUs, exclusive or time-sliced")
    model = pool.gpu.model
    request = nvml.gpu_request(model, 1).to_json()
    gpus = [{**request, "uuid": gpu_uuid(host, i)} for i in range(pool.gpu.count)]
    driver = spec.gpu_operator.driver.version
    op = Operator.from_values(gpu_operator.values(spec), installed=True)
    data = {k: gpu_operator.dump(v) for k, v in gpu_operator.device_plugin_config(spec).items()}
    config, error = op.select_config(data, node_config(spec)[host]["labels"].get(DEVICE_PLUGIN_CONFIG))
    if error:
        raise SimulatorError(f"{host}: {error}")
    env = {"MIG_STRATEGY": op.mig_strategy, "FAIL_ON_INIT_ERROR": "true", "CONTAINER_DRIVER_ROOT": DRIVER_ROOT,
           "GPUCLUSTER_NVML_STUB_CONFIG": NVML_CONFIG}
    if config:
        env["CONFIG_FILE"] = PLUGIN_CONFIG
    return StandIn(
        host=host,
        nvml={"driverVersion": driver, "cudaDriverVersion": nvml.cuda_driver_version(driver),
              "gpus": gpus, "eventsFile": EVENTS_FILE},
        plugin_config=config,
        plugin_env=env,
    )


#: The toolchain entries a stand-in host runs, by the file name they have on the host.
BINARIES = {"nvidia-device-plugin": "nvidia-device-plugin", "libnvidia-ml.so.1": "nvml-stub"}


def write_folder(spec: ClusterSpec, out: Path, binaries: Mapping[str, Path]) -> list[str]:
    """Fill ``out`` with what the stand-in playbook (molecule/site/prepare.yml) installs; returns the hosts.

    ``binaries`` maps each :data:`BINARIES` file name to its built path (linked, not copied). Per
    stand-in host, ``out/<host>/`` gets the stub's config, the plugin's environment and its config file.
    """
    out.mkdir(parents=True, exist_ok=True)
    for name, path in binaries.items():
        link = out / name
        link.unlink(missing_ok=True)
        os.symlink(path, link)
    names = hosts(spec)
    for host in names:
        s = for_host(spec, host)
        folder = out / host
        folder.mkdir(exist_ok=True)
        (folder / Path(NVML_CONFIG).name).write_text(json.dumps(s.nvml, indent=2) + "\n")
        (folder / "device-plugin.env").write_text(s.env_file())
        config = folder / Path(PLUGIN_CONFIG).name
        if s.plugin_config:
            config.write_text(s.plugin_config)
        else:
            config.unlink(missing_ok=True)
    return names

