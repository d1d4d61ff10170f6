"""Cluster checks: the live state in a :class:`Snapshot` against the spec's expected state.

Each function yields :class:`Result` rows for one check id. Check ids are stable (they appear in
JSON/JUnit output and in ``--checklist``) and each is proven to fail on its own fault by the
integration tests.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from gpucluster import cel, expected
from gpucluster import labels as L
from gpucluster.devices import Device
from gpucluster.expected import HostState
from gpucluster.quantity import parse_quantity
from gpucluster.render.monitoring import alert_rules
from gpucluster.spec.model import ClusterSpec
from gpucluster.upstream import DRA_DRIVER, DRA_EXTENDED_CLASS, MIG_DEVICE_NAME, counter_set_name
from gpucluster.verify import dra_claims, health
from gpucluster.verify.daemonsets import daemonset_row
from gpucluster.verify.isolation import enforcer_checks
from gpucluster.verify.kubelet import kubelet_checks
from gpucluster.verify.model import Result, compare, differences, fail, ok, skip
from gpucluster.verify.snapshot import Snapshot
from gpucluster.verify.tenancy import admission_checks, rbac_checks, security_checks, tenant_checks
from gpucluster.verify.topology import nvlink_checks, topology_checks

GPU_PREFIXES = ("nvidia.com/", "rdma/")


def _ready(node: dict) -> str:
    for c in node.get("status", {}).get("conditions", []):
        if c.get("type") == "Ready":
            return c.get("status", "Unknown")
    return "Unknown"


def _ext(resources: dict) -> dict[str, int]:
    """The GPU/RDMA extended resources of a node's capacity or allocatable, as integers."""
    return {k: int(parse_quantity(str(v))) for k, v in resources.items() if k.startswith(GPU_PREFIXES)}


def managed_taint_keys(states: dict[str, HostState]) -> set[str]:
    """Taint keys the spec manages: every key any host is expected to carry, and the GPU taint."""
    return {t.split(":")[0].split("=")[0] for s in states.values() for t in s.taints} | {"nvidia.com/gpu"}


#: The release whose node agents publish each kind of extended resource (device plugins).
RESOURCE_AGENTS = {"nvidia.com/": "gpu-operator", "rdma/": "network-operator"}
#: The release whose kubelet plugin publishes the DRA driver's ResourceSlices.
DRA_AGENT = "dra-driver"


def absent_agents(spec: ClusterSpec, *, charts_reachable: bool = True, simulated: bool = False) -> set[str]:
    """Releases not installed on purpose and with nothing standing in for their node agents.

    Where chart repositories cannot be reached, the releases from a repository are not installed; in
    the local world the GPU simulator publishes what their agents would, so none is absent there.
    """
    from gpucluster.render import releases

    if charts_reachable or simulated:
        return set()
    return {r.name for r in releases(spec) if r.repository.startswith(("http://", "https://", "oci://"))}


def _no_agents(want: dict[str, int], published: dict[str, int], absent: AbstractSet[str]) -> str:
    """Why a node's extended resources cannot be measured ("" when they can): nothing could publish them."""
    if published or not want:
        return ""
    needed = sorted({agent for key in want for prefix, agent in RESOURCE_AGENTS.items() if key.startswith(prefix)})
    if not needed or not set(needed) <= absent:
        return ""
    return (f"nothing publishes this node's devices: the release(s) {', '.join(needed)} whose device plugins "
            "would are not installed (chart repositories unreachable here)")


def node_checks(spec: ClusterSpec, snap: Snapshot, states: dict[str, HostState], *,
                absent: AbstractSet[str] = frozenset()) -> Iterator[Result]:
    """Per node: Ready, GPU/RDMA capacity and allocatable, labels and taints (GPU health: :mod:`.health`).

    ``absent`` (:func:`absent_agents`): releases not installed on purpose; a node whose expected
    devices only their agents would publish, and that publishes none, is not measured for them.
    """
    from gpucluster.render.nodes import node_config

    nodes = {n["metadata"]["name"]: n for n in snap.nodes}
    managed = managed_taint_keys(states)
    applied = {name: cfg["labels"] for name, cfg in node_config(spec).items()}
    for name, want in states.items():
        node = nodes.get(name)
        if node is None:
            yield fail("node-ready", name, "Ready node", "no such node", "the host never registered")
            for check in ("node-capacity", "node-allocatable", "node-labels", "node-taints"):
                yield skip(check, name, "node is missing (see node-ready)")
            continue
        yield compare("node-ready", name, "True", _ready(node), "node is not Ready")
        status = node.get("status", {})
        capacity, allocatable = _ext(status.get("capacity", {})), _ext(status.get("allocatable", {}))
        unmeasured = _no_agents(want.resources, capacity, absent)
        if unmeasured:
            yield skip("node-capacity", name, unmeasured)
            yield skip("node-allocatable", name, unmeasured)
        else:
            yield from _resource_checks(name, want.resources, capacity, allocatable)
        yield from _node_labels(name, node, want, applied.get(name, {}), absent)
        yield from _node_taints(name, node, want, managed)
    for name in sorted(set(nodes) - set(states)):
        yield fail("node-known", name, "a host of the spec", "not in the spec",
                   "a node the spec does not list: add it to hosts (and a pool), or remove it from the cluster")


def _resource_checks(name: str, want: dict[str, int], capacity: dict[str, int],
                     allocatable: dict[str, int]) -> Iterator[Result]:
    yield compare("node-capacity", name, want, capacity)
    withheld = {k: capacity[k] - allocatable.get(k, 0) for k in capacity if allocatable.get(k, 0) < capacity[k]}
    yield compare("node-allocatable", name, want, allocatable,
                  "; ".join(f"{n} {k} withheld (unhealthy devices?)" for k, n in sorted(withheld.items())))


def _node_labels(name: str, node: dict, want: HostState, applied: dict[str, str],
                 absent: AbstractSet[str]) -> Iterator[Result]:
    """The expected labels: those we apply (kubelet registration, node patches) and those node agents
    publish (GPU Feature Discovery, NFD, the network operator).

    Where the agents' releases are not installed on purpose and the node carries none of their labels,
    the labels we apply are still compared, and the agents' labels are a separate not-measured row
    (subject ``<node> (agent labels)``).
    """
    labels = node["metadata"].get("labels", {})
    expected_labels = want.labels
    agents = {k: v for k, v in want.labels.items() if k not in applied}
    if absent and agents and not set(agents) & set(labels):
        expected_labels = {k: v for k, v in want.labels.items() if k in applied}
        yield skip("node-labels", f"{name} (agent labels)",
                   f"the {len(agents)} labels node agents would publish (GPU Feature Discovery, NFD, the network "
                   f"operator) are not measured: the release(s) {', '.join(sorted(absent))} are not installed "
                   "(chart repositories unreachable here)")
    wrong = {k: labels.get(k, "(missing)") for k, v in expected_labels.items() if labels.get(k) != v}
    if wrong:
        yield fail("node-labels", name, {k: want.labels[k] for k in wrong}, wrong)
    else:
        yield ok("node-labels", name, f"{len(expected_labels)} labels", "all match")


def _node_taints(name: str, node: dict, want: HostState, managed: set[str]) -> Iterator[Result]:
    # Taints with a key the spec manages must be exactly the expected ones; others (the
    # node lifecycle's node.kubernetes.io/*, an operator's cordon) are not ours to judge.
    have = {f"{t['key']}={t.get('value', '')}:{t['effect']}" if t.get("value") else f"{t['key']}:{t['effect']}"
            for t in node.get("spec", {}).get("taints", []) or [] if t["key"] in managed}
    missing, extra = sorted(set(want.taints) - have), sorted(have - set(want.taints))
    if missing or extra:
        why = "; ".join(([f"missing {', '.join(missing)}"] if missing else [])
                        + ([f"unexpected {', '.join(extra)}"] if extra else []))
        yield fail("node-taints", name, sorted(want.taints) or "(none)", sorted(have) or "(none)", why)
    else:
        yield ok("node-taints", name, sorted(want.taints) or "(none)", sorted(have) or "(none)")


#: Why DRA rows are not measured where the DRA driver's release is absent and nothing publishes devices.
NO_DRA_AGENT = ("nothing publishes DRA devices: the release dra-driver, whose kubelet plugin would, is not "
                "installed (chart repositories unreachable here)")


def dra_checks(spec: ClusterSpec, snap: Snapshot, states: dict[str, HostState], *,
               absent: AbstractSet[str] = frozenset()) -> Iterator[Result]:
    dra_hosts = {n: s for n, s in states.items() if s.devices}
    if not dra_hosts and not spec.dra.device_classes and not snap.resource_slices:
        return
    if snap.resource_slices is None:
        yield fail("dra-slices", "resource.k8s.io/v1", "served", "not served", "the API server has no DRA v1 API")
        return
    by_node: dict[str, list[dict]] = {}
    counters: dict[str, list[dict]] = {}
    for rs in snap.resource_slices:
        s = rs.get("spec", {})
        if s.get("driver") == DRA_DRIVER and s.get("nodeName"):
            by_node.setdefault(s["nodeName"], []).extend(s.get("devices") or [])
            counters.setdefault(s["nodeName"], []).extend(s.get("sharedCounters") or [])
    for name, want in dra_hosts.items():
        got = by_node.get(name, [])
        if not got and not counters.get(name) and DRA_AGENT in absent:
            yield skip("dra-slices", name, NO_DRA_AGENT)
            continue
        problems = device_problems(want.devices, got)
        if want.counter_sets or counters.get(name):
            problems += counter_problems(want.counter_sets, counters.get(name, []))
        exp = f"{len(want.devices)} devices" + (f", {len(want.counter_sets)} counter sets" if want.counter_sets else "")
        act = f"{len(got)} devices" + (f", {len(counters.get(name, []))} counter sets" if want.counter_sets else "")
        if problems:
            yield fail("dra-slices", name, exp, act, "; ".join(problems[:5]) + _stale_layout_hint(spec, snap, name))
        else:
            yield ok("dra-slices", name, exp, act)
    for name in sorted(set(by_node) & set(states) - set(dra_hosts)):
        if by_node[name]:
            # the same GPUs twice: a claim and a device-plugin pod could both be handed one of them
            how = ("its pool serves GPUs through the device plugin" if states[name].gpu_count else "it has no GPU pool")
            yield fail("dra-slices", name, f"no DRA devices ({how})", f"{len(by_node[name])} devices",
                       f"the DRA driver publishes {', '.join(sorted(d.get('name', '?') for d in by_node[name])[:5])} "
                       "here: its kubelet plugin runs on a node outside the DRA pools (node selector or labels?)")
    yield from _device_class_checks(spec, snap, absent)


def _stale_layout_hint(spec: ClusterSpec, snap: Snapshot, name: str) -> str:
    """Why a static MIG DRA node whose MIG manager reports its layout applied may publish another one."""
    pool = spec.pools_by_host().get(name)
    if pool is None or not pool.uses_dra or pool.sharing.mode.value != "mig":
        return ""
    node = next((n for n in snap.nodes if n["metadata"]["name"] == name), None)
    if node is None or (node["metadata"].get("labels") or {}).get(L.MIG_CONFIG_STATE) != "success":
        return ""
    return (" (the MIG manager reports its layout applied; the DRA kubelet plugin enumerates MIG devices once, at "
            "start (dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/device_state.go:96), so a plugin started "
            "before the change still publishes the old layout: delete its pod on this node, and check that the "
            "release's kubeletPlugin.affinity is gpucluster's, which restarts it with the MIG manager's pause; "
            "docs/dra-migration.md)")


def _attrs(dev: dict) -> dict[str, object]:
    return {k.split("/")[-1]: next(iter(v.values())) for k, v in (dev.get("attributes") or {}).items()}


def _memory_slices(dev: dict, counter_set: str) -> list[int] | None:
    """The memory slices a partitionable device consumes from ``counter_set`` (None: it consumes none)."""
    for c in dev.get("consumesCounters") or []:
        if c.get("counterSet") == counter_set:
            return sorted(int(k.rsplit("-", 1)[1]) for k in c.get("counters") or {} if k.startswith("memory-slice-"))
    return None


def device_problems(want: list[Device], got: list[dict]) -> list[str]:
    """How a node's published devices differ from the expected ones.

    Whole GPUs are matched by name. Static MIG devices are matched by GPU and profile: each name must be
    the driver's ``gpu-<minor>-mig-<profile>-<id>-<start>`` with a start where the profile may be placed,
    the instances of one GPU must not overlap, and every GPU must carry the expected count per profile.
    Partitionable (dynamic MIG) devices are every placement once, each consuming exactly the memory
    slices of its placement from its GPU's counter set (the whole GPU: all of them).
    """
    problems: list[str] = []
    by_name = {d["name"]: d for d in got}
    seen: set[str] = set()

    def check(d: Device, dev: dict, start: int) -> None:
        attrs = _attrs(dev)
        # pciBusID/pcieRoot only where the catalog cites the platform's layout (data/platforms.yaml).
        for key, value in (("productName", d.product_name), ("type", d.type), ("profile", d.profile),
                           ("pciBusID", d.pci_bus_id), ("pcieRoot", d.pcie_root)):
            if value is not None and attrs.get(key) != value:
                problems.append(f"{dev['name']}.{key}={attrs.get(key)!r} (want {value!r})")
        mem = (dev.get("capacity") or {}).get("memory", {}).get("value")
        if mem is None or int(parse_quantity(str(mem))) != d.memory_bytes:
            problems.append(f"{dev['name']}.memory={mem} (want {d.memory_bytes})")
        if d.dynamic:
            want_slices = list(range(start, start + d.slices))
            have = _memory_slices(dev, counter_set_name(d.gpu))
            if have != want_slices:
                problems.append(f"{dev['name']} consumes memory slices {have} of {counter_set_name(d.gpu)} "
                                f"(want {want_slices})")

    for d in want:
        if d.type == "gpu":
            if d.name not in by_name:
                problems.append(f"missing {d.name}")
            else:
                seen.add(d.name)
                check(d, by_name[d.name], 0)
    mig_want: dict[str, list[Device]] = {}
    for d in want:
        if d.type == "mig":
            mig_want.setdefault(d.name, []).append(d)
    used: dict[int, set[int]] = {}
    for prefix, wanted in sorted(mig_want.items()):
        found = []
        for dev_name, dev in by_name.items():
            m = MIG_DEVICE_NAME.match(dev_name)
            if m and dev_name.rsplit("-", 2)[0] == prefix:
                found.append((int(m.group(4)), dev))
        d = wanted[0]
        if d.dynamic:
            starts = sorted(w.starts[0] for w in wanted)
            if sorted(start for start, _ in found) != starts:
                problems.append(f"{prefix}-*: placements {sorted(start for start, _ in found)} (want {starts})")
            for start, dev in found:
                seen.add(dev["name"])
                check(d, dev, start)
            continue
        if len(found) != len(wanted):
            problems.append(f"{prefix}-*: {len(found)} devices (want {len(wanted)})")
        for start, dev in found:
            seen.add(dev["name"])
            check(d, dev, start)
            span = set(range(start, start + d.slices))
            if start not in d.starts:
                problems.append(f"{dev['name']}: {d.profile} cannot start at memory slice {start} "
                                f"(valid: {', '.join(map(str, d.starts))})")
            elif span & used.setdefault(d.gpu, set()):
                problems.append(f"{dev['name']}: overlaps another MIG device of gpu-{d.gpu}")
            used[d.gpu] |= span
    extra = sorted(set(by_name) - seen)
    if extra:
        problems.append(f"unexpected {', '.join(extra[:5])}")
    return problems


def counter_problems(want: dict[str, dict[str, int]], got: list[dict]) -> list[str]:
    """How a node's shared counter sets differ from the expected ones (memory and memory slices)."""
    problems: list[str] = []
    have = {str(c.get("name", "")): c.get("counters") or {} for c in got}
    for name, counters in sorted(want.items()):
        if name not in have:
            problems.append(f"missing counter set {name}")
            continue
        slices = sorted(k for k in have[name] if k.startswith("memory-slice-"))
        want_slices = sorted(k for k in counters if k.startswith("memory-slice-"))
        if slices != want_slices:
            problems.append(f"{name}: {len(slices)} memory-slice counters (want {len(want_slices)})")
        mem = have[name].get("memory", {}).get("value")
        if mem is None or int(parse_quantity(str(mem))) != counters["memory"]:
            problems.append(f"{name}.memory={mem} (want {counters['memory']})")
    extra = sorted(set(have) - set(want))
    if extra:
        problems.append(f"unexpected counter sets {', '.join(extra[:5])}")
    return problems


def _device_class_checks(spec: ClusterSpec, snap: Snapshot, absent: AbstractSet[str] = frozenset()) -> Iterator[Result]:
    """Each DeviceClass gpucluster renders is deployed exactly as rendered (a selector deleted or widened is a
    difference), its selectors compile, no published device fails their evaluation, and they match some."""
    from gpucluster.render import dra_driver

    if not spec.dra.enabled:
        return
    deployed = {d["metadata"]["name"]: d for d in snap.device_classes or []}
    devices = [(rs["spec"].get("driver", ""), dev) for rs in snap.resource_slices or []
               for dev in rs.get("spec", {}).get("devices", [])]
    for want in dra_driver.objects(spec):
        name = want["metadata"]["name"]
        subject = f"deviceclass/{name}"
        obj = deployed.get(name)
        if obj is None:
            yield fail("deviceclass-matches", subject, "deployed", "missing")
            continue
        diff = differences(want["spec"], obj.get("spec") or {}, "spec")
        if diff:
            yield fail("deviceclass-matches", subject, "as rendered", f"{len(diff)} difference(s)",
                       "; ".join(diff[:4]) + " (a changed selector changes which devices the class hands out)")
            continue
        exprs = [s["cel"]["expression"] for s in obj.get("spec", {}).get("selectors", []) if "cel" in s]
        try:
            programs = [cel.compile_expr(e) for e in exprs]
        except cel.Unsupported as err:
            yield skip("deviceclass-matches", subject, f"{err}; not measured")
            continue
        except cel.CompileError as err:
            yield fail("deviceclass-matches", subject, ">= 1 device", "selector does not compile",
                       f"{err}: the scheduler fails every allocation that evaluates it")
            continue
        outcomes = [(dev, cel.evaluate_all(programs, drv, dev)) for drv, dev in devices]
        broken = [(dev, o.error) for dev, o in outcomes if o.error]
        n = sum(1 for _, o in outcomes if o.matched)
        if broken:
            dev, error = broken[0]
            yield fail("deviceclass-matches", subject, ">= 1 device, no evaluation error",
                       f"evaluation fails on {len(broken)} devices",
                       f"on {dev.get('name', '?')}: {error}; the scheduler fails the allocation of every claim "
                       "whose search reaches such a device")
        elif not devices and DRA_AGENT in absent:
            yield skip("deviceclass-matches", subject, NO_DRA_AGENT)
        elif name == DRA_EXTENDED_CLASS and not any(p.uses_dra and p.extended_resource for p in spec.gpu_pools):
            # no pool opts in: the class exists so the chart's own gpu.nvidia.com does not serve plain GPUs
            yield compare("deviceclass-matches", subject, "as rendered, 0 devices (no pool sets extendedResource)",
                          f"as rendered, {n} devices (no pool sets extendedResource)",
                          "plain nvidia.com/gpu pods may land on these DRA devices")
        elif n:
            yield ok("deviceclass-matches", subject, "as rendered, >= 1 device", f"{n} devices")
        else:
            yield fail("deviceclass-matches", subject, ">= 1 device", "0 devices",
                       "no published device satisfies the selector")


def daemonset_checks(spec: ClusterSpec, snap: Snapshot, *,
                     charts_reachable: bool = True) -> Iterator[Result]:
    """Every DaemonSet an enabled feature creates runs, current and ready, on exactly the hosts it must cover.

    A missing DaemonSet fails, unless its chart is not installed on purpose (the local world):
    then it is not measured, with that reason.
    """
    present = {(d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in snap.daemonsets}
    for (ns, name), hosts in sorted(expected.daemonsets(spec).items()):
        subject = f"{ns}/{name}"
        ds = present.get((ns, name))
        if ds is None:
            if not charts_reachable:
                yield skip("daemonsets-ready", subject, "its chart is not installed here (chart repositories are "
                           "unreachable; in the local world the GPU simulator stands in for its pods)")
            else:
                yield fail("daemonsets-ready", subject, f"{len(hosts)} scheduled, {len(hosts)} ready", "missing",
                           "the operator did not create it")
            continue
        unready = 0
        if ns == spec.gpu_operator.namespace and name == "nvidia-operator-validator":
            # NVIDIA/gpu-operator#2550: on DRA-only nodes of a mixed cluster the pod stops at plugin-validation
            dra_only = health.dra_only_hosts(spec) & set(hosts)
            pods = [health.validator_pod(h, snap.operator_pods or []) for h in sorted(dra_only)]
            unready = sum(1 for pod in pods if pod is not None and health.stopped_at_plugin_validation(pod))
        yield daemonset_row(subject, ds, len(hosts), unready=unready,
                            why=f"{unready} on DRA-only nodes stop at plugin-validation, NVIDIA/gpu-operator#2550")


#: The PriorityClass fields that decide scheduling (the rest is metadata).
PRIORITY_FIELDS = ("value", "globalDefault", "preemptionPolicy", "description")


def priority_checks(spec: ClusterSpec, snap: Snapshot) -> Iterator[Result]:
    """Each PriorityClass of the spec exactly as rendered; and no other PriorityClass is the cluster's global
    default (it would set the priority of every tenant pod that names none)."""
    from gpucluster.render.volcano import priority_classes

    have = {p["metadata"]["name"]: p for p in snap.priority_classes}
    rendered = {p["metadata"]["name"]: p for p in priority_classes(spec)}
    for name, want in rendered.items():
        subject = f"priorityclass/{name}"
        what = f"value={want['value']} {want['preemptionPolicy']}, globalDefault={want['globalDefault']}"
        got = have.get(name)
        if got is None:
            yield fail("priority-classes", subject, what, "missing")
            continue
        # the API server defaults preemptionPolicy and globalDefault when left out
        live = {"globalDefault": False, "preemptionPolicy": "PreemptLowerPriority", **got}
        diff = differences({k: want.get(k) for k in PRIORITY_FIELDS}, {k: live.get(k) for k in PRIORITY_FIELDS})
        if diff:
            yield fail("priority-classes", subject, what, f"{len(diff)} difference(s)", "; ".join(diff))
        else:
            yield ok("priority-classes", subject, what, "as rendered")
    for name, got in sorted(have.items()):
        if name not in rendered and got.get("globalDefault"):
            yield fail("priority-classes", f"priorityclass/{name}", "no global default but the spec's",
                       f"globalDefault=true, value={got.get('value')}",
                       "every pod that names no PriorityClass gets this one's priority, tenant pods included")


def chart_checks(spec: ClusterSpec, snap: Snapshot, *, charts_reachable: bool = True) -> Iterator[Result]:
    """Every release the spec installs is deployed in its namespace with the pinned chart and version.

    Read from Helm's own release records, and only from a record in the release's namespace that names
    it (:mod:`gpucluster.verify.helm`): a record elsewhere, or one that claims another release, is
    ignored, and the row says so when it claimed this one. Where chart repositories cannot be reached
    (the local world), releases from a repository are not installed on purpose: not measured, with that
    reason.
    """
    from gpucluster.render import releases
    from gpucluster.verify import helm

    wanted = releases(spec)
    if not wanted:
        return
    if snap.helm_releases is None:
        for rel in wanted:
            yield skip("charts-installed", f"release/{rel.name}", snap.helm_error or "Helm records not read")
        return
    installed: dict[tuple[str, str], helm.Installed] = {}
    broken: list[str] = []
    namespaces = {rel.namespace for rel in wanted}
    for secret in snap.helm_releases:
        if (secret.get("metadata") or {}).get("namespace") not in namespaces:
            continue  # fetch reads only the release namespaces; a record from anywhere else is not Helm's
        try:
            rec = helm.decode(secret)
        except ValueError as err:
            broken.append(str(err))
            continue
        seen = installed.get((rec.namespace, rec.name))
        if seen is None or rec.revision > seen.revision:  # Helm takes the latest deployed revision
            installed[(rec.namespace, rec.name)] = rec
    for rel in wanted:
        subject = f"release/{rel.name}"
        want = f"{rel.chart} {rel.version.lstrip('v')} in {rel.namespace}"
        found = installed.get((rel.namespace, rel.name))
        if found is None:
            local_path = not rel.repository.startswith(("http://", "https://", "oci://"))
            if not charts_reachable and not local_path:
                yield skip("charts-installed", subject, "chart repositories are unreachable here: not installed "
                           "on purpose (in the local world the GPU simulator stands in for its node agents)")
            else:
                # what went wrong with the records that could have been this release's
                claims = [b for b in broken if f"claims release {rel.namespace}/{rel.name}:" in b or
                          b.startswith(f"secret {rel.namespace}/")]
                yield fail("charts-installed", subject, want, "not installed",
                           "; ".join((claims or broken)[:2]) or "no deployed Helm release of that name in the "
                           "namespace")
            continue
        got = f"{found.chart} {found.version.lstrip('v')} in {found.namespace}"
        diff = differences(rel.values, found.config, "values")
        if got != want:
            yield fail("charts-installed", subject, want, got, f"revision {found.revision} holds another chart")
        elif diff:
            yield fail("charts-installed", subject, f"{want}, values as rendered",
                       f"{got}, {len(diff)} value(s) differ", f"revision {found.revision}: " + "; ".join(diff[:5]))
        else:
            yield ok("charts-installed", subject, f"{want}, values as rendered", f"{got}, revision {found.revision}")


def alert_checks(spec: ClusterSpec, snap: Snapshot) -> Iterator[Result]:
    """``alert-rules``: our PrometheusRule exactly as rendered (every rule's expression, ``for``, labels and
    annotations: a neutered alert is a difference), labelled so the Prometheus selects it; and, where a
    Prometheus was read (``--prometheus``, the local world's monitoring add-on), every alert loaded there
    from it with the same expression, duration, labels and annotations, and not failing to evaluate."""
    from gpucluster.render.monitoring import ALERT_GROUP, RULE_NAME, prometheus_rule

    if not spec.monitoring.enabled:
        return
    if snap.prometheus_rules is None:
        yield skip("alert-rules", "monitoring", "the PrometheusRule CRD is not installed (no monitoring stack)")
        return
    want = prometheus_rule(spec)
    ns = want["metadata"]["namespace"]
    subject = f"prometheusrule/{ns}/{RULE_NAME}"
    what = f"{len(alert_rules(spec))} alerts as rendered, selected by {_s_labels(spec.monitoring.prometheus_label)}"
    live = next((r for r in snap.prometheus_rules if r["metadata"].get("namespace") == ns
                 and r["metadata"]["name"] == RULE_NAME), None)
    if live is None:
        yield fail("alert-rules", subject, what, "missing")
        return
    labels = live["metadata"].get("labels") or {}
    problems = [f"label {k}={labels.get(k, '(missing)')} (the Prometheus selects {k}={v}: the rules are not loaded)"
                for k, v in spec.monitoring.prometheus_label.items() if labels.get(k) != v]
    problems += differences(want["spec"], live.get("spec") or {}, "spec")
    if snap.prometheus_loaded is not None:
        problems += _loaded_problems({r["alert"]: r for r in alert_rules(spec)}, snap.prometheus_loaded,
                                     f"{ns}-{RULE_NAME}-", ALERT_GROUP)
    elif snap.prometheus_error:
        problems.append(f"the Prometheus at {snap.prometheus_url} could not be read: {snap.prometheus_error}")
    actual = ("as rendered" + (f", loaded by {snap.prometheus_url}" if snap.prometheus_loaded is not None else ""))
    if problems:
        yield fail("alert-rules", subject, what, f"{len(problems)} difference(s)", "; ".join(problems[:6]))
    else:
        yield ok("alert-rules", subject, what, actual)


def _s_labels(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _seconds(duration: str) -> float:
    """A Prometheus duration (``10m``, ``1h30m``) in seconds."""
    import re

    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|w|y)", duration))


def _loaded_problems(want: dict[str, dict], groups: list[dict], file_prefix: str, group: str) -> list[str]:
    """How the alerts a Prometheus loaded from our rule file (``/api/v1/rules``) differ from the rendered ones.

    Prometheus answers each rule's expression as it prints the parsed query (:func:`promql_text`);
    ``duration`` is in seconds. A rule that failed its last evaluation (``health: err``)
    is a problem; ``unknown`` (not evaluated yet) is not."""
    loaded = {r.get("name"): r for g in groups if g.get("name") == group
              and str(g.get("file", "")).rsplit("/", 1)[-1].startswith(file_prefix)
              for r in g.get("rules") or [] if r.get("type") == "alerting"}
    problems = [f"alert {name} is not loaded by the Prometheus" for name in sorted(set(want) - set(loaded))]
    for name in sorted(set(want) & set(loaded)):
        w, got = want[name], loaded[name]
        if promql_text(str(got.get("query", ""))) != promql_text(w["expr"]):
            problems.append(f"alert {name}: Prometheus evaluates {got.get('query')!r}, not {w['expr']!r}")
        if float(got.get("duration") or 0) != _seconds(w.get("for", "0s")):
            problems.append(f"alert {name}: for {got.get('duration')}s, not {w.get('for', '0s')}")
        for key in ("labels", "annotations"):
            problems += [f"alert {name}: {d}" for d in _label_differences(w.get(key) or {}, got.get(key) or {}, key)]
        if got.get("health") == "err":
            problems.append(f"alert {name} fails to evaluate: {got.get('lastError', '')}")
    return problems


def promql_text(expr: str) -> str:
    """A PromQL expression as text to compare: without whitespace outside string literals, and with each
    selector's label matchers sorted, as Prometheus prints a parsed query (``/api/v1/rules`` answers
    ``rule.Query().String()``, web/api/v1/api.go:2338, and VectorSelector.String sorts the matchers,
    promql/parser/printer.go:452, prometheus v0.316.0; facts rules-api-query, printer-sorts-matchers).
    Selectors do not nest in PromQL, so one level of braces is all there is."""
    out: list[str] = []
    matchers: list[str] | None = None  # the matchers of the selector being read
    part: list[str] = []
    i = 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":  # a string literal, copied whole (a backslash escapes the next character but in `...`)
            end = i + 1
            while end < len(expr) and expr[end] != c:
                end += 2 if expr[end] == "\\" and c != "`" else 1
            (part if matchers is not None else out).append(expr[i:end + 1])
            i = end + 1
            continue
        if c.isspace():
            pass
        elif c == "{" and matchers is None:
            out.append("{")
            matchers, part = [], []
        elif c == "," and matchers is not None:
            matchers.append("".join(part))
            part = []
        elif c == "}" and matchers is not None:
            matchers.append("".join(part))
            out.append(",".join(sorted(m for m in matchers if m)) + "}")
            matchers = None
        else:
            (part if matchers is not None else out).append(c)
        i += 1
    return "".join(out)


def _label_differences(want: dict, got: dict, key: str) -> list[str]:

    return differences({k: str(v) for k, v in want.items()}, {k: str(v) for k, v in got.items()}, key)


def read_prometheus(snap: Snapshot, url: str) -> None:
    """The rule groups a Prometheus has loaded (``GET <url>/api/v1/rules``) into ``snap``."""
    import json
    import urllib.request

    snap.prometheus_url = url.rstrip("/")
    try:
        with urllib.request.urlopen(f"{snap.prometheus_url}/api/v1/rules?type=alert", timeout=10) as resp:
            body = json.loads(resp.read())
        snap.prometheus_loaded = list((body.get("data") or {}).get("groups") or [])
    except (OSError, ValueError) as err:
        snap.prometheus_error = str(err)


def local_prometheus(kubeconfig: str | Path | None) -> str | None:
    """The local world's Prometheus (its monitoring add-on) when it runs, for the world of ``kubeconfig``."""
    from gpucluster.addons import monitoring
    from gpucluster.local.world import World

    if kubeconfig is None:
        return None
    world = World(Path(kubeconfig).parent)
    return monitoring.url(world) if monitoring.running(world) else None


def fetch(spec: ClusterSpec, kubeconfig: str | Path | None = None, context: str | None = None, *,
          metrics_urls: Sequence[str] = (), simulated: bool = False, prometheus: str | None = None) -> Snapshot:
    """The snapshot every check of ``spec`` needs: the LISTs, the tenant access reviews, the GPU health
    sources (the GPU Operator's exporter pods; ``metrics_urls``; the simulated exporter where ``simulated``:
    the local world, whose exporter pods, if any, have no reachable address) and, given a ``prometheus``
    (the local world's own when its monitoring add-on runs), the alert rules it loaded."""
    from gpucluster import quarantine
    from gpucluster.render import releases
    from gpucluster.spec.features import DEVICE_TAINT_RULE_API
    from gpucluster.verify import health, kubelet, snapshot, tenancy

    minor = spec.kubernetes.minor[1]
    paths = {"device_taint_rules": quarantine.rules_path(minor)} if minor in DEVICE_TAINT_RULE_API else {}

    def scrape(api: Any, snap: Snapshot) -> None:
        if not simulated:
            snap.dcgm += health.scrape_exporter_pods(api, snap.operator_pods or [])
            live = {n["metadata"]["name"] for n in snap.nodes}
            kubelet.read_configz(api, snap, [h for h in kubelet.hosts_to_read(spec) if h in live])

    snap = snapshot.fetch(kubeconfig, context, tenancy.access_questions(spec), paths,
                          helm_namespaces=[rel.namespace for rel in releases(spec)],
                          operator_namespace=spec.gpu_operator.namespace if spec.gpu_operator.enabled else None,
                          then=scrape)
    snap.dcgm += health.scrape_urls(metrics_urls)
    if simulated:
        snap.dcgm += health.read_simulated(spec, kubeconfig)
        prometheus = prometheus or local_prometheus(kubeconfig)
    if prometheus and spec.monitoring.enabled:
        read_prometheus(snap, prometheus)
    return snap


def run(spec: ClusterSpec, snap: Snapshot, states: dict[str, HostState] | None = None, *,
        charts_reachable: bool = True, simulated: bool = False) -> list[Result]:
    """Every cluster check; ``states`` (from :func:`expected.host_states`) is computed when not given.

    ``charts_reachable`` False (the local world, an air-gapped site without local charts): releases
    from chart repositories are not installed on purpose, so what depends on them is not measured
    (with that reason) instead of failed. ``simulated`` (the local world): the GPU simulator stands in
    for their node agents, so the devices they would publish are still checked.

    ``gpucluster verify``, ``up``'s verify step and the pytest suite all call this: the same rows.
    """
    from gpucluster.verify import health

    states = states if states is not None else expected.host_states(spec)
    absent = absent_agents(spec, charts_reachable=charts_reachable, simulated=simulated)
    return [*node_checks(spec, snap, states, absent=absent), *health.health_checks(spec, snap, states),
            *dra_checks(spec, snap, states, absent=absent),
            *dra_claims.claim_checks(spec, snap), *dra_claims.extended_checks(spec, snap),
            *dra_claims.quarantine_checks(spec, snap),
            *daemonset_checks(spec, snap, charts_reachable=charts_reachable),
            *tenant_checks(spec, snap), *topology_checks(spec, snap),
            *nvlink_checks(spec, snap), *kubelet_checks(spec, snap, simulated=simulated),
            *security_checks(spec, snap),
            *enforcer_checks(spec, snap, charts_reachable=charts_reachable),
            *admission_checks(spec, snap), *rbac_checks(spec, snap), *priority_checks(spec, snap),
            *alert_checks(spec, snap), *chart_checks(spec, snap, charts_reachable=charts_reachable)]
