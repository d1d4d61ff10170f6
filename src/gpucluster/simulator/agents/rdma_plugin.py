"""The RDMA shared device plugin: ``rdma/<resourceName>`` from the NicClusterPolicy's configList."""

from __future__ import annotations

import json
from typing import Any


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
