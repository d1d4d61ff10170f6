"""Specs that cannot ask for the impossible: DeviceClasses, claim templates and quotas against the devices
the spec's DRA pools will publish.

The devices are the expectation side's (:func:`gpucluster.devices.dra_devices`, catalog facts), written
as ResourceSlice entries with the attributes the NVIDIA DRA driver publishes; every selector is the very
CEL expression the cluster gets (:mod:`gpucluster.spec.selectors`), evaluated with :mod:`gpucluster.cel`.
From that, :func:`problems` finds:

- a DeviceClass that matches no device (error; a warning when no pool uses DRA yet), naming the nearest
  devices and what they report (an "80Gi" class next to H100s that report 79.6Gi);
- a DeviceClass whose selector Kubernetes cannot evaluate: it does not compile, or its evaluation fails on
  a device (a missing attribute, a wrong type), which fails the allocation of a claim that reaches it
  (error);
- a claim template none of whose alternatives one node can satisfy (DRA allocates a claim on one node);
- a claim template with ``matchAttribute: pcieRoot`` none of whose alternatives fits under one PCIe root of
  one node, by the platform layouts the catalog cites (error; a warning where a pool's layout is not cited);
- a tenant whose quota for a class exceeds what the whole cluster could ever allocate of it (warning).

Under dynamic MIG the devices of one GPU overlap (its partitions and the whole GPU share its counters),
so "how many at once" is the largest set that fits one GPU (catalog profile limits, compute and memory
slices, placements), not the number published.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from functools import cache

from gpucluster import catalog, cel, devices
from gpucluster.catalog import GpuModel
from gpucluster.devices import Device
from gpucluster.errors import Problem
from gpucluster.quantity import parse_quantity
from gpucluster.spec import mig as miglib
from gpucluster.spec.model import ClaimAlternative, ClusterSpec, NodePool, SharingMode
from gpucluster.spec.selectors import chart_class_cel, device_class_cel, extended_class_cel
from gpucluster.upstream import DRA_BRAND, DRA_CHART_DEVICE_CLASSES, DRA_DRIVER, DRA_EXTENDED_CLASS

GIB = Decimal(2**30)


@dataclass(frozen=True)
class PoolDevices:
    """What one node of a DRA pool publishes."""

    pool: str
    hosts: int
    model: GpuModel
    dynamic: bool
    devices: tuple[tuple[Device, dict], ...]  # (expected device, its ResourceSlice entry)
    platform: str | None = None  # the pool's gpu.platform (its cited PCIe layout)


#: What validation knows each device will report; a selector on anything else (uuid, pciBusID, the CUDA
#: driver version, ...) cannot be predicted from the spec and is reported as not checked.
KNOWN_ATTRIBUTES = frozenset({"type", "productName", "architecture", "cudaComputeCapability", "profile", "brand",
                              "driverVersion"})
KNOWN_CAPACITIES = frozenset({"memory"})


def _semver(version: str) -> str:
    parts = [str(int(p)) for p in re.findall(r"\d+", version)][:3]
    return ".".join(parts + ["0"] * (3 - len(parts)))


def _entry(spec: ClusterSpec, model: GpuModel, d: Device) -> dict:
    attrs = {"type": {"string": d.type}, "productName": {"string": d.product_name},
             "architecture": {"string": model.architecture}, "brand": {"string": DRA_BRAND},
             "cudaComputeCapability": {"version": _semver(model.compute_capability)},
             "driverVersion": {"version": _semver(spec.gpu_operator.driver.version)}}
    if d.profile:
        attrs["profile"] = {"string": d.profile}
    return {"name": d.name, "attributes": attrs, "capacity": {"memory": {"value": str(d.memory_bytes)}}}


_REFERENCE = re.compile(r"device\.(attributes|capacity)\[\s*'[^']*'\s*\]\s*\.\??\s*(\w+)"
                        r"|device\.(attributes|capacity)\[\s*'[^']*'\s*\]\s*\[\s*'([^']*)'\s*\]")
_MISSING_KEY = re.compile(r"no such key: (\w+)")


def unknown_terms(program: cel.Program) -> list[str]:
    """Attributes or capacities the selector names that validation cannot predict (see
    :data:`KNOWN_ATTRIBUTES`), as ``attribute uuid`` / ``capacity bandwidth``."""
    out = []
    for m in _REFERENCE.finditer(program.expression):
        kind, name = (m[1], m[2]) if m[1] else (m[3], m[4])
        known = KNOWN_ATTRIBUTES if kind == "attributes" else KNOWN_CAPACITIES
        label = f"{'attribute' if kind == 'attributes' else 'capacity'} {name}"
        if name not in known and label not in out:
            out.append(label)
    return out


def failures(pools: list[PoolDevices], program: cel.Program) -> list[str]:
    """Where Kubernetes' evaluation of the selector fails on a device the pools publish (one line per
    distinct failure, naming the device)."""
    seen: dict[str, str] = {}
    for pd in pools:
        for d, entry in pd.devices:
            outcome = cel.evaluate(program, DRA_DRIVER, entry)
            if outcome.error and outcome.error not in seen:
                seen[outcome.error] = f"on {d.product_name} {d.type} devices of pool {pd.pool}: {outcome.error}"
    return list(seen.values())


def unpredictable_failure(failure: str) -> bool:
    """A missing key that validation's devices lack but real devices publish (uuid, pciBusID, ...)."""
    m = _MISSING_KEY.search(failure)
    return m is not None and m[1] not in KNOWN_ATTRIBUTES | KNOWN_CAPACITIES


def published(spec: ClusterSpec) -> list[PoolDevices]:
    """Per DRA pool of a validated spec: the devices one of its nodes publishes."""
    out = []
    for pool in spec.gpu_pools:
        if not (pool.uses_dra and pool.gpu and pool.gpu.model in catalog.catalog()):
            continue
        model = catalog.get(pool.gpu.model)
        dynamic = pool.sharing.mode is SharingMode.dynamic_mig and model.mig is not None
        layout = miglib.pool_layout(pool) if pool.sharing.mode is SharingMode.mig else None
        devs = devices.dra_devices(model, pool.gpu.count, layout, dynamic=dynamic, platform=pool.gpu.platform)
        out.append(PoolDevices(pool.name, len(pool.hosts), model, dynamic,
                               tuple((d, _entry(spec, model, d)) for d in devs), pool.gpu.platform))
    return out


def class_expressions(spec: ClusterSpec) -> dict[str, str]:
    """Every DeviceClass a claim may name, with its CEL: the spec's, the chart's and ours."""
    out = {name: chart_class_cel(name) for name in DRA_CHART_DEVICE_CLASSES}
    if any(p.uses_dra for p in spec.gpu_pools):
        out[DRA_EXTENDED_CLASS] = extended_class_cel(spec)
    out.update({dc.name: device_class_cel(dc) for dc in spec.dra.device_classes})
    return out


@cache
def _mig_max(model_key: str, profiles: tuple[str, ...]) -> int:
    """The most instances of ``profiles`` (any mix) that fit one GPU of the model together."""
    model = catalog.get(model_key)
    assert model.mig is not None
    ranges = [range(model.mig.profiles[p].max + 1) for p in profiles]
    best = 0
    for counts in itertools.product(*ranges):
        if sum(counts) <= best:
            continue
        try:
            miglib.check_fits(model, dict(zip(profiles, counts, strict=True)))
        except miglib.LayoutError:
            continue
        best = sum(counts)
    return best


def at_once(pd: PoolDevices, program: cel.Program) -> int:
    """How many devices matching ``program`` one node of the pool can have allocated at the same time."""
    hits = [d for d, entry in pd.devices if cel.evaluate(program, DRA_DRIVER, entry).matched]
    if not pd.dynamic:
        return len(hits)
    total = 0
    for gpu in sorted({d.gpu for d in hits}):
        mine = [d for d in hits if d.gpu == gpu]
        whole = any(d.type == "gpu" for d in mine)
        profiles = tuple(sorted({d.profile for d in mine if d.profile}))
        total += max(int(whole), _mig_max(pd.model.key, profiles) if profiles else 0)
    return total


def _gi(value: Decimal) -> str:
    return f"{(value / GIB).quantize(Decimal('0.1'))}Gi"


def _why(term: cel.Term, entry: dict) -> str:
    """What a device reports for a term it fails, in the words of the selector."""
    g = term.args
    if term.kind == "cap_ge":
        have = cel.capacity(entry, g[0], g[1])
        asked = cel.capacity({"capacity": {"x": {"value": g[2]}}}, "", "x")
        if have is None or asked is None:
            return f"no {g[1]} capacity"
        return f"{g[1]} is {_gi(have)} ({have} bytes), below {g[2]} ({_gi(asked)})"
    if term.kind in ("attr_eq", "attr_in", "attr_contains", "semver_ge"):
        have = cel.attribute(entry, g[0], g[1])
        want = {"attr_eq": f"not {g[2]!r}", "attr_in": f"not one of {list(g[2:])}",
                "attr_contains": f"without {g[2]!r}", "semver_ge": f"below {g[2]}"}[term.kind]
        return f"{g[1]} is {have!r}, {want}" if have is not None else f"no {g[1]} attribute"
    if term.kind == "false":
        return "the selector is `false`"
    return f"fails {term.text}"


def nearest(pools: list[PoolDevices], program: cel.Program, limit: int = 3) -> list[str]:
    """The devices that fail the fewest terms, each with what it reports for those terms."""
    seen: dict[tuple[str, str, str | None], tuple[int, str]] = {}
    for pd in pools:
        for d, entry in pd.devices:
            failed = cel.failed_terms(program, DRA_DRIVER, entry)
            key = (pd.pool, d.type, d.profile)
            if not failed or key in seen:
                continue
            what = d.product_name + (f" {d.profile} MIG device" if d.profile else
                                     " (whole GPU)" if pd.dynamic else "")
            seen[key] = (len(failed), f"{what} of pool {pd.pool}: {'; '.join(_why(t, entry) for t in failed)}")
    ranked = sorted(seen.values())
    best = ranked[0][0] if ranked else 0
    return [text for n, text in ranked if n == best][:limit]


def _memory_hint(program: cel.Program, pools: list[PoolDevices]) -> str:
    """For a memory floor just above what a device reports: the decimal value that includes it."""
    for term in program.terms:
        if term.kind != "cap_ge" or term.args[1] != "memory":
            continue
        asked = cel.capacity({"capacity": {"x": {"value": term.args[2]}}}, "", "x") or Decimal(0)
        below = [have for pd in pools for _, e in pd.devices
                 if (have := cel.capacity(e, DRA_DRIVER, "memory")) is not None and have < asked]
        if below:
            closest = max(below)
            m = re.fullmatch(r"(\d+)([KMGT])i", term.args[2])
            decimal = f"{m[1]}{m[2]}" if m else ""
            fits = decimal and Decimal(parse_quantity(decimal)) <= closest
            value = decimal if fits else f"{int(closest // 10**9)}G"
            return (f"the closest device reports {_gi(closest)}: minMemory: {value} includes it (vendors count "
                    "GB in decimal units)")
    return ""


def problems(spec: ClusterSpec) -> list[Problem]:
    """Every class, template and quota the spec's DRA devices cannot satisfy (see the module docstring)."""
    if not spec.dra.enabled:
        return []
    pools = published(spec)
    out: list[Problem] = []
    exprs = class_expressions(spec)
    programs: dict[str, cel.Program | None] = {}
    why: dict[str, str] = {}
    broken: dict[str, str] = {}  # the class's selector fails in Kubernetes: the reason
    for name, expr in exprs.items():
        programs[name] = None
        try:
            program = cel.compile_expr(expr)
        except cel.Unsupported as err:
            why[name] = f"extra CEL outside what gpucluster evaluates ({err})"
            continue
        except cel.CompileError as err:
            broken[name] = f"its selector does not compile in Kubernetes' DRA environment: {err}"
            continue
        failed = failures(pools, program)
        unknown = unknown_terms(program)
        if unknown or any(unpredictable_failure(f) for f in failed):
            why[name] = f"it tests what the spec cannot predict ({(unknown or failed)[0]})"
        elif failed:
            broken[name] = (f"evaluating its selector fails {failed[0]}; the scheduler fails the allocation of "
                            "every claim whose search reaches such a device")
        else:
            programs[name] = program
    for i, dc in enumerate(spec.dra.device_classes):
        path = f"dra.deviceClasses[{i}]"
        checked = programs[dc.name]
        if dc.name in broken:
            out.append(Problem(f"{path}.selector", f"DeviceClass {dc.name!r}: {broken[dc.name]}",
                               "test the device type first, guard optional attributes with has(...) or "
                               "device.attributes[...].?name.orValue(...), and compare like types"))
            continue
        if checked is None:
            out.append(Problem(f"{path}.selector.cel", f"DeviceClass {dc.name!r} is not checked against the pools' "
                               f"devices: {why[dc.name]}", "verify checks it against the published devices "
                               "(deviceclass-matches)", "warning"))
            continue
        if any(at_once(pd, checked) for pd in pools):
            continue
        if not pools:
            out.append(Problem(path, f"DeviceClass {dc.name!r} matches no device: no node pool uses DRA",
                               "set dra: true on the pools whose GPUs it should select", "warning"))
            continue
        near = nearest(pools, checked)
        detail = f"; nearest: {' | '.join(near)}" if near else ""
        out.append(Problem(path, f"DeviceClass {dc.name!r} matches none of the devices the DRA pools publish"
                           f"{detail}", _memory_hint(checked, pools) or "loosen the selector, or add a pool "
                           "whose GPUs it selects"))
    out += _templates(spec, pools, programs)
    if pools:
        out += _root_templates(spec, pools, programs)
    out += _quotas(spec, pools, programs)
    return out


def _best_node(pools: list[PoolDevices], program: cel.Program) -> tuple[int, str]:
    """The most matching devices one node can hold at once, and the pool that has it."""
    return max(((at_once(pd, program), pd.pool) for pd in pools), default=(0, ""))


def at_once_one_root(pd: PoolDevices, program: cel.Program) -> int | None:
    """How many devices matching ``program`` one node of the pool can have allocated at once under ONE PCIe
    root (``resource.kubernetes.io/pcieRoot``, which MIG devices take from their GPU); None when the pool's
    model has no cited platform layout (data/platforms.yaml), so which GPUs share a root is not known."""
    hits = [d for d, entry in pd.devices if cel.evaluate(program, DRA_DRIVER, entry).matched]
    if not hits:
        return 0
    if any(d.pcie_root is None for d in hits):
        return None
    return max(at_once(PoolDevices(pd.pool, pd.hosts, pd.model, pd.dynamic,
                                   tuple((d, e) for d, e in pd.devices if d.pcie_root == root), pd.platform), program)
               for root in sorted({d.pcie_root for d in hits if d.pcie_root}))


def _layout_words(pd: PoolDevices) -> str:
    platform = catalog.platform(pd.platform)
    if platform is None:
        return f"no platform given (nodePools[].gpu.platform), so no PCIe layout for {pd.model.key}"
    roots = {d.pcie_root for d, _ in pd.devices if d.pcie_root}
    gpus = {d.gpu for d, _ in pd.devices}
    shape = ("every GPU under its own PCIe root" if len(roots) == len(gpus)
             else f"{len(gpus)} GPUs under {len(roots)} roots")
    return f"{platform.description.split(' (')[0]} layout: {shape}"


def _root_templates(spec: ClusterSpec, pools: list[PoolDevices],
                    programs: dict[str, cel.Program | None]) -> Iterable[Problem]:
    """Templates with ``matchAttribute``: numaNode is refused (validate/dra.py); pcieRoot must fit under one
    root of one node of some pool whose layout is cited."""
    for i, t in enumerate(spec.dra.claim_templates):
        if t.match_attribute != "pcieRoot":
            continue
        path = f"dra.claimTemplates[{i}].matchAttribute"
        fits, unknown, parts = False, set(), []
        for alt in t.alternatives:
            program = programs.get(alt.device_class)
            if program is None:
                fits = True  # the class is not checked (reported elsewhere): neither is the constraint
                continue
            if _best_node(pools, program)[0] < alt.count:
                continue  # too many for one node at all: the count's own error says so
            best, where = 0, ""
            for pd in pools:
                n = at_once_one_root(pd, program)
                if n is None:
                    unknown.add(pd.pool)
                elif n > best or not where:
                    best, where = n, pd.pool
            if best >= alt.count:
                fits = True
            elif where:
                near = next((pd for pd in pools if pd.pool == where), None)
                parts.append(f"{alt.count}x {alt.device_class!r} (at most {best} under one root"
                             + (f", pool {where}: {_layout_words(near)})" if near and at_once(near, program) else ")"))
        if fits or not (parts or unknown):
            continue
        if unknown:
            known = f" ({' or '.join(parts)} where the layout is cited)" if parts else ""
            yield Problem(path, f"claim template {t.name!r} asks for its devices under one PCIe root{known}; "
                          f"pool(s) {', '.join(sorted(unknown))} may hold them, but name no platform with a cited "
                          "PCIe layout (nodePools[].gpu.platform, `gpucluster catalog`): not checked there",
                          "set the pools' gpu.platform where the catalog has it; without one the GPU simulator "
                          "publishes no pcieRoot, so the local world never allocates this template, while a real "
                          "node does if its GPUs share a root", "warning")
            continue
        yield Problem(path, f"claim template {t.name!r} asks for {' or '.join(parts)} with matchAttribute: "
                      "pcieRoot: no node of any pool has that many under one PCIe root, so the scheduler never "
                      "allocates it", "drop matchAttribute, or lower the count to what one root holds (MIG "
                      "devices of one GPU share its root)")


def _templates(spec: ClusterSpec, pools: list[PoolDevices],
               programs: dict[str, cel.Program | None]) -> Iterable[Problem]:
    if not pools:
        return  # no DRA pool yet: the classes' warnings say so
    for i, t in enumerate(spec.dra.claim_templates):
        alternatives = t.alternatives
        verdicts: list[tuple[bool, int, str, int, ClaimAlternative] | None] = []
        for j, alt in enumerate(alternatives):
            program = programs.get(alt.device_class)
            if program is None:  # unknown class (reported elsewhere) or not evaluable
                verdicts.append(None)
                continue
            best, where = _best_node(pools, program)
            verdicts.append((best >= alt.count, best, where, j, alt))
        checked = [v for v in verdicts if v is not None]
        if not checked or len(checked) < len(verdicts) or any(v[0] for v in checked):
            for ok, best, _where, j, alt in checked:
                if not ok and len(alternatives) > 1:
                    yield Problem(f"dra.claimTemplates[{i}].firstAvailable[{j}]",
                                  f"alternative {j + 1} ({alt.count}x {alt.device_class!r}) can never be allocated: "
                                  f"one node holds at most {best} such devices", "it is skipped; drop it or lower "
                                  "its count", "warning")
            continue
        parts = [f"{alt.count}x {alt.device_class!r} (at most {best} on one node"
                 + (f", pool {where})" if where and best else ")") for _, best, where, _, alt in checked]
        path = f"dra.claimTemplates[{i}]" + (".count" if len(alternatives) == 1 else ".firstAvailable")
        yield Problem(path, f"claim template {t.name!r} asks for {' or '.join(parts)}: no single node can satisfy "
                      "it (DRA allocates one claim on one node)",
                      "lower the count, split the claim, or add alternatives with firstAvailable")


def _quotas(spec: ClusterSpec, pools: list[PoolDevices],
            programs: dict[str, cel.Program | None]) -> Iterable[Problem]:
    for i, t in enumerate(spec.tenants):
        for cls, n in t.quota.device_classes.items():
            program = programs.get(cls)
            if program is None or not pools:
                continue
            total = sum(at_once(pd, program) * pd.hosts for pd in pools)
            if n > total:
                yield Problem(f"tenants[{i}].quota.deviceClasses.{cls}",
                              f"tenant {t.name!r} may claim {n} {cls!r} devices, but the cluster can never "
                              f"allocate more than {total} of them at once", f"lower it to {total}", "warning")


def pool_publishes_whole_gpus(pool: NodePool) -> bool:
    """Whether a DRA pool's slices carry whole GPUs (type gpu): all but static MIG pools."""
    return pool.uses_dra and pool.sharing.mode is not SharingMode.mig
