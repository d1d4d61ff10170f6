"""``gpucluster local``: the local control plane and its simulated GPU nodes from the command line."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import click

from gpucluster import addons, kube
from gpucluster import inventory as inventories
from gpucluster import labels as L
from gpucluster.cli import jsonout, options
from gpucluster.errors import Failed
from gpucluster.local import addons as addon_records
from gpucluster.local.world import World
from gpucluster.simulator import BANNER, FAULTS, Simulator


def _say(message: str) -> None:
    click.echo(message, err=True)


@click.group("local")
def local() -> None:
    """A real local Kubernetes control plane (etcd, kube-apiserver, controller manager, scheduler, kwok)."""


@local.command("up")
@options.local_state_dir
@options.inventory
@click.option("--apiserver-port", type=click.IntRange(1, 65535), default=None, help="Pin the API server port.")
@click.option("--timeout", type=float, default=90.0, show_default=True, help="Seconds each component may take.")
@click.option("--no-crds", is_flag=True, help="Skip installing the operators' CRDs.")
@click.option("--all-crds", is_flag=True, help="Also install prometheus-operator's workload CRDs.")
@click.option("--reset", is_flag=True, help="Discard an existing world (its etcd data too) and start a fresh one.")
def up(state_dir: Path | None, inventory: Path | None, apiserver_port: int | None, timeout: float,
       no_crds: bool, all_crds: bool, reset: bool) -> None:
    """Start the control plane on 127.0.0.1 (or confirm it already runs), then the simulated GPU nodes and Volcano.

    The simulator registers the inventory's hosts as kwok nodes, syncs them once (printing that the
    GPUs are SIMULATED) and keeps them current from a background process; Volcano's scheduler and
    controllers start when the spec enables Volcano. ``down`` stops all of them by pid.
    """
    ports = {"kube-apiserver": apiserver_port} if apiserver_port else {}
    spec = inventories.load(inventory)
    world = World(state_dir, ports=ports, timeout=timeout, say=_say)
    with world.hold():  # the whole command: a `local down` meanwhile is refused, naming this one
        _up(world, spec, inventory, no_crds=no_crds, all_crds=all_crds, reset=reset)


def _up(world: World, spec: Any, inventory: Path | None, *, no_crds: bool, all_crds: bool, reset: bool) -> None:
    result = world.up(extra_tools=() if no_crds else ("crds",), reset=reset)
    if result.already_running:
        click.echo(f"already running and healthy (state: {world.dir}); nothing changed")
    elif not result.fresh:
        click.echo(f"recovered in {result.seconds:.1f} s: restarted {', '.join(result.restarted)}; data kept")
    else:
        click.echo(f"control plane up in {result.seconds:.1f} s")
    alongside = []
    if result.fresh and not no_crds:
        from gpucluster.local.crds import install_crds

        def crds() -> None:
            sources = install_crds(world.kubeconfig, everything=all_crds)
            generated = [s.name for s in sources if s.origin == "generated"]
            stand_ins = [s.name for s in sources if s.origin == "stand-in"]
            _say(f"✓ CRDs: {len(generated)} generated with controller-gen\n"
                 f"  stand-ins (Go API module not served): {', '.join(stand_ins)}")

        alongside.append(crds)
    # The operators' CRDs go in while the add-ons start (both only wait for the API server).
    addons.start(world, spec, inventories.resolve(inventory), say=_say, alongside=alongside)
    click.echo(f"export KUBECONFIG={world.kubeconfig}")


@local.command("down")
@options.local_state_dir
@click.option("--force", is_flag=True, help="Proceed even when state.json is corrupt.")
def down(state_dir: Path | None, force: bool) -> None:
    """Stop every process `up` started (by pid) and remove the files it made.

    Refused while another command holds the world (a running `gpucluster up`), naming it.
    """
    world = World(state_dir, say=_say)
    stopped = world.down(force=force)
    click.echo(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


@local.command("status")
@options.local_state_dir
@options.output("text", "json")
def status(state_dir: Path | None, output: str) -> None:
    """Show each process: pid, port, running/healthy, uptime, log. Exit 1 when not all healthy."""
    world = World(state_dir)
    report = world.status()
    extra = addon_records.status(world.dir)
    healthy = bool(report) and all(c.healthy for c in report) and all(a.healthy for a in extra)
    if output == "json":
        jsonout.emit({
            "stateDir": str(world.dir), "kubeconfig": str(world.kubeconfig), "healthy": healthy,
            "controlPlane": [c.__dict__ for c in report],
            "addons": [{"addon": a.addon, "name": a.component.name, "pid": a.component.pid,
                        "running": a.running, "healthy": a.healthy, "log": a.component.log} for a in extra],
        })
    elif not report:
        click.echo(f"not running (state: {world.dir})")
    else:
        for c in report:
            mark = "healthy" if c.healthy else ("running, unhealthy" if c.running else "stopped")
            detail = f"  ({c.detail})" if c.detail else ""
            where, up_s = f"127.0.0.1:{c.port}", f"{c.uptime_s:.0f} s"
            click.echo(f"{c.name:<23} pid {c.pid:<7} {where:<16} {mark:<18} up {up_s:>7}  {c.log}{detail}")
        for a in extra:
            mark = "healthy" if a.healthy else ("running, unhealthy" if a.running else "stopped")
            click.echo(f"{a.component.name:<23} add-on {a.addon:<14} pid {a.component.pid:<7} {mark:<18} "
                       f"{a.component.log}")
        click.echo(f"kubeconfig: {world.kubeconfig}")
    if not report:
        raise Failed(f"the local world is not running (state: {world.dir})")
    if not healthy:
        raise Failed("not every process of the local world is healthy")


# -- the GPU simulator -------------------------------------------------------------------------------

_gpu_options = options.combine([
    options.inventory,
    options.local_state_dir,
    click.option("--kubeconfig", type=click.Path(dir_okay=False, path_type=Path), default=None,
                 help="Use this kubeconfig instead of the local world's."),
])


def _kubeconfig(kubeconfig: Path | None, state_dir: Path | None) -> Path:
    return kubeconfig or World(state_dir).kubeconfig


def _simulator(inventory: Path | None, state_dir: Path | None, kubeconfig: Path | None) -> Simulator:
    return Simulator(inventories.load(inventory), _kubeconfig(kubeconfig, state_dir), say=click.echo)


@local.group("gpus")
def gpus() -> None:
    """Simulated GPU nodes: what NVIDIA's node agents would publish (no real GPUs)."""


@gpus.command("sync")
@_gpu_options
def sync_cmd(inventory: Path | None, state_dir: Path | None, kubeconfig: Path | None) -> None:
    """Create/update every simulated node once and say what changed."""
    sim = _simulator(inventory, state_dir, kubeconfig)
    report = sim.sync()
    click.echo(BANNER, err=True)
    if not report.changed:
        click.echo(f"{report.nodes} simulated nodes already current; nothing changed")
        return
    click.echo(
        f"{report.nodes} simulated nodes: created {len(report.created)}, updated "
        f"{len(report.updated)}, deleted {len(report.deleted)} ({report.writes} writes)"
    )
    for node, notes in sorted(report.notes.items()):
        click.echo(f"  {node}: {'; '.join(notes)}")


@gpus.command("run")
@_gpu_options
@click.option("--interval", type=click.FloatRange(0.2, 3600), default=5.0, show_default=True,
              help="Seconds between syncs.")
def run_cmd(inventory: Path | None, state_dir: Path | None, kubeconfig: Path | None, interval: float) -> None:
    """Keep the simulated nodes current until stopped (SIGTERM/Ctrl-C) or the kubeconfig is removed."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    path = _kubeconfig(kubeconfig, state_dir)
    sim = Simulator(inventories.load(inventory), path, say=click.echo)
    click.echo(BANNER, err=True)
    stop = addon_records.stop_event(path)
    try:
        sim.run(interval, stop)
    except KeyboardInterrupt:
        pass
    finally:
        sim.close()


@gpus.command("fault")
@click.argument("node")
@click.argument("fault", type=click.Choice(sorted(FAULTS)))
@click.argument("value", required=False, default="true")
@click.option("--clear", is_flag=True, help="Remove the fault instead of setting it.")
@_gpu_options
def fault_cmd(node: str, fault: str, value: str, clear: bool, inventory: Path | None, state_dir: Path | None,
              kubeconfig: Path | None) -> None:
    """Inject a fault: unhealthy-gpus 0,3 | missing-devices gpu-2 | product NAME | not-ready."""
    sim = _simulator(inventory, state_dir, kubeconfig)
    if clear:
        sim.clear(node, fault)
    else:
        sim.inject(node, fault, value)
    report = sim.sync()
    what = "cleared" if clear else f"set to {value!r}"
    click.echo(f"{node}: fault {fault} {what} ({report.writes} writes after sync)")


@gpus.command("show")
@_gpu_options
def show_cmd(inventory: Path | None, state_dir: Path | None, kubeconfig: Path | None) -> None:
    """One line per simulated node: Ready, product, GPUs advertised, DRA devices, faults."""
    sim = _simulator(inventory, state_dir, kubeconfig)
    selector = f"{L.SIMULATED}=true"
    nodes = sim.kube.items(kube.with_selector(kube.NODES, selector))
    slices = sim.kube.items(kube.with_selector(kube.RESOURCE_SLICES, selector))
    devices: dict[str, int] = {}
    for s in slices:  # a node's pool may span several slices (partitionable devices)
        node = s["spec"].get("nodeName", "")
        devices[node] = devices.get(node, 0) + len(s["spec"].get("devices") or [])
    click.echo(BANNER, err=True)
    for n in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        click.echo(describe_node(n, devices.get(n["metadata"]["name"])))


def describe_node(node: dict[str, Any], dra_devices: int | None) -> str:
    name = node["metadata"]["name"]
    labels, ann = node["metadata"].get("labels") or {}, node["metadata"].get("annotations") or {}
    status = node.get("status") or {}
    ready = {c["type"]: c["status"] for c in status.get("conditions") or []}.get("Ready", "Unknown")
    gpus_ = ", ".join(
        f"{k}={status.get('allocatable', {}).get(k)}/{v}"
        for k, v in sorted((status.get("capacity") or {}).items())
        if k.startswith("nvidia.com/")
    )
    faults = [f"{k}={ann[v]}" for k, v in FAULTS.items() if v in ann]
    dra = f" dra-devices={dra_devices}" if dra_devices is not None else ""
    return (
        f"{name:<16} Ready={ready:<7} {labels.get(L.GPU_PRODUCT, '-'):<28} "
        f"{gpus_ or '-'}{dra}{'  faults: ' + ' '.join(faults) if faults else ''}"
    )


# -- monitoring: the real Prometheus Operator and Prometheus, simulated exporters -------------------

@local.group("monitoring")
def monitoring_group() -> None:
    """The real Prometheus Operator and Prometheus on loopback, scraping simulated DCGM exporters."""


@monitoring_group.command("up")
@options.local_state_dir
@options.inventory
@click.option("--scrape-interval", default="30s", show_default=True, help="The Prometheus object's scrapeInterval.")
@click.option("--evaluation-interval", default="30s", show_default=True,
              help="The Prometheus object's evaluationInterval.")
def monitoring_up(state_dir: Path | None, inventory: Path | None, scrape_interval: str,
                  evaluation_interval: str) -> None:
    """Start monitoring on a running local world (needs `gpucluster tools install prometheus prometheus-operator`)."""
    from gpucluster.addons import monitoring

    world = World(state_dir)
    if not world.healthy():
        raise Failed(f"the local world is not running (state: {world.dir}); run `gpucluster local up` first")
    spec = inventories.load(inventory)
    with world.hold():
        monitoring.start(world, spec, inventories.resolve(inventory), scrape_interval=scrape_interval,
                         evaluation_interval=evaluation_interval, say=_say)
    click.echo(f"Prometheus: {monitoring.url(world)}")


@monitoring_group.command("run")
@click.option("--settings", "settings_file", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path), help="The settings file the add-on wrote.")
def monitoring_run(settings_file: Path) -> None:
    """The add-on's background process (simulated exporters, kube-state-metrics, config sync) until stopped."""
    from gpucluster.addons.monitoring_runtime import Runtime, Settings
    from gpucluster.simulator.dcgm_live import BANNER as DCGM_BANNER

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = Settings.load(settings_file)
    click.echo(DCGM_BANNER, err=True)
    stop = addon_records.stop_event(Path(settings.kubeconfig))
    try:
        Runtime(settings).run(stop)
    except KeyboardInterrupt:
        pass
