"""Benchmark: the cost report over a month of data, and scraping the simulated DCGM exporter.

Prints:
  cost snapshot    seconds to load and to compute + render a JSON snapshot of NAMESPACES x MODELS
                   series of 5-minute intervals over DAYS (what `gpucluster cost --snapshot` costs for
                   a month), and intervals per second
  scrape           mean / p95 milliseconds to scrape every node's simulated exporter (8 GPUs each) for
                   N GPUs, and the ratio to a 15 s scrape interval (how much headroom the simulator has)

Usage: python benchmarks/bench_observability.py [--days 30] [--namespaces 20] [--gpus 64,512]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from decimal import Decimal
from pathlib import Path

from gpucluster.cost import data, report
from gpucluster.promtext import scrape
from gpucluster.simulator.dcgm import Fleet
from gpucluster.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
MODELS = ["H100-SXM5-80GB", "A100-80GB", "L4", "H200-141GB"]


def bench_cost(days: int, namespaces: int) -> None:
    spec = load_spec(REPO / "inventories" / "local")
    step, t0 = 300, 1_793_491_200
    rows = []
    for n in range(namespaces):
        for m in MODELS:
            for k in range(days * 86400 // step):
                start = t0 + k * step
                rows.append({"start": start, "end": start + step, "namespace": f"ns-{n}", "model": m,
                             "allocatedGpus": str(1 + (n + k) % 8), "usedGpus": str((n + k) % 8 * 0.1)})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "month.json"
        path.write_text(json.dumps({"kind": data.SNAPSHOT_KIND, "version": 1, "usage": rows}))
        started = time.perf_counter()
        usage = data.load_snapshot(path)
        loaded = time.perf_counter()
        rep = report.compute(usage, spec, Decimal(t0), Decimal(t0 + days * 86400), str(path), "local")
        report.to_json(rep)
        done = time.perf_counter()
    print(f"cost snapshot: {len(rows):,} intervals ({namespaces} namespaces x {len(MODELS)} models x {days} d "
          f"at 5 min): load {loaded - started:.2f} s, compute+render {done - loaded:.2f} s, "
          f"{len(rows) / (done - started):,.0f} intervals/s")


def bench_scrape(gpus: int, rounds: int = 30) -> None:
    nodes = {f"node-{i}": [{"index": g} for g in range(8)] for i in range(gpus // 8)}
    with Fleet(nodes) as fleet:
        for i, node in enumerate(nodes):
            fleet.set(node, i % 8, gr_engine_active=(i % 100) / 100, xid=79 if i % 17 == 0 else 0)
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            samples = [s for url in fleet.urls.values() for s in scrape(url)]
            times.append(time.perf_counter() - started)
    mean, p95 = statistics.mean(times), sorted(times)[int(0.95 * (len(times) - 1))]
    print(f"scrape: {gpus} GPUs, {len(samples):,} samples: mean {mean * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms "
          f"per scrape = {mean / 15:.4f} of a 15 s scrape interval")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--namespaces", type=int, default=20)
    parser.add_argument("--gpus", default="64,512")
    args = parser.parse_args()
    bench_cost(args.days, args.namespaces)
    for n in (int(x) for x in args.gpus.split(",")):
        bench_scrape(n)


if __name__ == "__main__":
    main()
