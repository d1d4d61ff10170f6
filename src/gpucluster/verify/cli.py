"""``gpucluster verify``: check the cluster (and optionally the hosts) against the spec."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.console import Console

from gpucluster.verify import checklist, report
from gpucluster.verify.model import Result, Verdict


def _kubeconfig(spec_env: str, given: str | None) -> str | None:
    if given:
        return given
    if spec_env == "local":
        from gpucluster.local.world import World

        path = World().kubeconfig
        if not path.exists():
            from gpucluster.errors import InputError

            raise InputError(f"the local world is not running ({path} missing): run `gpucluster up` first, "
                             "or pass --kubeconfig")
        return str(path)
    return None


@click.command()
@click.option("-i", "--inventory", type=click.Path(path_type=Path), default=None,
              help="Inventory folder (default: inventories/local).")
@click.option("--kubeconfig", default=None,
              help="Kubeconfig of the cluster (default: the local world's, or $KUBECONFIG).")
@click.option("--context", default=None, help="Kubeconfig context.")
@click.option("--hosts", "host_mode", type=click.Choice(["none", "ssh", "podman", "local"]), default="none",
              show_default=True, help="Also run host checks through testinfra, connecting this way.")
@click.option("--metrics-url", multiple=True, help="DCGM exporter (or federate) endpoint for XID/ECC health checks.")
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None, help="Write a JSON report here.")
@click.option("--junit", type=click.Path(path_type=Path), default=None, help="Write JUnit XML here.")
@click.option("--problems-only", is_flag=True, help="Show only failed and skipped rows in the table.")
@click.option("--checklist", "show_checklist", is_flag=True, help="Print the production checklist mapping and exit.")
def verify(inventory: Path | None, kubeconfig: str | None, context: str | None, host_mode: str,
           metrics_url: tuple[str, ...], json_out: Path | None, junit: Path | None, problems_only: bool,
           show_checklist: bool) -> None:
    """Check capacity, allocatable, labels, taints, DRA devices, tenants and health, node by node.

    Exit 0 when every check passes, 1 when any fails, 2 for bad input.
    """
    if show_checklist:
        click.echo("\n".join(checklist.lines()))
        return
    from gpucluster.cli import _load
    from gpucluster.verify import cluster, snapshot

    spec = _load(inventory)
    started = time.perf_counter()
    snap = snapshot.fetch(_kubeconfig(spec.metadata.environment, kubeconfig), context)
    fetched = time.perf_counter()
    results: list[Result] = cluster.rows(spec, snap, metrics_url)
    if host_mode != "none":
        from gpucluster.verify import hosts

        for host in spec.hosts:
            try:
                results += hosts.host_checks(spec, host, hosts.connect(host, host_mode))
            except Exception as err:  # a host we cannot reach is a failed check, not a crash
                results.append(Result("host-reachable", host.name, Verdict.failed, "reachable", str(err)[:200]))
    elapsed = time.perf_counter() - started
    console = Console(width=160)
    report.table(results, console, only_problems=problems_only)
    console.print(f"{snap.calls} LIST calls in {fetched - started:.2f}s; checks done in {elapsed:.2f}s")
    meta = {"cluster": spec.metadata.name, "listCalls": snap.calls, "seconds": round(elapsed, 3)}
    if json_out:
        report.write(json_out, report.to_json(results, meta))
    if junit:
        report.write(junit, report.to_junit(results))
    if any(r.verdict is Verdict.failed for r in results):
        raise click.exceptions.Exit(1)
