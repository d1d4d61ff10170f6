"""Cluster checks: the live state in a :class:`Snapshot` against the spec's expected state.

Each function yields :class:`Result` rows for one check id. Check ids are stable (they appear in
JSON/JUnit output and in ``--checklist``) and each is proven to fail on its own fault by the
integration tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path

from gpucluster import cel, expected
from gpucluster.devices import Device
from gpucluster.expected import HostState
from gpucluster.quantity import parse_quantity
from gpucluster.render.monitoring import alert_rules
from gpucluster.spec.model import ClusterSpec
from gpucluster.upstream import DRA_DRIVER, MIG_DEVICE_NAME, counter_set_name
from gpucluster.verify import dra_claims
from gpucluster.verify.isolation import enforcer_checks
from gpucluster.verify.model import Result, compare, fail, ok, skip
from gpucluster.verify.snapshot import Snapshot
from gpucluster.verify.tenancy import admission_checks, rbac_checks, security_checks, tenant_checks

GPU_PREFIXES = ("nvidia.com/", "rdma/")


def _ready(node: dict) -> str:
    for c in node.get("status", {}).get("conditions", []):
        if c.get("type") == "Ready":
            return c.get("status", "Unknown")
    return "Unknown"


def _gpu_condition(condition: dict) -> bool:
    """Node-problem-detector style conditions (True = problem) that concern GPUs, e.g. GpuUnhealthy."""
    kind = condition.get("type", "")
    return kind != "Ready" and "gpu" in kind.lower()


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
    """Per node: Ready, GPU/RDMA capacity and allocatable, GPU health, labels and taints.

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
            for check in ("node-capacity", "node-allocatable", "node-labels", "node-taints", "gpu-health"):
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
        yield from _node_health(name, node, want)
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


def _node_health(name: str, node: dict, want: HostState) -> Iterator[Result]:
    if not want.gpu_count:
        return
    status = node.get("status", {})
    gpu_conditions = [c for c in status.get("conditions", []) if _gpu_condition(c)]
    bad = [f"{c['type']}: {c.get('message') or c.get('reason') or 'True'}"
           for c in gpu_conditions if c.get("status") == "True"]
    if bad:
        yield fail("gpu-health", name, "no GPU problem conditions", "; ".join(bad))
    elif not gpu_conditions:
        yield skip("gpu-health", name, "no agent reports GPU conditions on this node (a node-problem-"
                   "detector GPU monitor would); DCGM health is checked with --metrics-url")
    else:
        yield ok("gpu-health", name, "no GPU problem conditions",
                 ", ".join(f"{c['type']}=False" for c in gpu_conditions))


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
    if not dra_hosts and not spec.dra.device_classes:
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
            yield fail("dra-slices", name, exp, act, "; ".join(problems[:5]))
        else:
            yield ok("dra-slices", name, exp, act)
    yield from _device_class_checks(spec, snap, absent)


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
        for key, value in (("productName", d.product_name), ("type", d.type), ("profile", d.profile)):
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
    if not spec.dra.enabled or not spec.dra.device_classes:
        return
    deployed = {d["metadata"]["name"]: d for d in snap.device_classes or []}
    devices = [(rs["spec"].get("driver", ""), dev) for rs in snap.resource_slices or []
               for dev in rs.get("spec", {}).get("devices", [])]
    for dc in spec.dra.device_classes:
        subject = f"deviceclass/{dc.name}"
        obj = deployed.get(dc.name)
        if obj is None:
            yield fail("deviceclass-matches", subject, "deployed", "missing")
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
        elif n:
            yield ok("deviceclass-matches", subject, ">= 1 device", f"{n} devices")
        else:
            yield fail("deviceclass-matches", subject, ">= 1 device", "0 devices",
                       "no published device satisfies the selector")


def daemonset_checks(spec: ClusterSpec, snap: Snapshot, *,
                     charts_reachable: bool = True) -> Iterator[Result]:
    """Every DaemonSet an enabled feature creates runs, ready, on exactly the hosts it must cover.

    A missing DaemonSet fails, unless its chart is not installed on purpose (the local world):
    then it is not measured, with that reason.
    """
    present = {(d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in snap.daemonsets}
    for (ns, name), hosts in sorted(expected.daemonsets(spec).items()):
        subject = f"{ns}/{name}"
        want = f"{len(hosts)} scheduled, {len(hosts)} ready"
        ds = present.get((ns, name))
        if ds is None:
            if not charts_reachable:
                yield skip("daemonsets-ready", subject, "its chart is not installed here (chart repositories are "
                           "unreachable; in the local world the GPU simulator stands in for its pods)")
            else:
                yield fail("daemonsets-ready", subject, want, "missing", "the operator did not create it")
            continue
        st = ds.get("status") or {}
        got = f"{st.get('desiredNumberScheduled', 0)} scheduled, {st.get('numberReady', 0)} ready"
        yield compare("daemonsets-ready", subject, want, got,
                      "scheduled on other nodes than the spec's (node selector, labels or taints?)"
                      if st.get("desiredNumberScheduled", 0) != len(hosts) else "pods not ready")


def priority_checks(spec: ClusterSpec, snap: Snapshot) -> Iterator[Result]:
    have = {p["metadata"]["name"]: p for p in snap.priority_classes}
    for pc in spec.scheduling.priority_classes:
        got = have.get(pc.name)
        actual = f"value={got.get('value')} {got.get('preemptionPolicy', 'PreemptLowerPriority')}" if got else "missing"
        want = f"value={pc.value} {pc.preemption_policy}"
        yield compare("priority-classes", f"priorityclass/{pc.name}", want, actual)


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
        yield compare("charts-installed", subject, want,
                      f"{found.chart} {found.version.lstrip('v')} in {found.namespace}")


def alert_checks(spec: ClusterSpec, snap: Snapshot) -> Iterator[Result]:
    if not spec.monitoring.enabled:
        return
    if snap.prometheus_rules is None:
        yield skip("alert-rules", "monitoring", "the PrometheusRule CRD is not installed (no monitoring stack)")
        return
    loaded = {r["alert"] for pr in snap.prometheus_rules for g in pr.get("spec", {}).get("groups", [])
              for r in g.get("rules", []) if "alert" in r}
    want = {r["alert"] for r in alert_rules(spec)}
    missing = sorted(want - loaded)
    if missing:
        yield fail("alert-rules", "monitoring", sorted(want), sorted(loaded & want), f"missing {', '.join(missing)}")
    else:
        yield ok("alert-rules", "monitoring", f"{len(want)} alerts", "all loaded")


def fetch(spec: ClusterSpec, kubeconfig: str | Path | None = None, context: str | None = None) -> Snapshot:
    """The snapshot every check of ``spec`` needs: the LISTs and the tenant access reviews."""
    from gpucluster import quarantine
    from gpucluster.spec.features import DEVICE_TAINT_RULE_API
    from gpucluster.verify import snapshot, tenancy

    minor = spec.kubernetes.minor[1]
    paths = {"device_taint_rules": quarantine.rules_path(minor)} if minor in DEVICE_TAINT_RULE_API else {}
    from gpucluster.render import releases

    return snapshot.fetch(kubeconfig, context, tenancy.access_questions(spec), paths,
                          helm_namespaces=[rel.namespace for rel in releases(spec)])


def run(spec: ClusterSpec, snap: Snapshot, states: dict[str, HostState] | None = None, *,
        charts_reachable: bool = True, simulated: bool = False) -> list[Result]:
    """Every cluster check; ``states`` (from :func:`expected.host_states`) is computed when not given.

    ``charts_reachable`` False (the local world, an air-gapped site without local charts): releases
    from chart repositories are not installed on purpose, so what depends on them is not measured
    (with that reason) instead of failed. ``simulated`` (the local world): the GPU simulator stands in
    for their node agents, so the devices they would publish are still checked.
    """
    states = states if states is not None else expected.host_states(spec)
    absent = absent_agents(spec, charts_reachable=charts_reachable, simulated=simulated)
    return [*node_checks(spec, snap, states, absent=absent), *dra_checks(spec, snap, states, absent=absent),
            *dra_claims.claim_checks(spec, snap), *dra_claims.extended_checks(spec, snap),
            *dra_claims.quarantine_checks(spec, snap),
            *daemonset_checks(spec, snap, charts_reachable=charts_reachable),
            *tenant_checks(spec, snap), *security_checks(spec, snap),
            *enforcer_checks(spec, snap, charts_reachable=charts_reachable),
            *admission_checks(spec, snap), *rbac_checks(spec, snap), *priority_checks(spec, snap),
            *alert_checks(spec, snap), *chart_checks(spec, snap, charts_reachable=charts_reachable)]


def rows(spec: ClusterSpec, snap: Snapshot, metrics_urls: tuple[str, ...] = (), *,
         charts_reachable: bool = True, simulated: bool = False) -> list[Result]:
    """Every row `gpucluster verify` shows without --hosts: the cluster checks and the DCGM metric checks.

    The CLI and the pytest suite both call this, so they report the same rows.
    """
    from gpucluster.verify import health

    states = expected.host_states(spec)  # once: the cluster and the metric checks both use it
    return [*run(spec, snap, states, charts_reachable=charts_reachable, simulated=simulated),
            *health.metric_checks(states, metrics_urls)]
