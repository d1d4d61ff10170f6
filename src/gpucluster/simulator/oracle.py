"""Ask NVIDIA's own node-agent code what a simulated node publishes (the ``nvidia-oracle`` tool).

``nvidia-oracle`` (tools/nvidia-oracle, built by ``gpucluster tools install nvidia-oracle``) runs GPU
Feature Discovery's labelers and the device plugin's resource managers of NVIDIA/k8s-device-plugin
(the release the GPU Operator deploys) over a mock NVML built from a request. This module is its
client: requests are plain data (what NVML reports for each GPU, the device-plugin config text, the
flags the operator passes), answers are what GFD labels and what the device plugin advertises.

- Many requests go to the tool in one process start (:meth:`Oracle.nodes`,
  :meth:`Oracle.validate_configs`); answers are cached by request content, so asking again is free.
- Errors: :class:`~gpucluster.errors.ToolMissing` when the tool is not built;
  :class:`~gpucluster.errors.OracleFailed` (a ``SimulatorError``) when it fails, carrying its stderr,
  or when it refuses a request (e.g. a MIG profile NVIDIA would name differently).
- An agent that would not start (a config upstream rejects) is an answer, not an error:
  :attr:`NodeAnswer.errors` names the agent and upstream's message, and it publishes nothing.

Example (what the GPU simulator does for one MIG node)::

    from gpucluster.simulator import nvml, oracle

    gpu = nvml.gpu_request("A100-80GB", count=8, mig_devices=("1g.10gb",) * 7)
    node = oracle.NodeRequest(gpus=(gpu,), driver_version="580.95.05", cuda_driver_version=13000,
                              config="version: v1\\nflags:\\n  migStrategy: mixed\\n", mig_strategy="mixed")
    answer = oracle.shared().node(node)
    answer.labels["nvidia.com/mig-1g.10gb.count"]   # "56"
    answer.resources                                 # {"nvidia.com/mig-1g.10gb": 56}

    verdict = oracle.shared().validate_config("version: v1\\nsharing:\\n  timeSlicing: ...")
    verdict.valid, verdict.error
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.errors import OracleFailed
from gpucluster.toolchain import path_of

#: The toolchain entry (src/gpucluster/toolchain/versions.py).
TOOL = "nvidia-oracle"


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile as nvmlDeviceGetGpuInstanceProfileInfo reports it.

    ``name`` is NVIDIA's name for it (e.g. ``1g.10gb``); the tool checks it against the name go-nvlib
    derives from the profile id and the memory sizes, and refuses the request when they differ.
    ``gi_profile_id`` is NVML's ``GPU_INSTANCE_PROFILE_*`` value (derived from the name when None).
    """

    name: str
    memory_mib: int
    instances: int
    multiprocessors: int = 0
    copy_engines: int = 0
    decoders: int = 0
    encoders: int = 0
    jpegs: int = 0
    ofas: int = 0
    gi_profile_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "memoryMiB": self.memory_mib, "instanceCount": self.instances,
            "multiprocessors": self.multiprocessors, "copyEngines": self.copy_engines,
            "decoders": self.decoders, "encoders": self.encoders, "jpegs": self.jpegs, "ofas": self.ofas,
        }
        if self.gi_profile_id is not None:
            out["giProfileId"] = self.gi_profile_id
        return out


@dataclass(frozen=True)
class GpuRequest:
    """``count`` identical GPUs as NVML reports them.

    ``compute_capability`` is ``"<major>.<minor>"``; ``architecture`` an NVML architecture
    (``ampere``, ``hopper``, ``ada-lovelace``, ``blackwell``, ...). A MIG-capable GPU either lists
    ``mig_profiles`` (needed when MIG is enabled) or sets ``mig_capable``. ``mig_devices`` are the
    configured MIG devices of each GPU, by profile name.

    NVLink fabric (nvmlDeviceGetGpuFabricInfo; a GB200 NVL72 GPU's multi-node NVLink domain): with
    ``fabric_cluster_uuid`` set (a UUID, e.g. ``00000001-0000-0000-0000-000000000001``) each GPU reports
    that cluster, clique ``fabric_clique_id`` and registration state ``fabric_state`` (``completed``,
    the default when empty; ``in-progress``, ``not-started``, ``not-supported``), status success.
    Empty: NVML answers NOT_SUPPORTED (no fabric). GFD's ``nvidia.com/gpu.clique`` label is
    upstream's reading of it.
    """

    product_name: str
    memory_mib: int
    compute_capability: str
    architecture: str = ""
    count: int = 1
    mig_capable: bool = False
    mig_profiles: tuple[MigProfile, ...] = ()
    mig_enabled: bool = False
    mig_devices: tuple[str, ...] = ()
    pci_device_id: str = ""
    fabric_cluster_uuid: str = ""
    fabric_clique_id: int = 0
    fabric_state: str = ""

    def to_json(self) -> dict[str, Any]:
        major, _, minor = self.compute_capability.partition(".")
        if not (major.isdigit() and minor.isdigit()):
            raise ValueError(f"compute capability {self.compute_capability!r} is not <major>.<minor>")
        out: dict[str, Any] = {
            "productName": self.product_name, "memoryMiB": self.memory_mib,
            "computeMajor": int(major), "computeMinor": int(minor), "count": self.count,
        }
        optional = {
            "arch": self.architecture, "migCapable": self.mig_capable,
            "migProfiles": [p.to_json() for p in self.mig_profiles], "migEnabled": self.mig_enabled,
            "migDevices": list(self.mig_devices), "pciDeviceId": self.pci_device_id,
        }
        out.update({k: v for k, v in optional.items() if v})
        if self.fabric_cluster_uuid:
            fabric: dict[str, Any] = {"clusterUuid": self.fabric_cluster_uuid, "cliqueId": self.fabric_clique_id}
            if self.fabric_state:
                fabric["state"] = self.fabric_state
            out["fabric"] = fabric
        return out


@dataclass(frozen=True)
class NodeRequest:
    """One node as its GPU agents see it.

    ``config`` is the device-plugin config file the node uses (empty: none); ``mig_strategy`` what
    the GPU Operator passes both agents (MIG_STRATEGY); ``plugin_args`` further device-plugin flags
    the operator sets (e.g. ``--mps-root=/run/nvidia/mps``). ``cuda_driver_version`` is NVML's
    encoding (13000 for CUDA 13.0). ``nvml_library`` names an NVML library to answer through (the NVML
    stub, handed the same GPUs): an answer that differs from the mock's is a fault in its C interface.
    """

    gpus: tuple[GpuRequest, ...]
    driver_version: str
    cuda_driver_version: int
    config: str = ""
    mig_strategy: str = ""
    machine_type: str = ""
    plugin_args: tuple[str, ...] = ()
    gfd_args: tuple[str, ...] = ()
    #: Answer through this NVML library (the toolchain's nvml-stub) instead of the mock directly.
    nvml_library: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "gpus": [g.to_json() for g in self.gpus],
            "driverVersion": self.driver_version, "cudaDriverVersion": self.cuda_driver_version,
        }
        optional = {
            "config": self.config, "migStrategy": self.mig_strategy, "machineType": self.machine_type,
            "pluginArgs": list(self.plugin_args), "gfdArgs": list(self.gfd_args), "nvmlLibrary": self.nvml_library,
        }
        out.update({k: v for k, v in optional.items() if v})
        return out


@dataclass(frozen=True)
class NodeAnswer:
    """What the node's agents publish.

    ``labels``: GFD's labels (empty when GFD would not start). ``resources``: resource name → count
    the device plugin advertises (empty when it would not start). ``errors``: agent name
    (``gpu-feature-discovery``, ``nvidia-device-plugin``) → why it would not start. ``warnings``:
    what upstream logged as warnings, and config keys upstream ignores.
    """

    labels: Mapping[str, str]
    resources: Mapping[str, int]
    errors: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConfigVerdict:
    """Upstream's verdict on a device-plugin config file (both agents' start-up code).

    ``upstream_accepts``: the real device plugin and GFD would start with it. ``valid``: that, and
    the strict check found no key upstream would silently ignore (``problems``). ``config`` is the
    config upstream would run with (as the plugin logs it at start-up), when it accepts it.
    """

    valid: bool
    upstream_accepts: bool
    error: str = ""
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    sharing_strategy: str = ""
    config: Mapping[str, Any] | None = None


def _key(item: Mapping[str, Any]) -> str:
    """Cache key: the request's canonical JSON, hashed."""
    return hashlib.sha256(json.dumps(item, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class Oracle:
    """A client of one nvidia-oracle binary, with a cache of its answers by request content.

    ``binary``: the tool to run (default: the toolchain's, looked up on first use; raises
    :class:`~gpucluster.errors.ToolMissing` when it is not built). ``calls`` counts process starts.
    """

    def __init__(self, binary: Path | None = None, *, timeout: float = 300.0) -> None:
        self._binary = binary
        self._timeout = timeout
        self._cache: dict[str, dict[str, Any]] = {}
        self.calls = 0

    @property
    def binary(self) -> Path:
        if self._binary is None:
            self._binary = path_of(TOOL)
        return self._binary

    def nodes(self, requests: Sequence[NodeRequest]) -> list[NodeAnswer]:
        """Answer every node request (the uncached ones in one process start), in order."""
        answers = self._ask([{"node": r.to_json()} for r in requests])
        return [
            NodeAnswer(
                labels=dict(a["labels"]), resources=dict(a["resources"]),
                errors=dict(a.get("errors") or {}), warnings=tuple(a.get("warnings") or ()),
            )
            for a in (x["node"] for x in answers)
        ]

    def node(self, request: NodeRequest) -> NodeAnswer:
        """Answer one node request."""
        return self.nodes([request])[0]

    def validate_configs(self, configs: Sequence[tuple[str, Sequence[str]]]) -> list[ConfigVerdict]:
        """Upstream's verdict on each (config text, device-plugin flags) pair, in order."""
        items = [{"validateConfig": {"config": text, "pluginArgs": list(args)}} for text, args in configs]
        verdicts = []
        for answer in self._ask(items):
            v = answer["validateConfig"]
            verdicts.append(ConfigVerdict(
                valid=v["valid"], upstream_accepts=v["upstreamAccepts"], error=v.get("error", ""),
                problems=tuple(v.get("problems") or ()), warnings=tuple(v.get("warnings") or ()),
                sharing_strategy=v.get("sharingStrategy", ""), config=v.get("config"),
            ))
        return verdicts

    def validate_config(self, config: str, plugin_args: Sequence[str] = ()) -> ConfigVerdict:
        """Upstream's verdict on one config file (``plugin_args``: e.g. ``--mig-strategy=single``)."""
        return self.validate_configs([(config, plugin_args)])[0]

    def _ask(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Answers for ``items`` from the cache, asking the tool once for all the others."""
        keys = [_key(item) for item in items]
        missing: dict[str, dict[str, Any]] = {}
        for key, item in zip(keys, items, strict=True):
            if key not in self._cache:
                missing.setdefault(key, item)
        if missing:
            results = self._run(list(missing.values()))
            refused = []
            for (key, item), result in zip(missing.items(), results, strict=True):
                if result.get("error"):
                    refused.append(f"{_describe(item)}: {result['error']}")
                else:
                    self._cache[key] = result
            if refused:
                raise OracleFailed(f"{TOOL} refused {len(refused)} request(s): " + "; ".join(refused))
        return [self._cache[key] for key in keys]

    def _run(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One ``nvidia-oracle batch`` run; its per-item results."""
        binary = self.binary
        self.calls += 1
        try:
            proc = subprocess.run(
                [str(binary), "batch"], input=json.dumps({"items": items}), capture_output=True, text=True,
                timeout=self._timeout, check=False,
            )
        except subprocess.TimeoutExpired as err:
            stderr = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else (err.stderr or "")
            raise OracleFailed(f"{TOOL} did not answer {len(items)} request(s) within {self._timeout:.0f} s",
                               stderr) from err
        except OSError as err:
            raise OracleFailed(f"{TOOL} ({binary}) could not be started: {err}") from err
        if proc.returncode != 0:
            raise OracleFailed(f"{TOOL} failed (exit {proc.returncode}): {_tail(proc.stderr)}", proc.stderr)
        try:
            results = json.loads(proc.stdout)["results"]
        except (ValueError, KeyError, TypeError) as err:
            raise OracleFailed(f"{TOOL} printed no batch answer ({err}): {_tail(proc.stdout)}", proc.stderr) from err
        if not isinstance(results, list) or len(results) != len(items):
            raise OracleFailed(f"{TOOL} answered {len(results) if isinstance(results, list) else '?'} "
                               f"of {len(items)} request(s)", proc.stderr)
        return results


def _describe(item: Mapping[str, Any]) -> str:
    if "node" in item:
        gpus = ", ".join(f"{g.get('count', 1)} x {g['productName']}" for g in item["node"]["gpus"])
        return f"node ({gpus or 'no GPUs'})"
    return "config"


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:]) or "(no output)"


_SHARED: Oracle | None = None


def shared() -> Oracle:
    """The process-wide client (one cache for every simulated agent)."""
    global _SHARED  # one lazily created client per process is the point
    if _SHARED is None:
        _SHARED = Oracle()
    return _SHARED
