"""``gpucluster up`` and ``gpucluster down``: the whole flow in one command.

``up``: validate the spec → (the local world, when the spec's environment is ``local``) → the
platform stack → the tenants stack → wait until the cluster has acted on them → verify the cluster
against the spec (the checks of ``gpucluster verify``) → a summary. ``down``
destroys in reverse order. Each phase is timed; a failure names the phase (and, from the engine, the
resource), keeps the stack state, and the next run continues from there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from gpucluster.errors import GpuclusterError, InputError


class PhaseFailed(GpuclusterError):
    """A phase of ``up``/``down`` failed; the message starts with the phase."""


@dataclass
class Report:
    """What a run did: phases with timings, per-stack counts, what was left out, what is not ready."""

    environment: str
    operation: str
    phases: list[dict[str, Any]] = field(default_factory=list)
    stacks: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    not_ready: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Cluster checks after `up`: counts plus every failed and skipped row (with its reason).
    verify: dict[str, Any] = field(default_factory=dict)


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
                failed = PhaseFailed(f"phase {name!r} failed: {err}")
                failed.exit_code = err.exit_code  # a user mistake stays exit 2
                raise failed from None
        seconds = time.monotonic() - start
        self.report.phases.append({"phase": name, "seconds": round(seconds, 2)})
        if self.problem:
            self.console.print(f"[red]✗ {name}[/red] ({seconds:.1f} s): {self.problem}")
            self.problem = ""
        else:
            self.console.print(f"[green]✓[/green] {name} ({seconds:.1f} s)")


@dataclass
class Target:
    """The cluster a run acts on and where its stack state lives."""

    kubeconfig: Path | None
    state_dir: Path
    local_world: Any = None  # gpucluster.local.world.World for the local inventory


def _is_local(spec: Any) -> bool:
    return spec.metadata.environment == "local"


def _stack_state(state_dir: Path | None, env: str) -> Path:
    """Stack state of a real cluster: ``$GPUCLUSTER_STATE/stacks/<env>`` (the local world keeps its own)."""
    import os

    base = state_dir or Path(os.environ.get("GPUCLUSTER_STATE") or Path.home() / ".local/state/gpucluster")
    return Path(base).expanduser() / "stacks" / env


def local_world_phase(world_dir: Path | None, spec: Any, inventory: Path, *, start: bool,
                      say: Callable[[str], None]) -> Any:
    """The local-world phase: control plane up (or already up), CRDs, simulated GPU nodes.

    Returns the ``World``. ``start=False`` (dry runs, ``down``) only attaches to a running world.
    """
    from gpucluster.local.world import World

    world = World(world_dir, say=say)
    if not start:
        return world if world.healthy() else None
    result = world.up()
    say("control plane already running" if result.already_running
        else f"control plane up in {result.seconds:.1f} s")
    if not result.already_running:
        # A fresh control plane has an empty etcd: stack state from an earlier world describes
        # objects that no longer exist, so it goes (otherwise `up` would report them unchanged).
        import shutil

        shutil.rmtree(world.dir / "pulumi", ignore_errors=True)
    from gpucluster.toolchain import locate

    if result.already_running:
        # A running world got its CRDs when it started; the plan phase lists any kind still missing.
        say("operator CRDs left as they are")
    elif locate("crds") is not None:
        from gpucluster.local.crds import install_crds

        say(f"{len(install_crds(world.kubeconfig))} operator CRDs installed (generated or stand-in)")
    else:
        say("operator CRDs not built (`gpucluster tools install crds`): their objects are skipped")
    _addons(world, spec, inventory, say)
    return world


def _addons(world: Any, spec: Any, inventory: Path, say: Callable[[str], None]) -> None:
    """Simulated GPU nodes (kept current in the background) and Volcano, as `gpucluster local up` does."""
    from gpucluster.toolchain import ToolMissing

    try:
        from gpucluster.local import addons
    except ImportError:  # an older local world: nodes only
        from gpucluster.local.simulator import attach

        attach(world, spec, say=say).close()
        return
    try:
        addons.start(world, spec, inventory, say=say)
    except ToolMissing as err:
        # The nodes are registered before Volcano starts; without its binaries Volcano's Queues
        # still apply (CRDs) but nothing schedules gangs. Say so rather than fail the whole run.
        say(f"Volcano not started: {err}")


def _programs(plans: dict, kubeconfig: Path | None) -> dict[str, Callable[[], Any]]:
    from gpucluster.pulumi.programs import PROGRAMS

    kc = str(kubeconfig) if kubeconfig else None
    return {name: (lambda n=name: PROGRAMS[n](plans[n], kc)) for name in PROGRAMS}


def run_up(inventory: Path | None, *, dry_run: bool = False, state_dir: Path | None = None,
           world_dir: Path | None = None, kubeconfig: Path | None = None, quiet: bool = False,
           verify: bool = True) -> Report:
    """The body of ``gpucluster up`` (callable from tests and benchmarks)."""
    from gpucluster.cli import _load

    report = Report("?", "preview" if dry_run else "up")
    run = Runner(report, quiet)
    with run.phase("validate"):
        spec = _load(inventory)
        report.environment = spec.metadata.name
    world = None
    if _is_local(spec) and kubeconfig is None:
        with run.phase("local world"):
            from gpucluster.cli import default_inventory

            world = local_world_phase(world_dir, spec, inventory or default_inventory(), start=not dry_run,
                                      say=run.console.print)
            if world is None:
                raise InputError("the local world is not running; a dry run does not start it: run "
                                 "`gpucluster local up` (or `gpucluster up`) first")
            kubeconfig = world.kubeconfig
            report.notes.append("local world: GPUs and kubelets are SIMULATED (kwok nodes); the control "
                                "plane, the Pulumi engine and the provider are real")
    state = state_dir or (world.dir / "pulumi" if world is not None
                          else _stack_state(None, spec.metadata.name))
    _stacks(report, run, spec, kubeconfig, state, local=world is not None, dry_run=dry_run)
    if verify and not dry_run:
        with run.phase("verify") as say:
            report.verify = verify_cluster(spec, kubeconfig)
            c = report.verify["summary"]
            say(f"{c['pass']} checks passed, {c['fail']} failed, {c['skip']} skipped")
            if c["fail"]:
                run.problem = f"{c['fail']} check(s) failed"
    return report


def verify_cluster(spec: Any, kubeconfig: Path | None, *, settle_s: float = 30.0) -> dict[str, Any]:
    """The cluster checks of ``gpucluster verify`` (no host or metric checks) after ``up``.

    Simulated or real node agents act on what the stacks just applied a little later, so a failing
    check is looked at again every 2 s for up to ``settle_s`` before it counts. Returns the counts
    and every failed or skipped row.
    """
    from gpucluster import expected
    from gpucluster.verify import cluster, report, snapshot
    from gpucluster.verify.model import Verdict

    states = expected.host_states(spec)
    deadline = time.monotonic() + settle_s
    while True:
        results = cluster.run(spec, snapshot.fetch(str(kubeconfig) if kubeconfig else None), states)
        failed = any(r.verdict is Verdict.failed for r in results)
        if not failed or time.monotonic() >= deadline:
            break
        time.sleep(2)
    return {"summary": report.counts(results),
            "problems": [r.to_dict() for r in results if r.verdict is not Verdict.passed]}


def _stacks(report: Report, run: Runner, spec: Any, kubeconfig: Path | None, state: Path, *,
            local: bool, dry_run: bool) -> Report:
    from gpucluster.pulumi.cluster import discover, wait_ready
    from gpucluster.pulumi.engine import Engine
    from gpucluster.pulumi.plan import plan
    from gpucluster.render import render

    with run.phase("plan"):
        facts = discover(kubeconfig, remote_charts=not local)
        plans = plan(render(spec), facts)
        report.skipped = [s.__dict__ for p in plans.values() for s in p.skipped]
        engine = Engine(state, spec.metadata.name)
        engine.setup()
    programs = _programs(plans, kubeconfig)
    for name in ("platform", "tenants"):
        with run.phase(f"{name} stack") as say:
            counts = engine.run(name, "preview" if dry_run else "up", programs[name], on_output=None)
            report.stacks.append(counts.as_dict())
            say(_counts_line(counts.as_dict()))
    if not dry_run:
        with run.phase("readiness"):
            report.not_ready = wait_ready(kubeconfig, [o for p in plans.values() for o in p.objects()])
            if local:
                from gpucluster.local.simulator import Simulator

                # The simulated node agents read the configuration the stacks just applied.
                sim = Simulator(spec, Path(kubeconfig or ""))
                sim.sync()
                sim.close()
    return report


def run_down(inventory: Path | None, *, state_dir: Path | None = None, world_dir: Path | None = None,
             kubeconfig: Path | None = None, keep_world: bool = False, quiet: bool = False) -> Report:
    """The body of ``gpucluster down``: tenants, then platform, then (local) the world."""
    from gpucluster.cli import _load
    from gpucluster.pulumi.engine import Engine
    from gpucluster.pulumi.plan import StackPlan

    report = Report("?", "destroy")
    run = Runner(report, quiet)
    with run.phase("validate"):
        spec = _load(inventory)
        report.environment = spec.metadata.name
    world = None
    if _is_local(spec) and kubeconfig is None:
        from gpucluster.local.world import World

        world = local_world_phase(world_dir, spec, Path("."), start=False, say=run.console.print)
        kubeconfig = world.kubeconfig if world else None
        state = state_dir or World(world_dir).dir / "pulumi"
    else:
        state = state_dir or _stack_state(None, spec.metadata.name)
    if world is None and _is_local(spec) and kubeconfig is None:
        # The cluster is gone with the world: there is nothing left to destroy, only stale state.
        import shutil

        shutil.rmtree(state, ignore_errors=True)
        report.notes.append("local world not running: nothing to destroy; stack state removed")
        return report
    engine = Engine(state, spec.metadata.name)
    empty = {n: StackPlan(n) for n in ("platform", "tenants")}
    programs = _programs(empty, kubeconfig)
    for name in ("tenants", "platform"):
        with run.phase(f"{name} stack") as say:
            counts = engine.run(name, "destroy", programs[name])
            report.stacks.append(counts.as_dict())
            say(_counts_line(counts.as_dict()))
    if world is not None and not keep_world:
        with run.phase("local world"):
            world.down()
    return report


def _counts_line(c: dict[str, Any]) -> str:
    return (f"{c['stack']}: {c['created']} created, {c['updated']} updated, {c['deleted']} deleted, "
            f"{c['same']} unchanged")


def print_report(report: Report, output: str) -> None:
    """The summary: JSON on stdout, or a rich table."""
    if output == "json":
        click.echo(json.dumps(report.__dict__, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    table = Table(title=f"{report.environment}: {report.operation}")
    for col in ("stack", "created", "updated", "deleted", "unchanged", "seconds"):
        table.add_column(col, justify="left" if col == "stack" else "right")
    for c in report.stacks:
        table.add_row(c["stack"], *(str(c[k]) for k in ("created", "updated", "deleted", "same", "seconds")))
    console.print(table)
    changed = sum(c["created"] + c["updated"] + c["deleted"] for c in report.stacks)
    if report.stacks and not changed:
        console.print("no changes: the cluster already matches the spec")
    for s in report.skipped:
        console.print(f"[yellow]not installed[/yellow] ({s['stack']}) {s['what']}: {s['reason']}")
    for item in report.not_ready:
        console.print(f"[yellow]not ready[/yellow] {item}")
    if report.verify:
        c = report.verify["summary"]
        console.print(f"verify: {c['pass']} checks passed, {c['fail']} failed, {c['skip']} skipped "
                      "(`gpucluster verify` shows every row)")
        skips: dict[tuple[str, str], int] = {}
        for p in report.verify["problems"]:
            if p["verdict"] == "fail":
                console.print(f"[red]failed[/red] {p['check']} {p['subject']}: expected {p['expected']}, "
                              f"actual {p['actual']}", soft_wrap=True)
            else:
                skips[(p["check"], p["reason"])] = skips.get((p["check"], p["reason"]), 0) + 1
        for (check, reason), n in sorted(skips.items()):
            console.print(f"[yellow]skipped[/yellow] {check}{f' x{n}' if n > 1 else ''}: {reason}", soft_wrap=True)
    for note in report.notes:
        console.print(f"note: {note}")


_common = [
    click.option("-i", "--inventory", type=click.Path(path_type=Path), default=None,
                 help="Inventory folder (default: inventories/local, the local world)."),
    click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True),
    click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                 help="Where stack state lives (file backend) [default: ~/.local/state/gpucluster]."),
    click.option("--world-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                 help="State folder of the local world (local inventory only)."),
    click.option("--kubeconfig", type=click.Path(dir_okay=False, path_type=Path), default=None,
                 help="Cluster to act on (default: the local world, else $KUBECONFIG)."),
]


def _options(f: Callable) -> Callable:
    for opt in reversed(_common):
        f = opt(f)
    return f


@click.command("up")
@_options
@click.option("--dry-run", is_flag=True, help="Preview both stacks; change nothing.")
@click.option("--no-verify", is_flag=True, help="Skip the cluster checks that end a run.")
def up(inventory: Path | None, output: str, state_dir: Path | None, world_dir: Path | None,
       kubeconfig: Path | None, dry_run: bool, no_verify: bool) -> None:
    """Bring the cluster to the spec: local world (local inventory), platform and tenants stacks, verify.

    Exit 1 when an object did not become ready or a cluster check failed.
    """
    report = run_up(inventory, dry_run=dry_run, state_dir=state_dir, world_dir=world_dir,
                    kubeconfig=kubeconfig, quiet=output == "json", verify=not no_verify)
    print_report(report, output)
    if report.not_ready or (report.verify and report.verify["summary"]["fail"]):
        raise click.exceptions.Exit(1)


@click.command("down")
@_options
@click.option("--keep-world", is_flag=True, help="Leave the local world running (local inventory).")
def down(inventory: Path | None, output: str, state_dir: Path | None, world_dir: Path | None,
         kubeconfig: Path | None, keep_world: bool) -> None:
    """Destroy the tenants stack, then the platform stack, then (local inventory) the local world."""
    report = run_down(inventory, state_dir=state_dir, world_dir=world_dir, kubeconfig=kubeconfig,
                      keep_world=keep_world, quiet=output == "json")
    print_report(report, output)


commands = [up, down]
