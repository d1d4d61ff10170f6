"""``gpucluster cost``: what each tenant's GPUs cost over a time range, and how much of it was idle."""

from __future__ import annotations

import re
import time
from decimal import Decimal
from pathlib import Path

import click

from gpucluster import inventory as inventories
from gpucluster.cli import jsonout, options
from gpucluster.errors import InputError
from gpucluster.spec import spec_path

_RELATIVE = re.compile(r"^-(\d+)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _when(text: str | None, now: Decimal, option: str) -> Decimal | None:
    """``now``, ``-24h``/``-7d`` (relative to now), RFC 3339 or unix seconds."""
    from gpucluster.cost.data import parse_time

    if text is None:
        return None
    if text == "now":
        return now
    m = _RELATIVE.match(text)
    if m:
        return now - int(m[1]) * _UNITS[m[2]]
    return parse_time(text, option)


def _step(text: str) -> int:
    m = re.fullmatch(r"(\d+)([smhd])", text)
    if not m or int(m[1]) == 0:
        raise InputError(f"--step: {text!r} is not a duration like 1m, 5m or 1h")
    return int(m[1]) * _UNITS[m[2]]


@click.command("cost")
@options.inventory
@click.option("--prometheus", "prometheus", metavar="URL", default=None,
              help="Prometheus base URL to read the gpucluster recording rules from (query_range).")
@click.option("--snapshot", "snapshot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Metrics snapshot file (.json or .csv, see docs/observability.md) instead of Prometheus.")
@click.option("--start", "start", default=None, metavar="TIME",
              help="Range start: RFC 3339, unix seconds, now or -24h/-7d. Default: -24h (Prometheus), "
                   "the snapshot's first interval (snapshot).")
@click.option("--end", "end", default=None, metavar="TIME",
              help="Range end (exclusive). Default: now (Prometheus), the snapshot's last interval end.")
@click.option("--step", "step", default="5m", show_default=True,
              help="Prometheus query_range resolution; each point stands for one step.")
@click.option("-o", "--output", "output", type=click.Choice(["text", "csv", "json", "table"]), default="text",
              show_default=True, help="What to print on stdout (`table` is the old name of `text`).")
@click.option("--save-snapshot", "save", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the data read from Prometheus as a JSON snapshot (re-run offline later).")
@click.option("--dra", is_flag=True,
              help="Also charge the GPUs that allocated DRA claims hold now, from their allocation time (read from "
                   "the cluster; activity from Prometheus by GPU UUID when given, else unmeasured). With the "
                   "exporter's DRA attribution on (gpuOperator.dcgmExporter.draAttribution, the default) whole "
                   "GPUs are already in the recording rules, so only DRA MIG devices are added.")
@options.cluster
def cost(inventory: Path | None, prometheus: str | None, snapshot: Path | None, start: str | None,
         end: str | None, step: str, output: str, save: Path | None, dra: bool, kubeconfig: Path | None,
         context: str | None) -> None:
    """Allocated, useful and idle GPU-hours and their cost per tenant and GPU model.

    Rates are the spec's cost.rates (price per GPU-hour by GPU model). Useful GPU-hours are allocated
    GPU-hours x average activity; idle cost is gross cost minus the cost of the useful hours.
    """
    from gpucluster.cost import data, report

    if (prometheus is None) == (snapshot is None):
        raise InputError("give exactly one source: --prometheus URL or --snapshot FILE")
    if save and not prometheus:
        raise InputError("--save-snapshot records what --prometheus returned; it needs --prometheus")
    spec_file = str(spec_path(inventories.resolve(inventory)))
    spec = inventories.load(inventory)
    now = Decimal(int(time.time()))
    t0, t1 = _when(start, now, "--start"), _when(end, now, "--end")
    if prometheus:
        t1 = now if t1 is None else t1
        t0 = t1 - 86400 if t0 is None else t0
        if t1 <= t0:
            raise InputError(f"empty time range: --start {start} is not before --end {end or 'now'}")
        usage = data.fetch_prometheus(prometheus, t0, t1, _step(step), allow_empty=dra)
        source = prometheus
        if dra:
            from gpucluster.cost import dra as dra_cost

            held = dra_cost.unmetered(spec, dra_cost.fetch(inventories.kubeconfig_for(spec, kubeconfig), context))
            usage += dra_cost.usage(held, t0, t1, dra_cost.prometheus_activity(prometheus))
            source += " + the cluster's DRA claims" + dra_cost.which(spec)
        if save:
            data.save_snapshot(usage, save)
            click.echo(f"wrote snapshot {save} ({len(usage)} intervals)", err=True)
    else:
        assert snapshot is not None
        usage = data.load_snapshot(snapshot)
        if not usage:
            raise InputError(f"{snapshot}: the snapshot holds no usage intervals")
        t0 = min(u.start for u in usage) if t0 is None else t0
        t1 = max(u.end for u in usage) if t1 is None else t1
        source = str(snapshot)
        if dra:
            from gpucluster.cost import dra as dra_cost

            held = dra_cost.unmetered(spec, dra_cost.fetch(inventories.kubeconfig_for(spec, kubeconfig), context))
            usage += dra_cost.usage(held, t0, t1)
            source += " + the cluster's DRA claims" + dra_cost.which(spec) + " (activity unmeasured)"
    rep = report.compute(usage, spec, t0, t1, source, spec_file)
    if output == "json":
        jsonout.emit_text(report.to_json(rep))
        return
    render = {"text": report.to_table, "table": report.to_table, "csv": report.to_csv}[output]
    click.echo(render(rep), nl=False)
