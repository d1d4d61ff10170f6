"""``gpucluster drain NODE`` and ``gpucluster uncordon NODE``: node maintenance that keeps jobs alive.

``drain`` cordons the node and evicts its pods through the Eviction API (PodDisruptionBudgets
honoured), leaving DaemonSet, static and finished pods alone and never splitting a running Volcano
gang (see :mod:`gpucluster.drain`). Exit 0 when the node is empty, 1 when something blocks (the node
stays cordoned and the message says what blocks), 2 for bad input (an unknown node).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gpucluster import inventory as inventories
from gpucluster import kube
from gpucluster.cli import jsonout, options, target


def _api(command: str, inventory: Path | None, kubeconfig: Path | None, context: str | None) -> kube.Kube:
    """The cluster ``command`` changes, said first on stderr (the local world's spec only on the local world)."""
    spec = inventories.load(inventory)
    target.announce(command, target.of(spec, inventory, kubeconfig, context))
    return kube.Kube(inventories.kubeconfig_for(spec, kubeconfig), context=context)


@click.command()
@click.argument("node")
@options.inventory
@options.cluster
@click.option("--timeout", type=click.FloatRange(min=0), default=300.0, show_default=True, metavar="SECONDS",
              help="How long to retry evictions a PodDisruptionBudget refuses, and to wait for pods to go.")
@click.option("--evict-gangs", is_flag=True, help="Evict every member of a running gang on the node together "
              "(on all its nodes), instead of refusing to split it.")
@click.option("--force", is_flag=True, help="Also evict pods no controller would recreate.")
@click.option("--dry-run", is_flag=True, help="Cordon nothing, evict nothing: say what would happen (dry-run "
              "evictions still ask every PodDisruptionBudget).")
@options.output("text", "json")
def drain(node: str, inventory: Path | None, kubeconfig: Path | None, context: str | None, timeout: float,
          evict_gangs: bool, force: bool, dry_run: bool, output: str) -> None:
    """Cordon NODE and evict its pods, PodDisruptionBudgets honoured and gangs kept whole."""
    from gpucluster import drain as draining

    say = (lambda line: click.echo(line, err=True)) if output == "json" else click.echo
    with _api("drain", inventory, kubeconfig, context) as api:
        done = draining.drain(api, node, timeout=timeout, evict_gangs=evict_gangs, force=force, dry_run=dry_run,
                              say=say)
    if output == "json":
        jsonout.emit({**done.to_dict(), "dryRun": dry_run})
    else:
        n = len(done.evict) + sum(len(m) for m in done.gangs.values())
        click.echo(f"{node}: {'would evict' if dry_run else 'drained,'} {n} pod(s)"
                   + ("" if dry_run else " evicted; uncordon with `gpucluster uncordon " + node + "`"))


@click.command()
@click.argument("node")
@options.inventory
@options.cluster
def uncordon(node: str, inventory: Path | None, kubeconfig: Path | None, context: str | None) -> None:
    """Make NODE schedulable again."""
    from gpucluster import drain as draining

    with _api("uncordon", inventory, kubeconfig, context) as api:
        draining.cordon(api, node, on=False)
    click.echo(f"{node} uncordoned")


@click.group()
def node() -> None:
    """Nodes for good: `node remove NODE` (adding one: add it to cluster.yaml, then `up --limit NODE`)."""


@node.command("remove")
@click.argument("name", metavar="NODE")
@options.inventory
@options.cluster
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The stack state folder `up` used (where the host layer keeps its timed record) "
                   "[default: ~/.local/state/gpucluster/stacks/<env>].")
@click.option("--no-reset", "no_reset", is_flag=True, help="Do not reset the host (a machine that is gone or "
              "not in cluster.yaml any more): drain and delete the Node only.")
@click.option("--timeout", type=click.FloatRange(min=0), default=300.0, show_default=True, metavar="SECONDS",
              help="How long to retry evictions a PodDisruptionBudget refuses, and to wait for pods to go.")
@click.option("--evict-gangs", is_flag=True, help="Evict every member of a running gang on the node together.")
@click.option("--force", is_flag=True, help="Also evict pods no controller would recreate.")
@click.option("--dry-run", is_flag=True, help="Change nothing: say what would be drained, reset and deleted.")
@click.option("-y", "--yes", is_flag=True, help="Remove without asking (pipelines).")
@options.output("text", "json")
def node_remove(name: str, inventory: Path | None, kubeconfig: Path | None, context: str | None,
                state_dir: Path | None, no_reset: bool, timeout: float, evict_gangs: bool, force: bool,
                dry_run: bool, yes: bool, output: str) -> None:
    """Drain NODE, reset its host (kubeadm reset, through Ansible) and delete its Node object.

    A control-plane host also hands the endpoint over and leaves etcd (kubeadm reset removes its member);
    the first one (kubeadm init's) is refused. Then take the host out of cluster.yaml: until then `up` joins
    it again. Exit 0 removed (or nothing left to remove), 1 the drain is blocked or a step failed (what is
    done stays done, the message says where it stopped), 2 refused before any change (the first
    control-plane host, an unknown name, no --yes without a terminal).
    """
    from gpucluster import hostlayer, noderemove
    from gpucluster.errors import ConfirmationNeeded, Declined

    say = (lambda line: click.echo(line, err=True)) if output == "json" else click.echo
    spec = inventories.load(inventory)
    local = inventories.is_local(spec)
    reset = not no_reset

    def reset_host() -> int:
        record = hostlayer.kubeconfig_path(state_dir or inventories.stack_state(spec.metadata.name))
        return hostlayer.run(inventories.resolve(inventory), record, say, playbooks=(noderemove.PLAYBOOK,),
                             limit=(name,)).changed

    def forget_patches() -> list[str]:
        from gpucluster.pulumi.engine import Engine, backend_url

        engine = Engine(state_dir or inventories.stack_state(spec.metadata.name), spec.metadata.name,
                        backend_url(None))
        urns = noderemove.patch_urns(engine.state_resources("platform", pending=False), name)
        for urn in urns:
            engine.forget("platform", urn)
        return urns

    if local:  # refused (exit 2) before the local world is looked for
        noderemove.check(spec, name, None, reset=reset, local=True)
    if kubeconfig is None and state_dir is not None:
        kubeconfig = hostlayer.kubeconfig_path(state_dir)  # the admin kubeconfig `up --state-dir` fetched
    with _api("node remove", inventory, kubeconfig, context) as api:
        # Refusals first (exit 2, nothing asked, nothing changed), then the question.
        noderemove.check(spec, name, api.get(f"{kube.NODES}/{name}"), reset=reset, local=False)
        if not (dry_run or yes):
            steps = ("drain it, reset its host (kubeadm reset) and delete its Node" if reset
                     else "drain it and delete its Node")
            if not sys.stdin.isatty():
                raise ConfirmationNeeded(f"`gpucluster node remove {name}` would {steps}, and asks first, but stdin "
                                         "is not a terminal: nothing was changed. Pass --yes to confirm, or --dry-run "
                                         "to see what it would do")
            if not click.confirm(f"Remove node {name}: {steps}?", default=False, err=True):
                raise Declined(f"{name} was not removed")
        done = noderemove.remove(api, spec, name, reset_host=reset_host if reset else None,
                                 forget_patches=forget_patches, timeout=timeout,
                                 evict_gangs=evict_gangs, force=force, dry_run=dry_run, say=say)
    for note in done.notes:
        say(f"note: {note}")
    if output == "json":
        jsonout.emit(done.to_dict())
    elif not dry_run:
        did = [w for w, d in (("drained", done.drained), ("reset", done.reset), ("deleted", done.deleted)) if d]
        click.echo(f"{name}: " + (", ".join(did) if did else "nothing left to remove"))


commands = [drain, uncordon, node]
