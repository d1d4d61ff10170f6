"""Offline helpers for the GPU simulator's agents: a spec's rendered objects as deployed, and syncs.

:func:`deployed` is the :class:`~gpucluster.simulator.agents.ClusterView` a cluster gives the agents
after the platform stack applied the render (operator installed, ConfigMaps and NicClusterPolicy in
place). :func:`publish` runs the agents for one host over several syncs, feeding each sync's labels,
annotations and capacity back in as the API server would, so the MIG manager's steps play out.
:class:`Node` does the same offline, without the oracle: only the agents' plan, sync after sync.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gpucluster.render import dra_driver, gpu_operator
from gpucluster.render import network_operator as network
from gpucluster.render.nodes import node_config
from gpucluster.simulator import agents
from gpucluster.simulator.agents.operator import Operator
from gpucluster.simulator.oracle import Oracle
from gpucluster.simulator.silicon import silicon_of
from gpucluster.spec.model import ClusterSpec


def deployed(spec: ClusterSpec, **changes: Any) -> agents.ClusterView:
    """What the agents read once the rendered objects are deployed (``changes`` replace fields)."""
    objs = {o["metadata"]["name"]: o for o in gpu_operator.objects(spec)}
    mig = objs.get(gpu_operator.MIG_CONFIGMAP)
    view = agents.ClusterView(
        operator=Operator.from_values(gpu_operator.values(spec), installed=True),
        device_plugin_data=dict(objs[gpu_operator.DEVICE_PLUGIN_CONFIGMAP]["data"]),
        mig_data=dict(mig["data"]) if mig else None,
        host_mig={"config.yaml": gpu_operator.dump(gpu_operator.mig_parted_config(spec))},
        nic_policy=network.nic_cluster_policy(spec),
        dra=spec.dra.enabled,
        cluster=spec.metadata.name,
        driver_version=spec.gpu_operator.driver.version,
        dra_gates=dict(dra_driver.values(spec).get("featureGates") or {}),
        dra_plugin=dict(dra_driver.values(spec).get("kubeletPlugin") or {}),
    )
    return dataclasses.replace(view, **changes)


def publish(
    spec: ClusterSpec,
    host: str,
    view: agents.ClusterView,
    oracle: Oracle,
    *,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    syncs: int = 3,
    history: list[agents.Desired] | None = None,
) -> agents.Desired:
    """What the agents publish for ``host`` after ``syncs`` syncs (``history`` collects each one)."""
    reg = node_config(spec)[host]
    node = agents.NodeView(silicon_of(spec)[host], {**reg["labels"], **(labels or {})},
                           dict(annotations or {}), reg["taints"], {})
    desired = agents.Desired()
    for _ in range(syncs):
        [desired] = agents.fleet(view, [node], oracle)
        if history is not None:
            history.append(desired)
        annotations = {k: v for k, v in {**node.annotations, **desired.annotations}.items() if v is not None}
        node = agents.NodeView(node.silicon, {**node.labels, **desired.labels}, annotations, node.taints,
                               desired.capacity)
    return desired


def extended(resources: dict[str, str]) -> dict[str, int]:
    """The extended resources (``vendor/name``) of a capacity or allocatable map, as integers."""
    return {k: int(v) for k, v in resources.items() if "/" in k}


class Node:
    """One node's labels and annotations as the API server keeps them between syncs (the agents' plan only)."""

    def __init__(self, spec: ClusterSpec, host: str) -> None:
        reg = node_config(spec)[host]
        self.silicon = silicon_of(spec)[host]
        self.labels: dict[str, str] = dict(reg["labels"])
        self.annotations: dict[str, str] = {}
        self.taints = reg["taints"]

    def sync(self, view: agents.ClusterView, syncs: int = 1) -> agents.Desired:
        """Plan ``syncs`` times, keeping what each plan writes; the last plan's result."""
        desired = agents.Desired()
        for _ in range(syncs):
            desired = agents.plan(view, agents.NodeView(self.silicon, self.labels, self.annotations,
                                                        self.taints)).desired
            self.labels.update(desired.labels)
            for key, value in desired.annotations.items():
                if value is None:
                    self.annotations.pop(key, None)
                else:
                    self.annotations[key] = value
        return desired
