"""The MIG manager (mig-parted v0.14.0, the release gpu-operator v26.3.0 deploys), one step per sync.

It reads ``config.yaml`` from the mig-parted ConfigMap and applies the config named by the node label
``nvidia.com/mig.config``, reporting progress in ``nvidia.com/mig.config.state``. The sequence follows
``pkg/mig/reconfigure/reconfigure.go`` (tests/upstream/facts/gpu-operator.yaml):

1. an invalid or missing config: ``failed``, nothing else changes (reconfigure.go:134);
2. the config is already applied: ``success`` (reconfigure.go:140);
3. otherwise ``pending``, and the deploy labels of the GPU clients (device plugin, GFD, DCGM,
   exporter, NVSM) go from ``true`` to ``paused-for-mig-change`` (``false`` stays false;
   reconfigure.go:154,560-563);
4. next sync: the layout is applied, the paused labels are ``true`` again and the state is
   ``success`` (reconfigure.go:570). A mode change that needs a reboot shows ``rebooting`` first
   (reconfigure.go:184, fault ``simulate-mig-reboot``); a failing apply leaves ``failed`` with the
   clients still paused (fault ``simulate-mig-fail``); waiting for GPU client pods that never go
   away leaves ``pending`` and the paused labels for good (fault ``simulate-mig-wedge``,
   gpu-operator issue 2833).

What the GPUs have applied is the silicon's state: the caller keeps it (a node annotation) between
syncs. :func:`parse_configs` checks the file as mig-parted's ``api/spec/v1`` does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpucluster import labels as L
from gpucluster.simulator import placement
from gpucluster.simulator.agents.yamltext import load_yaml
from gpucluster.simulator.nvml import NvmlModel

#: Deploy labels of GPU clients the manager pauses (reconfigure.go:40).
PAUSED_LABELS = (
    L.DEPLOY_DEVICE_PLUGIN,
    L.DEPLOY_GFD,
    L.DEPLOY_DCGM_EXPORTER,
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.nvsm",
)
TOP_KEYS = {"version", "mig-configs"}  # api/spec/v1/spec.go:31
ENTRY_KEYS = {"device-filter", "devices", "mig-enabled", "mig-devices"}  # spec.go:37

Layout = tuple[tuple[str, ...], ...]  # per GPU: the MIG devices (profile names), () = MIG disabled


@dataclass
class MigState:
    """What the GPUs of one node have applied, and a change in progress (kept between syncs)."""

    applied: Layout = ()
    config: str = ""
    step: str = ""  # "" | "pending" | "rebooting"
    target: str = ""
    failed: str = ""  # a config whose apply failed: the manager retries only when the label changes

    def to_json(self) -> str:
        return json.dumps({"applied": [list(g) for g in self.applied], "config": self.config,
                           "step": self.step, "target": self.target, "failed": self.failed},
                          sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None, count: int) -> MigState:
        """The state an annotation recorded; GPUs come up with MIG disabled."""
        try:
            raw = json.loads(text) if text else {}
            applied = tuple(tuple(str(p) for p in g) for g in raw.get("applied") or [])
            state = cls(applied, str(raw.get("config", "")), str(raw.get("step", "")),
                        str(raw.get("target", "")), str(raw.get("failed", "")))
        except (ValueError, TypeError, AttributeError):
            state = cls()
        if len(state.applied) != count:
            state.applied = ((),) * count
        return state


@dataclass
class Outcome:
    """One sync of the manager: the state label, deploy labels it sets and the GPUs' MIG state."""

    state: MigState
    labels: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def parse_configs(data: Mapping[str, str] | None) -> dict[str, list[dict[str, Any]]]:
    """``mig-configs`` of the ConfigMap's ``config.yaml``; ValueError as mig-parted would refuse it."""
    if data is None or "config.yaml" not in data:
        raise ValueError("config.yaml not found in the mig-parted ConfigMap")
    doc = load_yaml(data["config.yaml"])
    if not isinstance(doc, dict):
        raise ValueError("config.yaml is not a mapping")
    extra = set(doc) - TOP_KEYS
    if extra:
        raise ValueError(f"unknown top-level keys {sorted(extra)}")
    if doc.get("version") != "v1":
        raise ValueError(f"unsupported version {doc.get('version')!r} (want v1)")
    configs = doc.get("mig-configs")
    if not isinstance(configs, dict):
        raise ValueError("mig-configs must be a mapping of name -> list of entries")
    for name, entries in configs.items():
        if not isinstance(entries, list):
            raise ValueError(f"mig-configs.{name} must be a list")
        for i, entry in enumerate(entries):
            where = f"mig-configs.{name}[{i}]"
            if not isinstance(entry, dict):
                raise ValueError(f"{where} is not a mapping")
            if set(entry) - ENTRY_KEYS:
                raise ValueError(f"{where}: unknown keys {sorted(set(entry) - ENTRY_KEYS)}")
            for key in ("devices", "mig-enabled"):
                if key not in entry:
                    raise ValueError(f"{where}: missing {key}")
            devices = entry["devices"]
            if devices != "all" and not (isinstance(devices, list) and all(isinstance(d, int) for d in devices)):
                raise ValueError(f"{where}.devices must be 'all' or a list of GPU indices")
            if entry["mig-enabled"] and not entry.get("mig-devices"):
                raise ValueError(f"{where}: mig-devices required when mig-enabled")
            if not entry["mig-enabled"] and entry.get("mig-devices"):
                raise ValueError(f"{where}: mig-devices not allowed when mig-enabled is false")
    return configs


def _filter_matches(entry: Mapping[str, Any], model: NvmlModel) -> bool:
    wanted = entry.get("device-filter")
    if wanted is None:
        return True
    ids = [wanted] if isinstance(wanted, str) else list(wanted)
    mine = f"{model.pci_device_id}10de".lower()
    return any(str(i).lower() == mine for i in ids)


def layout_of(entries: Sequence[Mapping[str, Any]], model: NvmlModel, count: int) -> Layout:
    """The per-GPU MIG devices one config gives ``count`` GPUs of ``model``; ValueError if it cannot apply."""
    per_gpu: list[tuple[str, ...]] = [()] * count
    for entry in entries:
        if not _filter_matches(entry, model):
            continue
        devices = entry["devices"]
        indices = range(count) if devices == "all" else [d for d in devices if d < count]
        wanted: tuple[str, ...] = ()
        if entry["mig-enabled"]:
            if not model.mig_capable or model.mig is None:
                raise ValueError(f"{model.name} has no MIG profiles the simulator knows (simulator/data/nvml.yaml)")
            wanted = tuple(p for p, n in sorted(entry["mig-devices"].items()) for _ in range(int(n)))
            placement.place(model, wanted)  # raises ValueError when the devices do not fit one GPU
        for i in indices:
            per_gpu[i] = wanted
    return tuple(per_gpu)


def step(
    state: MigState,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    configs: dict[str, list[dict[str, Any]]] | None,
    config_error: str,
    model: NvmlModel,
) -> Outcome:
    """One sync of the MIG manager on a node whose GPUs have ``state``."""
    count = len(state.applied)
    name = labels.get(L.MIG_CONFIG)
    out = Outcome(MigState(state.applied, state.config, state.step, state.target, state.failed))
    if not name:
        return out  # nothing selected: the manager waits for the label
    if state.failed == name and not state.step:
        out.labels[L.MIG_CONFIG_STATE] = "failed"
        return out
    try:
        if configs is None:
            raise ValueError(config_error or "no mig-parted config")
        if name not in configs:
            raise ValueError(f"config {name!r} is not in the mig-parted ConfigMap")
        target = layout_of(configs[name], model, count)
    except ValueError as err:
        out.labels[L.MIG_CONFIG_STATE] = "failed"
        out.notes.append(f"MIG config {name!r} cannot be applied: {err}")
        return out
    paused = {k: L.DEPLOY_PAUSED for k in PAUSED_LABELS if labels.get(k) == "true"}
    restored = {k: "true" for k in PAUSED_LABELS if labels.get(k) == L.DEPLOY_PAUSED}
    if state.step and state.target == name:
        if annotations.get(L.FAULT_MIG_WEDGE) == "true":
            out.labels[L.MIG_CONFIG_STATE] = "pending"
            out.notes.append("MIG change stuck: GPU client pods never went away (state pending, operands paused)")
            return out
        mode_change = any(bool(a) != bool(b) for a, b in zip(state.applied, target, strict=True))
        if state.step == "pending" and mode_change and annotations.get(L.FAULT_MIG_REBOOT) == "true":
            out.state.step = "rebooting"
            out.labels[L.MIG_CONFIG_STATE] = "rebooting"
            return out
        if annotations.get(L.FAULT_MIG_FAIL) == "true":
            out.state.step, out.state.target, out.state.failed = "", "", name
            out.labels[L.MIG_CONFIG_STATE] = "failed"
            out.notes.append(f"applying MIG config {name!r} failed; GPU clients left paused")
            return out
        out.state = MigState(target, name)
        out.labels.update(restored)
        out.labels[L.MIG_CONFIG_STATE] = "success"
        return out
    if target == state.applied:
        out.state = MigState(target, name)
        out.labels[L.MIG_CONFIG_STATE] = "success"
        return out
    out.state = MigState(state.applied, state.config, "pending", name)
    out.labels.update(paused)
    out.labels[L.MIG_CONFIG_STATE] = "pending"
    return out
