"""DRA in use: which physical devices each tenant's claims hold, which class serves plain
``nvidia.com/gpu``, and which GPUs are quarantined.

- ``dra-claims`` (one row per namespace holding DRA devices): the devices of every allocated claim, read
  from ``status.allocation.devices.results`` (the scheduler writes it; NVIDIA's DRA driver 0.4.1 writes
  no ``status.devices``, fact claim-status-devices-not-written, so that field is read when a driver
  fills it and must then name allocated devices only). Fails when a claim holds a device no slice
  publishes any more, or a tenant holds more devices of a class than its quota allows.
- ``dra-extended-resource``: the DeviceClass the scheduler maps ``nvidia.com/gpu`` to (the newest that
  names it, ties to the lower name) must be gpucluster's, or plain GPU pods may land on every DRA pool.
- ``dra-quarantine`` (one row per quarantined GPU): the reason and effect; fails when the rule names a
  device no slice publishes, or a claim without a toleration still holds a ``NoExecute`` one.

:func:`held` is also what ``gpucluster cost`` charges for DRA pools.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gpucluster import labels as L
from gpucluster import quarantine
from gpucluster.render import dra_driver
from gpucluster.render.tenants import device_quota
from gpucluster.spec.model import ClusterSpec
from gpucluster.upstream import DRA_DRIVER, DRA_EXTENDED_CLASS, DRA_EXTENDED_RESOURCE
from gpucluster.verify.model import Result, fail, ok, skip
from gpucluster.verify.snapshot import Snapshot


@dataclass(frozen=True)
class Held:
    """One device an allocated claim holds."""

    namespace: str
    claim: str
    request: str  # "<request>" or "<request>/<firstAvailable subrequest>"
    device_class: str
    node: str  # the pool (the NVIDIA driver's pools are named after their node)
    device: str
    product: str  # productName of the published device ("" when not published)
    profile: str  # a MIG device's profile ("" for a whole GPU)
    uuid: str
    since: str  # allocationTimestamp, else the claim's creationTimestamp
    extended: bool  # made by the scheduler for a plain extended-resource request


def _published(snap: Snapshot) -> dict[tuple[str, str], dict]:
    return {(s["spec"].get("pool", {}).get("name", ""), d["name"]): d for s in snap.resource_slices or []
            if s.get("spec", {}).get("driver") == DRA_DRIVER for d in s["spec"].get("devices") or []}


def _attr(dev: dict, name: str) -> str:
    value = (dev.get("attributes") or {}).get(name) or {}
    return str(next(iter(value.values()), ""))


def _request_classes(claim: dict) -> dict[str, str]:
    """Request (and ``request/subrequest``) name → DeviceClass, from the claim's spec."""
    out = {}
    for r in (claim.get("spec") or {}).get("devices", {}).get("requests") or []:
        if r.get("exactly"):
            out[r["name"]] = r["exactly"].get("deviceClassName", "")
        for sub in r.get("firstAvailable") or []:
            out[f"{r['name']}/{sub['name']}"] = sub.get("deviceClassName", "")
    return out


def held(snap: Snapshot) -> list[Held]:
    """Every DRA GPU device allocated claims hold now."""
    published = _published(snap)
    out = []
    for c in snap.resource_claims or []:
        meta, status = c["metadata"], c.get("status") or {}
        alloc = status.get("allocation") or {}
        classes = _request_classes(c)
        since = alloc.get("allocationTimestamp") or meta.get("creationTimestamp", "")
        extended = (meta.get("annotations") or {}).get("resource.kubernetes.io/extended-resource-claim") == "true"
        for r in (alloc.get("devices") or {}).get("results") or []:
            if r.get("driver") != DRA_DRIVER:
                continue
            dev = published.get((r.get("pool", ""), r.get("device", "")), {})
            out.append(Held(meta["namespace"], meta["name"], r.get("request", ""),
                            classes.get(r.get("request", ""), ""), r.get("pool", ""), r.get("device", ""),
                            _attr(dev, "productName"), _attr(dev, "profile"),
                            _attr(dev, "uuid") or _attr(dev, "parentUUID"), since, extended))
    return sorted(out, key=lambda h: (h.namespace, h.claim, h.node, h.device))


def claim_checks(spec: ClusterSpec, snap: Snapshot) -> Iterator[Result]:
    """``dra-claims``: per namespace, the devices its claims hold (see the module docstring)."""
    if not spec.dra.enabled or not any(p.uses_dra for p in spec.gpu_pools):
        return
    if snap.resource_claims is None:
        yield skip("dra-claims", "resource.k8s.io/v1", "ResourceClaims are not served")
        return
    published = _published(snap)
    tenants = {t.ns: t for t in spec.tenants}
    by_ns: dict[str, list[Held]] = {}
    for h in held(snap):
        by_ns.setdefault(h.namespace, []).append(h)
    problems_by_ns: dict[str, list[str]] = {}
    for c in snap.resource_claims:
        allocated = {(r.get("driver"), r.get("pool"), r.get("device")) for r in
                     (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []}
        for d in (c.get("status") or {}).get("devices") or []:
            if (d.get("driver"), d.get("pool"), d.get("device")) not in allocated:
                problems_by_ns.setdefault(c["metadata"]["namespace"], []).append(
                    f"claim {c['metadata']['name']}: status.devices names {d.get('pool')}/{d.get('device')}, "
                    "which it was not allocated")
    for ns in sorted(set(by_ns) | set(problems_by_ns)):
        rows = by_ns.get(ns, [])
        t = tenants.get(ns)
        subject = f"tenants/{t.name}" if t else f"namespace/{ns}"
        problems = list(problems_by_ns.get(ns, []))
        problems += [f"claim {h.claim} holds {h.node}/{h.device}, which no ResourceSlice publishes"
                     for h in rows if (h.node, h.device) not in published]
        per_class: dict[str, int] = {}
        for h in rows:
            per_class[h.device_class] = per_class.get(h.device_class, 0) + 1
        limits = device_quota(spec, t) if t else {}
        if t:
            problems += [f"{n} {cls!r} devices held, above the quota of {limits.get(cls, 0)}"
                         for cls, n in sorted(per_class.items()) if n > limits.get(cls, 0)]
        listing = ", ".join(f"{h.node}/{h.device} ({h.product or '?'}; claim {h.claim}"
                            + (", for nvidia.com/gpu" if h.extended else "") + ")" for h in rows)
        expected = ("within quota: " + ", ".join(f"{c}<={limits.get(c, 0)}" for c in sorted(per_class))) if t \
            else "published devices"
        actual = f"{len(rows)} devices: {listing}" if rows else "no devices"
        if problems:
            yield fail("dra-claims", subject, expected, actual, "; ".join(problems[:5]))
        else:
            yield ok("dra-claims", subject, expected, actual)


def mapped_class(classes: list[dict], resource: str = DRA_EXTENDED_RESOURCE) -> dict | None:
    """The DeviceClass the scheduler maps ``resource`` to: the newest naming it, ties to the lower name
    (k8s.io/dynamic-resource-allocation v0.37.2 deviceclass/extendedresourcecache, fact
    extended-resource-class-newest-wins)."""
    named = [c for c in classes if (c.get("spec") or {}).get("extendedResourceName") == resource]
    if not named:
        return None
    newest = max(c["metadata"].get("creationTimestamp", "") for c in named)
    return min((c for c in named if c["metadata"].get("creationTimestamp", "") == newest),
               key=lambda c: c["metadata"]["name"])


def extended_checks(spec: ClusterSpec, snap: Snapshot) -> Iterator[Result]:
    """``dra-extended-resource``: gpucluster's class serves plain ``nvidia.com/gpu`` (module docstring)."""
    if not (spec.dra.enabled and dra_driver.enabled(spec)):
        return
    if snap.device_classes is None:
        yield skip("dra-extended-resource", f"extended-resource/{DRA_EXTENDED_RESOURCE}",
                   "DeviceClasses are not served (resource.k8s.io/v1)")
        return
    winner = mapped_class(snap.device_classes)
    pools = [p.name for p in spec.gpu_pools if p.uses_dra and p.extended_resource]
    expected = f"{DRA_EXTENDED_CLASS} (pools: {', '.join(pools) or 'none'})"
    subject = f"extended-resource/{DRA_EXTENDED_RESOURCE}"
    if winner is None:
        yield fail("dra-extended-resource", subject, expected, "no DeviceClass names it",
                   f"DeviceClass {DRA_EXTENDED_CLASS} is missing; run up again")
    elif winner["metadata"]["name"] != DRA_EXTENDED_CLASS:
        yield fail("dra-extended-resource", subject, expected, winner["metadata"]["name"],
                   f"{winner['metadata']['name']} is newer than {DRA_EXTENDED_CLASS}, so plain {DRA_EXTENDED_RESOURCE} "
                   f"pods may land on every DRA pool: delete {DRA_EXTENDED_CLASS} and run up again to recreate it")
    else:
        yield ok("dra-extended-resource", subject, expected, DRA_EXTENDED_CLASS)


def quarantine_checks(spec: ClusterSpec, snap: Snapshot) -> Iterator[Result]:
    """``dra-quarantine``: one row per quarantined GPU (module docstring)."""
    rules = quarantine.active(snap.device_taint_rules)
    if not rules:
        return
    published = _published(snap)
    for q in rules:
        subject = f"{q.node}/{q.device}"
        actual = f"quarantined ({q.effect}) since {q.since or '?'}: {q.reason}"
        holders = [] if q.effect != "NoExecute" else [
            f"{c['metadata']['namespace']}/{c['metadata']['name']}" for c in snap.resource_claims or []
            for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
            if (r.get("pool"), r.get("device")) == (q.node, q.device)
            and not survives(r.get("tolerations") or [], L.QUARANTINE, q.value)]
        if (q.node, q.device) not in published:
            yield fail("dra-quarantine", subject, "a published device", actual,
                       f"no ResourceSlice publishes {q.device} in pool {q.node}: lift it "
                       f"(`gpucluster quarantine {q.node} {q.device} --lift`)")
        elif holders:
            yield fail("dra-quarantine", subject, "no claim holds it without a NoExecute toleration", actual,
                       f"claim {', '.join(holders)} still holds it (eviction pending?)")
        else:
            yield ok("dra-quarantine", subject, "out of service, nothing holds it untolerated", actual)


def survives(tolerations: list[dict], key: str, value: str) -> bool:
    """Whether an allocated device's tolerations keep its pod from a NoExecute taint: the eviction
    controller honours only tolerations with ``effect: NoExecute`` and no tolerationSeconds (kubernetes
    v1.37.2 pkg/controller/devicetainteviction/device_taint_eviction.go:1237, fact
    device-taint-eviction-needs-noexecute-toleration); then the usual matching (an empty key with Exists
    matches every taint; Exists ignores the value, Equal compares it)."""
    for t in tolerations:
        if t.get("effect") != "NoExecute" or t.get("tolerationSeconds") is not None:
            continue
        exists = t.get("operator") == "Exists"
        if (not t.get("key") and exists) or (t.get("key") == key and (exists or t.get("value", "") == value)):
            return True
    return False
