"""Per-GPU quarantine: one DeviceTaintRule per unhealthy GPU instead of a cordoned node.

``gpucluster quarantine NODE DEVICE --reason TEXT`` taints one device of the NVIDIA DRA driver's pool of
that node (the pool is named after the node, fact pool-name) with the key
:data:`~gpucluster.labels.QUARANTINE`. With ``NoSchedule`` the scheduler stops allocating it; with
``NoExecute`` (the default) the kube-controller-manager's device-taint-eviction controller also deletes
the pods whose allocated claims hold it, unless the claim tolerates the taint. The node's other GPUs stay
in use. Lifting the quarantine deletes the rule, and the device is allocatable again.

The DRA driver's own health monitor taints devices too, in its ResourceSlices, under its domain
(``gpu.nvidia.com/xid``; :class:`DriverTaint`). The two never touch each other's taints: lifting a
quarantine leaves the driver's taint of the same device in force, and ``--list`` shows both.

The rule's API version is the one the spec's Kubernetes version serves
(:data:`gpucluster.spec.features.DEVICE_TAINT_RULE_API`: ``resource.k8s.io/v1`` on 1.37). The rule is
labelled and annotated so that ``verify`` lists the quarantined devices with their reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpucluster import kube
from gpucluster import labels as L
from gpucluster.errors import InputError
from gpucluster.spec.features import DEVICE_TAINT_RULE_API
from gpucluster.upstream import DRA_DRIVER

PREFIX = "gpucluster-quarantine-"
EFFECTS = ("NoExecute", "NoSchedule")


@dataclass(frozen=True)
class Quarantine:
    """One quarantined device, as its DeviceTaintRule records it."""

    node: str
    device: str
    reason: str
    effect: str
    since: str
    rule: str
    value: str = ""


@dataclass(frozen=True)
class DriverTaint:
    """A taint the DRA driver's health monitor put on one of its devices, as its ResourceSlice shows it.

    The driver keeps it in its kubelet plugin's memory (dra-driver-nvidia-gpu v0.4.1
    ``cmd/gpu-kubelet-plugin/allocatable.go:328``): nothing gpucluster does lifts it, and a new plugin pod
    on the node (after the GPU was repaired, or a reboot) publishes the device untainted.
    """

    node: str
    device: str
    key: str
    value: str
    effect: str
    since: str

    @property
    def what(self) -> str:
        """``key=value`` (or the key alone)."""
        return f"{self.key}={self.value}" if self.value else self.key

    @property
    def text(self) -> str:
        return f"{self.what}:{self.effect}"


def driver_taints(slices: list[dict[str, Any]] | None) -> list[DriverTaint]:
    """Every taint under the driver's own domain (``gpu.nvidia.com/``) in its ResourceSlices, by node and device.

    Ours are DeviceTaintRules with another key (:data:`gpucluster.labels.QUARANTINE`): the two never touch
    each other's taints, so lifting a quarantine leaves the driver's taint of the same device in force.
    """
    out = []
    for s in slices or []:
        spec = s.get("spec") or {}
        if spec.get("driver") != DRA_DRIVER:
            continue
        node = str((spec.get("pool") or {}).get("name") or spec.get("nodeName") or "")
        for dev in spec.get("devices") or []:
            for t in dev.get("taints") or []:
                if str(t.get("key", "")).startswith(f"{DRA_DRIVER}/"):
                    out.append(DriverTaint(node, str(dev.get("name", "")), str(t["key"]), str(t.get("value") or ""),
                                           str(t.get("effect") or ""), str(t.get("timeAdded") or "")))
    return sorted(out, key=lambda t: (t.node, t.device, t.key))


def api_version(minor: int) -> str:
    """The DeviceTaintRule API of Kubernetes 1.``minor``."""
    if minor not in DEVICE_TAINT_RULE_API:
        known = ", ".join(f"1.{m}" for m in sorted(DEVICE_TAINT_RULE_API))
        raise InputError(f"DeviceTaintRules are not served by Kubernetes 1.{minor} (known: {known})")
    return DEVICE_TAINT_RULE_API[minor]


def rules_path(minor: int) -> str:
    return f"/apis/{api_version(minor)}/devicetaintrules"


def rule_name(node: str, device: str) -> str:
    """The rule's name: the prefix, the node and the device (a DNS subdomain of at most 253 characters)."""
    return f"{PREFIX}{node}-{device}"[:253].rstrip("-.")


def taint_value(reason: str) -> str:
    """The reason as a label value (what the scheduler's and the evictions' messages show)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", reason)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", slug)


def rule_object(minor: int, node: str, device: str, reason: str, effect: str) -> dict[str, Any]:
    """The DeviceTaintRule that quarantines ``device`` of ``node``."""
    return {
        "apiVersion": api_version(minor),
        "kind": "DeviceTaintRule",
        "metadata": {"name": rule_name(node, device), "labels": {L.QUARANTINE: "true"},
                     "annotations": {L.QUARANTINE_REASON: reason}},
        "spec": {
            "deviceSelector": {"driver": DRA_DRIVER, "pool": node, "device": device},
            "taint": {"key": L.QUARANTINE, "value": taint_value(reason), "effect": effect},
        },
    }


def from_rule(rule: dict[str, Any]) -> Quarantine | None:
    """The quarantine a rule records (None: not one of ours)."""
    meta = rule.get("metadata") or {}
    if (meta.get("labels") or {}).get(L.QUARANTINE) != "true":
        return None
    sel = (rule.get("spec") or {}).get("deviceSelector") or {}
    taint = (rule.get("spec") or {}).get("taint") or {}
    return Quarantine(node=str(sel.get("pool", "")), device=str(sel.get("device", "")),
                      reason=(meta.get("annotations") or {}).get(L.QUARANTINE_REASON, ""),
                      effect=str(taint.get("effect", "")), since=str(taint.get("timeAdded", "")),
                      rule=str(meta.get("name", "")), value=str(taint.get("value", "")))


def active(rules: list[dict[str, Any]] | None) -> list[Quarantine]:
    """Every quarantine among ``rules``, by node and device."""
    out = [q for q in (from_rule(r) for r in rules or []) if q is not None]
    return sorted(out, key=lambda q: (q.node, q.device))


def _node_devices(slices: list[dict[str, Any]], node: str) -> list[str]:
    return sorted(d["name"] for s in slices
                  if s["spec"].get("driver") == DRA_DRIVER and s["spec"].get("pool", {}).get("name") == node
                  for d in s["spec"].get("devices") or [])


def holders(claims: list[dict[str, Any]], node: str, device: str) -> list[str]:
    """``namespace/claim`` of every allocated claim that holds the device."""
    out = []
    for c in claims:
        results = ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
        if any(r.get("driver") == DRA_DRIVER and r.get("pool") == node and r.get("device") == device
               for r in results):
            out.append(f"{c['metadata']['namespace']}/{c['metadata']['name']}")
    return sorted(out)


def quarantine(api: kube.Kube, minor: int, node: str, device: str, reason: str,
               effect: str = "NoExecute") -> tuple[Quarantine, list[str]]:
    """Create (or update) the rule; the quarantine and the claims that hold the device now.

    InputError (nothing written) when the reason is empty, the effect unknown, or the node's pool does
    not publish the device.
    """
    if not reason.strip():
        raise InputError("--reason is required: say why the GPU is quarantined (e.g. \"XID 79: fallen off the bus\")")
    if effect not in EFFECTS:
        raise InputError(f"--effect {effect!r}: use one of {', '.join(EFFECTS)}")
    path = rules_path(minor)
    devices = _node_devices(api.items(kube.RESOURCE_SLICES), node)
    if device not in devices:
        if not devices:
            raise InputError(f"node {node!r} publishes no devices of the DRA driver {DRA_DRIVER} (is it a DRA node, "
                             "and its kubelet plugin running?); only DRA devices can be quarantined one by one")
        raise InputError(f"node {node!r} publishes no DRA device {device!r}; its devices: {', '.join(devices)}")
    body = rule_object(minor, node, device, reason.strip(), effect)
    out = api.apply(f"{path}/{body['metadata']['name']}", body)
    q = from_rule(out or body)
    assert q is not None
    return q, holders(api.items(kube.RESOURCE_CLAIMS), node, device)


def lift(api: kube.Kube, minor: int, node: str, device: str) -> Quarantine:
    """Delete the rule; InputError when the device is not quarantined."""
    path = f"{rules_path(minor)}/{rule_name(node, device)}"
    rule = api.get(path)
    q = from_rule(rule) if rule else None
    if q is None:
        current = active(api.list(rules_path(minor)))
        listed = ", ".join(f"{x.node}/{x.device}" for x in current) or "none"
        raise InputError(f"{node}/{device} is not quarantined (quarantined now: {listed})")
    api.delete(path)
    return q
