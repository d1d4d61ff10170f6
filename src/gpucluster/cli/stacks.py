"""``gpucluster up`` and ``gpucluster down``: the whole flow in one command (see :mod:`gpucluster.flow`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import click

from gpucluster import flow
from gpucluster.cli import jsonout, options, target
from gpucluster.errors import ConfirmationNeeded, Failed
from gpucluster.flow import Report
from gpucluster.verify.report import summary_line

if TYPE_CHECKING:
    from gpucluster.pulumi.teardown import Teardown


def print_report(report: Report, output: str) -> None:
    """The summary: JSON on stdout, or a rich table."""
    if output == "json":
        jsonout.emit(report.__dict__)
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    if report.hosts:
        hosts = Table(title=f"{report.environment}: host layer")
        for col in ("host", "ok", "changed", "failed", "unreachable", "skipped"):
            hosts.add_column(col, justify="left" if col == "host" else "right")
        for name, counts in sorted(report.hosts.items()):
            hosts.add_row(name, *(str(counts.get(k, 0)) for k in ("ok", "changed", "failures", "unreachable",
                                                                  "skipped")))
        console.print(hosts)
    table = Table(title=f"{report.environment}: {report.operation}")
    for col in ("stack", "created", "updated", "deleted", "unchanged", "seconds"):
        table.add_column(col, justify="left" if col == "stack" else "right")
    for c in report.stacks:
        table.add_row(c["stack"], *(str(c[k]) for k in ("created", "updated", "deleted", "same", "seconds")))
    console.print(table)
    for c in report.stacks:
        if c.get("inputs_unchanged"):
            console.print(f"{c['stack']}: {flow.INPUTS_UNCHANGED}; the engine did not run", soft_wrap=True)
    changed = sum(c["created"] + c["updated"] + c["deleted"] for c in report.stacks)
    changed += sum(h.get("changed", 0) for h in report.hosts.values())
    if report.stacks and not changed:
        console.print("no changes: " + ("the hosts and the cluster already match the spec" if report.hosts
                                        else "the cluster already matches the spec"))
    for s in report.skipped:
        mark = "[red]not applied[/red]" if s.get("cause") == "unserved" else "[yellow]not installed[/yellow]"
        console.print(f"{mark} ({s['stack']}) {s['what']}: {s['reason']}")
    for item in report.ownership.get("adopted", []):
        console.print(f"adopted {item}: imported into the stack state; `gpucluster down` leaves it in place",
                      markup=False)
    for item in report.not_ready:
        console.print(f"[yellow]not ready[/yellow] {item}")
    if report.verify:
        c = report.verify["summary"]
        console.print(f"verify: {summary_line(c)} (`gpucluster verify` shows every row)")
        skips: dict[tuple[str, str], int] = {}
        for p in report.verify["problems"]:
            if p["verdict"] == "fail":
                console.print(f"[red]failed[/red] {p['check']} {p['subject']}: expected {p['expected']}, "
                              f"actual {p['actual']}", soft_wrap=True)
            elif p["verdict"] == "warn":
                console.print(f"[yellow]warning[/yellow] {p['check']} {p['subject']}: {p['reason']}", soft_wrap=True)
            else:
                skips[(p["check"], p["reason"])] = skips.get((p["check"], p["reason"]), 0) + 1
        allowed = report.verify.get("allowedNotMeasured", {})
        for (check, reason), n in sorted(skips.items()):
            mark = f"not measured (allowed: {allowed[check]})" if check in allowed else "not measured"
            console.print(f"[yellow]{mark}[/yellow] {check}{f' x{n}' if n > 1 else ''}: {reason}", soft_wrap=True)
    for note in report.notes:
        console.print(f"note: {note}")



def _announce(command: str, inventory: Path | None, state_dir: Path | None, world_dir: Path | None,
              kubeconfig: Path | None, context: str | None, *, fetched_later: bool = False) -> None:
    """Say what ``command`` acts on (stderr), or refuse the local world's spec on another cluster (exit 2).

    A spec that does not load (or no inventory) is left to the run's validate phase, which reports it.
    """
    from gpucluster import inventory as inventories
    from gpucluster.errors import InputError

    try:
        spec = inventories.load(inventory)
    except InputError:
        return
    target.announce(command, target.of(spec, inventory, kubeconfig, context, world_dir=world_dir,
                                       state_dir=state_dir, fetched_later=fetched_later))


#: --backend of every command that reads or writes the stack state.
_backend = click.option(
    "--backend", "backend", default=None, metavar="URL",
    help="Keep the stack state in this Pulumi backend, shared by every runner (s3://BUCKET?region=...&endpoint=..., "
         "gs://, azblob://, file://) [default: $PULUMI_BACKEND_URL, else the state folder]. Each stack is locked "
         "while an update runs; every runner needs the same PULUMI_CONFIG_PASSPHRASE. docs/gitops.md.")


@click.command("up")
@options.inventory
@_backend
@options.output("text", "json")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where stack state lives (file backend), with the admin kubeconfig the host layer fetches "
                   "[default: ~/.local/state/gpucluster/stacks/<env>].")
@options.world_dir
@options.cluster
@options.no_chart_repositories
@click.option("--skip-hosts", is_flag=True, help="Real hosts: start at the stacks (the host layer, playbooks/"
              "site.yml, is not run; the stacks use --kubeconfig or the admin kubeconfig an earlier run fetched).")
@click.option("--dry-run", is_flag=True, help="Preview both stacks; change nothing.")
@click.option("--only", "only", multiple=True, type=click.Choice(["platform", "tenants"]),
              help="Run only this stack (repeatable), no host layer: `--only tenants` applies a tenant or quota "
                   "change without touching the hosts or the operators. Verify still checks the whole spec.")
@click.option("--limit", "limit", multiple=True, metavar="HOST[,HOST...]",
              help="Real hosts: the host layer changes only these hosts of the spec (a node added to spec.hosts, "
                   "one being repaired), then both stacks run. Repeatable.")
@click.option("--no-verify", is_flag=True, help="Skip the cluster checks that end a run.")
@click.option("--reset", is_flag=True, help="Local world: discard it (its data too) and start a fresh one.")
@options.allow_not_measured
@click.option("--adopt", "adopt", multiple=True, metavar="KIND/NAMESPACE/NAME",
              help="Take over an object the stacks would create that already exists on the cluster (NAMESPACE "
                   "empty when cluster-scoped: Namespace//monitoring; a Helm release: Release/NAMESPACE/NAME): "
                   "it is imported and `down` leaves it. Repeatable. Without it, `up` refuses (exit 2) any "
                   "such object it did not create, before changing anything.")
def up(inventory: Path | None, output: str, state_dir: Path | None, world_dir: Path | None,
       kubeconfig: Path | None, context: str | None, no_chart_repositories: bool, skip_hosts: bool,
       dry_run: bool, only: tuple[str, ...], limit: tuple[str, ...], no_verify: bool, reset: bool,
       allow_not_measured: tuple[str, ...], adopt: tuple[str, ...], backend: str | None) -> None:
    """Bring the cluster to the spec: the local world (local inventory) or the host layer (real hosts:
    playbooks/site.yml, then the admin kubeconfig from the init host), the platform and tenants
    stacks, verify.

    Exit 1 when a host task failed, an object did not become ready, a cluster check failed or a row could
    not be measured whose check is not allowed to be (--allow-not-measured); 2 for bad input or when an
    object the stacks would create exists and is neither in the stack state nor adopted.
    """
    _announce("up", inventory, state_dir, world_dir, kubeconfig, context, fetched_later=not (skip_hosts or only))
    from gpucluster.verify import checks

    allowed = checks.parse(allow_not_measured)
    report = flow.run_up(inventory, dry_run=dry_run, state_dir=state_dir, world_dir=world_dir,
                         kubeconfig=kubeconfig, verify=not no_verify, reset=reset,
                         context=context, allow_not_measured=allowed, hosts=not skip_hosts,
                         chart_repositories=not no_chart_repositories, adopt=adopt, only=only,
                         limit=[h for value in limit for h in value.split(",") if h], backend=backend)
    print_report(report, output)
    problems = []
    if report.left_out:
        problems.append(f"{len(report.left_out)} object(s) not applied: their kind is not served (install the "
                        "operators that own those CRDs, or enable them in the spec, and run up again)")
    if report.not_ready:
        problems.append(f"{len(report.not_ready)} object(s) not ready")
    if report.verify and report.verify["summary"]["fail"]:
        problems.append(f"{report.verify['summary']['fail']} check(s) failed")
    elif report.verify:
        from gpucluster.verify.model import Result
        from gpucluster.verify.model import problems as verify_problems

        rows = [Result.from_dict(p) for p in report.verify["problems"]]
        problem = verify_problems(rows, report.verify.get("allowedNotMeasured", {}))
        if problem:
            problems.append(problem)
    if problems:
        raise Failed("; ".join(problems))


@click.command("down")
@options.inventory
@_backend
@options.output("text", "json")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where stack state lives (file backend) [default: ~/.local/state/gpucluster].")
@options.world_dir
@options.cluster
@click.option("--keep-world", is_flag=True, help="Leave the local world running (local inventory).")
@click.option("-y", "--yes", is_flag=True, help="Delete without asking (pipelines). Without it `down` lists what it "
              "deletes and asks; on a non-interactive stdin it refuses (exit 2).")
def down(inventory: Path | None, output: str, state_dir: Path | None, world_dir: Path | None,
         kubeconfig: Path | None, context: str | None, keep_world: bool, yes: bool, backend: str | None) -> None:
    """Destroy the tenants stack, then the platform stack, then (local inventory) the local world.

    Only what the stack state records as created by gpucluster is deleted; adopted objects (`up --adopt`)
    stay. Before deleting, `down` lists each Namespace with the pods and PersistentVolumeClaims it holds
    (they go with it), the Helm releases and the other objects, and asks unless --yes. The local world
    without --keep-world is stopped with its data (simulated, all of it gpucluster's): nothing is asked.
    """
    _announce("down", inventory, state_dir, world_dir, kubeconfig, context)
    report = flow.run_down(inventory, state_dir=state_dir, world_dir=world_dir, kubeconfig=kubeconfig,
                           keep_world=keep_world, context=context,
                           confirm=None if yes else ask_before_deleting, backend=backend)
    print_report(report, output)


def ask_before_deleting(plan: Teardown, *, show: bool = False, stdin: TextIO | None = None) -> bool:
    """``down``'s question. ``show``: print the listing first (for a caller whose run printed none).

    A stdin that is not a terminal cannot answer: :class:`ConfirmationNeeded` (exit 2) says to pass ``--yes``.
    """
    if show:
        for line in plan.lines():
            click.echo(line, err=True)
    stdin = stdin or sys.stdin
    if not stdin.isatty():
        raise ConfirmationNeeded("`gpucluster down` deletes the objects listed above and asks first, but stdin is "
                                 "not a terminal, so it cannot ask: nothing was deleted. Pass --yes to confirm "
                                 "(pipelines), or run it in a terminal.")
    return click.confirm("Delete them?", default=False, err=True)


def _progress(output: str) -> Callable[[str], None]:
    """Where a command's progress lines go: stdout for text, stderr when stdout is a JSON document."""
    return (lambda line: click.echo(line, err=True)) if output == "json" else click.echo


#: --state-dir of the commands that read the state `up` wrote (drift, plan).
_state_dir_as_given_to_up = click.option(
    "--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Where stack state lives (file backend), as given to `up` [default: ~/.local/state/gpucluster].")


@click.command("drift")
@options.inventory
@_backend
@options.output("text", "json")
@_state_dir_as_given_to_up
@options.world_dir
@options.cluster
def drift(inventory: Path | None, backend: str | None, output: str, state_dir: Path | None,
          world_dir: Path | None, kubeconfig: Path | None, context: str | None) -> None:
    """Say which objects of the stacks were changed on the cluster outside them, field by field; change nothing.

    For each object the stack state records, the API server is asked what applying the stack's last inputs
    again would store (a dry-run server-side apply); a field the stack sets whose live value differs is
    listed with both values, and so is an object deleted or re-made by someone else. Helm releases are
    listed as not compared. Exit 0: no drift; 5: drift found; 1: the cluster could not be read; 2: bad
    input (no stack state, a spec that does not load).
    """
    _announce("drift", inventory, state_dir, world_dir, kubeconfig, context)
    from gpucluster.errors import DriftFound

    report = flow.run_drift(inventory, state_dir=state_dir, world_dir=world_dir, kubeconfig=kubeconfig,
                            context=context, backend=backend)
    if output == "json":
        jsonout.emit(report.as_dict())
    else:
        for line in report.lines():
            click.echo(line)
    if report.drifted:
        raise DriftFound(f"{len(report.drifted)} object(s) changed outside the stacks; `gpucluster up` does not take "
                         "them back by itself (docs/stacks.md, \"A converged re-run\")")


@click.command("plan")
@options.inventory
@_backend
@options.output("text", "json")
@_state_dir_as_given_to_up
@options.world_dir
@options.cluster
@options.no_chart_repositories
@click.option("--out-dir", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also write plan.md and plan.json there (for a pull request); files of those names that "
                   "`gpucluster plan` did not write are refused.")
def plan(inventory: Path | None, backend: str | None, output: str, state_dir: Path | None, world_dir: Path | None,
         kubeconfig: Path | None, context: str | None, no_chart_repositories: bool, out_dir: Path | None) -> None:
    """What `up` would change in the stacks, object by object with each changed field; change nothing.

    The engine's preview of both stacks (the host layer is not run). Text: the plan as Markdown; json:
    plan.json. Exit 0: no changes; 5: changes pending; 2: bad input, or an object the stacks would create
    that exists and is not theirs (as `up`); 1: the preview failed.
    """
    _announce("plan", inventory, state_dir, world_dir, kubeconfig, context)
    from gpucluster.errors import DriftFound
    from gpucluster.pulumi import planfile

    report = flow.run_up(inventory, dry_run=True, state_dir=state_dir, world_dir=world_dir, kubeconfig=kubeconfig,
                         verify=False, context=context, hosts=False,
                         chart_repositories=not no_chart_repositories, quiet=True, backend=backend)
    doc = planfile.document(report.environment, report.stacks)
    if out_dir is not None:
        written = planfile.write(out_dir, doc)
        click.echo(f"wrote {', '.join(map(str, written))}", err=True)
    if output == "json":
        jsonout.emit(doc)
    else:
        click.echo(planfile.markdown(doc), nl=False)
    if doc["changes"]:
        raise DriftFound(f"{doc['changes']} change(s) pending: `gpucluster up` would make them")


@click.group("backup")
def backup() -> None:
    """Back up what gpucluster keeps: the stack state (`backup stacks`)."""


@backup.command("stacks")
@options.inventory
@_backend
@options.output("text", "json")
@_state_dir_as_given_to_up
@options.world_dir
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The file to write (mode 0600; never written over an existing file).")
def backup_stacks(inventory: Path | None, backend: str | None, output: str, state_dir: Path | None,
                  world_dir: Path | None, out: Path) -> None:
    """Write both stacks' state (`pulumi stack export` of each; secrets stay encrypted) into one file.

    The file restores with `gpucluster restore stacks` and the same passphrase (PULUMI_CONFIG_PASSPHRASE, else
    the state folder's `passphrase` file): keep that with it. Reads the state only; holds its lock meanwhile.
    Exit 2: no stack state, or the file exists.
    """
    result = flow.run_backup_stacks(inventory, out, state_dir=state_dir, world_dir=world_dir, backend=backend)
    if output == "json":
        jsonout.emit(result)
    else:
        click.echo(f"{result['file']}: the stack state of {result['environment']} ({result['stacks']['platform']} "
                   f"platform and {result['stacks']['tenants']} tenants resources)")


@backup.command("etcd")
@options.inventory
@options.output("text", "json")
@_state_dir_as_given_to_up
@options.world_dir
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The snapshot file to write (mode 0600; never written over an existing file).")
def backup_etcd(inventory: Path | None, output: str, state_dir: Path | None, world_dir: Path | None,
                out: Path) -> None:
    """Save a snapshot of the cluster's etcd (upstream's `etcdctl snapshot save`, checked with `etcdutl snapshot
    status`): the local world's, or a kubeadm cluster's from its first control-plane host
    (playbooks/etcd-snapshot.yml). The file holds every Secret: keep it as you keep the admin kubeconfig.
    Exit 2: no world running, the file exists."""
    result = flow.run_backup_etcd(inventory, out, world_dir=world_dir, state_dir=state_dir, say=_progress(output))
    if output == "json":
        jsonout.emit(result)
    else:
        where = f" from {result['host']}" if result.get("host") else ""
        click.echo(f"{result['file']}: etcd snapshot{where} at revision {result['revision']} ({result['keys']} keys, "
                   f"{result['bytes']} bytes)")


@click.group("restore")
def restore() -> None:
    """Restore what `gpucluster backup` wrote: the stack state (`restore stacks`), the local world's etcd
    (`restore etcd`)."""


@restore.command("stacks")
@options.inventory
@_backend
@options.output("text", "json")
@_state_dir_as_given_to_up
@options.world_dir
@click.option("--from", "source", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The file `gpucluster backup stacks` wrote.")
@click.option("-y", "--yes", is_flag=True, help="Replace a stack state that holds resources (without it: exit 2).")
def restore_stacks(inventory: Path | None, backend: str | None, output: str, state_dir: Path | None,
                   world_dir: Path | None, source: Path, yes: bool) -> None:
    """Put both stacks' state back from a backup (`pulumi stack import` of each); the cluster is not touched.

    The file must be a backup of this inventory's environment whose every resource belongs to its stacks
    (exit 2 otherwise, before any stack changes). The next `gpucluster up` (or `plan`) compares the restored
    state with the cluster as usual.
    """
    result = flow.run_restore_stacks(inventory, source, state_dir=state_dir, world_dir=world_dir, replace=yes,
                                     backend=backend)
    if output == "json":
        jsonout.emit(result)
    else:
        click.echo(f"restored the stack state of {result['environment']} from {result['file']} "
                   f"({result['stacks']['platform']} platform and {result['stacks']['tenants']} tenants resources, "
                   f"taken {result['takenAt']}); `gpucluster plan` shows what `up` would change from here")


@restore.command("etcd")
@options.inventory
@options.output("text", "json")
@_state_dir_as_given_to_up
@options.world_dir
@click.option("--from", "source", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The snapshot `gpucluster backup etcd` wrote.")
@click.option("-y", "--yes", is_flag=True, help="Restore (without it: exit 2; everything written since the snapshot "
              "is lost).")
def restore_etcd(inventory: Path | None, output: str, state_dir: Path | None, world_dir: Path | None, source: Path,
                 yes: bool) -> None:
    """Put the cluster's etcd back to a snapshot. The snapshot is checked first (exit 2, nothing stopped); then
    the control plane stops, `etcdutl snapshot restore` makes new data directories, and the control plane
    starts on them. Local world: the replaced data stays as etcd-data.before-restore. A kubeadm cluster
    (playbooks/etcd-restore.yml): every control-plane host's member is restored as one new etcd cluster,
    each keeping the data it replaced as <data-dir>/member.before-restore-<time>. Exit 2: no --yes, not a
    snapshot, no world."""
    result = flow.run_restore_etcd(inventory, source, world_dir=world_dir, state_dir=state_dir, yes=yes,
                                   say=_progress(output))
    if output == "json":
        jsonout.emit(result)
    else:
        click.echo(f"restored etcd from {result['file']} (revision {result['revision']}, {result['keys']} keys); "
                   f"restarted {'; '.join(result['restarted']) or 'nothing'}")


commands = [up, down, drift, plan, backup, restore]
