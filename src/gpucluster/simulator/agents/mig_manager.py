"""The MIG manager: which MIG layout a node's GPUs get from the deployed mig-parted config.

It reads ``config.yaml`` (``version: v1``, ``mig-configs``) from the ConfigMap the GPU Operator
points it at and applies the config named by the node label ``nvidia.com/mig.config``, reporting
``nvidia.com/mig.config.state``.
"""

from __future__ import annotations

from typing import Any

from gpucluster.catalog import GpuModel
from gpucluster.simulator.agents.yamltext import load_yaml
from gpucluster.spec import mig as miglib


def parse_mig_configs(data: dict[str, str] | None) -> dict[str, list[dict[str, Any]]] | None:
    """``mig-configs`` of the mig-parted ConfigMap's ``config.yaml``; None when there is none."""
    if data is None or "config.yaml" not in data:
        return None
    doc = load_yaml(data["config.yaml"]) or {}
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
    first = per_gpu[0] if per_gpu else None
    if first is None:
        return None, "success"
    if model.mig is None:
        return None, "failed"
    try:
        miglib.check_fits(model, first)
    except (miglib.LayoutError, KeyError):
        return None, "failed"
    return first, "success"
