"""The GPU Operator, as far as it decides what runs on a GPU node (pure).

The operator itself does not run in the local world (its chart cannot be fetched), so the simulator
stands in for the parts that shape a node: which operands it deploys and with which settings, read
from the Helm values the platform stack would install it with, and the node labels it manages.
Behaviour follows gpu-operator v26.3.0 (tests/upstream/facts/gpu-operator.yaml):

- ``nvidia.com/gpu.present=true`` on nodes NFD labels with an NVIDIA PCI device
  (``controllers/state_manager.go:42,116``);
- every missing ``nvidia.com/gpu.deploy.<operand>`` label of a GPU node is set to ``"true"``, an
  existing value is honoured (``state_manager.go:90,414``); ``gpu.deploy.mig-manager`` only on
  MIG-capable nodes (``state_manager.go:420``);
- MIG-capable nodes without ``nvidia.com/mig.config`` get ``all-disabled`` when the MIG manager is on
  and its default config is ``all-disabled`` (``state_manager.go:579``);
- MIG_STRATEGY (``mig.strategy``) reaches the device plugin and GFD as an environment variable that
  overrides ``flags.migStrategy`` in their config files (``object_controls.go:2673``);
- the config manager picks the node's config by ``nvidia.com/device-plugin.config``, else
  ``devicePlugin.config.default``; a label naming a missing key is an error, not a fallback
  (k8s-device-plugin v0.19.0 ``cmd/config-manager/main.go:354``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpucluster import labels as L

#: Chart defaults for the keys we read (gpu-operator v26.3.0 deployments/gpu-operator/values.yaml).
CHART_DEFAULTS: dict[str, Any] = {
    "mig.strategy": "single",  # values.yaml:115
    "devicePlugin.enabled": True,  # values.yaml:220
    "devicePlugin.config.name": "",  # values.yaml:253
    "devicePlugin.config.default": "",  # values.yaml:255
    "devicePlugin.mps.root": "/run/nvidia/mps",  # values.yaml:261
    "gfd.enabled": True,  # values.yaml:325
    "migManager.enabled": True,  # values.yaml:335
    "migManager.config.name": "",
    "migManager.config.default": "all-disabled",
    "dcgmExporter.enabled": True,  # values.yaml:276
}

#: Deploy labels the operator adds to a GPU node (container workloads, state_manager.go:90).
CONTAINER_OPERANDS = (
    "nvidia.com/gpu.deploy.driver",
    L.DEPLOY_GFD,
    "nvidia.com/gpu.deploy.container-toolkit",
    L.DEPLOY_DEVICE_PLUGIN,
    "nvidia.com/gpu.deploy.dcgm",
    L.DEPLOY_DCGM_EXPORTER,
    "nvidia.com/gpu.deploy.node-status-exporter",
    "nvidia.com/gpu.deploy.operator-validator",
)


def _get(values: Mapping[str, Any], dotted: str) -> Any:
    node: Any = values
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return CHART_DEFAULTS[dotted]
        node = node[part]
    return node


@dataclass(frozen=True)
class Operator:
    """The operator's settings that shape a node, from its Helm values (chart defaults where unset)."""

    installed: bool
    mig_strategy: str
    device_plugin: bool
    config_map: str
    default_config: str
    mps_root: str
    gfd: bool
    mig_manager: bool
    mig_config_map: str
    mig_default: str

    @classmethod
    def from_values(cls, values: Mapping[str, Any], *, installed: bool) -> Operator:
        return cls(
            installed=installed,
            mig_strategy=str(_get(values, "mig.strategy")),
            device_plugin=bool(_get(values, "devicePlugin.enabled")),
            config_map=str(_get(values, "devicePlugin.config.name") or ""),
            default_config=str(_get(values, "devicePlugin.config.default") or ""),
            mps_root=str(_get(values, "devicePlugin.mps.root") or ""),
            gfd=bool(_get(values, "gfd.enabled")),
            mig_manager=bool(_get(values, "migManager.enabled")),
            mig_config_map=str(_get(values, "migManager.config.name") or ""),
            mig_default=str(_get(values, "migManager.config.default") or ""),
        )

    def node_labels(self, labels: Mapping[str, str], *, gpu: bool, mig_capable: bool) -> dict[str, str]:
        """The labels the operator adds or keeps on one node (NFD's PCI label included)."""
        if not gpu:
            return {}
        out = {L.NFD_NVIDIA_PCI: "true"}
        if not self.installed:
            return out
        out[L.GPU_PRESENT] = "true"
        operands = CONTAINER_OPERANDS + ((L.DEPLOY_MIG_MANAGER,) if mig_capable else ())
        for key in operands:
            out[key] = labels.get(key, "true")
        if mig_capable and self.mig_manager and self.mig_default == "all-disabled" and L.MIG_CONFIG not in labels:
            out[L.MIG_CONFIG] = "all-disabled"
        return out

    def runs(self, labels: Mapping[str, str], operand: str) -> bool:
        """Whether the operand's DaemonSet has a pod on a node with ``labels`` (selector value "true")."""
        enabled = {L.DEPLOY_DEVICE_PLUGIN: self.device_plugin, L.DEPLOY_GFD: self.gfd,
                   L.DEPLOY_MIG_MANAGER: self.mig_manager}.get(operand, True)
        return self.installed and enabled and labels.get(operand) == "true"

    def select_config(self, data: Mapping[str, str] | None, label: str | None) -> tuple[str, str]:
        """(config text, error) the config manager hands the device plugin and GFD on one node.

        An error means both agents' pods do not start (their init container exits).
        """
        if not self.config_map:
            return "", ""  # no config file: the agents run with their flags only
        if data is None:
            return "", f"ConfigMap {self.config_map} not found: the device plugin and GFD pods cannot mount it"
        name = label or self.default_config
        if not name:
            return "", ""  # fallback strategy "empty": no config file
        if name not in data:
            return "", f"specified config {name} does not exist (config manager exits; no fallback to the default)"
        return data[name], ""
