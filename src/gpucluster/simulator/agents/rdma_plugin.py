"""The RDMA shared device plugin, and the node labels that put its DaemonSet on a node.

Follows Mellanox/k8s-rdma-shared-dev-plugin v1.5.3 (the config schema the network operator 26.4.1
deploys) and the operator's DaemonSet:

- NFD labels a node ``feature.node.kubernetes.io/pci-15b3.present=true`` when it has an NVIDIA/Mellanox
  NIC (the chart's NodeFeatureRule); the operator sets ``network.nvidia.com/operator.mofed.wait=false``
  on such nodes while it reconciles a NicClusterPolicy without ``ofedDriver``. The plugin's DaemonSet
  selects on both labels and tolerates ``nvidia.com/gpu:NoSchedule`` plus the policy's ``tolerations``.
- The plugin refuses its whole config (and so advertises nothing) when configList is empty, a resource
  name is not ``[a-zA-Z0-9_]+`` or repeats, ``rdmaHcaMax`` is negative, or an entry has neither
  selectors nor devices, or both.
- Per entry it filters the node's network devices by every non-empty selector in turn (vendors,
  deviceIDs, drivers, ifNames, linkTypes: ANDed) and serves ``<resourcePrefix>/<resourceName>`` with
  ``rdmaHcaMax`` devices (Go's zero, 0, when the key is missing) if any device is left, else an empty
  resource (the kubelet shows it as 0).

The simulator's NICs are ConnectX-7 adapters (vendor 15b3, device 1021, driver mlx5_core) named and
typed as the pool's ``rdma`` section says; that is the silicon, the rest comes from the deployed policy.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpucluster import labels as L

DEFAULT_PREFIX = "rdma"
#: What the simulated NICs report to the selectors (besides their name and link type).
NIC_VENDOR, NIC_DEVICE_ID, NIC_DRIVER = "15b3", "1021", "mlx5_core"
#: The DaemonSet's nodeSelector (netop manifests/state-rdma-shared-device-plugin/0060_rdma-shared-dev-plugin-ds.yaml).
DAEMONSET_NODE_SELECTOR = {L.MELLANOX_NIC: "true", L.MOFED_WAIT: "false"}
#: The toleration every operator DaemonSet carries of its own (same manifest).
BUILTIN_TOLERATIONS = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)
_RESOURCE_NAME = re.compile(r"^[a-zA-Z0-9_]+$")
_SELECTORS = ("vendors", "deviceIDs", "drivers", "ifNames", "linkTypes")


def _spec(nic_policy: dict[str, Any] | None) -> dict[str, Any]:
    return (nic_policy or {}).get("spec") or {}


def nic_labels(nic_policy: dict[str, Any] | None, nics: tuple[str, ...]) -> dict[str, str]:
    """What NFD (Mellanox NIC present) and the network operator (OFED wait) put on a node."""
    if not nics:
        return {}
    out = {L.MELLANOX_NIC: "true"}
    if nic_policy is not None:
        # No OFED driver container is simulated: with ofedDriver set the node would wait forever.
        out[L.MOFED_WAIT] = "true" if _spec(nic_policy).get("ofedDriver") else "false"
    return out


def _tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get("value", "")


def scheduled(nic_policy: dict[str, Any] | None, labels: dict[str, str], taints: list[dict[str, Any]]) -> bool:
    """Whether the plugin's DaemonSet runs a pod on a node with these labels and taints."""
    if not _spec(nic_policy).get("rdmaSharedDevicePlugin"):
        return False
    if any(labels.get(k) != v for k, v in DAEMONSET_NODE_SELECTOR.items()):
        return False
    tolerations = [*BUILTIN_TOLERATIONS, *(_spec(nic_policy).get("tolerations") or [])]
    hard = [t for t in taints if t.get("effect") in ("NoSchedule", "NoExecute")]
    return all(any(_tolerates(tol, t) for tol in tolerations) for t in hard)


def config_problem(config: dict[str, Any]) -> str | None:
    """Why the plugin would refuse ``config`` (it then exits), or None."""
    entries = config.get("configList") or []
    if not entries:
        return "no resources configuration found"
    seen: set[str] = set()
    for entry in entries:
        name = str(entry.get("resourceName", ""))
        if not _RESOURCE_NAME.match(name):
            return f'resource name "{name}" contains invalid characters'
        if name in seen:
            return f'resource name "{name}" already exists'
        seen.add(name)
        if int(entry.get("rdmaHcaMax") or 0) < 0:
            return f"invalid value for rdmaHcaMax < 0: {entry['rdmaHcaMax']}"
        has_selectors = any(((entry.get("selectors") or {}).get(k) or []) for k in _SELECTORS)
        if not has_selectors and not entry.get("devices"):
            return 'neither "selectors" nor "devices" fields exist'
        if has_selectors and entry.get("devices"):
            return 'cannot specify both "selectors" and "devices" fields'
    return None


def rdma_resources(
    nic_policy: dict[str, Any] | None, nics: tuple[str, ...], link_type: str, notes: list[str] | None = None
) -> dict[str, int]:
    """``<prefix>/<name>: count`` for every configList entry, as the plugin would serve them on a node
    that has ``nics`` (all of ``link_type``); {} where the plugin does not run or refuses its config.

    Call only for nodes the DaemonSet schedules on (:func:`scheduled`).
    """
    plugin = _spec(nic_policy).get("rdmaSharedDevicePlugin") or {}
    if not plugin.get("config"):
        return {}
    try:
        config = json.loads(plugin["config"])
        problem = config_problem(config)
    except (ValueError, TypeError, AttributeError) as exc:
        problem = f"config is not valid JSON of the expected shape ({exc})"
    if problem:
        if notes is not None:
            notes.append(f"RDMA shared device plugin refuses its config: {problem}")
        return {}
    devices = [{"vendors": NIC_VENDOR, "deviceIDs": NIC_DEVICE_ID, "drivers": NIC_DRIVER, "ifNames": nic,
                "linkTypes": link_type} for nic in nics]
    out: dict[str, int] = {}
    for entry in config["configList"]:
        selectors = entry.get("selectors") or {}
        if not any(selectors.get(k) for k in _SELECTORS):
            selectors = {"ifNames": entry.get("devices") or []}  # the deprecated "devices" field
        matched = [d for d in devices if all(d[k] in selectors[k] for k in _SELECTORS if selectors.get(k))]
        prefix = entry.get("resourcePrefix") or DEFAULT_PREFIX
        out[f"{prefix}/{entry['resourceName']}"] = int(entry.get("rdmaHcaMax") or 0) if matched else 0
    return out
