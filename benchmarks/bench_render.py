"""Benchmark: load + validate + render + write the bundle (to a new folder) for a generated N-node spec.

Prints the time of each phase (best of --repeat runs) and the total against the 1 s target.
Usage: python benchmarks/bench_render.py [--nodes 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_spec import write

from gpucluster import bundle, expected
from gpucluster.render import render
from gpucluster.spec import load_spec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--target", type=float, default=1.0, help="seconds for load+validate+render+write")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inv = write(args.nodes, Path(tmp) / "inv")
        best: dict[str, float] = {}
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            spec = load_spec(inv)
            t1 = time.perf_counter()
            rendered = render(spec)
            t2 = time.perf_counter()
            out = Path(tempfile.mkdtemp(dir=tmp))
            bundle.write(rendered, out)  # into an empty folder: every file written
            t3 = time.perf_counter()
            bundle.write(rendered, out)  # re-render: content compared, nothing rewritten
            t4 = time.perf_counter()
            states = expected.host_states(spec)
            t5 = time.perf_counter()
            for k, v in {"load+validate": t1 - t0, "render": t2 - t1, "write (new)": t3 - t2,
                         "write (again)": t4 - t3, "expected state": t5 - t4, "total": t3 - t0}.items():
                best[k] = min(best.get(k, 1e9), v)
        gpus = sum(s.gpu_count for s in states.values())
        print(f"spec: {args.nodes} GPU nodes, {gpus} GPUs, {len(spec.node_pools)} pools, "
              f"{len(rendered.objects())} objects (best of {args.repeat})")
        for k, v in best.items():
            print(f"  {k:15} {v * 1000:8.1f} ms")
        ratio = best["total"] / args.target
        print(f"total {best['total']:.3f} s vs target {args.target:.1f} s: {ratio:.2f}x of target "
              f"({'OK' if ratio <= 1 else 'OVER'})")
        return 0 if ratio <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
