"""``gpus``: the GPU simulator from the command line, and as a background process for ``local up``.

The click group is meant to be mounted under ``gpucluster local`` (``local.add_command(gpus)``);
it also runs standalone as ``python -m gpucluster.local.simulator_cli``. :func:`spawn` starts
``run`` in the background (pid file and log in the world's state directory) so the nodes stay
current after ``gpucluster local up`` returns; :func:`stop_spawned` stops it by pid. The loop also
ends by itself once the world's kubeconfig is gone (``local down`` removes it).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

from gpucluster.local.simulator import BANNER, FAULTS, Simulator
from gpucluster.local.simulator_agents import SIMULATED
from gpucluster.spec import load_spec

PID_FILE = "gpu-simulator.pid"
LOG_FILE = "gpu-simulator.log"
MODULE = "gpucluster.local.simulator_cli"


def _kubeconfig(kubeconfig: Path | None, state_dir: Path | None) -> Path:
    if kubeconfig:
        return kubeconfig
    from gpucluster.local.world import World

    return World(state_dir).kubeconfig


def _spec(inventory: Path | None):  # type: ignore[no-untyped-def]
    from gpucluster.cli import default_inventory

    return load_spec(inventory or default_inventory())


_opts = [
    click.option(
        "-i",
        "--inventory",
        type=click.Path(path_type=Path),
        default=None,
        help="Inventory whose hosts are simulated [default: inventories/local].",
    ),
    click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="The local world's state directory (its kubeconfig is used).",
    ),
    click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Use this kubeconfig instead of the local world's.",
    ),
]


def _common(f):  # type: ignore[no-untyped-def]
    for opt in reversed(_opts):
        f = opt(f)
    return f


def _simulator(inventory: Path | None, state_dir: Path | None, kubeconfig: Path | None) -> Simulator:
    return Simulator(_spec(inventory), _kubeconfig(kubeconfig, state_dir), say=click.echo)


@click.group("gpus")
def gpus() -> None:
    """Simulated GPU nodes: what NVIDIA's node agents would publish (no real GPUs)."""


@gpus.command("sync")
@_common
def sync_cmd(inventory: Path | None, state_dir: Path | None, kubeconfig: Path | None) -> None:
    """Create/update every simulated node once and say what changed."""
    from gpucluster.toolchain.cli import user_errors

    with user_errors():
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
@_common
@click.option(
    "--interval",
    type=click.FloatRange(0.2, 3600),
    default=5.0,
    show_default=True,
    help="Seconds between syncs.",
)
def run_cmd(inventory: Path | None, state_dir: Path | None, kubeconfig: Path | None, interval: float) -> None:
    """Keep the simulated nodes current until stopped (SIGTERM/Ctrl-C) or the kubeconfig is removed."""
    from gpucluster.toolchain.cli import user_errors

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    with user_errors():
        path = _kubeconfig(kubeconfig, state_dir)
        sim = Simulator(_spec(inventory), path, say=click.echo)
    click.echo(BANNER, err=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def watch_world() -> None:
        while not stop.wait(1.0):
            if not path.exists():
                logging.info("kubeconfig %s is gone (world down): stopping", path)
                stop.set()

    threading.Thread(target=watch_world, daemon=True).start()
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
@_common
def fault_cmd(
    node: str,
    fault: str,
    value: str,
    clear: bool,
    inventory: Path | None,
    state_dir: Path | None,
    kubeconfig: Path | None,
) -> None:
    """Inject a fault: unhealthy-gpus 0,3 | missing-devices gpu-2 | product NAME | not-ready."""
    from gpucluster.toolchain.cli import user_errors

    with user_errors():
        sim = _simulator(inventory, state_dir, kubeconfig)
        if clear:
            sim.clear(node, fault)
        else:
            sim.inject(node, fault, value)
        report = sim.sync()
    what = "cleared" if clear else f"set to {value!r}"
    click.echo(f"{node}: fault {fault} {what} ({report.writes} writes after sync)")


@gpus.command("show")
@_common
def show_cmd(inventory: Path | None, state_dir: Path | None, kubeconfig: Path | None) -> None:
    """One line per simulated node: Ready, product, GPUs advertised, DRA devices, faults."""
    from gpucluster.toolchain.cli import user_errors

    with user_errors():
        sim = _simulator(inventory, state_dir, kubeconfig)
        nodes = sim.kube.items(f"/api/v1/nodes?labelSelector={SIMULATED}%3Dtrue")
        slices = sim.kube.items(f"/apis/resource.k8s.io/v1/resourceslices?labelSelector={SIMULATED}%3Dtrue")
    devices = {s["spec"].get("nodeName"): len(s["spec"].get("devices") or []) for s in slices}
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
        f"{name:<16} Ready={ready:<7} {labels.get('nvidia.com/gpu.product', '-'):<28} "
        f"{gpus_ or '-'}{dra}{'  faults: ' + ' '.join(faults) if faults else ''}"
    )


# -- background process for `gpucluster local up` ------------------------------------------------


def spawn(state_dir: Path, kubeconfig: Path, inventory: Path | None, interval: float = 5.0) -> int:
    """Start ``run`` in the background (replacing one already running); returns its pid."""
    stop_spawned(state_dir)
    args = [sys.executable, "-m", MODULE, "run", "--kubeconfig", str(kubeconfig), "--interval", str(interval)]
    if inventory:
        args += ["-i", str(Path(inventory).resolve())]
    (state_dir / "logs").mkdir(parents=True, exist_ok=True)
    with open(state_dir / "logs" / LOG_FILE, "ab") as log:
        proc = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    (state_dir / PID_FILE).write_text(f"{proc.pid}\n")
    return proc.pid


def _ours(pid: int, kubeconfig_marker: str) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    text = [a.decode(errors="replace") for a in argv]
    return MODULE in text and any(kubeconfig_marker in a for a in text)


def stop_spawned(state_dir: Path, timeout: float = 10.0) -> bool:
    """Stop the background simulator of ``state_dir`` by pid (only if it is still ours)."""
    pid_file = state_dir / PID_FILE
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        pid_file.unlink(missing_ok=True)
        return False
    stopped = False
    if _ours(pid, str(state_dir)):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _ours(pid, str(state_dir)):
            time.sleep(0.1)
            try:
                os.waitpid(pid, os.WNOHANG)  # reap it when it is our child
            except ChildProcessError:
                pass
        if _ours(pid, str(state_dir)):
            os.kill(pid, signal.SIGKILL)
        stopped = True
    pid_file.unlink(missing_ok=True)
    return stopped


if __name__ == "__main__":
    gpus()
