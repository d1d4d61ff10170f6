"""Parsing the objects NVIDIA's node agents read their configuration from (pure).

- the device plugin's sharing config (``version: v1``; ``flags.migStrategy``,
  ``sharing.timeSlicing`` / ``sharing.mps`` with ``resources[].replicas`` and ``renameByDefault``),
  one key per pool plus ``default``, chosen by the node label ``nvidia.com/device-plugin.config``;
- mig-parted's ``config.yaml`` (``version: v1``, ``mig-configs``), chosen by ``nvidia.com/mig.config``;
- the NicClusterPolicy's RDMA shared device plugin ``configList``.

Errors are ValueErrors with the reason, as the agents would log them before giving up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import yaml

from gpucluster.catalog import GpuModel
from gpucluster.spec import mig as miglib

DEFAULT_KEY = "default"


@dataclass(frozen=True)
class Sharing:
    """One device-plugin config: how GPUs are shared and the MIG strategy."""

    mode: str = "exclusive"  # exclusive | time-slicing | mps
    replicas: int = 1
    rename_by_default: bool = False
    mig_strategy: str = "none"


# -- device plugin config ---------------------------------------------------------------------


@lru_cache(maxsize=256)
def _load(text: str) -> Any:
    """Parsed YAML, cached: a sync reads the same few config texts for every node (do not mutate)."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@lru_cache(maxsize=256)
def parse_sharing(text: str) -> Sharing:
    """One device-plugin config file (``version: v1``); raises ValueError like the plugin would."""
    doc = _load(text) or {}
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


# -- mig-parted config ------------------------------------------------------------------------


def parse_mig_configs(data: dict[str, str] | None) -> dict[str, list[dict[str, Any]]] | None:
    """``mig-configs`` of the mig-parted ConfigMap's ``config.yaml``; None when there is none."""
    if data is None or "config.yaml" not in data:
        return None
    doc = _load(data["config.yaml"]) or {}
    if not isinstance(doc, dict) or doc.get("version") != "v1":
        raise ValueError("config.yaml must be a mapping with version: v1")
    configs = doc.get("mig-configs") or {}
    if not isinstance(configs, dict):
        raise ValueError("mig-configs must be a mapping of name -> list of device entries")
    return configs


def mig_layout(
    configs: dict[str, list[dict[str, Any]]] | None, name: str | None, model: GpuModel, count: int
) -> tuple[dict[str, int] | None, str]:
    """(per-GPU layout or None when MIG is off, state) the MIG manager reaches for ``name``.

    State is what ``nvidia.com/mig.config.state`` shows: ``success`` or ``failed``. Only layouts that
    are the same on every GPU are supported (ours always are).
    """
    if not name:
        return None, ""
    if configs is None or name not in configs:
        return None, "failed"
    per_gpu: list[dict[str, int] | None] = [None] * count
    for entry in configs[name] or []:
        devices = entry.get("devices", "all")
        indices = range(count) if devices == "all" else [int(i) for i in devices if int(i) < count]
        layout = {str(p): int(n) for p, n in (entry.get("mig-devices") or {}).items() if n}
        for i in indices:
            per_gpu[i] = layout if entry.get("mig-enabled") and layout else None
    if any(p is not None and p != per_gpu[0] for p in per_gpu):
        return None, "failed"
    layout = per_gpu[0] if per_gpu else None
    if layout is None:
        return None, "success"
    if model.mig is None:
        return None, "failed"
    try:
        miglib.check_fits(model, layout)
    except (miglib.LayoutError, KeyError):
        return None, "failed"
    return layout, "success"


# -- RDMA shared device plugin ----------------------------------------------------------------


def rdma_resources(
    nic_policy: dict[str, Any] | None, nics: tuple[str, ...], link_type: str
) -> dict[str, int]:
    """``rdma/<name>: rdmaHcaMax`` for every configList entry whose selectors match the host's NICs."""
    plugin = ((nic_policy or {}).get("spec") or {}).get("rdmaSharedDevicePlugin") or {}
    if not plugin.get("config") or not nics:
        return {}
    config = json.loads(plugin["config"])
    out: dict[str, int] = {}
    for entry in config.get("configList") or []:
        sel = entry.get("selectors") or {}
        names, links = sel.get("ifNames") or [], sel.get("linkTypes") or []
        if names and not set(names) & set(nics):
            continue
        if links and link_type not in links:
            continue
        out[f"rdma/{entry['resourceName']}"] = int(entry.get("rdmaHcaMax", 1))
    return out
