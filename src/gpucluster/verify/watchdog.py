"""Reconfiguration watchdog: MIG layout and sharing changes followed through their labels, with a deadline.

Two checks, one row per node that has such a change:

- ``mig-reconfig``: the MIG manager's ``nvidia.com/mig.config.state`` must reach ``success`` with no
  ``nvidia.com/gpu.deploy.*`` label left at ``paused-for-mig-change``. ``failed`` fails at once; a
  change still ``pending``/``rebooting`` after the deadline fails as stuck, and ``pending`` with paused
  deploy labels is named as the wedge of gpu-operator issue 2833 (the manager aborted while stopping
  the GPU clients and waits for a label change that never comes; the node advertises 0 GPUs).
- ``sharing-reconfig``: the sharing config a node's ``nvidia.com/device-plugin.config`` label names
  must exist in the deployed device-plugin ConfigMap (the config manager refuses a missing one:
  k8s-device-plugin v0.19.0 cmd/config-manager/main.go:354) and GPU Feature Discovery's
  ``nvidia.com/gpu.sharing-strategy`` / ``nvidia.com/gpu.replicas`` must show what it configures
  (k8s-device-plugin internal/lm/resource.go:162, :210-214) within the deadline.

:func:`follow` polls the nodes while a change is in progress, up to the deadline, and remembers the
states each node went through; :func:`checks` judges the last snapshot (pure). Upstream facts:
tests/upstream/facts/gpu-operator.yaml (``mig-*``) and device-plugin.yaml (``gfd-label-*``,
``sharing-*``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpucluster import labels as L
from gpucluster.spec.model import ClusterSpec
from gpucluster.verify.model import Result, fail, ok
from gpucluster.verify.nodestate import (
    MIG_FAILED,
    MIG_PENDING,
    MIG_REBOOTING,
    MIG_SUCCESS,
    MigChange,
    age,
    labels_of,
    mig_change,
)

Obj = dict[str, Any]
#: Default deadline for a reconfiguration (s): a MIG change with a GPU reset takes minutes, one with a
#: reboot longer; the sharing config reaches GFD within a minute.
DEFAULT_DEADLINE = 600.0
#: How long a newly chosen MIG config may wait for the manager's first answer before the state shown
#: is taken as that answer (s): the manager watches the label and answers within seconds.
ANSWER_GRACE = 30.0


@dataclass
class Watch:
    """What :func:`follow` saw: per node, the (MIG state, sharing settled) values in order, and for how long."""

    seen: dict[str, list[str]] = field(default_factory=dict)
    first: dict[str, float] = field(default_factory=dict)  # node -> when first seen in progress (monotonic)
    last: float = 0.0

    def observed(self, node: str) -> float:
        return self.last - self.first[node] if node in self.first else 0.0


# -- what a sharing config configures (read here, not shared with the simulator) -------------------
def sharing_of(config_text: str) -> tuple[str, int]:
    """(strategy, replicas) GFD labels for a device-plugin config document (``version: v1``).

    MPS wins over time-slicing when both are set (k8s-device-plugin api/config/v1/sharing.go:37);
    a strategy counts only with more than one replica (internal/lm/resource.go:162).
    """
    doc = yaml.safe_load(config_text) or {}
    sharing = doc.get("sharing") or {}
    for key, strategy in (("mps", "mps"), ("timeSlicing", "time-slicing")):
        for res in (sharing.get(key) or {}).get("resources") or []:
            if res.get("name") == "nvidia.com/gpu" and int(res.get("replicas") or 1) > 1:
                return strategy, int(res["replicas"])
    return "none", 1


# -- the MIG check ----------------------------------------------------------------------------------
def _paused_restore(change: MigChange) -> str:
    return " ".join(f"{k}=true" for k in change.paused)


def recovery_2833(change: MigChange, ns: str) -> str:
    n = change.node
    return (f"gpu-operator issue 2833: the MIG manager aborted while stopping the GPU clients and waits for a "
            f"change of {L.MIG_CONFIG} that never comes, so {n} advertises 0 GPUs. Recover: (1) find what kept "
            f"the clients from stopping: kubectl -n {ns} logs $(kubectl -n {ns} get pod -l app=nvidia-mig-manager "
            f"--field-selector spec.nodeName={n} -o name) and `nvidia-smi` on the host for processes on the GPUs; "
            f"(2) give the clients back: kubectl label node {n} {_paused_restore(change)} --overwrite; "
            f"(3) re-run the change: kubectl label node {n} {L.MIG_CONFIG}=all-disabled --overwrite, wait for "
            f"{L.MIG_CONFIG_STATE}=success, then kubectl label node {n} {L.MIG_CONFIG}={change.config} --overwrite")


def recovery_failed(change: MigChange, ns: str) -> str:
    n = change.node
    return (f"the MIG manager could not apply {change.config}: check that the config exists for this GPU model "
            f"in the mig-parted ConfigMap (the spec renders it) and read kubectl -n {ns} logs of the "
            f"nvidia-mig-manager pod on {n}; a MIG mode change that needs a GPU reset the host cannot do needs a "
            f"reboot (migManager env WITH_REBOOT=true, or reboot {n}); then re-run it: kubectl label node {n} "
            f"{L.MIG_CONFIG}=all-disabled --overwrite and back to {change.config}")


def recovery_rebooting(change: MigChange, ns: str) -> str:
    return (f"{change.node} was rebooted to apply a MIG mode change and the manager has not finished since: check "
            f"that the node is Ready and that the nvidia-mig-manager pod on it runs (kubectl -n {ns} get pods -o "
            f"wide); its log says which step it is on")


def mig_rows(nodes: list[Obj], deadline: float, watch: Watch | None, now: float, ns: str) -> Iterator[Result]:
    for node in nodes:
        change = mig_change(node, now)
        if change is None:
            continue
        name = change.node
        subject, want = name, f"{L.MIG_CONFIG_STATE}=success, no client paused"
        held = max(change.age or 0.0, watch.observed(name) if watch else 0.0)
        seen = f"; seen {' -> '.join(watch.seen[name])}" if watch and len(watch.seen.get(name, [])) > 1 else ""
        if labels_of(node).get(L.DEPLOY_MIG_MANAGER) == "false" and not change.state:
            continue  # the host applies MIG (no MIG manager reports a state): node-capacity judges the layout
        if change.unanswered(ANSWER_GRACE) and not change.in_progress:
            yield fail("mig-reconfig", subject, want, f"in progress: {change.config} chosen, the MIG manager has "
                       f"not answered yet (its last state: {change.state or 'none'})",
                       "not settled yet: verify again in a moment, or with --reconfig-deadline to follow it")
        elif change.state == MIG_FAILED:
            yield fail("mig-reconfig", subject, want, change.describe() + seen, recovery_failed(change, ns))
        elif change.in_progress and held >= deadline:
            why = (recovery_2833(change, ns) if change.wedge_signature else
                   recovery_rebooting(change, ns) if change.state == MIG_REBOOTING else
                   f"the layout is applied but the GPU clients were never given back: kubectl label node {name} "
                   f"{_paused_restore(change)} --overwrite" if change.state == MIG_SUCCESS else
                   f"the change has not finished within {int(deadline)} s: read the nvidia-mig-manager log on {name}")
            yield fail("mig-reconfig", subject, want, f"stuck: {change.describe()}{seen}", why)
        elif change.in_progress:
            yield fail("mig-reconfig", subject, want, f"in progress: {change.describe()}{seen}",
                       f"not settled yet ({int(held)} s of the {int(deadline)} s deadline): verify again later, or "
                       "with a longer --reconfig-deadline to follow it")
        elif change.state == MIG_SUCCESS:
            yield ok("mig-reconfig", subject, want, f"success (config {change.config}){seen}")
        else:
            yield fail("mig-reconfig", subject, want, change.describe(),
                       f"the MIG manager has not reported a state for {change.config}: is it running on {name}?")


# -- the sharing check ----------------------------------------------------------------------------
def sharing_rows(nodes: list[Obj], configs: dict[str, str] | None, deadline: float, watch: Watch | None,
                 now: float, ns: str, configmap: str) -> Iterator[Result]:
    for node in nodes:
        labels = labels_of(node)
        key = labels.get(L.DEVICE_PLUGIN_CONFIG)
        if key is None:
            continue
        name = node["metadata"]["name"]
        restart = (f"restart the device plugin and GFD on {name}: kubectl -n {ns} delete pod -l "
                   f"'app in (nvidia-device-plugin-daemonset,gpu-feature-discovery)' --field-selector "
                   f"spec.nodeName={name}")
        if configs is None:
            yield fail("sharing-reconfig", name, f"ConfigMap {ns}/{configmap}", "missing",
                       f"{L.DEVICE_PLUGIN_CONFIG}={key} names a config of a ConfigMap that is not deployed")
            continue
        if key not in configs:
            yield fail("sharing-reconfig", name, f"config {key} in {ns}/{configmap}", "no such key",
                       f"the config manager refuses a label naming a missing config (\"specified config {key} does "
                       f"not exist\") and the device plugin keeps its old one: add {key} to the ConfigMap or label "
                       f"the node with one of {', '.join(sorted(configs))}")
            continue
        try:
            strategy, replicas = sharing_of(configs[key])
        except (yaml.YAMLError, ValueError, TypeError, AttributeError) as err:
            yield fail("sharing-reconfig", name, f"valid config {key}", "unreadable", f"{err}"[:200])
            continue
        have_s, have_r = labels.get(L.GPU_SHARING_STRATEGY, "(none)"), labels.get(L.GPU_REPLICAS, "(none)")
        want = f"sharing-strategy={strategy}" + (f", replicas={replicas}" if strategy != "none" else "")
        actual = f"sharing-strategy={have_s}" + (f", replicas={have_r}" if strategy != "none" else "")
        if want == actual:
            yield ok("sharing-reconfig", name, want, actual + f" (config {key})")
            continue
        held = max(age(node, L.DEVICE_PLUGIN_CONFIG, now) or 0.0, watch.observed(name) if watch else 0.0)
        if held >= deadline:
            yield fail("sharing-reconfig", name, want, f"stuck: {actual}",
                       f"GFD still shows the old sharing {int(held)} s after {L.DEVICE_PLUGIN_CONFIG}={key}: {restart}")
        else:
            yield fail("sharing-reconfig", name, want, f"in progress: {actual}",
                       f"not reflected yet ({int(held)} s of the {int(deadline)} s deadline)")


def checks(nodes: list[Obj], configs: dict[str, str] | None, *, deadline: float = DEFAULT_DEADLINE,
           watch: Watch | None = None, now: float | None = None, namespace: str = "gpu-operator",
           configmap: str = "gpucluster-device-plugin-config") -> list[Result]:
    """Every ``mig-reconfig`` and ``sharing-reconfig`` row for these nodes (pure)."""
    now = time.time() if now is None else now
    return [*mig_rows(nodes, deadline, watch, now, namespace),
            *sharing_rows(nodes, configs, deadline, watch, now, namespace, configmap)]


# -- following changes in progress ----------------------------------------------------------------------
def unsettled(node: Obj, configs: dict[str, str] | None, now: float) -> str | None:
    """A short state word when the node has a change in progress (None when settled or failed)."""
    change = mig_change(node, now)
    if change is not None and change.in_progress:
        return change.state or "paused"
    if change is not None and change.unanswered(ANSWER_GRACE):
        return f"{change.config} chosen"
    key = labels_of(node).get(L.DEVICE_PLUGIN_CONFIG)
    if key is not None and configs and key in configs:
        try:
            strategy, replicas = sharing_of(configs[key])
        except (yaml.YAMLError, ValueError, TypeError, AttributeError):
            return None
        labels = labels_of(node)
        if labels.get(L.GPU_SHARING_STRATEGY) != strategy or (
                strategy != "none" and labels.get(L.GPU_REPLICAS) != str(replicas)):
            return f"sharing {key} not reflected"
    return None


def follow(fetch: Callable[[], tuple[list[Obj], dict[str, str] | None]], deadline: float, *,
           interval: float = 2.0, clock: Callable[[], float] = time.monotonic,
           wall: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
           say: Callable[[str], None] | None = None) -> tuple[list[Obj], dict[str, str] | None, Watch]:
    """Poll until no node has a change in progress, or each one has been followed past ``deadline``.

    Returns the last nodes and configs and what was seen. A node whose labels already show it stuck
    longer than the deadline (managedFields) is not waited for.
    """
    watch = Watch()
    start = clock()
    while True:
        nodes, configs = fetch()
        now, wall_now = clock(), wall()
        watch.last = now
        waiting = []
        for node in nodes:
            name = node["metadata"]["name"]
            state = unsettled(node, configs, wall_now)
            change = mig_change(node, wall_now)
            word = state or (change.state if change and change.state else None)
            if word and (not watch.seen.get(name) or watch.seen[name][-1] != word):
                watch.seen.setdefault(name, []).append(word)
            if state is None:
                continue
            watch.first.setdefault(name, now)
            if change is not None and change.in_progress:
                known = change.age or 0.0
            elif change is not None and change.unanswered(ANSWER_GRACE):
                known = 0.0  # the grace bounds this wait, not the deadline
            else:
                known = age(node, L.DEVICE_PLUGIN_CONFIG, wall_now) or 0.0
            if max(known, watch.observed(name)) < deadline:
                waiting.append(f"{name} ({state})")
        if not waiting or now - start >= deadline:
            return nodes, configs, watch
        if say:
            say(f"waiting for reconfiguration on {', '.join(waiting[:5])}{' ...' if len(waiting) > 5 else ''}")
        sleep(interval)


def live_rows(spec: ClusterSpec, kubeconfig: Any, context: str | None, deadline: float, upgrade_deadline: float,
              *, node: str | None = None, say: Callable[[str], None] | None = None) -> list[Result]:
    """The watchdog's rows for a live cluster: MIG/sharing changes followed (nodes and the deployed
    device-plugin ConfigMap every 2 s) up to ``deadline``, then each node's driver upgrade; only
    ``node``'s when given (another node's change is then not waited for)."""
    from gpucluster import kube
    from gpucluster.render.gpu_operator import DEVICE_PLUGIN_CONFIGMAP
    from gpucluster.verify import health, upgrades

    ns = spec.gpu_operator.namespace
    with kube.Kube(kubeconfig, context=context) as api:
        def fetch() -> tuple[list[Obj], dict[str, str] | None]:
            cm = api.get(kube.configmap(ns, DEVICE_PLUGIN_CONFIGMAP))
            nodes = [n for n in api.items(kube.NODES) if node is None or n["metadata"]["name"] == node]
            return nodes, (cm.get("data") or {}) if cm is not None else None
        nodes, configs, watch = follow(fetch, deadline, say=say)
        # a stalled rollout is judged over every node, whichever one is shown
        every = nodes if node is None else api.items(kube.NODES)
        inputs = upgrades.fetch(api, ns, every)
    out = checks(nodes, configs, deadline=deadline, watch=watch, namespace=ns, configmap=DEVICE_PLUGIN_CONFIGMAP)
    if inputs is not None:
        out += [r for r in upgrades.rows(every, inputs, deadline=upgrade_deadline, now=time.time(),
                                         dra_only=health.dra_only_hosts(spec))
                if node is None or r.subject == node]
    return out


__all__ = ["DEFAULT_DEADLINE", "MIG_FAILED", "MIG_PENDING", "MIG_REBOOTING", "MIG_SUCCESS", "Watch", "checks",
           "follow", "live_rows", "sharing_of", "unsettled"]
