"""``gpucluster up`` and ``gpucluster down``: the whole flow in one command.

``up``: validate the spec → the local world (when the spec's environment is ``local``) or the
host layer (real hosts: the site playbook, then the admin kubeconfig from the init host) → the
platform stack → the tenants stack → wait until the cluster has acted on them → verify the cluster
against the spec (the checks of ``gpucluster verify``) → a summary. ``down``
destroys in reverse order. Each phase is timed; a failure names the phase (and, from the engine, the
resource), keeps the stack state, and the next run continues from there.

Both hold what they work on for the whole run: the stack state folder (made ours first, see
:data:`STACK_STATE`) and its lock, and on the local world the world itself
(:meth:`gpucluster.local.world.World.hold`), so a `local down` meanwhile is refused, naming the run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucluster import inventory as inventories
from gpucluster import lockfile, ownership, prerequisites
from gpucluster.errors import Declined, GpuclusterError, InputError, PhaseFailed
from gpucluster.hostlayer import EVENTS_FILE
from gpucluster.spec.model import ClusterSpec

if TYPE_CHECKING:
    from gpucluster.local.world import World


@dataclass
class Report:
    """What a run did: phases with timings, per-stack counts, what was left out, what is not ready."""

    environment: str
    operation: str
    phases: list[dict[str, Any]] = field(default_factory=list)
    stacks: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    not_ready: list[str] = field(default_factory=list)
    #: Objects not applied because the cluster does not serve their kind, even after the releases ran.
    left_out: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The ownership check before the first create: objects looked up, API calls, seconds, and the
    #: objects this run adopted (``--adopt``: imported, left in place by ``down``).
    ownership: dict[str, Any] = field(default_factory=dict)
    #: ``down``: what it deletes and what it keeps (:meth:`gpucluster.pulumi.teardown.Teardown.as_dict`).
    teardown: dict[str, Any] = field(default_factory=dict)
    # Cluster checks after `up`: counts plus every failed and skipped row (with its reason).
    verify: dict[str, Any] = field(default_factory=dict)
    #: The host layer's counts per host (ok, changed, failures, ...), when it ran.
    hosts: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Everything the run changed: host tasks that changed plus stack objects created, updated, deleted.
    changes: int = 0

    def count_changes(self) -> int:
        self.changes = (sum(h.get("changed", 0) for h in self.hosts.values())
                        + sum(c["created"] + c.get("imported", 0) + c["updated"] + c["deleted"] for c in self.stacks))
        return self.changes


class Runner:
    """Runs named phases with rich progress on stderr (stdout stays clean for ``--output json``)."""

    def __init__(self, report: Report, quiet: bool) -> None:
        from rich.console import Console

        self.report = report
        self.console = Console(stderr=True, highlight=False, quiet=quiet)
        # Set inside a phase that completes but found a problem (e.g. failed checks): shown as ✗.
        self.problem = ""

    @contextmanager
    def phase(self, name: str) -> Iterator[Callable[[str], None]]:
        start = time.monotonic()
        with self.console.status(f"{name} …"):
            try:
                yield lambda msg: self.console.print(f"  [dim]{msg}[/dim]")
            except GpuclusterError as err:
                self.console.print(f"[red]✗ {name}[/red] ({time.monotonic() - start:.1f} s)")
                raise PhaseFailed(f"phase {name!r} failed: {err}", err.exit_code) from None
        seconds = time.monotonic() - start
        self.report.phases.append({"phase": name, "seconds": round(seconds, 2)})
        if self.problem:
            self.console.print(f"[red]✗ {name}[/red] ({seconds:.1f} s): {self.problem}")
            self.problem = ""
        else:
            self.console.print(f"[green]✓[/green] {name} ({seconds:.1f} s)")


#: What the engine keeps in a stack state folder (besides the lock and the passphrase).
STACK_STATE_PARTS = ("backend", "work")


def _earlier_stack_state(root: Path) -> bool:
    """A stack state folder of an earlier version: our lock file, or a file backend of gpucluster's projects only.

    Pulumi's file backend keeps stacks as ``.pulumi/stacks/<project>/<stack>.json`` (pulumi/pulumi
    ``pkg/backend/diy/store.go``); the engine names its projects ``gpucluster-<stack>``.
    """
    if lockfile.written_by_us(root):
        return True
    stacks = root / "backend" / ".pulumi" / "stacks"
    projects = os.listdir(stacks) if stacks.is_dir() else []
    return bool(projects) and all(p.startswith("gpucluster-") for p in projects)


#: The marker kind of a stack state folder (:mod:`gpucluster.ownership`): what the engine keeps there
#: (``pulumi/engine.py``) and what the host layer fetches next to it (``hostlayer.py``).
STACK_STATE = ownership.Kind(
    "stack-state", "a stack state folder",
    frozenset({*STACK_STATE_PARTS, "engine", "home", "passphrase", inventories.FETCHED_KUBECONFIG, EVENTS_FILE,
               inventories.STATE_INVENTORY}),
    _earlier_stack_state)


@contextmanager
def _held(spec: ClusterSpec, state: Path, world_dir: Path | None, kubeconfig: Path | None,
          inventory: Path | None = None) -> Iterator[None]:
    """For a whole ``up``/``down``: the stack state made ours and locked, and the local world held when used.

    A real cluster's stack state is bound to the inventory that first used it
    (:func:`gpucluster.inventory.bind_state`): a second inventory with the same ``metadata.name`` (and
    state folder) is refused before anything changes, instead of sharing stacks and admin kubeconfig.
    """
    with ExitStack() as stack:
        world, folders = None, [(state, STACK_STATE)]
        if inventories.is_local(spec) and kubeconfig is None:
            from gpucluster.local.world import FOLDER, World

            world = World(world_dir)
            folders.insert(0, (world.dir, FOLDER))  # before its pulumi/ folder (the stack state) appears in it
        for folder, kind in folders:  # every one checked before any is created
            ownership.owned(folder, kind)
        for folder, kind in folders:
            ownership.claim(folder, kind)
        stack.enter_context(lockfile.hold(state, f"the stacks of {spec.metadata.name}"))
        if not inventories.is_local(spec):
            inventories.bind_state(state, inventories.resolve(inventory), spec.metadata.name)
        if world is not None:
            stack.enter_context(world.hold())
        yield


def local_world_phase(world_dir: Path | None, spec: ClusterSpec, inventory: Path, *, start: bool,
                      say: Callable[[str], None], reset: bool = False) -> World | None:
    """The local-world phase: control plane up (or already up), CRDs, simulated GPU nodes.

    Returns the ``World``. ``start=False`` (dry runs, ``down``) only attaches to a running world.
    """
    from gpucluster.local.world import World

    world = World(world_dir, say=say)
    if not start:
        return world if world.healthy() else None
    result = world.up(reset=reset)
    if result.already_running:
        say("control plane already running")
    elif result.fresh:
        say(f"control plane up in {result.seconds:.1f} s")
        # A fresh control plane has an empty etcd: stack state from an earlier world describes
        # objects that no longer exist, so it goes (otherwise `up` would report them unchanged).
        # The state folder itself (and its lock, which this run holds) stays.
        ownership.remove(world.dir / "pulumi", STACK_STATE, STACK_STATE_PARTS)
    else:
        say(f"control plane recovered in {result.seconds:.1f} s (restarted {', '.join(result.restarted) or 'nothing'}; "
            "its data is kept)")
    from gpucluster.toolchain import locate

    alongside = []
    if not result.fresh:
        # A running world got its CRDs when it started; the plan phase lists any kind still missing.
        say("operator CRDs left as they are")
    elif locate("crds") is not None:
        from gpucluster.local.crds import install_crds

        def crds() -> None:
            say(f"{len(install_crds(world.kubeconfig))} operator CRDs installed (generated or stand-in)")

        alongside.append(crds)
    else:
        say("operator CRDs not built (`gpucluster tools install crds`): their objects are skipped")
    from gpucluster import addons

    # Simulated GPU nodes (kept current in the background) and Volcano, as `gpucluster local up` does;
    # the operators' CRDs go in meanwhile.
    addons.start(world, spec, inventory, say=say, alongside=alongside)
    return world


def _programs(plans: dict, kubeconfig: Path | None, context: str | None = None) -> dict[str, Callable[[], Any]]:
    from gpucluster.pulumi.programs import PROGRAMS

    kc = str(kubeconfig) if kubeconfig else None

    def program(name: str) -> Callable[[], Any]:
        return lambda: PROGRAMS[name](plans[name], kc, context)

    return {name: program(name) for name in PROGRAMS}


def _state_of(spec: ClusterSpec, state_dir: Path | None, world_dir: Path | None, kubeconfig: Path | None) -> Path:
    """Where the stacks of ``spec`` keep their state: the local world's folder, or one per environment."""
    if state_dir is not None:
        return state_dir
    if inventories.is_local(spec) and kubeconfig is None:
        from gpucluster.local.world import World

        return World(world_dir).dir / "pulumi"
    return inventories.stack_state(spec.metadata.name)


def run_up(inventory: Path | None, *, dry_run: bool = False, state_dir: Path | None = None,
           world_dir: Path | None = None, kubeconfig: Path | None = None, quiet: bool = False,
           verify: bool = True, reset: bool = False, context: str | None = None,
           allow_not_measured: Mapping[str, str] | None = None, hosts: bool = True,
           chart_repositories: bool = True, adopt: Sequence[str] = (), only: Sequence[str] = (),
           limit: Sequence[str] = (), backend: str | None = None) -> Report:
    """The body of ``gpucluster up`` (callable from tests and benchmarks).

    ``allow_not_measured`` (check id -> who allowed it, :func:`gpucluster.verify.checks.parse`): rows of
    these checks that the closing verification cannot measure do not fail the run (they are still listed).
    The local world adds its fixed list (:data:`gpucluster.verify.checks.LOCAL_WORLD`: it installs no chart).
    ``hosts``: on an inventory of real hosts, run the host layer first (``--skip-hosts`` turns it off).
    ``chart_repositories`` False: chart repositories cannot be reached from here, so releases from a
    repository are reported as not installed, with the objects whose CRDs they bring, and what their
    node agents would publish is not measured (:data:`gpucluster.verify.checks.NO_CHART_REPOSITORIES` allowed).
    ``adopt``: ``KIND/NAMESPACE/NAME`` of objects that exist on the cluster and that the stacks may take
    over: imported and retained (``down`` leaves them). Any other object the stacks would create that
    exists and is not in the stack state stops the run before the first create
    (:mod:`gpucluster.pulumi.ownership`).
    ``only``: run just these stacks (``platform``, ``tenants``), no host layer; ``tenants`` alone needs a
    platform stack an earlier run applied. ``limit``: real hosts, the host layer changes only these hosts
    of the spec, then both stacks run. ``backend``: a shared Pulumi backend URL (``--backend``, else
    ``$PULUMI_BACKEND_URL``; :func:`gpucluster.pulumi.engine.backend_url`); None keeps the state in ``state``.

    The whole run holds the lock of the stack state, so a second ``up``/``down`` on the same state
    stops at once naming the first instead of racing it.
    """
    report = Report("?", "preview" if dry_run else "up")
    run = Runner(report, quiet)
    with run.phase("validate"):
        from gpucluster.pulumi.ownership import parse_adopt

        parse_adopt(adopt)  # a malformed --adopt stops the run before anything starts
        spec = inventories.load(inventory)
        report.environment = spec.metadata.name
        _check_only_and_limit(spec, only, limit, hosts=hosts)
        backend = _backend_for(spec, backend, kubeconfig)
    state = _state_of(spec, state_dir, world_dir, kubeconfig)
    if set(only) == {"tenants"}:
        from gpucluster.pulumi.engine import Engine

        if not Engine(state, spec.metadata.name, backend).state_resources("platform"):
            raise InputError(f"--only tenants: the platform stack of {spec.metadata.name} was never applied (no "
                             f"state in {state}), and the tenants stack needs what it installs: run `gpucluster "
                             "up` without --only first")
    with _held(spec, state, world_dir, kubeconfig, inventory):
        _up(report, run, spec, inventory, state, dry_run=dry_run, world_dir=world_dir,
            kubeconfig=kubeconfig, verify=verify, reset=reset, context=context,
            allow_not_measured=allow_not_measured or {},
            hosts=hosts and not only, chart_repositories=chart_repositories, adopt=adopt,
            only=tuple(only), limit=tuple(limit), backend=backend)
    report.count_changes()
    return report


def _backend_for(spec: ClusterSpec, backend: str | None, kubeconfig: Path | None) -> str | None:
    """The shared backend (:func:`gpucluster.pulumi.engine.backend_url`); the local world keeps its stack state
    in its own folder, which goes with it (exit 2 for a backend there, unless --kubeconfig names the cluster)."""
    from gpucluster.pulumi.engine import backend_url

    url = backend_url(backend)
    if url is not None and inventories.is_local(spec) and kubeconfig is None:
        raise InputError("--backend/PULUMI_BACKEND_URL: the local world keeps its stack state in its own folder, "
                         "which `down` removes with it; a shared backend is for a cluster named by -i and "
                         "--kubeconfig (leave it out here, or unset PULUMI_BACKEND_URL)")
    return url


#: The stacks ``up --only`` may name, in the order they run.
STACKS = ("platform", "tenants")


def _check_only_and_limit(spec: ClusterSpec, only: Sequence[str], limit: Sequence[str], *, hosts: bool) -> None:
    """``--only`` and ``--limit`` name what exists and do not contradict each other (exit 2 before anything)."""
    unknown = [s for s in only if s not in STACKS]
    if unknown:
        raise InputError(f"--only {unknown[0]}: not a stack; the stacks are {', '.join(STACKS)}")
    if not limit:
        return
    if inventories.is_local(spec):
        raise InputError(f"--limit: {spec.metadata.name} is the local world, which has no host layer; "
                         "leave --limit out")
    if only or not hosts:
        raise InputError("--limit changes some hosts and then runs the stacks; it cannot go with "
                         + ("--only" if only else "--skip-hosts") + " (which runs no host layer)")
    names = [h.name for h in spec.hosts]
    missing = [h for h in limit if h not in names]
    if missing:
        raise InputError(f"--limit {missing[0]}: no such host in the spec of {spec.metadata.name} "
                         f"(its hosts: {', '.join(names)}); add it to spec.hosts first")


def _host_layer(report: Report, run: Runner, spec: ClusterSpec, inventory: Path | None, state: Path, *,
                dry_run: bool, hosts: bool, kubeconfig: Path | None, limit: tuple[str, ...] = ()) -> Path | None:
    """Run the host layer (real hosts, not ``--skip-hosts``); return the kubeconfig the stacks use.

    The one given wins; else the admin kubeconfig fetched from the init host (by this run or an
    earlier one); else None (the Kubernetes client's own lookup).
    """
    from gpucluster import hostlayer

    fetched = hostlayer.kubeconfig_path(state)
    if hosts and dry_run:
        with run.phase("preflight") as say:  # the checks that change nothing (roles/preflight)
            hostlayer.run(inventories.resolve(inventory), fetched, say, playbooks=hostlayer.PREFLIGHT, limit=limit)
        report.notes.append("dry run: the hosts were checked (preflight), not changed; `ansible-playbook --check` "
                            "on playbooks/site.yml previews the rest of the host layer")
    elif hosts:
        with run.phase("host layer") as say:
            result = hostlayer.run(inventories.resolve(inventory), fetched, say, limit=limit)
            report.hosts = result.hosts
            say(f"{len(result.hosts)} hosts, {result.plays} plays: " + (
                f"{result.changed} change(s)" if result.changed else "no changes"))
            if result.kubeconfig is not None and kubeconfig is None:
                say(f"admin kubeconfig from the init host: {result.kubeconfig}")
            if result.new_cluster:
                # kubeadm init made a new cluster (a new CA) where an earlier one was: the stack state
                # describes objects of the old one, so it goes (else `up` would report them unchanged).
                ownership.remove(state, STACK_STATE, STACK_STATE_PARTS)
                say("a new cluster (its CA differs from the one an earlier run fetched): the stack state of "
                    "the earlier cluster was discarded")
    if kubeconfig is None and fetched.exists():
        return fetched
    return kubeconfig


def _up(report: Report, run: Runner, spec: ClusterSpec, inventory: Path | None, state: Path, *, dry_run: bool,
        world_dir: Path | None, kubeconfig: Path | None, verify: bool, reset: bool,
        context: str | None = None, allow_not_measured: Mapping[str, str] | None = None, hosts: bool = True,
        chart_repositories: bool = True, adopt: Sequence[str] = (), only: tuple[str, ...] = (),
        limit: tuple[str, ...] = (), backend: str | None = None) -> Report:
    world = None
    if not inventories.is_local(spec):
        kubeconfig = _host_layer(report, run, spec, inventory, state, dry_run=dry_run, hosts=hosts,
                                 kubeconfig=kubeconfig, limit=limit)
        if dry_run and hosts and kubeconfig is None and not os.environ.get("KUBECONFIG") \
                and not (Path.home() / ".kube" / "config").exists():
            report.notes.append("dry run: no cluster to preview the stacks against yet (no admin kubeconfig "
                                "fetched from the init host, no --kubeconfig): `up` builds it")
            return report
    if inventories.is_local(spec) and kubeconfig is None:
        with run.phase("local world"):
            world = local_world_phase(world_dir, spec, inventories.resolve(inventory), start=not dry_run,
                                      say=run.console.print, reset=reset)
            if world is None:
                raise InputError("the local world is not running; a dry run does not start it: run "
                                 "`gpucluster local up` (or `gpucluster up`) first")
            kubeconfig = world.kubeconfig
            report.notes.append("local world: GPUs and kubelets are SIMULATED (kwok nodes); the control "
                                "plane, the Pulumi engine and the provider are real")
    charts = chart_repositories and world is None
    _stacks(report, run, spec, kubeconfig, state, local=world is not None, dry_run=dry_run, context=context,
            charts=charts, adopt=adopt, only=only, backend=backend)
    if verify and not dry_run:
        from gpucluster.verify import checks
        from gpucluster.verify.model import Result, unallowed
        from gpucluster.verify.report import allowance_lines, summary_line

        # the local world allows its own fixed list; --no-chart-repositories, where given, allows its list
        allowed = checks.allowed(allow_not_measured or {}, local_world=world is not None,
                                 chart_repositories=chart_repositories, spec=spec)
        with run.phase("verify") as say:
            report.verify = verify_cluster(spec, kubeconfig, context=context, charts_reachable=charts,
                                           simulated=world is not None, inventory=inventories.resolve(inventory))
            c = report.verify["summary"]
            report.verify["allowedNotMeasured"] = dict(sorted(allowed.items()))
            say(summary_line(c))
            rows = [Result.from_dict(p) for p in report.verify["problems"]]
            for line in allowance_lines(rows, allowed):
                say(line)
            left = unallowed(rows, allowed)
            if c["fail"]:
                run.problem = f"{c['fail']} check(s) failed"
            elif left:
                run.problem = f"{len(left)} row(s) not measured ({','.join(sorted({r.check for r in left}))})"
    return report


def verify_cluster(spec: ClusterSpec, kubeconfig: Path | None, *, settle_s: float = 30.0,
                   context: str | None = None, charts_reachable: bool = True,
                   simulated: bool = False, inventory: Path | None = None) -> dict[str, Any]:
    """The cluster checks of ``gpucluster verify`` (the same rows; no host checks) after ``up``.

    Simulated or real node agents act on what the stacks just applied a little later, so a failing
    check is looked at again every 2 s for up to ``settle_s`` before it counts; MIG and sharing changes
    in progress are followed first, as ``gpucluster verify`` follows them; the control-plane certificates are
    read once. Returns the counts and every failed, not-measured or warning row.
    """
    from gpucluster import expected
    from gpucluster.poll import poll
    from gpucluster.verify import certs, cluster, report, upgrades, watchdog
    from gpucluster.verify.model import Verdict

    states = expected.host_states(spec)
    config = str(kubeconfig) if kubeconfig else None
    followed = watchdog.live_rows(spec, config, context, watchdog.DEFAULT_DEADLINE, upgrades.DEFAULT_DEADLINE)

    def check() -> list[Any]:
        snap = cluster.fetch(spec, config, context, simulated=simulated)
        return cluster.run(spec, snap, states, charts_reachable=charts_reachable, simulated=simulated) + followed

    results = poll(check, timeout=settle_s, every=2, done=lambda rs: not any(r.verdict is Verdict.failed for r in rs))
    results += certs.rows(config, context, fix=certs.fix_for(spec, inventory))
    return {"summary": report.counts(results),
            "problems": [r.to_dict() for r in results if r.verdict is not Verdict.passed]}


def _stacks(report: Report, run: Runner, spec: ClusterSpec, kubeconfig: Path | None, state: Path, *,
            local: bool, dry_run: bool, context: str | None = None, charts: bool = True,
            adopt: Sequence[str] = (), only: tuple[str, ...] = (), backend: str | None = None) -> Report:
    from gpucluster.pulumi.cluster import discover, wait_ready
    from gpucluster.pulumi.engine import Engine
    from gpucluster.pulumi.plan import plan
    from gpucluster.render import render

    rendered = render(spec)
    with run.phase("plan") as say:
        facts = discover(kubeconfig, remote_charts=charts, context=context, simulated=local)
        # Kinds whose CRDs no release of ours brings (the Prometheus Operator's): exit 2 before any stack runs.
        prerequisites.check(rendered.objects(), facts.served, simulated=local,
                            source=f"the spec of {spec.metadata.name}")
        plans = plan(rendered, facts)
        engine = Engine(state, spec.metadata.name, backend)
        engine.setup()
        names = [n for n in STACKS if not only or n in only]
        engine.share_salt(STACKS)  # a shared backend: its passphrase checked before anything touches the cluster
        if only:
            say(f"--only: the {' and '.join(names)} stack{'s' if len(names) > 1 else ''}; "
                + ("no other stack, no host layer" if len(names) < len(STACKS) else "no host layer"))
        # Before the first create: nothing the stacks would create may exist unless it is ours or adopted.
        owns = guard(engine, {n: plans[n] for n in names}, facts, kubeconfig, context, adopt, record=not dry_run)
        report.ownership = owns.as_dict()
        say(owns.summary())
    programs = _programs(plans, kubeconfig, context)
    for name in names:
        with run.phase(f"{name} stack") as say:
            counts = _apply(engine, name, plans[name], programs[name], kubeconfig, context, facts.uid, dry_run=dry_run)
            report.stacks.append(counts.as_dict())
            say(_counts_line(counts.as_dict()))
            if name == "platform" and not dry_run and _unserved({n: plans[n] for n in names}):
                # The releases just installed may have brought the CRDs of objects left out at plan time.
                plans = _second_pass(report, say, engine, rendered, plans, kubeconfig, context, charts, local, adopt,
                                     names=names)
                programs = _programs(plans, kubeconfig, context)
    ran = {n: plans[n] for n in names}  # what a stack --only left alone is not this run's to report
    report.skipped = [s.__dict__ for p in ran.values() for s in p.skipped]
    if not dry_run:
        _settle_journal(engine)
        # Objects whose kind is still not served were not applied: the run is not done (exit 1).
        report.left_out = [f"{s.stack}: {s.what}" for s in _unserved(ran)]
        with run.phase("readiness"):
            report.not_ready = wait_ready(kubeconfig, [o for p in ran.values() for o in p.objects()],
                                          context=context)
            if local:
                from gpucluster.simulator import Simulator
                from gpucluster.simulator.reconcile import summarize_notes

                # The simulated node agents act on the configuration the stacks just applied, step by step
                # as theirs would (a MIG change is pending, then applied): settled here rather than left
                # to the background process's next syncs, so verify looks at the nodes as they end up.
                # What the agents still note then is the settled state, worth one line each.
                sim = Simulator(spec, Path(kubeconfig or ""))
                report.notes += [f"simulated agents: {line}" for line in summarize_notes(sim.settle().notes)]
                sim.close()
    return report


def _apply(engine: Any, name: str, stack_plan: Any, program: Callable[[], Any], kubeconfig: Path | None,
           context: str | None, cluster_uid: str, *, dry_run: bool) -> Any:
    """Preview or update stack ``name``. An update whose inputs and state are byte-identical to those its last
    successful update recorded is not run: the engine would change nothing (:mod:`gpucluster.pulumi.fingerprint`),
    and the counts say so (``inputs_unchanged``)."""
    if dry_run:
        return engine.run(name, "preview", program, on_output=None)
    inputs = engine.inputs(name, stack_plan, str(kubeconfig) if kubeconfig else None, context, cluster_uid)
    return engine.converged(name, inputs) or engine.run(name, "up", program, on_output=None, inputs=inputs)


def _unserved(plans: dict[str, Any]) -> list[Any]:
    return [s for p in plans.values() for s in p.skipped if s.cause == "unserved"]


#: How long a release's CRDs may take to be served after the platform stack installed it.
CRD_WAIT_S = 120.0


def guard(engine: Any, plans: dict[str, Any], facts: Any, kubeconfig: Path | None, context: str | None,
          adopt: Sequence[str], *, applied: bool = False, record: bool = True) -> Any:
    """The ownership check of :mod:`gpucluster.pulumi.ownership` against both stacks' state; sets what each
    stack plan imports and retains. Raises ObjectsNotOurs (exit 2) for an object that exists and is not ours.

    ``record`` (every run but a dry run): what the stacks are about to create goes to the creates journal
    before the engine runs, so that a create an interrupt leaves unrecorded is still known as ours; entries
    the stack state now records leave it."""
    from gpucluster.pulumi import ownership
    from gpucluster.pulumi.cluster import applied_by_provider, existing

    owned: dict[Any, bool] = {}
    recorded: set[Any] = set()  # created and recorded, not only left pending
    for name in plans:
        for ref, retained in ownership.in_state(engine.state_resources(name)).items():
            owned[ref] = owned.get(ref, False) or retained
        recorded |= set(ownership.in_state(engine.state_resources(name, pending=False)))
    journal = ownership.read_journal(engine.journal)
    result = ownership.check(plans, owned, lambda refs: existing(kubeconfig, refs, facts.resources, context),
                             adopt, environment=engine.environment, applied=applied, journal=journal,
                             confirm=lambda refs: applied_by_provider(kubeconfig, refs, facts.resources, context))
    if record:
        # A create left pending is cleared and applied again by this run: it stays in the journal until recorded.
        ownership.write_journal(engine.journal, (journal | set(result.creates) | set(owned)) - recorded)
    for name, p in plans.items():
        p.adopt = result.adopt.get(name, {})
    return result


def _settle_journal(engine: Any) -> None:
    """After both stacks applied: what their state now records leaves the creates journal (the file goes
    when nothing is left, as after every run that ends well)."""
    from gpucluster.pulumi import ownership

    recorded = {ref for name in ("platform", "tenants")
                for ref in ownership.in_state(engine.state_resources(name, pending=False))}
    ownership.write_journal(engine.journal, ownership.read_journal(engine.journal) - recorded)


def _second_pass(report: Report, say: Callable[[str], None], engine: Any, rendered: Any, plans: dict[str, Any],
                 kubeconfig: Path | None, context: str | None, charts: bool, local: bool,
                 adopt: Sequence[str] = (), names: Sequence[str] = STACKS) -> dict[str, Any]:
    """Wait for the kinds left out to be served, plan again and apply the platform stack once more
    (``names``: the stacks this run applies)."""
    from gpucluster.poll import poll
    from gpucluster.pulumi.cluster import discover, served_kinds_of
    from gpucluster.pulumi.plan import plan

    plans = {n: plans[n] for n in names}
    wanted = {s.what for s in _unserved(plans)}
    kinds = {(o["apiVersion"], o["kind"]) for p in plans.values() for o in _left_out_objects(rendered, p)}
    poll(lambda: kinds <= served_kinds_of(kubeconfig, context), timeout=CRD_WAIT_S, every=2)
    facts = discover(kubeconfig, remote_charts=charts, context=context, simulated=local)
    again = plan(rendered, facts)
    # The objects admitted now were looked up too (their kinds were not served then): same rule.
    guard(engine, {n: again[n] for n in names}, facts, kubeconfig, context, adopt, applied=True)
    still = {s.what for s in _unserved({n: again[n] for n in names})}
    if wanted - still:
        say(f"{len(wanted - still)} object(s) whose CRDs the releases installed: applying them now")
        counts = _apply(engine, "platform", again["platform"], _programs(again, kubeconfig, context)["platform"],
                        kubeconfig, context, facts.uid, dry_run=False)
        report.stacks.append({**counts.as_dict(), "stack": "platform (second pass)"})
        say(_counts_line(counts.as_dict()))
    return again


def _left_out_objects(rendered: Any, stack_plan: Any) -> list[dict[str, Any]]:
    names = {s.what for s in stack_plan.skipped if s.cause == "unserved"}
    return [o for o in rendered.objects() if f"{o['kind']} {o['metadata']['name']}" in names]


def run_down(inventory: Path | None, *, state_dir: Path | None = None, world_dir: Path | None = None,
             kubeconfig: Path | None = None, keep_world: bool = False, quiet: bool = False,
             context: str | None = None, confirm: Callable[[Any], bool] | None = None,
             backend: str | None = None) -> Report:
    """The body of ``gpucluster down``: tenants, then platform, then (local) the world.

    Before the stacks are destroyed object by object, what that deletes (from the stack state: each
    Namespace with the pods and PersistentVolumeClaims it holds now, Helm releases, other objects by
    kind) and what it keeps (adopted objects) is printed and put in the report; ``confirm`` (the CLI's
    question, unless ``--yes``) gets that :class:`~gpucluster.pulumi.teardown.Teardown` and may stop
    the run (:class:`~gpucluster.errors.Declined`) before anything is deleted. None: no question.

    On the local world (without ``keep_world``) the stacks are not destroyed object by object: the
    world is stopped and its etcd data deleted, which takes every object with it in a second instead
    of waiting for each deletion; the stack state goes too, as it describes nothing any more. Nothing
    is asked there: the simulated world and everything in it are gpucluster's.
    """
    report = Report("?", "destroy")
    run = Runner(report, quiet)
    with run.phase("validate"):
        spec = inventories.load(inventory)
        report.environment = spec.metadata.name
        backend = _backend_for(spec, backend, kubeconfig)
    state = _state_of(spec, state_dir, world_dir, kubeconfig)
    with _held(spec, state, world_dir, kubeconfig, inventory):
        return _down(report, run, spec, state, world_dir=world_dir, kubeconfig=kubeconfig, keep_world=keep_world,
                     context=context, confirm=confirm, backend=backend)


def _down(report: Report, run: Runner, spec: ClusterSpec, state: Path, *, world_dir: Path | None,
          kubeconfig: Path | None, keep_world: bool, context: str | None = None,
          confirm: Callable[[Any], bool] | None = None, backend: str | None = None) -> Report:
    from gpucluster.pulumi.engine import Engine
    from gpucluster.pulumi.plan import StackPlan

    local = inventories.is_local(spec) and kubeconfig is None
    world = None
    if not local and kubeconfig is None:
        from gpucluster import hostlayer

        # The admin kubeconfig an earlier `up` fetched from the init host, when there is one.
        fetched = hostlayer.kubeconfig_path(state)
        kubeconfig = fetched if fetched.exists() else None
    if local:
        world = local_world_phase(world_dir, spec, Path("."), start=False, say=run.console.print)
        kubeconfig = world.kubeconfig if world else None
        if world is None or not keep_world:
            if world is not None:
                with run.phase("local world") as say:
                    stopped = world.down()
                    say(f"stopped {', '.join(stopped) or 'nothing'}; the cluster's data went with it")
            ownership.remove(state, STACK_STATE, STACK_STATE_PARTS)
            report.notes.append("local world (SIMULATED, all of it gpucluster's) stopped with its data: every "
                                "object in it went with it, nothing was asked (`down --keep-world` destroys the "
                                "stacks object by object, listing and asking as on a real cluster); stack state "
                                "removed" if world is not None else
                                "local world not running: nothing to destroy; stack state removed")
            return report
    engine = Engine(state, spec.metadata.name, backend)
    engine.share_salt(("tenants", "platform"))
    with run.phase("what down deletes"):
        from gpucluster.pulumi import teardown
        from gpucluster.pulumi.cluster import live_uids, namespace_contents

        states = {name: engine.state_resources(name) for name in ("tenants", "platform")}
        plan_ = teardown.of(spec.metadata.name, states, lambda nss: namespace_contents(kubeconfig, nss, context),
                            lambda wanted: live_uids(kubeconfig, wanted, context))
        report.teardown = plan_.as_dict()
    for line in plan_.lines():
        run.console.print(line, soft_wrap=True, markup=False)
    if confirm is not None and not plan_.empty and not confirm(plan_):
        raise Declined("nothing was deleted")
    if plan_.replaced:
        with run.phase("state") as say:
            for rec in plan_.replaced:
                engine.forget(rec.stack, rec.urn)
            say(f"{len(plan_.replaced)} object(s) re-made by someone else dropped from the stack state, left in place")
    if plan_.orphaned:
        with run.phase("state") as say:
            for patch in plan_.orphaned:
                engine.forget(patch.stack, patch.urn)
            say(f"{len(plan_.orphaned)} patch(es) of objects that are gone dropped from the stack state: "
                + ", ".join(str(p.target) for p in plan_.orphaned))
    empty = {n: StackPlan(n) for n in ("platform", "tenants")}
    programs = _programs(empty, kubeconfig, context)
    for name in ("tenants", "platform"):
        with run.phase(f"{name} stack") as say:
            counts = engine.run(name, "destroy", programs[name])
            report.stacks.append(counts.as_dict())
            say(_counts_line(counts.as_dict()))
    return report


def run_drift(inventory: Path | None, *, state_dir: Path | None = None, world_dir: Path | None = None,
              kubeconfig: Path | None = None, context: str | None = None, backend: str | None = None) -> Any:
    """The body of ``gpucluster drift``: every object the stacks' state records, compared with the cluster
    (:mod:`gpucluster.pulumi.drift`); changes nothing. Holds the stack state's lock (an ``up`` under way
    would make the state and the cluster disagree for a moment)."""
    from gpucluster import kube
    from gpucluster.pulumi import drift
    from gpucluster.pulumi.cluster import DriftApi, api_resources
    from gpucluster.pulumi.engine import Engine

    spec = inventories.load(inventory)
    backend = _backend_for(spec, backend, kubeconfig)
    state = _state_of(spec, state_dir, world_dir, kubeconfig)
    local = inventories.is_local(spec) and kubeconfig is None
    engine = Engine(state, spec.metadata.name, backend)
    if not any(engine.state_resources(n, pending=False) for n in ("platform", "tenants")):
        raise InputError(f"no stack state of {spec.metadata.name} in {state}: nothing was applied from there, so "
                         "there is nothing to compare. Run `gpucluster up` first, or pass the --state-dir it used.")
    if local:
        from gpucluster.local.world import World

        world = World(world_dir)
        if not world.kubeconfig.is_file():
            raise InputError(f"the local world in {world.dir} is not running: start it with `gpucluster up`")
        kubeconfig = world.kubeconfig
    elif kubeconfig is None:
        from gpucluster import hostlayer

        fetched = hostlayer.kubeconfig_path(state)
        kubeconfig = fetched if fetched.exists() else None
    with lockfile.hold(state, f"the stacks of {spec.metadata.name}"), kube.Kube(kubeconfig, context=context) as api:
        states = {n: engine.state_resources(n, pending=False) for n in ("platform", "tenants")}
        return drift.of(spec.metadata.name, states, DriftApi(api, api_resources(api)))


def run_backup_stacks(inventory: Path | None, out: Path, *, state_dir: Path | None = None,
                      world_dir: Path | None = None, backend: str | None = None) -> dict[str, Any]:
    """The body of ``gpucluster backup stacks`` (:mod:`gpucluster.pulumi.statebackup`): holds the state's lock."""
    from gpucluster.pulumi import statebackup
    from gpucluster.pulumi.engine import Engine

    spec = inventories.load(inventory)
    backend = _backend_for(spec, backend, None)
    state = _state_of(spec, state_dir, world_dir, None)
    engine = Engine(state, spec.metadata.name, backend)
    with lockfile.hold(state, f"the stacks of {spec.metadata.name}"):
        doc = statebackup.take(engine, spec.metadata.name)
        statebackup.write(out, doc)
    return {"environment": spec.metadata.name, "file": str(out), "takenAt": doc["takenAt"],
            "stacks": {n: len(doc["stacks"][n]["deployment"].get("resources") or []) for n in statebackup.STACKS}}


def run_restore_stacks(inventory: Path | None, source: Path, *, state_dir: Path | None = None,
                       world_dir: Path | None = None, replace: bool = False,
                       backend: str | None = None) -> dict[str, Any]:
    """The body of ``gpucluster restore stacks``: the file checked first, then the state held as ``up`` holds it."""
    from gpucluster.pulumi import statebackup
    from gpucluster.pulumi.engine import Engine

    spec = inventories.load(inventory)
    doc = statebackup.read(source, spec.metadata.name)
    backend = _backend_for(spec, backend, None)
    state = _state_of(spec, state_dir, world_dir, None)
    with _held(spec, state, world_dir, None, inventory):
        counts = statebackup.restore(Engine(state, spec.metadata.name, backend), doc, replace=replace)
    return {"environment": spec.metadata.name, "file": str(source), "takenAt": doc["takenAt"], "stacks": counts}


def _local_world_of(world_dir: Path | None) -> Any:
    from gpucluster.local.world import World

    return World(world_dir)


def _playbook_runner(inventory: Path | None, spec: ClusterSpec, state_dir: Path | None,
                     say: Callable[[str], None]) -> Callable[[tuple[str, ...], dict[str, Any]], Any]:
    """Runs host-layer playbooks on the hosts of ``inventory`` (its events recorded beside its stack state)."""
    from gpucluster import hostlayer

    record = hostlayer.kubeconfig_path(state_dir or inventories.stack_state(spec.metadata.name))

    def run(playbooks: tuple[str, ...], extra: dict[str, Any]) -> Any:
        return hostlayer.run(inventories.resolve(inventory), record, say, playbooks=playbooks, extra_vars=extra)
    return run


def run_backup_etcd(inventory: Path | None, out: Path, *, world_dir: Path | None = None,
                    state_dir: Path | None = None, say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The body of ``gpucluster backup etcd``: the local world's etcd (:mod:`gpucluster.local.etcdsnap`), or a
    kubeadm cluster's through its first control-plane host (:mod:`gpucluster.etcdhosts`)."""
    spec = inventories.load(inventory)
    if not inventories.is_local(spec):
        from gpucluster import etcdhosts

        return etcdhosts.save(spec, out, _playbook_runner(inventory, spec, state_dir, say))
    from gpucluster.local import etcdsnap

    world = _local_world_of(world_dir)
    with world.hold():
        return etcdsnap.save(world, out)


def run_restore_etcd(inventory: Path | None, source: Path, *, world_dir: Path | None = None,
                     state_dir: Path | None = None, yes: bool = False,
                     say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The body of ``gpucluster restore etcd``: everything written since the snapshot is lost, so only with ``yes``."""
    spec = inventories.load(inventory)
    local = inventories.is_local(spec)
    if not yes:
        if local:
            from gpucluster.local import etcdsnap

            kept = f"the replaced data is kept as {_local_world_of(world_dir).dir / etcdsnap.BEFORE_RESTORE}"
            what = "the whole local world"
        else:
            kept = "each control-plane host keeps the etcd data it replaced as <data-dir>/member.before-restore-<time>"
            what = (f"the whole cluster {spec.metadata.name} (every control-plane host's API server, controllers "
                    "and etcd stop meanwhile)")
        raise InputError(f"restoring {source} puts {what} back to the moment it was taken: everything written since "
                         f"is lost ({kept}). Pass --yes to restore")
    if not local:
        from gpucluster import etcdhosts

        return etcdhosts.restore(spec, source, _playbook_runner(inventory, spec, state_dir, say))
    from gpucluster.local import etcdsnap

    return etcdsnap.restore(_local_world_of(world_dir), source)


#: How a stack the engine did not run is reported (see :func:`_apply`).
INPUTS_UNCHANGED = "unchanged (inputs identical to the last update)"


def _counts_line(c: dict[str, Any]) -> str:
    if c.get("inputs_unchanged"):
        return f"{c['stack']}: {INPUTS_UNCHANGED}: {c['same']} resources as that update left them"
    return (f"{c['stack']}: {c['created']} created, " + (f"{c['imported']} imported, " if c.get("imported") else "")
            + f"{c['updated']} updated, {c['deleted']} deleted, {c['same']} unchanged")
