"""GPU time of DRA pools for the cost report: what allocated ResourceClaims hold, from their allocation on.

With the exporter's DRA attribution (``gpuOperator.dcgmExporter.draAttribution``, the default) the
recording rules count whole DRA GPUs like any other; DRA MIG devices they cannot tell apart
(docs/observability.md, "DRA pools"), and with attribution off they see no DRA device at all. The
claims see every one, so :func:`unmetered` keeps what the rules miss. The claims do: verification's
:func:`gpucluster.verify.dra_claims.held` lists every device an allocated claim holds, with its namespace
and since when. Each becomes a
:class:`~gpucluster.cost.data.Usage` from its allocation time (clipped to the range) to the end of the
range: a whole GPU counts 1, a MIG device its compute slices over the GPU's (as the recording rules count
a MIG instance). Activity comes from the device's own DCGM series (``UUID`` label) when a Prometheus is
given; without one, or for MIG devices (whose DCGM series are keyed by their parent's UUID and instance
id, which a claim does not record), the interval is *unmeasured*: in gross cost, never idle.

Claims released before the report runs are gone from the cluster and are not counted: for billing,
run the report (or ``--save-snapshot``) at least as often as claims come and go.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

from gpucluster import catalog, kube
from gpucluster.cost.data import Usage, parse_time
from gpucluster.errors import GpuclusterError
from gpucluster.render.monitoring import ACTIVITY
from gpucluster.spec.model import ClusterSpec
from gpucluster.verify.dra_claims import Held, held
from gpucluster.verify.snapshot import Snapshot

#: (uuid, start, end) -> average activity 0..1 over [start, end), or None when there is no series.
Activity = Callable[[str, Decimal, Decimal], Decimal | None]


def unmetered(spec: ClusterSpec, devices: list[Held]) -> list[Held]:
    """The held devices the recording rules do not count: MIG devices, or all when attribution is off."""
    return [h for h in devices if h.profile] if spec.dcgm_dra_attribution else devices


def which(spec: ClusterSpec) -> str:
    """What :func:`unmetered` keeps, for the report's source line."""
    return " (MIG devices: whole GPUs are in the recording rules)" if spec.dcgm_dra_attribution else ""


def share(h: Held) -> Decimal:
    """GPU-equivalents of one held device: 1, or a MIG device's compute slices over its GPU's."""
    m = re.match(r"(\d+)g\.", h.profile)
    if not m:
        return Decimal(1)
    model = next((g for g in catalog.catalog().values() if g.product_name == h.product and g.mig), None)
    total = model.mig.compute_slices if model and model.mig else 7
    return Decimal(int(m[1])) / Decimal(total)


def usage(devices: list[Held], start: Decimal, end: Decimal, activity: Activity | None = None) -> list[Usage]:
    """One interval per held device over [max(allocation, start), end)."""
    out = []
    for h in devices:
        since = parse_time(h.since, f"claim {h.namespace}/{h.claim}: allocation time") if h.since else start
        lo = max(since, start)
        if lo >= end:
            continue
        amount = share(h)
        busy = activity(h.uuid, lo, end) if activity and h.uuid and not h.profile else None
        out.append(Usage(h.namespace, h.product or "unknown DRA device", lo, end, amount,
                         amount * busy if busy is not None else Decimal(0), measured=busy is not None))
    return out


def fetch(kubeconfig: str | Path | None, context: str | None) -> list[Held]:
    """The devices allocated claims hold now (two LISTs: ResourceClaims and ResourceSlices)."""
    with kube.Kube(kubeconfig, context=context, timeout=60) as api:
        snap = Snapshot(resource_claims=api.items(kube.RESOURCE_CLAIMS),
                        resource_slices=api.items(kube.RESOURCE_SLICES))
    return held(snap)


def prometheus_activity(base: str, timeout: float = 30.0) -> Activity:
    """Average activity of one GPU (by UUID) over an interval, read with one instant query at its end."""
    def query(uuid: str, start: Decimal, end: Decimal) -> Decimal | None:
        seconds = max(int(end - start), 1)
        promql = f'avg_over_time({ACTIVITY}{{UUID="{uuid}"}}[{seconds}s])'
        url = f"{base.rstrip('/')}/api/v1/query?" + urllib.parse.urlencode({"query": promql, "time": str(end)})
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                body = json.loads(resp.read().decode())
        except (urllib.error.URLError, TimeoutError, OSError, json.JSONDecodeError) as err:
            raise GpuclusterError(f"cannot read GPU activity from Prometheus at {base} ({err})") from None
        result = (body.get("data") or {}).get("result") or []
        values = [Decimal(r["value"][1]) for r in result if r.get("value")]
        if not values:
            return None
        return min(sum(values, Decimal(0)) / len(values), Decimal(1))
    return query
