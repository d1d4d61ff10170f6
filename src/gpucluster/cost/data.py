"""Usage data for the cost report: from a Prometheus HTTP endpoint or from a snapshot file.

Both sources become :class:`Usage` intervals: over ``[start, end)``, namespace N held ``allocated``
GPUs of a model, of which ``used`` GPUs' worth was busy (allocated x average activity). Prometheus
data come from our recording rules (``render/monitoring.py``): allocation in GPU-equivalents (a MIG
instance or a shared-GPU replica as its share of the parent GPU, whose ``modelName`` it carries),
activity from ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``; each query_range point at ``t`` stands for
``[t, t + step)``.

Snapshot files (JSON or CSV) are documented in ``docs/observability.md``; ``--save-snapshot`` writes
the JSON form from a Prometheus query, so a report can be re-run offline.
"""

from __future__ import annotations

import csv
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path

from gpucluster.errors import GpuclusterError, InputError

ALLOCATED = "namespace_model:gpucluster_gpus_allocated:count"
USED = "namespace_model:gpucluster_gpus_used:sum"
SNAPSHOT_KIND = "gpucluster-cost-snapshot"
#: Prometheus refuses query_range answers over 11,000 points per series; stay below it per request.
MAX_POINTS = 10_000


@dataclass(frozen=True)
class Usage:
    """GPUs of one model held by one namespace over ``[start, end)`` (unix seconds)."""

    namespace: str
    model: str
    start: Decimal
    end: Decimal
    allocated: Decimal
    used: Decimal
    #: False when nobody measured the activity (a DRA claim's GPU without a DCGM series): the interval
    #: counts in gross cost only, never as idle (``used`` is 0 then).
    measured: bool = True


def iso(ts: Decimal | float) -> str:
    return datetime.fromtimestamp(float(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | int | float, where: str) -> Decimal:
    """Unix seconds or RFC 3339 (``2026-11-01T00:00:00Z``) → unix seconds."""
    if isinstance(text, int | float):
        return Decimal(str(text))
    try:
        return Decimal(text)
    except InvalidOperation:
        pass
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{where}: {text!r} is not a time (use 2026-11-01T00:00:00Z or unix seconds)") \
            from None
    if dt.tzinfo is None:
        raise InputError(f"{where}: {text!r} has no time zone (append Z for UTC)")
    return Decimal(str(dt.timestamp()))


def _number(value: object, where: str) -> Decimal:
    try:
        out = Decimal(str(value))
    except InvalidOperation:
        raise InputError(f"{where}: {value!r} is not a number") from None
    if not out.is_finite() or out < 0:
        raise InputError(f"{where}: {value!r} must be a finite number ≥ 0")
    return out


def _usage(row: dict, where: str) -> Usage:
    missing = [k for k in ("start", "end", "namespace", "model", "allocatedGpus") if row.get(k) in (None, "")]
    if missing:
        raise InputError(f"{where}: missing {', '.join(missing)}")
    allocated = _number(row["allocatedGpus"], f"{where}: allocatedGpus")
    has_used, has_activity = row.get("usedGpus") not in (None, ""), row.get("activity") not in (None, "")
    if str(row.get("unmeasured", "")).lower() == "true":
        if has_used or has_activity:
            raise InputError(f"{where}: an unmeasured interval carries no usedGpus or activity")
        start, end = parse_time(row["start"], f"{where}: start"), parse_time(row["end"], f"{where}: end")
        if end <= start:
            raise InputError(f"{where}: end {row['end']} is not after start {row['start']}")
        return Usage(str(row["namespace"]), str(row["model"]), start, end, allocated, Decimal(0), measured=False)
    if has_used == has_activity:
        raise InputError(f"{where}: give exactly one of usedGpus (GPUs' worth busy) or activity (0..1)")
    if has_used:
        used = _number(row["usedGpus"], f"{where}: usedGpus")
    else:
        activity = _number(row["activity"], f"{where}: activity")
        if activity > 1:
            raise InputError(f"{where}: activity {activity} is a ratio and must be ≤ 1 (35% is 0.35)")
        used = allocated * activity
    if used > allocated:
        raise InputError(f"{where}: usedGpus {used} exceeds allocatedGpus {allocated}")
    start, end = parse_time(row["start"], f"{where}: start"), parse_time(row["end"], f"{where}: end")
    if end <= start:
        raise InputError(f"{where}: end {row['end']} is not after start {row['start']}")
    return Usage(str(row["namespace"]), str(row["model"]), start, end, allocated, used)


def load_snapshot(path: Path) -> list[Usage]:
    """Read a JSON (``{"kind": …, "version": 1, "usage": [...]}``) or CSV snapshot."""
    if not path.is_file():
        raise InputError(f"{path}: no such snapshot file")
    text = path.read_text()
    if path.suffix.lower() == ".csv":
        rows = list(csv.DictReader(text.splitlines()))
        if not rows:
            raise InputError(f"{path}: no rows (expected a header: start,end,namespace,model,allocatedGpus,"
                             "activity|usedGpus)")
        return [_usage(r, f"{path}:{n}") for n, r in enumerate(rows, start=2)]
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not JSON ({err}); CSV snapshots need a .csv suffix") from None
    if not isinstance(doc, dict) or doc.get("kind") != SNAPSHOT_KIND or doc.get("version") != 1:
        raise InputError(f'{path}: not a cost snapshot (expected "kind": "{SNAPSHOT_KIND}", "version": 1)')
    raw_rows = doc.get("usage")
    if not isinstance(raw_rows, list):
        raise InputError(f"{path}: `usage` must be a list of intervals")
    return [_usage(r if isinstance(r, dict) else {}, f"{path}: usage[{i}]") for i, r in enumerate(raw_rows)]


def save_snapshot(usage: list[Usage], path: Path) -> None:
    rows = [{"start": iso(u.start), "end": iso(u.end), "namespace": u.namespace, "model": u.model,
             "allocatedGpus": str(u.allocated),
             **({"usedGpus": str(u.used)} if u.measured else {"unmeasured": True})} for u in usage]
    path.write_text(json.dumps({"kind": SNAPSHOT_KIND, "version": 1, "usage": rows}, indent=1) + "\n")


def _query_range(base: str, query: str, start: Decimal, end: Decimal, step: int,
                 timeout: float) -> list[dict]:
    """All series of ``query`` over [start, end], split into requests of at most MAX_POINTS points."""
    series: dict[tuple, dict] = {}
    chunk = Decimal(step * (MAX_POINTS - 1))
    t = start
    while t <= end:  # bounded: (end - start) / chunk + 1 requests
        stop = min(t + chunk, end)
        params = urllib.parse.urlencode(
            {"query": query, "start": str(t), "end": str(stop), "step": str(step)})
        url = f"{base.rstrip('/')}/api/v1/query_range?{params}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                body = json.loads(resp.read().decode())
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")[:300]
            raise GpuclusterError(f"Prometheus at {base} answered {err.code} for {query}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as err:
            raise GpuclusterError(f"cannot reach Prometheus at {base} ({err}); check --prometheus") from None
        except json.JSONDecodeError:
            raise GpuclusterError(f"{base} did not answer with Prometheus JSON; is it the Prometheus URL?") \
                from None
        if body.get("status") != "success":
            raise GpuclusterError(f"Prometheus at {base}: {body.get('errorType')}: {body.get('error')}")
        for s in body.get("data", {}).get("result", []):
            key = tuple(sorted(s.get("metric", {}).items()))
            series.setdefault(key, {"metric": s.get("metric", {}), "values": {}})["values"].update(
                {Decimal(str(ts)): Decimal(v) for ts, v in s.get("values", [])})
        t = stop + step
    return list(series.values())


def fetch_prometheus(base: str, start: Decimal, end: Decimal, step: int,
                     timeout: float = 30.0, allow_empty: bool = False) -> list[Usage]:
    """Allocated and used GPUs per namespace and model from our recording rules, as intervals.

    No allocation series is an error unless ``allow_empty`` (DRA claims are charged besides)."""
    allocated = _query_range(base, ALLOCATED, start, end, step, timeout)
    if not allocated and allow_empty:
        return []
    if not allocated:
        raise InputError(f"no {ALLOCATED} series between {iso(start)} and {iso(end)} at {base}: are the "
                         "gpucluster recording rules loaded (PrometheusRule gpucluster-gpu-alerts), and did "
                         "any pod hold a GPU in that range?")
    used = {(s["metric"].get("namespace"), s["metric"].get("modelName")): s["values"]
            for s in _query_range(base, USED, start, end, step, timeout)}
    out = []
    for s in allocated:
        ns, model = s["metric"].get("namespace"), s["metric"].get("modelName")
        if not ns or not model:
            raise InputError(f"{ALLOCATED} series without namespace/modelName labels: {s['metric']}")
        if (ns, model) not in used:
            raise InputError(f'missing series {USED}{{namespace="{ns}", modelName="{model}"}} at {base}: '
                             "the recording rules are incomplete; re-apply the gpucluster PrometheusRule")
        busy = used[(ns, model)]
        for ts, value in sorted(s["values"].items()):
            stop = min(ts + step, end)
            if stop > ts and value > 0:
                # A missing `used` point counts as idle: the cost report never invents activity.
                out.append(Usage(ns, model, ts, stop, value, min(busy.get(ts, Decimal(0)), value)))
    return out
