"""``gpucluster quarantine``: take one GPU of a DRA node out of service (and give it back)."""

from __future__ import annotations

from pathlib import Path

import click

from gpucluster import inventory as inventories
from gpucluster import labels as L
from gpucluster.cli import options, target
from gpucluster.errors import InputError


@click.command("quarantine")
@options.inventory
@options.cluster
@click.argument("node", required=False)
@click.argument("device", required=False)
@click.option("--reason", default="", metavar="TEXT", help="Why (required to quarantine), e.g. \"XID 79\".")
@click.option("--effect", type=click.Choice(["NoExecute", "NoSchedule"]), default="NoExecute", show_default=True,
              help="NoExecute also evicts the pods whose claims hold the GPU (unless they tolerate it); "
                   "NoSchedule only stops new allocations.")
@click.option("--lift", is_flag=True, help="Lift the quarantine of NODE DEVICE: the GPU is allocatable again.")
@click.option("--list", "list_", is_flag=True, help="List the quarantined GPUs and exit.")
def quarantine(inventory: Path | None, kubeconfig: Path | None, context: str | None, node: str | None,
               device: str | None, reason: str, effect: str, lift: bool, list_: bool) -> None:
    """Quarantine GPU DEVICE of DRA node NODE with a DeviceTaintRule (the node's other GPUs stay in use).

    DEVICE is the DRA driver's device name (gpu-3; a MIG device's full name). Exit 2 when NODE does not
    publish DEVICE or it is not quarantined (--lift); nothing is changed then.
    """
    from gpucluster import kube
    from gpucluster import quarantine as q

    if not list_ and (not node or not device):
        raise InputError("give NODE and DEVICE (e.g. `gpucluster quarantine h100-1 gpu-3 --reason \"XID 79\"`), "
                         "or --list")
    spec = inventories.load(inventory)
    acting = target.of(spec, inventory, kubeconfig, context)  # refuses the local world's spec elsewhere
    if not list_:
        target.announce("quarantine --lift" if lift else "quarantine", acting)
    minor = spec.kubernetes.minor[1]
    with kube.Kube(inventories.kubeconfig_for(spec, kubeconfig), context=context, timeout=30) as api:
        if list_:
            rows = q.active(api.list(q.rules_path(minor)))
            driver = q.driver_taints(api.list(kube.RESOURCE_SLICES))
            for r in rows:
                click.echo(f"{r.node}/{r.device}  {r.effect}  since {r.since or '?'}  {r.reason}  "
                           "(gpucluster quarantine)")
            for t in driver:
                click.echo(f"{t.node}/{t.device}  {t.effect}  since {t.since or '?'}  {t.what}  "
                           "(the DRA driver's health monitor; a new kubelet plugin pod lifts it)")
            if not rows and not driver:
                click.echo("no GPU is quarantined or tainted by the DRA driver")
            return
        assert node and device
        if lift:
            done = q.lift(api, minor, node, device)
            click.echo(f"{node}/{device}: quarantine lifted (was {done.effect}: {done.reason}); DeviceTaintRule "
                       f"{done.rule} deleted")
            kept = [t for t in q.driver_taints(api.list(kube.RESOURCE_SLICES)) if (t.node, t.device) == (node, device)]
            if kept:
                click.echo(f"  still tainted by the DRA driver's health monitor: {', '.join(t.text for t in kept)} "
                           "(lifted only by a new kubelet plugin pod on the node, once the GPU is repaired)")
            return
        rule, held = q.quarantine(api, minor, node, device, reason, effect)
    click.echo(f"{node}/{device}: quarantined ({rule.effect}) by DeviceTaintRule {rule.rule}: {rule.reason}")
    if held:
        what = "evicts their pods unless they tolerate" if effect == "NoExecute" else "leaves running"
        click.echo(f"  held by {', '.join(held)}: the device-taint-eviction controller {what} {L.QUARANTINE}")
