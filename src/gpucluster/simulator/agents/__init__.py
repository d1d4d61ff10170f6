"""What NVIDIA's node agents would publish for each node, from what is deployed (pure but for the oracle).

The GPU simulator stands where the GPU Operator (:mod:`.operator`: which operands run, the labels it
manages), GPU Feature Discovery and the device plugin (:mod:`.device_plugin`, answered by NVIDIA's
own code through nvidia-oracle), the MIG manager (:mod:`.mig_manager`), the DRA kubelet plugin
(:mod:`.dra_plugin`) and the RDMA shared device plugin (:mod:`.rdma_plugin`) would run. Like them it
reads its configuration from the cluster (the device-plugin and mig-parted ConfigMaps, the node's
labels, the NicClusterPolicy) and the operator's Helm values, so a wrong rendered object shows up as
a wrong node. Only the silicon (GPU model and count, NICs, applied MIG devices) is the simulator's own.

A sync is two passes over the fleet so that one oracle process answers every node:
:func:`plan` (per node: labels, MIG step, DRA devices, and the oracle requests) and :func:`finish`
(per node, with the answers). :func:`fleet` does both. Nothing here imports the expectation side
(``gpucluster.expected``, ``gpucluster.devices``, ``gpucluster.verify``); a unit test keeps it so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpucluster import labels as L
from gpucluster.errors import SimulatorError
from gpucluster.simulator import nvml
from gpucluster.simulator.agents import device_plugin, dra_plugin, mig_manager, rdma_plugin
from gpucluster.simulator.agents.operator import Operator
from gpucluster.simulator.oracle import NodeAnswer, NodeRequest, Oracle
from gpucluster.simulator.silicon import BASE_CPU_NODE, BASE_GPU_NODE, Silicon

#: Resources the device plugin owns on a node (RDMA resources belong to the RDMA plugin).
PLUGIN_PREFIX = "nvidia.com/"


@dataclass
class Desired:
    """What the agents publish for one node."""

    labels: dict[str, str] = field(default_factory=dict)  # agent- and operator-owned labels
    #: The silicon's state (applied MIG) and what a running DRA plugin read at start; None removes one.
    annotations: dict[str, str | None] = field(default_factory=dict)
    capacity: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, str] = field(default_factory=dict)
    devices: list[dict[str, Any]] | None = None  # None: the DRA driver does not serve this node
    #: The node's pool as slice contents (devices and/or sharedCounters), in the driver's order.
    slices: list[dict[str, Any]] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ClusterView:
    """What the agents read from the cluster (once per sync) plus the host's own settings.

    ``host_mig`` is the mig-parted config Ansible installed on hosts whose MIG layout the host layer
    applies (``managedBy: host``); ``dra`` whether the DRA driver is installed, ``dra_gates`` its feature
    gates (the chart's ``featureGates`` value), ``dra_plugin`` its ``kubeletPlugin`` value (placement) and
    ``server_minor`` the API server's Kubernetes minor, which the driver reads to decide how to lay out
    partitionable devices.
    """

    operator: Operator
    device_plugin_data: Mapping[str, str] | None
    mig_data: Mapping[str, str] | None
    host_mig: Mapping[str, str] | None = None
    nic_policy: dict[str, Any] | None = None
    dra: bool = False
    cluster: str = "local"
    driver_version: str = "580.95.05"
    dra_gates: Mapping[str, bool] = field(default_factory=dict)
    server_minor: int = 37
    #: The driver release's ``kubeletPlugin`` value (where its DaemonSet places the plugin).
    dra_plugin: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeView:
    """One node as its agents see it: the silicon and the Node object's current state."""

    silicon: Silicon
    labels: Mapping[str, str]
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, Any]] = ()
    capacity: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Plan:
    """A node half-way through a sync: everything but the oracle's answers."""

    desired: Desired
    node: NodeView
    capacity: NodeRequest | None = None
    allocatable: NodeRequest | None = None
    plugin: bool = False  # the device plugin's pod runs (and is asked)
    gfd: bool = False
    #: (nominal, real) GPU memory when MIG-enabled GPUs were described with a MIG table written for
    #: a nominal total (nvml.yaml): GFD's nvidia.com/gpu.memory then shows the board's real total.
    memory: tuple[str, str] | None = None


def _indices(value: str | None) -> set[int]:
    return {int(v) for v in re.findall(r"\d+", value or "")}


def _names(value: str | None) -> set[str]:
    return {v.strip() for v in (value or "").split(",") if v.strip()}


def _configs(data: Mapping[str, str] | None) -> tuple[dict[str, list[dict[str, Any]]] | None, str]:
    try:
        return mig_manager.parse_configs(data), ""
    except (ValueError, yaml.YAMLError) as err:
        return None, str(err)


def plan(view: ClusterView, node: NodeView) -> Plan:
    """Everything one node's agents publish that needs no oracle answer, and the requests."""
    si, labels = node.silicon, dict(node.labels)
    base = BASE_GPU_NODE if si.model else BASE_CPU_NODE
    out = Desired(capacity=dict(base), allocatable=dict(base))
    p = Plan(out, node)
    # NFD and the network operator label the node first; the RDMA plugin's DaemonSet selects on them.
    nic = rdma_plugin.nic_labels(view.nic_policy, si.nics)
    if rdma_plugin.scheduled(view.nic_policy, {**labels, **nic}, [dict(t) for t in node.taints]):
        for name, n in rdma_plugin.rdma_resources(view.nic_policy, si.nics, si.link_type, out.notes).items():
            out.capacity[name] = out.allocatable[name] = str(n)
    out.labels.update(nic)
    if si.model is None or si.count == 0:
        return p
    try:
        model = nvml.model(si.model.key)
    except SimulatorError as err:
        out.notes.append(str(err))
        return p
    op = view.operator
    out.labels.update(op.node_labels(labels, gpu=True, mig_capable=model.mig_capable))
    labels.update(out.labels)  # what the node carries once the operator is done
    # MIG: the manager (one step per sync) or, with managedBy: host, mig-parted on the host.
    state = mig_manager.MigState.from_json(node.annotations.get(L.SIMULATED_MIG), si.count)
    if model.mig_capable and labels.get(L.DEPLOY_MIG_MANAGER) == "false" and labels.get(L.MIG_CONFIG):
        configs, problem = _configs(view.host_mig)
        name = labels[L.MIG_CONFIG]
        try:
            if configs is None or name not in configs:
                raise ValueError(problem or f"config {name!r} is not in the host's mig-parted config")
            state = mig_manager.MigState(mig_manager.layout_of(configs[name], model, si.count), name)
        except ValueError as exc:
            out.notes.append(f"host mig-parted cannot apply {name!r}: {exc}")
    elif model.mig_capable and op.runs(labels, L.DEPLOY_MIG_MANAGER):
        configs, problem = _configs(view.mig_data)
        step = mig_manager.step(state, labels, node.annotations, configs, problem, model)
        state = step.state
        out.labels.update(step.labels)
        out.notes.extend(step.notes)
        labels.update(step.labels)
    out.annotations[L.SIMULATED_MIG] = state.to_json()
    # GFD and the device plugin: the config manager's choice, then NVIDIA's code via the oracle.
    p.gfd, p.plugin = op.runs(labels, L.DEPLOY_GFD), op.runs(labels, L.DEPLOY_DEVICE_PLUGIN)
    config, error = op.select_config(view.device_plugin_data, labels.get(L.DEVICE_PLUGIN_CONFIG))
    if error and (p.gfd or p.plugin):
        out.notes.append(error)
        p.gfd = p.plugin = False
    if p.gfd or p.plugin:
        unhealthy = _indices(node.annotations.get(L.FAULT_UNHEALTHY_GPUS))
        ask = dict(config=config, mig_strategy=op.mig_strategy, driver_version=view.driver_version,
                   mps_root=op.mps_root)
        p.capacity = device_plugin.request(si.model.key, state.applied, range(si.count), fabric=si.fabric, **ask)
        if model.mig and any(state.applied) and model.mig.device_memory_mib != model.memory_mib:
            p.memory = (str(model.mig.device_memory_mib), str(model.memory_mib))
        healthy = [i for i in range(si.count) if i not in unhealthy]
        if p.plugin and healthy and len(healthy) < si.count:
            p.allocatable = device_plugin.request(si.model.key, state.applied, healthy, fabric=si.fabric, **ask)
    if view.dra and dra_plugin.scheduled(view.dra_plugin, labels):
        # The plugin publishes what it enumerated when its pod started (a new pod: a new template, or
        # the first sync it runs after not running), not the layout the GPUs have now.
        template = dra_plugin.template_key(view.dra_plugin, view.dra_gates, view.driver_version)
        started = dra_plugin.Started.from_json(node.annotations.get(L.SIMULATED_DRA_PLUGIN))
        xids = dra_plugin.gpu_xids(node.annotations.get(L.SIMULATE_DCGM))
        if started is None or started.template != template:
            # A new pod: it registers for NVML events now; what the GPUs reported before is no event to it.
            started = dra_plugin.Started(state.applied, template, xids=xids)
        elif started.layout != state.applied:
            out.notes.append("DRA kubelet plugin publishes the MIG layout it read at start; the GPUs have "
                             "another (it reads devices once: restart its pod)")
        if view.dra_gates.get(dra_plugin.HEALTH_GATE):
            started = dra_plugin.health_events(started, xids, out.notes)
        out.annotations[L.SIMULATED_DRA_PLUGIN] = started.to_json()
        out.slices = dra_plugin.slices(
            view.cluster, si.node, model, started.layout, driver_version=view.driver_version,
            cuda_driver_version=nvml.cuda_driver_version(view.driver_version),
            missing=_names(node.annotations.get(L.FAULT_MISSING_DEVICES)),
            dynamic_mig=bool(view.dra_gates.get(dra_plugin.DYNAMIC_MIG)), server_minor=view.server_minor,
            notes=out.notes, taints=started.taints, platform=si.platform,
        )
        out.devices = [d for sl in out.slices for d in sl.get("devices") or []]
    else:
        out.annotations[L.SIMULATED_DRA_PLUGIN] = None  # not running: the kubelet wipes its slices
    return p


def finish(p: Plan, answers: Mapping[NodeRequest, NodeAnswer]) -> Desired:
    """Complete a plan with the oracle's answers (GFD labels, advertised resources)."""
    out, node = p.desired, p.node
    current = {k: v for k, v in node.labels.items() if L.is_gfd_label(k) and k not in out.labels}
    kept = {k: v for k, v in node.capacity.items() if k.startswith(PLUGIN_PREFIX)}
    answer = answers[p.capacity] if p.capacity is not None else None
    if answer is not None:
        for agent, why in sorted(answer.errors.items()):
            out.notes.append(f"{agent} would not start: {why}")
    if p.gfd and answer is not None and device_plugin.GFD not in answer.errors:
        gfd_labels = dict(answer.labels)
        if p.memory and gfd_labels.get(L.GPU_MEMORY) == p.memory[0]:
            gfd_labels[L.GPU_MEMORY] = p.memory[1]
        product = node.annotations.get(L.FAULT_PRODUCT)
        if product:
            gfd_labels[L.GPU_PRODUCT] = product
        out.labels = {**gfd_labels, **out.labels}
    else:
        out.labels = {**current, **out.labels}  # a GFD that is not running leaves its labels behind
    if p.plugin and answer is not None and device_plugin.PLUGIN not in answer.errors:
        capacity = dict(answer.resources)
        if p.allocatable is not None:
            healthy = answers[p.allocatable].resources
            allocatable = {k: healthy.get(k, 0) for k in capacity}
        elif _indices(node.annotations.get(L.FAULT_UNHEALTHY_GPUS)) & set(range(node.silicon.count)):
            allocatable = dict.fromkeys(capacity, 0)  # every GPU unhealthy
        else:
            allocatable = dict(capacity)
        out.capacity.update({k: str(v) for k, v in capacity.items()})
        out.allocatable.update({k: str(v) for k, v in allocatable.items()})
    else:
        # The kubelet keeps a stopped plugin's resources in capacity and makes none allocatable.
        out.capacity.update(kept)
        out.allocatable.update(dict.fromkeys(kept, "0"))
    return out


def fleet(view: ClusterView, nodes: Sequence[NodeView], oracle: Oracle) -> list[Desired]:
    """What every node's agents publish, asking the oracle once for the whole fleet."""
    plans = [plan(view, n) for n in nodes]
    requests = list(dict.fromkeys(r for p in plans for r in (p.capacity, p.allocatable) if r is not None))
    answers = dict(zip(requests, oracle.nodes(requests), strict=True)) if requests else {}
    return [finish(p, answers) for p in plans]


def describe(desired: Desired, labels: Mapping[str, str]) -> str:
    """One line for the node's derived-state annotation: which configs were used and any problems."""
    parts = [
        f"sharing={labels.get(L.GPU_SHARING_STRATEGY, 'n/a')}",
        f"replicas={labels.get(L.GPU_REPLICAS, 'n/a')}",
    ]
    if L.MIG_CONFIG_STATE in labels:
        parts.append(f"mig={labels[L.MIG_CONFIG_STATE]}")
    if desired.devices is not None:
        parts.append(f"dra-devices={len(desired.devices)}")
    return "; ".join(parts + desired.notes)
