"""``gpucluster local up|down|status``: the local control plane from the command line."""

from __future__ import annotations

from pathlib import Path

import click

from gpucluster.local.state import default_state_dir
from gpucluster.local.world import World
from gpucluster.toolchain.cli import user_errors

_state_dir = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"Where state, certificates, logs and the kubeconfig live [default: {default_state_dir()}].",
)


def _after_control_plane(world: World, inventory: Path | None) -> None:
    """After the control plane is healthy (and the CRDs are installed): simulated GPU nodes, Volcano.

    The simulator registers the inventory's hosts as kwok nodes, syncs them once (printing that the
    GPUs are SIMULATED) and keeps them current from a background process; Volcano's scheduler and
    controllers start when the spec enables Volcano. ``down`` stops all of them by pid.
    """
    from gpucluster.cli import default_inventory
    from gpucluster.local import addons
    from gpucluster.spec import load_spec

    inv = inventory or default_inventory()
    addons.start(world, load_spec(inv), inv, say=_say)


def _say(message: str) -> None:
    click.echo(message, err=True)


@click.group("local")
def local() -> None:
    """A real local Kubernetes control plane (etcd, kube-apiserver, controller manager, scheduler, kwok)."""


@local.command("up")
@_state_dir
@click.option("-i", "--inventory", type=click.Path(path_type=Path), default=None, help="Inventory to simulate.")
@click.option("--apiserver-port", type=click.IntRange(1, 65535), default=None, help="Pin the API server port.")
@click.option("--timeout", type=float, default=90.0, show_default=True, help="Seconds each component may take.")
@click.option("--no-crds", is_flag=True, help="Skip installing the operators' CRDs.")
@click.option("--all-crds", is_flag=True, help="Also install prometheus-operator's workload CRDs.")
def up(
    state_dir: Path | None,
    inventory: Path | None,
    apiserver_port: int | None,
    timeout: float,
    no_crds: bool,
    all_crds: bool,
) -> None:
    """Start the control plane on 127.0.0.1 (or confirm it already runs)."""
    ports = {"kube-apiserver": apiserver_port} if apiserver_port else {}
    with user_errors():
        world = World(state_dir, ports=ports, timeout=timeout, say=_say)
        result = world.up(extra_tools=() if no_crds else ("kubectl", "crds"))
        if result.already_running:
            click.echo(f"already running and healthy (state: {world.dir}); nothing changed")
        else:
            if not no_crds:
                from gpucluster.local.crds import install_crds

                sources = install_crds(world.kubeconfig, everything=all_crds)
                generated = [s.name for s in sources if s.origin == "generated"]
                stand_ins = [s.name for s in sources if s.origin == "stand-in"]
                _say(f"✓ CRDs: {len(generated)} generated with controller-gen")
                _say(f"  stand-ins (Go API module not served): {', '.join(stand_ins)}")
            click.echo(f"control plane up in {result.seconds:.1f} s")
        _after_control_plane(world, inventory)
    click.echo(f"export KUBECONFIG={world.kubeconfig}")


@local.command("down")
@_state_dir
@click.option("--force", is_flag=True, help="Proceed even when state.json is corrupt.")
def down(state_dir: Path | None, force: bool) -> None:
    """Stop every process `up` started (by pid) and remove the state."""
    with user_errors():
        world = World(state_dir, say=_say)
        stopped = world.down(force=force)
    click.echo(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


@local.command("status")
@_state_dir
def status(state_dir: Path | None) -> None:
    """Show each component: pid, port, running/healthy, uptime, log. Exit 1 when not all healthy."""
    with user_errors():
        world = World(state_dir)
        report = world.status()
    if not report:
        click.echo(f"not running (state: {world.dir})")
        raise SystemExit(1)
    for c in report:
        mark = "healthy" if c.healthy else ("running, unhealthy" if c.running else "stopped")
        extra = f"  ({c.detail})" if c.detail else ""
        where, up_s = f"127.0.0.1:{c.port}", f"{c.uptime_s:.0f} s"
        click.echo(f"{c.name:<23} pid {c.pid:<7} {where:<16} {mark:<18} up {up_s:>7}  {c.log}{extra}")
    from gpucluster.local import volcano
    from gpucluster.local.simulator_cli import PID_FILE

    pid_file = world.dir / PID_FILE
    sim_pid = pid_file.read_text().strip() if pid_file.exists() else ""
    sim_alive = bool(sim_pid) and Path(f"/proc/{sim_pid}").exists()
    click.echo(f"{'gpu-simulator':<23} {'pid ' + sim_pid if sim_alive else 'not running'}  (SIMULATED GPUs)")
    click.echo(f"{'volcano':<23} {'healthy' if volcano.running(world) else 'not running'}")
    click.echo(f"kubeconfig: {world.kubeconfig}")
    if not all(c.healthy for c in report):
        raise SystemExit(1)


def _mount_simulator() -> None:
    from gpucluster.local.simulator_cli import gpus

    local.add_command(gpus)


_mount_simulator()
