"""Benchmark: cold ``gpucluster up`` on the local inventory, a converged re-run, and ``down``.

Toolchain cached (``gpucluster tools install``). Each round uses a fresh local world in a temporary
folder, so "cold" includes starting the control plane, installing the CRDs and registering the
simulated nodes; the re-run must report 0 changes. Targets: cold ≤ 60 s, re-run ≤ 10 s.

    .venv/bin/python benchmarks/bench_up.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from gpucluster.flow import run_down, run_up  # noqa: E402  (after the path tweak, for a plain checkout)

LOCAL = REPO / "inventories" / "local"


def one_round(tmp: Path) -> tuple[float, float, float, int]:
    """(cold up s, re-run s, down s, changes in the re-run)."""
    world_dir, state = tmp / "world", tmp / "stacks"
    t0 = time.monotonic()
    run_up(LOCAL, world_dir=world_dir, state_dir=state, quiet=True)
    t1 = time.monotonic()
    again = run_up(LOCAL, world_dir=world_dir, state_dir=state, quiet=True)
    t2 = time.monotonic()
    run_down(LOCAL, world_dir=world_dir, state_dir=state, quiet=True)
    t3 = time.monotonic()
    changes = sum(c["created"] + c["updated"] + c["deleted"] for c in again.stacks)
    return t1 - t0, t2 - t1, t3 - t2, changes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    rows = []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="gpucluster-bench-up-") as tmp:
            rows.append(one_round(Path(tmp)))
        cold, rerun, down, changes = rows[-1]
        print(f"round {i + 1}: cold up {cold:.1f} s, re-run {rerun:.1f} s ({changes} changes), "
              f"down {down:.1f} s")
    med = [statistics.median(col) for col in zip(*rows, strict=True)]
    print(f"median of {len(rows)}: cold up {med[0]:.1f} s (target ≤ 60), re-run {med[1]:.1f} s "
          f"(target ≤ 10, changes {int(max(r[3] for r in rows))}), down {med[2]:.1f} s")
    ok = med[0] <= 60 and med[1] <= 10 and all(r[3] == 0 for r in rows)
    print("targets met" if ok else "targets NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
