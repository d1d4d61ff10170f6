"""The cost arithmetic and its three renderings (table, CSV, JSON).

Per namespace and GPU model over the range: allocated GPU-hours, useful GPU-hours (allocated x
average activity), gross cost (allocated GPU-hours x rate), useful cost and idle cost (gross minus
useful). Decimal arithmetic throughout, so the worked example (4 GPUs x 24 h x 2.50 at 35% useful)
comes out as exactly 240.00 gross and 156.00 idle.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from gpucluster import catalog
from gpucluster.cost.data import Usage, iso
from gpucluster.errors import InputError
from gpucluster.spec.model import ClusterSpec

HOURS = Decimal("0.001")
MONEY = Decimal("0.01")
COLUMNS = ("scope", "tenant", "namespace", "model", "rate", "allocatedGpuHours", "usefulGpuHours",
           "usefulPercent", "grossCost", "usefulCost", "idleCost", "unmeasuredGpuHours")


@dataclass
class Line:
    """Totals for one group (a namespace and model, a tenant, a model, or everything)."""

    scope: str
    tenant: str = ""
    namespace: str = ""
    model: str = ""
    rate: Decimal | None = None
    allocated_h: Decimal = Decimal(0)
    useful_h: Decimal = Decimal(0)
    gross: Decimal = Decimal(0)
    useful_cost: Decimal = Decimal(0)
    #: Allocated hours nobody measured the activity of (DRA claims without a DCGM series), and their cost:
    #: in gross, never in idle.
    unmeasured_h: Decimal = Decimal(0)
    unmeasured_cost: Decimal = Decimal(0)

    @property
    def idle(self) -> Decimal:
        return self.gross - self.useful_cost - self.unmeasured_cost

    @property
    def useful_percent(self) -> Decimal:
        measured = self.allocated_h - self.unmeasured_h
        return (100 * self.useful_h / measured) if measured else Decimal(0)

    def add(self, other: Line) -> None:
        self.allocated_h += other.allocated_h
        self.useful_h += other.useful_h
        self.gross += other.gross
        self.useful_cost += other.useful_cost
        self.unmeasured_h += other.unmeasured_h
        self.unmeasured_cost += other.unmeasured_cost

    def as_dict(self) -> dict:
        return {"scope": self.scope, "tenant": self.tenant, "namespace": self.namespace, "model": self.model,
                "rate": None if self.rate is None else float(self.rate),
                "allocatedGpuHours": float(self.allocated_h.quantize(HOURS)),
                "usefulGpuHours": float(self.useful_h.quantize(HOURS)),
                "usefulPercent": float(self.useful_percent.quantize(Decimal("0.1"))),
                "grossCost": float(self.gross.quantize(MONEY)),
                "usefulCost": float(self.useful_cost.quantize(MONEY)),
                "idleCost": float(self.idle.quantize(MONEY)),
                "unmeasuredGpuHours": float(self.unmeasured_h.quantize(HOURS))}


@dataclass
class Report:
    cluster: str
    currency: str
    start: Decimal
    end: Decimal
    source: str
    rows: list[Line] = field(default_factory=list)

    def _group(self, scope: str, key: Callable[[Line], str]) -> list[Line]:
        groups: dict[str, Line] = {}
        for r in self.rows:
            k = key(r)
            line = groups.setdefault(k, Line(scope, tenant=k) if scope == "tenant" else Line(scope, model=k))
            line.add(r)
        return [groups[k] for k in sorted(groups)]

    @property
    def by_tenant(self) -> list[Line]:
        return self._group("tenant", lambda r: r.tenant)

    @property
    def by_model(self) -> list[Line]:
        return self._group("model", lambda r: r.model)

    @property
    def total(self) -> Line:
        line = Line("total")
        for r in self.rows:
            line.add(r)
        return line

    def lines(self) -> Iterable[Line]:
        yield from self.rows
        yield from self.by_tenant
        yield from self.by_model
        yield self.total


def rate_key(model: str, rates: dict[str, float]) -> str | None:
    """The ``cost.rates`` key for a model label: a catalog key, or the product name DCGM reports."""
    if model in rates:
        return model
    for key, m in catalog.catalog().items():
        if m.product_name == model and key in rates:
            return key
    return None


def compute(usage: list[Usage], spec: ClusterSpec, start: Decimal, end: Decimal, source: str,
            spec_file: str) -> Report:
    """Clip every interval to [start, end) and total it per namespace and model."""
    if end <= start:
        raise InputError(f"empty time range: {iso(start)} to {iso(end)}; --end must be after --start")
    rates = spec.cost.rates
    tenants = {t.ns: t.name for t in spec.tenants}
    unknown: dict[str, str] = {}
    groups: dict[tuple[str, str], Line] = {}
    for u in usage:
        lo, hi = max(u.start, start), min(u.end, end)
        if hi <= lo:
            continue
        key = rate_key(u.model, rates)
        if key is None:
            unknown.setdefault(u.model, u.namespace)
            continue
        rate = Decimal(str(rates[key]))
        hours = (hi - lo) / 3600
        line = groups.setdefault((u.namespace, key), Line(
            "namespace", tenant=tenants.get(u.namespace, f"{u.namespace} (no tenant)"),
            namespace=u.namespace, model=key, rate=rate))
        part = Line("part", allocated_h=u.allocated * hours, useful_h=u.used * hours,
                    unmeasured_h=Decimal(0) if u.measured else u.allocated * hours)
        part.gross, part.useful_cost = part.allocated_h * rate, part.useful_h * rate
        part.unmeasured_cost = part.unmeasured_h * rate
        line.add(part)
    if unknown:
        listed = "; ".join(f"{m!r} (namespace {ns})" for m, ns in sorted(unknown.items()))
        example = next(iter(sorted(unknown)))
        known = {m.product_name: k for k, m in catalog.catalog().items()}
        raise InputError(f"no rate for GPU model {listed} in cost.rates of {spec_file}: add one, e.g. "
                         f"`cost: {{rates: {{{known.get(example, example)}: 2.50}}}}` (price per GPU-hour)")
    if not groups:
        raise InputError(f"no GPU usage between {iso(start)} and {iso(end)} in {source}")
    rows = [groups[k] for k in sorted(groups)]
    return Report(spec.metadata.name, spec.cost.currency, start, end, source, rows)


def _cells(line: Line) -> list[str]:
    d = line.as_dict()
    rate = "" if line.rate is None else f"{line.rate:.2f}"
    return [line.tenant, line.namespace, line.model, rate, f"{line.allocated_h:.3f}", f"{line.useful_h:.3f}",
            f"{d['usefulPercent']:.1f}%", f"{line.gross:.2f}", f"{line.useful_cost:.2f}", f"{line.idle:.2f}"]


def to_table(report: Report) -> str:
    hours = (report.end - report.start) / 3600
    head = ["tenant", "namespace", "model", "rate", "alloc GPU-h", "useful GPU-h", "useful", "gross cost",
            "useful cost", "idle cost"]
    sections = [("per namespace and model", report.rows), ("per tenant", report.by_tenant),
                ("per GPU model", report.by_model), ("total", [report.total])]
    table = [head] + [_cells(line) for _, lines in sections for line in lines]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]

    def fmt(cells: list[str]) -> str:
        # Text columns left, numbers right, one width per column across every section.
        return "  ".join(c.rjust(w) if i >= 3 else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    out = [f"GPU cost of {report.cluster} from {iso(report.start)} to {iso(report.end)} ({hours:.2f} h), "
           f"{report.currency} per GPU-hour; source: {report.source}", ""]
    for title, lines in sections:
        out += [f"{title}:", fmt(head)] + [fmt(_cells(line)) for line in lines] + [""]
    total = report.total
    if total.unmeasured_h:
        out.append(f"{total.unmeasured_h:.3f} allocated GPU-hours ({total.unmeasured_cost:.2f} {report.currency}) "
                   "had no activity measurement (DRA claims without a DCGM series): they are in gross cost, "
                   "in neither useful nor idle cost.")
    return "\n".join(out).rstrip() + "\n"


def to_csv(report: Report) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for line in report.lines():
        row = line.as_dict()
        writer.writerow({k: "" if row[k] is None else row[k] for k in COLUMNS})
    return buf.getvalue()


def to_json(report: Report) -> str:
    doc = {"cluster": report.cluster, "currency": report.currency, "start": iso(report.start),
           "end": iso(report.end), "hours": float((report.end - report.start) / 3600),
           "source": report.source,
           "rows": [r.as_dict() for r in report.rows], "byTenant": [r.as_dict() for r in report.by_tenant],
           "byModel": [r.as_dict() for r in report.by_model], "total": report.total.as_dict()}
    return json.dumps(doc, indent=2) + "\n"
