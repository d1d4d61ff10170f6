"""The state NVIDIA's node agents leave in a node's labels, read one way for verify and the doctor.

- MIG: the MIG manager writes ``nvidia.com/mig.config.state`` (pending, rebooting, success, failed:
  NVIDIA/mig-parted v0.14.0 pkg/mig/reconfigure/reconfigure.go:46) and, while it works, sets each
  ``nvidia.com/gpu.deploy.*`` label of the GPU clients it stops to ``paused-for-mig-change``
  (reconfigure.go:40, :563), restoring ``true`` when done (:570).
- Driver upgrades: the GPU Operator's upgrade controller walks ``nvidia.com/gpu-driver-upgrade-state``
  through the states of NVIDIA/k8s-operator-libs pkg/upgrade/consts.go:49 (tests/upstream/facts/
  gpu-operator.yaml, facts ``mig-*`` and ``driver-upgrade-*``).

How long a label has held its value is read from the node's ``managedFields``: the entry that owns the
label carries the time of its manager's last change, so ``now - time`` is a lower bound of the label's
age (the manager may have changed other fields since). No field of ours is written to the node.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpucluster import labels as L

Obj = dict[str, Any]

MIG_PENDING, MIG_REBOOTING, MIG_SUCCESS, MIG_FAILED = "pending", "rebooting", "success", "failed"
#: The value the MIG manager gives the deploy labels of the GPU clients it stopped.
PAUSED = L.DEPLOY_PAUSED
#: The deploy labels the MIG manager pauses (mig-parted v0.14.0 reconfigure.go:40).
MIG_PAUSED_LABELS = (
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.nvsm",
)


def labels_of(node: Obj) -> dict[str, str]:
    return node.get("metadata", {}).get("labels") or {}


def _owns(fields: Any, key: str) -> bool:
    return isinstance(fields, dict) and f"f:{key}" in ((fields.get("f:metadata") or {}).get("f:labels") or {})


def label_since(node: Obj, key: str) -> float | None:
    """Epoch seconds by which ``key`` had its current value (from managedFields), or None if unknown."""
    last = _last_write(node, key)
    return last[0] if last else None


def _last_write(node: Obj, key: str) -> tuple[float, str] | None:
    """The latest managedFields entry owning label ``key``: its time and who wrote it (manager, operation)."""
    found: list[tuple[float, str]] = []
    for entry in node.get("metadata", {}).get("managedFields") or []:
        if _owns(entry.get("fieldsV1"), key) and entry.get("time"):
            try:
                when = datetime.fromisoformat(entry["time"].replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
            found.append((when, f"{entry.get('manager', '')}/{entry.get('operation', '')}"))
    return max(found) if found else None


def age(node: Obj, key: str, now: float) -> float | None:
    """Seconds ``key`` has held its value at least (None when managedFields do not say)."""
    since = label_since(node, key)
    return None if since is None or not now else max(0.0, now - since)


@dataclass(frozen=True)
class MigChange:
    """A node's MIG reconfiguration as its labels show it."""

    node: str
    config: str  # nvidia.com/mig.config: the layout asked for
    state: str  # nvidia.com/mig.config.state ("" before the manager ran)
    paused: tuple[str, ...]  # deploy labels left at paused-for-mig-change
    age: float | None  # seconds the state label has held at least
    config_age: float | None = None  # seconds since the config label was last written (at least)
    config_newer: bool = False  # the config label was written after the state: the manager has not answered

    def unanswered(self, grace: float) -> bool:
        """The config was chosen after the manager last wrote its state, less than ``grace`` s ago.

        The MIG manager answers a new config within seconds (``pending``, or ``success`` at once when it
        is already applied, a write that changes nothing and so leaves no newer time). Until it does,
        the state shown belongs to the previous config; past ``grace`` it is taken as the answer.
        """
        return self.config_newer and self.config_age is not None and self.config_age < grace

    @property
    def in_progress(self) -> bool:
        """The manager is (or claims to be) applying a layout: GPU clients are stopped meanwhile."""
        return self.state in (MIG_PENDING, MIG_REBOOTING) or (bool(self.paused) and self.state != MIG_FAILED)

    @property
    def wedge_signature(self) -> bool:
        """gpu-operator issue 2833: state pending with the GPU clients' deploy labels left paused."""
        return self.state == MIG_PENDING and bool(self.paused)

    def describe(self) -> str:
        held = f" for at least {int(self.age)} s" if self.age is not None else ""
        paused = f", {len(self.paused)} nvidia.com/gpu.deploy.* labels {PAUSED}" if self.paused else ""
        return f"{L.MIG_CONFIG_STATE}={self.state or '(none)'}{held}{paused} (config {self.config or '(none)'})"


def mig_change(node: Obj, now: float = 0.0) -> MigChange | None:
    """The node's MIG state, or None when no MIG layout is asked of it and no client is paused."""
    labels = labels_of(node)
    paused = tuple(sorted(k for k, v in labels.items() if k.startswith(L.DEPLOY_PREFIX) and v == PAUSED))
    config, state = labels.get(L.MIG_CONFIG, ""), labels.get(L.MIG_CONFIG_STATE, "")
    if not config and not state and not paused:
        return None
    state_last, config_last = _last_write(node, L.MIG_CONFIG_STATE), _last_write(node, L.MIG_CONFIG)
    # managedFields times have one-second resolution: a config another writer chose in the same second as
    # the manager's last state cannot be told from one already answered, so it counts as not answered
    # (until the manager writes again, or the grace passes). One writer of both wrote them together.
    newer = config_last is not None and (state_last is None or config_last[0] > state_last[0] or (
        config_last[0] == state_last[0] and config_last[1] != state_last[1]))
    return MigChange(node["metadata"]["name"], config, state, paused, age(node, L.MIG_CONFIG_STATE, now),
                     age(node, L.MIG_CONFIG, now), newer)
