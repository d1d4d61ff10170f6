"""Health from DCGM metrics: XID errors, double-bit ECC errors and GPUs missing from a node.

Reads DCGM-exporter text from one or more endpoints (a real exporter, a Prometheus federate
endpoint, or the local world's simulated exporter). Series are matched to nodes by the ``node``
label our ServiceMonitor sets (``Hostname`` as a fallback).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from gpucluster.expected import HostState
from gpucluster.promtext import scrape
from gpucluster.verify.model import Result, fail, ok, skip

XID = "DCGM_FI_DEV_XID_ERRORS"
ECC_DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"


def metric_checks(states: dict[str, HostState], urls: Iterable[str]) -> Iterator[Result]:
    urls = list(urls)
    gpu_hosts = {n: s for n, s in states.items() if s.gpu_count}
    if not urls:
        for name in gpu_hosts:
            yield skip("gpu-xid", name, "no DCGM metrics endpoint given (--metrics-url)")
        return
    samples = []
    for url in urls:
        try:
            samples += scrape(url)
        except (OSError, ValueError) as err:
            yield fail("gpu-metrics", url, "reachable DCGM exporter", f"unreachable: {err}")
    seen: dict[str, set[str]] = {}
    measured: dict[tuple[str, str], set[str]] = {}  # (node, metric) -> GPUs with a series of it
    xid: dict[tuple[str, str], float] = {}
    dbe: dict[tuple[str, str], float] = {}
    for s in samples:
        node = s.labels.get("node") or s.labels.get("Hostname", "")
        gpu = s.labels.get("gpu", "?")
        if node not in gpu_hosts:
            continue
        seen.setdefault(node, set()).add(gpu)
        measured.setdefault((node, s.name), set()).add(gpu)
        if s.name == XID and s.value:
            xid[(node, gpu)] = s.value
        elif s.name == ECC_DBE and s.value:
            dbe[(node, gpu)] = s.value
    for name, state in gpu_hosts.items():
        gpus = seen.get(name, set())
        if len(gpus) < state.gpu_count:
            yield fail("gpu-count-metrics", name, f"{state.gpu_count} GPUs reporting", f"{len(gpus)} GPUs reporting",
                       "GPUs fell off the bus or the exporter does not run on this node")
        else:
            yield ok("gpu-count-metrics", name, f"{state.gpu_count} GPUs reporting", f"{len(gpus)} GPUs reporting")
        bad_xid = sorted((g, int(v)) for (n, g), v in xid.items() if n == name)
        if not measured.get((name, XID)):
            yield skip("gpu-xid", name, f"no {XID} series from this node (is the field in the exporter's CSV, "
                       "and does the exporter run here?)")
        elif bad_xid:
            yield fail("gpu-xid", name, "no XID errors", ", ".join(f"GPU {g}: XID {v}" for g, v in bad_xid),
                       "see docs/runbooks.md#xid")
        else:
            yield ok("gpu-xid", name, "no XID errors", "none")
        bad_ecc = sorted((g, int(v)) for (n, g), v in dbe.items() if n == name)
        if not measured.get((name, ECC_DBE)):
            yield skip("gpu-ecc", name, f"no {ECC_DBE} series from this node (is the field in the exporter's CSV, "
                       "and does the exporter run here?)")
        elif bad_ecc:
            yield fail("gpu-ecc", name, "no double-bit ECC errors",
                       ", ".join(f"GPU {g}: {v} DBE" for g, v in bad_ecc), "see docs/runbooks.md#ecc")
        else:
            yield ok("gpu-ecc", name, "no double-bit ECC errors", "none")
