"""``gpucluster verify``: check the cluster (and optionally the hosts) against the spec."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.console import Console

from gpucluster import inventory as inventories
from gpucluster.cli import jsonout, options
from gpucluster.errors import Failed, InputError
from gpucluster.verify import checklist, report
from gpucluster.verify.model import Result, Verdict, problems


@click.command()
@options.inventory
@options.cluster
@options.no_chart_repositories
@click.option("--hosts", "host_mode", type=click.Choice(["none", "ssh", "podman", "local"]), default="none",
              show_default=True, help="Also run host checks through testinfra, connecting this way.")
@click.option("--metrics-url", multiple=True, help="Also read GPU health from this DCGM exporter or Prometheus "
              "federate endpoint (repeatable); the GPU Operator's exporter pods are read without it.")
@click.option("--prometheus", "prometheus", default=None, metavar="URL",
              help="Also check that this Prometheus loaded the GPU alert rules as rendered (the local world's own "
                   "is read when its monitoring add-on runs).")
@options.output("text", "json", "junit")
@options.out_dir
@click.option("--reconfig-deadline", type=click.FloatRange(min=0), default=600.0, show_default=True,
              metavar="SECONDS", help="Follow MIG/sharing changes in progress this long; longer fails as stuck.")
@click.option("--upgrade-deadline", type=click.FloatRange(min=0), default=3600.0, show_default=True,
              metavar="SECONDS", help="A driver upgrade step (or a stalled rollout) older than this fails.")
@click.option("--node", "only_node", default=None, metavar="NODE", help="Show only the rows about this node.")
@click.option("--problems-only", is_flag=True, help="Show only failed and not-measured rows in the table.")
@options.allow_not_measured
@click.option("--checklist", "show_checklist", is_flag=True, help="Print the production checklist mapping and exit.")
def verify(inventory: Path | None, kubeconfig: Path | None, context: str | None, no_chart_repositories: bool,
           host_mode: str,
           metrics_url: tuple[str, ...], prometheus: str | None, output: str, out_dir: Path | None,
           reconfig_deadline: float, upgrade_deadline: float, only_node: str | None,
           problems_only: bool, allow_not_measured: tuple[str, ...], show_checklist: bool) -> None:
    """Check capacity, allocatable, labels, taints, DRA devices, tenants and health, node by node.

    -o picks what stdout shows (a table, JSON or JUnit XML); --out-dir also writes verify.json and
    verify.xml there. Exit 0 when every check passes; 1 when any fails, or a row could not be measured and
    its check is not allowed to be (--allow-not-measured; the local world allows a fixed list); 2 for bad
    input.
    """
    if show_checklist:
        click.echo("\n".join(checklist.lines()))
        return
    from gpucluster.verify import certs, checks, cluster, watchdog

    user_allowed = checks.parse(allow_not_measured)  # bad ids are bad input, before anything is asked
    spec = inventories.load(inventory)
    started = time.perf_counter()
    if only_node is not None and only_node not in {h.name for h in spec.hosts}:
        raise InputError(f"--node {only_node}: not a host of the spec (hosts: {', '.join(h.name for h in spec.hosts)})")
    targets = {}
    if host_mode == "ssh":  # before anything is asked: bad connection settings are bad input
        from gpucluster.verify import ssh

        # ssh goes where Ansible goes: the inventory's connection settings (ansible_host, _port, _user, ...).
        targets = ssh.targets(inventories.resolve(inventory), {h.name: h.address for h in spec.hosts})
    config = inventories.kubeconfig_for(spec, kubeconfig)
    # Changes in progress (MIG, sharing) are followed to their end or deadline before anything is judged.
    followed = watchdog.live_rows(spec, config, context, reconfig_deadline, upgrade_deadline, node=only_node,
                                  say=lambda line: click.echo(line, err=True))
    local = inventories.is_local(spec)
    snap = cluster.fetch(spec, config, context, metrics_urls=metrics_url, simulated=local, prometheus=prometheus)
    fetched = time.perf_counter()
    # The local world cannot fetch charts: what depends on them is not measured there (a fixed list of
    # checks it allows); its GPU simulator stands in for their node agents.
    allowed = checks.allowed(user_allowed, local_world=local, chart_repositories=not no_chart_repositories,
                             spec=spec)
    results: list[Result] = cluster.run(spec, snap, charts_reachable=not (local or no_chart_repositories),
                                        simulated=local)
    results += followed
    results += certs.rows(config, context, fix=certs.fix_for(spec, inventories.resolve(inventory)))
    if host_mode != "none":
        from gpucluster.verify import hosts

        for host in spec.hosts:
            try:
                results += hosts.host_checks(spec, host, hosts.connect(host, host_mode, targets.get(host.name)))
            except Exception as err:  # a host we cannot reach is a failed check, not a crash
                results.append(Result("host-reachable", host.name, Verdict.failed, "reachable", str(err)[:200]))
    if only_node is not None:
        results = [r for r in results if r.subject == only_node]
    elapsed = time.perf_counter() - started
    meta = {"cluster": spec.metadata.name, "listCalls": snap.calls, "accessReviews": snap.reviews,
            "seconds": round(elapsed, 3)}
    if output == "json":
        jsonout.emit_text(report.to_json(results, meta, allowed))
    elif output == "junit":
        click.echo(report.to_junit(results, allowed=allowed))
    else:
        console = Console(width=160)
        report.table(results, console, only_problems=problems_only, allowed=allowed)
        console.print(f"{snap.calls} LIST calls and {snap.reviews} access reviews in {fetched - started:.2f}s; "
                      f"checks done in {elapsed:.2f}s")
    if out_dir is not None:
        report.write(out_dir / "verify.json", report.to_json(results, meta, allowed))
        report.write(out_dir / "verify.xml", report.to_junit(results, allowed=allowed))
    problem = problems(results, allowed)
    if problem:
        raise Failed(problem)
