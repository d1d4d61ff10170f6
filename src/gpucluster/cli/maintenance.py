"""``gpucluster drain NODE`` and ``gpucluster uncordon NODE``: node maintenance that keeps jobs alive.

``drain`` cordons the node and evicts its pods through the Eviction API (PodDisruptionBudgets
honoured), leaving DaemonSet, static and finished pods alone and never splitting a running Volcano
gang (see :mod:`gpucluster.drain`). Exit 0 when the node is empty, 1 when something blocks (the node
stays cordoned and the message says what blocks), 2 for bad input (an unknown node).
"""

from __future__ import annotations

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


commands = [drain, uncordon]
