"""What NVIDIA's node agents would publish for one node, computed from deployed objects (pure).

The GPU simulator stands where GPU Feature Discovery (:mod:`.gfd`), the device plugin
(:mod:`.device_plugin`), the MIG manager (:mod:`.mig_manager`), the DRA kubelet plugin
(:mod:`.dra_plugin`) and the RDMA shared device plugin (:mod:`.rdma_plugin`) would run. Like them,
it reads its configuration from objects in the cluster — the device-plugin sharing ConfigMap (key
chosen by the node label ``nvidia.com/device-plugin.config``), the mig-parted ConfigMap (config
chosen by ``nvidia.com/mig.config``), the NicClusterPolicy's RDMA config and tolerations, and the node
labels that say which agent serves the node — so a wrong rendered object shows up as a wrong node. It
also publishes the labels NFD and the network operator put on nodes with NVIDIA NICs (the RDMA plugin's
DaemonSet selects on them). Only the silicon (GPU model and count, NICs) comes from the spec.

Nothing here talks to the API server; :mod:`gpucluster.simulator.reconcile` does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpucluster import labels as L
from gpucluster.simulator.agents import device_plugin, dra_plugin, gfd, mig_manager, rdma_plugin
from gpucluster.simulator.silicon import BASE_CPU_NODE, BASE_GPU_NODE, Silicon


@dataclass
class Desired:
    """What the agents publish for one node."""

    labels: dict[str, str] = field(default_factory=dict)  # agent-owned labels only (L.is_agent_label)
    capacity: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, str] = field(default_factory=dict)
    devices: list[dict[str, Any]] | None = None  # None: the DRA driver does not serve this node
    notes: list[str] = field(default_factory=list)


def _indices(value: str | None) -> set[int]:
    return {int(v) for v in re.findall(r"\d+", value or "")}


def _names(value: str | None) -> set[str]:
    return {v.strip() for v in (value or "").split(",") if v.strip()}


def node_agents(
    silicon: Silicon,
    node_labels: dict[str, str],
    annotations: dict[str, str],
    *,
    device_plugin_data: dict[str, str] | None,
    mig_data: dict[str, str] | None,
    nic_policy: dict[str, Any] | None = None,
    cluster: str = "local",
    driver_version: str = "580.95.05",
    taints: list[dict[str, Any]] | None = None,
) -> Desired:
    """Everything the NVIDIA agents would publish for one node, from what is deployed."""
    base = BASE_GPU_NODE if silicon.model else BASE_CPU_NODE
    out = Desired(capacity=dict(base), allocatable=dict(base))
    # NFD and the network operator label the node first; the RDMA plugin's DaemonSet selects on them.
    nic = rdma_plugin.nic_labels(nic_policy, silicon.nics)
    if rdma_plugin.scheduled(nic_policy, {**node_labels, **nic}, taints or []):
        for name, n in rdma_plugin.rdma_resources(nic_policy, silicon.nics, silicon.link_type, out.notes).items():
            out.capacity[name] = out.allocatable[name] = str(n)
    out.labels = dict(nic)
    model, count = silicon.model, silicon.count
    if model is None or count == 0:
        return out
    notes = out.notes
    try:
        sharing = device_plugin.select_sharing(device_plugin_data, node_labels.get(L.DEVICE_PLUGIN_CONFIG), notes)
        plugin_ok = True
    except (ValueError, yaml.YAMLError) as exc:
        notes.append(f"device-plugin config invalid ({exc}): plugin would crash-loop")
        sharing, plugin_ok = device_plugin.Sharing(), False
    try:
        configs = mig_manager.parse_mig_configs(mig_data)
    except (ValueError, yaml.YAMLError) as exc:
        notes.append(f"mig-parted config invalid ({exc})")
        configs = {}
    mig_name = node_labels.get(L.MIG_CONFIG)
    layout, mig_state = mig_manager.mig_layout(configs, mig_name, model, count)
    if mig_state == "failed":
        notes.append(f"MIG config {mig_name!r} could not be applied: MIG left disabled")
    out.labels |= gfd.node_labels(
        model, count, mode="mig" if layout else sharing.mode, replicas=sharing.replicas,
        rename_by_default=sharing.rename_by_default, layout=layout, strategy=sharing.mig_strategy,
        mig_state=mig_state, product_fault=annotations.get(L.FAULT_PRODUCT),
    )
    unhealthy = {i for i in _indices(annotations.get(L.FAULT_UNHEALTHY_GPUS)) if i < count}
    if node_labels.get(L.DEPLOY_DEVICE_PLUGIN) != "false" and plugin_ok:
        capacity, allocatable = device_plugin.advertised(model, count, count - len(unhealthy), sharing, layout)
        out.capacity.update(capacity)
        out.allocatable.update(allocatable)
    if node_labels.get(L.DRA) == "true":
        out.devices = dra_plugin.published(
            cluster, silicon.node, model, count, layout, driver_version,
            missing=_names(annotations.get(L.FAULT_MISSING_DEVICES)), unhealthy=unhealthy,
        )
    return out


def describe(desired: Desired, labels: dict[str, str]) -> str:
    """One line for the node's derived-state annotation: which configs were used and any fallbacks."""
    parts = [
        f"sharing={labels.get(L.GPU_SHARING_STRATEGY, 'n/a')}",
        f"replicas={labels.get(L.GPU_REPLICAS, 'n/a')}",
    ]
    if desired.devices is not None:
        parts.append(f"dra-devices={len(desired.devices)}")
    return "; ".join(parts + desired.notes)
