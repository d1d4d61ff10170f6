"""DRA: can the pod's unallocated ResourceClaims be satisfied by a device nobody holds?

For every request of every claim the pod uses, the published devices (ResourceSlices) are filtered
by the request's DeviceClass selectors and the request's own selectors (evaluated as Kubernetes does,
:mod:`gpucluster.cel`; a selector whose evaluation fails blocks the request, as it fails the scheduler's
allocation), then by the allocation results of every claim in the
cluster. A request whose class matches no published device, or whose matching devices are all
allocated, blocks the pod; otherwise the nodes holding enough free devices are the candidates.

A device is not free either while a taint with effect ``NoSchedule`` or ``NoExecute`` that the request does
not tolerate is in force on it (KEP 5055, k8s.io/api v0.37.2 resource/v1 ``DeviceTaintEffect``; ``None`` is
informational): its slice's own taints (the DRA driver's health monitor taints a GPU after a fatal XID) and
those of the DeviceTaintRules that select it (``gpucluster quarantine``). The finding names which.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster import cel
from gpucluster import labels as L
from gpucluster.doctor.model import Finding, Obj, View
from gpucluster.doctor.objects import claim_names, name_of, tolerates
from gpucluster.upstream import DRA_DRIVER

FIX_NO_MATCH = ("ask for a DeviceClass that matches published devices (`kubectl get resourceslices`; "
                "`gpucluster verify` shows each class's matches under check deviceclass-matches), or relax the "
                "request's selectors; if the hardware should exist, add a DRA pool with it to the spec")


FIX_SELECTOR = ("fix the selector: test the device type and driver first, guard optional attributes with "
                "has(...) or .?name.orValue(...), compare like types (quantity(), semver()); `kubectl describe "
                "pod` shows the scheduler's CEL runtime error")


@dataclass
class DraResult:
    """Either a blocking finding, or the nodes that hold enough free matching devices (None: no claims)."""

    finding: Finding | None = None
    nodes: set[str] | None = None


def _devices(view: View) -> list[tuple[str, str, str, Obj]]:
    """(driver, pool, node, device) of every published device."""
    out = []
    for s in view.slices or []:
        spec = s.get("spec", {})
        for dev in spec.get("devices") or []:
            out.append((spec.get("driver", ""), spec.get("pool", {}).get("name", ""), spec.get("nodeName", ""), dev))
    return out


def _allocated(view: View) -> dict[tuple[str, str, str], str]:
    """(driver, pool, device) -> the claim holding it."""
    out = {}
    for c in view.claims or []:
        for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
            out[(r.get("driver", ""), r.get("pool", ""), r.get("device", ""))] = name_of(c)
    return out


#: Device taint effects that keep the scheduler from allocating a device to a claim that does not tolerate them.
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def device_taints(driver: str, pool: str, device: Obj, rules: list[Obj] | None) -> list[Obj]:
    """The taints in force on a device: its slice's own, then those of the DeviceTaintRules selecting it
    (an unset selector field matches every value)."""
    out = list(device.get("taints") or [])
    for rule in rules or []:
        spec = rule.get("spec") or {}
        sel = spec.get("deviceSelector") or {}
        wanted = (("driver", driver), ("pool", pool), ("device", device.get("name")))
        if all(sel.get(k) in (None, v) for k, v in wanted):
            out.append(dict(spec.get("taint") or {}, rule=(rule.get("metadata") or {}).get("name", "?")))
    return out


def _taint_text(node: str, device: Obj, taint: Obj) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    whose = f"DeviceTaintRule {taint['rule']}" if taint.get("rule") else (
        "the DRA driver's health monitor" if str(taint.get("key", "")).startswith(f"{DRA_DRIVER}/") else "its slice")
    return f"{node}/{device.get('name', '?')} tainted {taint.get('key')}{value}:{taint.get('effect')} ({whose})"


def _alternatives(request: Obj) -> list[Obj]:
    if "exactly" in request:
        return [request["exactly"]]
    return list(request.get("firstAvailable") or [])


def check(pod: Obj, view: View) -> DraResult:
    """The DRA verdict for ``pod`` (see the module docstring)."""
    if not pod.get("spec", {}).get("resourceClaims"):
        return DraResult()
    ns = pod["metadata"]["namespace"]
    claims = {name_of(c): c for c in view.claims or []}
    names = claim_names(pod)
    if not names or any(f"{ns}/{n}" not in claims for n in names):
        missing = [n for n in names if f"{ns}/{n}" not in claims] or ["(generated from a template)"]
        return DraResult(Finding("create-refused", f"the pod's ResourceClaim {', '.join(missing)} does not exist yet",
                                 "check the pod's resourceClaims (template name, claim name) and the namespace's "
                                 "events for FailedResourceClaimCreation"))
    classes = {d["metadata"]["name"]: d for d in view.device_classes or []}
    devices = _devices(view)
    held = _allocated(view)
    nodes: set[str] | None = None
    for claim_name in names:
        claim = claims[f"{ns}/{claim_name}"]
        if (claim.get("status") or {}).get("allocation"):
            continue  # already allocated: DRA does not block this claim
        for req in (claim.get("spec", {}).get("devices") or {}).get("requests") or []:
            ok, finding = _request(claim_name, req, classes, devices, held, view.nodes, view.taint_rules)
            if finding is not None:
                return DraResult(finding)
            if ok is None:  # a selector outside the CEL subset: no opinion about this request
                continue
            nodes = ok if nodes is None else nodes & ok
    if nodes is not None and not nodes:
        return DraResult(Finding("dra-no-free-device",
                                 "the pod's claims can each be satisfied, but on no common node",
                                 "ask for devices that one node holds together"))
    return DraResult(nodes=nodes)


def _request(claim: str, req: Obj, classes: dict[str, Obj], devices: list[tuple[str, str, str, Obj]],
             held: dict[tuple[str, str, str], str], nodes: list[Obj],
             rules: list[Obj] | None) -> tuple[set[str] | None, Finding | None]:
    """Nodes with enough free devices for one request (any alternative), or the finding that blocks it."""
    ok: set[str] = set()
    reasons: list[str] = []
    holders: set[str] = set()
    tainted: list[str] = []
    for alt in _alternatives(req):
        cls_name = alt.get("deviceClassName", "")
        cls = classes.get(cls_name)
        if cls is None:
            reasons.append(f"DeviceClass {cls_name} does not exist")
            continue
        exprs = [s["cel"]["expression"] for s in (cls.get("spec", {}).get("selectors") or []) + (
            alt.get("selectors") or []) if "cel" in s]
        try:
            programs = [cel.compile_expr(e) for e in exprs]
        except cel.Unsupported:
            return None, None
        except cel.CompileError as err:
            return ok, Finding("dra-selector-error", f"request {req.get('name', '?')} of claim {claim}: a selector of "
                               f"DeviceClass {cls_name} or of the request does not compile ({err}); the scheduler "
                               "fails its allocation", FIX_SELECTOR)
        outcomes = [(drv, pool, node, d, cel.evaluate_all(programs, drv, d)) for drv, pool, node, d in devices]
        broken = [(d, o.error) for _, _, _, d, o in outcomes if o.error]
        if broken:
            d, error = broken[0]
            return ok, Finding("dra-selector-error", f"request {req.get('name', '?')} of claim {claim}: evaluating "
                               f"the selectors of DeviceClass {cls_name} fails on device {d.get('name', '?')} "
                               f"({error}); the scheduler fails the allocation when its search reaches such a "
                               f"device ({len(broken)} published devices)", FIX_SELECTOR)
        matching = [(drv, pool, node, d) for drv, pool, node, d, o in outcomes if o.matched]
        free: dict[str, int] = {}
        tainted_here = 0
        for drv, pool, node, d in matching:
            holder = held.get((drv, pool, d.get("name", "")))
            blocking = [t for t in device_taints(drv, pool, d, rules) if t.get("effect") in BLOCKING_EFFECTS
                        and not tolerates(alt.get("tolerations") or [], t)]
            if holder:
                holders.add(holder)
            elif blocking:
                tainted_here += 1
                tainted.extend(_taint_text(node, d, t) for t in blocking)
            else:
                free[node] = free.get(node, 0) + 1
        need = 1 if alt.get("allocationMode") == "All" else int(alt.get("count") or 1)
        ok |= {n for n, k in free.items() if k >= need}
        if not matching:
            reasons.append(f"DeviceClass {cls_name} matches none of the {len(devices)} published devices")
        elif not free and tainted_here:
            reasons.append(f"of the {len(matching)} devices DeviceClass {cls_name} matches, {tainted_here} carry a "
                           f"taint the request does not tolerate and the others are allocated")
        elif not free:
            reasons.append(f"all {len(matching)} devices DeviceClass {cls_name} matches are allocated")
        elif not ok:
            reasons.append(f"DeviceClass {cls_name}: no node has {need} free matching devices "
                           f"(most on one node: {max(free.values())})")
    if ok:
        return ok, None
    where = f"request {req.get('name', '?')} of claim {claim}"
    evidence = tuple(sorted(set(tainted))[:8]) + tuple(f"held by claim {h}" for h in sorted(holders)[:8])
    if tainted:
        fix = FIX_TAINTED
    elif holders:
        fix = ("wait until those claims are released (their pods end), or ask for fewer devices; the claims "
               "holding them are listed below")
    else:
        fix = FIX_NO_MATCH
        stale = stale_mig_layouts(nodes, devices)
        if stale:
            fix = FIX_STALE_LAYOUT
            evidence += tuple(stale[:8])
    return ok, Finding("dra-no-free-device", f"{where}: {'; '.join(reasons)}", fix, evidence)


FIX_TAINTED = ("tainted devices are out of service (below): a taint of the DRA driver's health monitor "
               "(gpu.nvidia.com/xid: a fatal XID) stays until the GPU is repaired and the driver's kubelet plugin "
               "pod on that node restarts (docs/runbooks.md); a DeviceTaintRule of `gpucluster quarantine` until "
               "`gpucluster quarantine NODE DEVICE --lift`; `gpucluster quarantine --list` shows both. Or wait for "
               "the claims that hold the others")


FIX_STALE_LAYOUT = ("a DRA node publishes another MIG layout than its GPUs have (below): the DRA kubelet plugin "
                    "enumerates MIG devices once, at start (dra-driver-nvidia-gpu v0.4.1 device_state.go:96); "
                    "delete its pod on that node so a new one reads the layout, and check that the release's "
                    "kubeletPlugin.affinity is gpucluster's (it restarts the plugin with the MIG manager's pause; "
                    "docs/dra-migration.md)")


def stale_mig_layouts(nodes: list[Obj], devices: list[tuple[str, str, str, Obj]]) -> list[str]:
    """DRA nodes whose published MIG devices differ from the MIG devices GFD labels there (its
    ``nvidia.com/mig-<profile>.count``, read after every MIG change): a plugin still on an old layout."""
    published: dict[str, dict[str, int]] = {}
    for drv, _pool, where, d in devices:
        # the driver's own attributes, unqualified or qualified by its domain (both name the same attribute)
        attrs = {k.removeprefix(f"{drv}/"): v for k, v in (d.get("attributes") or {}).items()}
        profile = (attrs.get("profile") or {}).get("string")
        if drv == DRA_DRIVER and profile and "uuid" in attrs:  # static MIG (a dynamic partition has no uuid)
            counts = published.setdefault(where, {})
            counts[profile] = counts.get(profile, 0) + 1
    out = []
    for node in nodes:
        name, labels = node["metadata"]["name"], node["metadata"].get("labels") or {}
        if labels.get(L.MIG_CONFIG_STATE) != "success" or labels.get(L.DRA) != "true":
            continue
        gfd = {k[len("nvidia.com/mig-"):-len(".count")]: int(v) for k, v in labels.items()
               if k.startswith("nvidia.com/mig-") and k.endswith(".count") and v.isdigit() and int(v)}
        have = published.get(name, {})
        if gfd and have and gfd != have:
            out.append(f"{name}: GFD labels MIG devices {dict(sorted(gfd.items()))}, the DRA slice publishes "
                       f"{dict(sorted(have.items()))}")
    return out
