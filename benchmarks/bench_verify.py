"""Benchmark: `verify` on a simulated 1,000-node / 8,000-GPU cluster next to the raw LIST calls it needs.

Starts a local world in a temporary folder (toolchain must be built), registers the generated spec's
nodes with the GPU simulator, applies the render output, then times (best of --repeat):
  raw LISTs   GET nodes + GET resourceslices (the two big lists), raw JSON
  verify      the whole `gpucluster verify` path: 11 LISTs + every check
and prints both and their ratio (targets: verify <= 5 s and <= 2x the raw LISTs).
Usage: python benchmarks/bench_verify.py [--nodes 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml
from gen_spec import write

from gpucluster.local.world import World
from gpucluster.render import render
from gpucluster.simulator import attach
from gpucluster.spec import load_spec
from gpucluster.toolchain import path_of
from gpucluster.verify import cluster, snapshot


def raw_lists(kubeconfig: str) -> float:
    """The two big LISTs, bodies read and decoded, through the same REST layer verify uses."""
    import json

    from kubernetes import client, config

    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    api = client.ApiClient(cfg)
    t0 = time.perf_counter()
    for path in ("/api/v1/nodes", "/apis/resource.k8s.io/v1/resourceslices"):
        resp = api.rest_client.request("GET", cfg.host + path, headers={"Accept": "application/json"})
        json.loads(resp.read())
    dt = time.perf_counter() - t0
    api.close()
    return dt


def wait_ready(kubeconfig: str, nodes: int, limit: float = 900) -> float:
    """Wait (bounded) until ``nodes`` nodes are Ready, so the timed runs check a settled cluster."""
    t0 = time.perf_counter()
    while True:
        ready = sum(1 for n in snapshot.fetch(kubeconfig).nodes
                    if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", [])))
        if ready >= nodes:
            return time.perf_counter() - t0
        if time.perf_counter() - t0 > limit:
            raise SystemExit(f"only {ready} of {nodes} nodes Ready after {limit:.0f}s")
        time.sleep(5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inv = write(args.nodes, Path(tmp) / "inv")
        spec = load_spec(inv)
        world = World(Path(tmp) / "world")
        t0 = time.perf_counter()
        world.up()
        kc = str(world.kubeconfig)
        try:
            objs = [o for o in render(spec).objects() if o["kind"] in ("Namespace", "ConfigMap", "DeviceClass",
                                                                        "ResourceQuota", "LimitRange", "NetworkPolicy",
                                                                        "PriorityClass")]
            subprocess.run([str(path_of("kubectl")), f"--kubeconfig={kc}", "apply", "--server-side", "-f", "-"],
                           input=yaml.safe_dump_all(sorted(objs, key=lambda o: o["kind"] != "Namespace")),
                           text=True, check=True, capture_output=True)
            sim = attach(world.kubeconfig, spec)
            sim.close()
            waited = wait_ready(kc, len(spec.hosts))
            gpus = sum(p.gpu.count * len(p.hosts) for p in spec.gpu_pools if p.gpu)
            print(f"cluster: {args.nodes} simulated nodes, {gpus} GPUs, built in {time.perf_counter() - t0:.1f}s "
                  f"(all Ready after {waited:.1f}s)")
            raw, full = [], []
            for _ in range(args.repeat):
                raw.append(raw_lists(kc))
                t1 = time.perf_counter()
                snap = cluster.fetch(spec, kc)  # what `gpucluster verify` fetches, access reviews included
                results = cluster.run(spec, snap)
                full.append(time.perf_counter() - t1)
            fails = sum(1 for r in results if r.verdict.value == "fail")
            r, v = min(raw), min(full)
            print(f"raw LISTs (nodes + resourceslices): {r:.2f} s")
            print(f"verify ({snap.calls} LISTs + {snap.reviews} access reviews + {len(results)} checks, "
                  f"{fails} failed): {v:.2f} s")
            print(f"ratio verify/raw: {v / r:.2f}x (target <= 2x); verify {'<=' if v <= 5 else '>'} 5 s target")
            by_check = Counter(r.check for r in results if r.verdict.value == "fail")
            for check, n in sorted(by_check.items()):
                example = next(x for x in results if x.check == check and x.verdict.value == "fail")
                print(f"  failed {check}: {n} (e.g. {example.subject}: expected {example.expected}, "
                      f"actual {example.actual})")
        finally:
            world.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
