"""The NVIDIA device plugin: which config a node uses and what it advertises.

The plugin reads one config file per node from the ConfigMap the GPU Operator points it at, chosen
by the node label ``nvidia.com/device-plugin.config`` (else the ``default`` key): ``version: v1``,
``flags.migStrategy``, ``sharing.timeSlicing`` / ``sharing.mps`` with ``resources[].replicas`` and
``renameByDefault``. A config that does not parse makes the real plugin crash-loop: it then
advertises nothing. Errors are ValueErrors with the reason the plugin would log.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from gpucluster import devices
from gpucluster.catalog import GpuModel
from gpucluster.simulator.agents.yamltext import load_yaml

DEFAULT_KEY = "default"


@dataclass(frozen=True)
class Sharing:
    """One device-plugin config: how GPUs are shared and the MIG strategy."""

    mode: str = "exclusive"  # exclusive | time-slicing | mps
    replicas: int = 1
    rename_by_default: bool = False
    mig_strategy: str = "none"


@lru_cache(maxsize=256)
def parse_sharing(text: str) -> Sharing:
    """One device-plugin config file (``version: v1``); raises ValueError like the plugin would."""
    doc = load_yaml(text) or {}
    if not isinstance(doc, dict):
        raise ValueError("config is not a mapping")
    if doc.get("version") != "v1":
        raise ValueError(f"unsupported version {doc.get('version')!r} (want v1)")
    strategy = str((doc.get("flags") or {}).get("migStrategy") or "none")
    if strategy not in ("none", "single", "mixed"):
        raise ValueError(f"unknown flags.migStrategy {strategy!r}")
    sharing = doc.get("sharing") or {}
    sections = [s for s in ("timeSlicing", "mps") if sharing.get(s)]
    if len(sections) > 1:
        raise ValueError("sharing sets both timeSlicing and mps")
    if not sections:
        return Sharing(mig_strategy=strategy)
    section = sharing[sections[0]]
    replicas = 1
    for res in section.get("resources") or []:
        if res.get("name") == "nvidia.com/gpu":
            replicas = res.get("replicas")
            if not isinstance(replicas, int) or replicas < 1:
                raise ValueError(f"replicas must be an integer >= 1, got {replicas!r}")
    mode = "time-slicing" if sections[0] == "timeSlicing" else "mps"
    return Sharing(mode, replicas, bool(section.get("renameByDefault", False)), strategy)


def select_sharing(data: dict[str, str] | None, key: str | None, notes: list[str]) -> Sharing:
    """The config the device plugin on a node uses: its label's key, else ``default``, else none.

    A missing ConfigMap or key falls back (and says so in ``notes``); a config that does not parse
    is what makes the real plugin crash-loop, so the caller advertises nothing for it.
    """
    if data is None:
        notes.append("device-plugin ConfigMap not found: no sharing")
        return Sharing()
    chosen = key or DEFAULT_KEY
    if chosen not in data:
        notes.append(f"device-plugin config {chosen!r} not in ConfigMap: using {DEFAULT_KEY!r}")
        chosen = DEFAULT_KEY
        if chosen not in data:
            notes.append(f"no {DEFAULT_KEY!r} key either: no sharing")
            return Sharing()
    return parse_sharing(data[chosen])


def advertised(
    model: GpuModel, count: int, healthy: int, sharing: Sharing, layout: dict[str, int] | None
) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) the plugin advertises for ``count`` GPUs of which ``healthy`` are healthy."""
    mode = "mig" if layout else sharing.mode
    strategy = sharing.mig_strategy
    if mode == "mig" and strategy == "none":
        # With migStrategy none the plugin ignores MIG devices and lists whole GPUs.
        mode, layout = "exclusive", None

    def resources(n: int) -> dict[str, int]:
        return devices.advertised_resources(
            model, n, mode=mode, replicas=sharing.replicas, rename_by_default=sharing.rename_by_default,
            mig=layout, mig_strategy=strategy if strategy != "none" else "mixed")

    capacity, allocatable = resources(count), resources(healthy)
    return ({k: str(v) for k, v in capacity.items()}, {k: str(allocatable.get(k, 0)) for k in capacity})
