"""Benchmark: topology-constrained gangs placed per second through the real Volcano, next to unconstrained ones.

One local world (toolchain must be built: the control plane, kwok and Volcano's three daemons) with --nodes
simulated 8-GPU H100 nodes (device plugin), --leaf-size nodes per leaf and every leaf under one of
ceil(leaves / 8) spines, rendered from a spec with ``topology.tiers: [leaf, spine]`` (so the scheduler runs
the ``network-topology-aware`` plugin and the HyperNodes we render, exactly as a real cluster gets them).
Two rounds on the same world, each submitting --gangs Volcano Jobs of --workers pods x 8 GPUs at once:

  unconstrained  no ``networkTopology``: the gang may span the whole cluster
  leaf           ``networkTopology {mode: hard, highestTierAllowed: 1}``: every gang inside one leaf

For each round: the time from the first Job POST until every pod is bound, gangs per second, and how many
gangs span more than one leaf (the leaf round must show 0; the HyperNodes are resolved from the live
objects). Prints both and the ratio leaf / unconstrained.
Usage: python benchmarks/bench_topology.py [--nodes 1000] [--leaf-size 8] [--gangs 200] [--workers 2]
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from gpucluster import kube
from gpucluster.addons import volcano as local_volcano
from gpucluster.local.world import World
from gpucluster.render import render
from gpucluster.simulator import attach
from gpucluster.spec import load_spec
from gpucluster.toolchain import path_of
from gpucluster.verify.topology import membership

NS = "bench"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
HYPERNODES = "/apis/topology.volcano.sh/v1alpha1/hypernodes"


def spec_doc(nodes: int, leaf_size: int, gpus: int) -> dict[str, Any]:
    hosts: list[dict[str, Any]] = [{"name": "cp-1", "address": "10.0.0.1", "roles": ["control-plane"]}]
    names = [f"h100-{i:04d}" for i in range(nodes)]
    for i, n in enumerate(names):
        leaf = i // leaf_size
        hosts.append({"name": n, "address": f"10.1.{i // 250}.{1 + i % 250}",
                      "topology": {"leaf": f"leaf-{leaf:03d}", "spine": f"spine-{leaf // 8:02d}"}})
    return {"metadata": {"name": f"bench-topology-{nodes}"}, "hosts": hosts,
            "nodePools": [{"name": "h100", "hosts": names, "gpu": {"model": "H100-SXM5-80GB", "count": 8}}],
            "topology": {"tiers": ["leaf", "spine"]},
            "tenants": [{"name": NS, "quota": {"gpus": gpus}, "queue": {"weight": 1, "capabilityGpus": gpus},
                         "priorityClasses": ["training"]}],
            "monitoring": {"enabled": False}, "networking": {"multus": False, "networkOperator": {"enabled": False}}}


def job(i: int, workers: int, constrained: bool) -> dict[str, Any]:
    # Each round its own names: Volcano's job controller loses a Job re-created under the name of one
    # still being deleted (v1.14.1 logged "failed to find job" and never created its pods, seen here).
    name = f"{'leaf' if constrained else 'free'}-{i:05d}"
    pod = {"schedulerName": "volcano", "restartPolicy": "Never", "tolerations": [TOLERATION],
           "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
           "containers": [{"name": "main", "image": "registry.invalid/none:0",
                           "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                           "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                                         "limits": {"nvidia.com/gpu": "8"}}}]}
    spec: dict[str, Any] = {"schedulerName": "volcano", "queue": NS, "minAvailable": workers, "maxRetry": 1,
                            "priorityClassName": "training",
                            "tasks": [{"name": "w", "replicas": workers, "minAvailable": workers,
                                       "template": {"metadata": {"labels": {"gang": name}}, "spec": pod}}]}
    if constrained:
        spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": spec}


def ready_nodes(api: kube.Kube) -> int:
    return sum(1 for n in api.items(kube.NODES) if n["metadata"]["name"] != "cp-1" and any(
        c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", [])))


def wait(what: str, probe: Any, limit: float, every: float = 1.0) -> float:
    t0 = time.perf_counter()
    while not probe():
        if time.perf_counter() - t0 > limit:
            raise SystemExit(f"timed out after {limit:.0f} s waiting for {what}")
        time.sleep(every)
    return time.perf_counter() - t0


def gangs_spanning_leaves(api: kube.Kube) -> int:
    hns = api.items(HYPERNODES)
    nodes = {n["metadata"]["name"]: n for n in api.items(kube.NODES)}
    leaf_of = {name: tuple(membership(hns, n).get(1, [])) for name, n in nodes.items()}
    per_gang: dict[str, set[tuple[str, ...]]] = {}
    for p in api.items(kube.namespaced(NS, "pods")):
        per_gang.setdefault(p["metadata"]["labels"]["gang"], set()).add(leaf_of[p["spec"]["nodeName"]])
    return sum(1 for leaves in per_gang.values() if len(leaves) > 1)


def round_(api: kube.Kube, kubectl_delete: Any, gangs: int, workers: int, constrained: bool) -> dict[str, float]:
    start = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: api.create(f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs",
                                           job(i, workers, constrained)), range(gangs)))
    created = time.perf_counter() - start
    want = gangs * workers

    def all_bound() -> bool:
        return sum(1 for p in api.items(kube.namespaced(NS, "pods")) if p["spec"].get("nodeName")) >= want
    wait(f"{want} pods bound", all_bound, 1800, every=0.5)
    took = time.perf_counter() - start
    spanning = gangs_spanning_leaves(api)
    what = "leaf-constrained (hard, tier 1)" if constrained else "unconstrained"
    print(f"{what}: {gangs} gangs x {workers} pods x 8 GPUs, Jobs created in {created:.1f} s, every pod bound after "
          f"{took:.1f} s: {gangs / took:.2f} gangs per second; {spanning} gang(s) span more than one leaf",
          flush=True)
    kubectl_delete()
    paths = (kube.namespaced(NS, "pods"), f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs",
             f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups")
    wait("the round's Jobs, PodGroups and pods gone", lambda: not any(api.items(p) for p in paths), 600)
    return {"rate": gangs / took, "spanning": spanning}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--leaf-size", type=int, default=8)
    ap.add_argument("--gangs", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if args.workers > args.leaf_size:
        raise SystemExit(f"--workers {args.workers} (one 8-GPU node each) cannot fit in a leaf of {args.leaf_size}")
    per_leaf = args.leaf_size // args.workers
    leaves = math.ceil(args.nodes / args.leaf_size)
    if args.gangs > per_leaf * (args.nodes // args.leaf_size):
        raise SystemExit(f"--gangs {args.gangs} exceeds the {per_leaf * (args.nodes // args.leaf_size)} that fit "
                         f"leaf by leaf in {leaves} leaves")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        inv = Path(tmp) / "inv"
        inv.mkdir()
        (inv / "cluster.yaml").write_text(yaml.safe_dump(spec_doc(args.nodes, args.leaf_size, args.nodes * 8),
                                                        sort_keys=False))
        spec = load_spec(inv)
        world = World(Path(tmp) / "world")
        t0 = time.perf_counter()
        world.up()
        try:
            local_volcano.start(world, spec)
            rendered = render(spec).components
            objs = [*rendered["namespaces"], *rendered["gpu-operator"], *rendered["volcano"],
                    *[o for o in rendered["tenants"] if o["kind"] == "Namespace"]]
            kubectl = [str(path_of("kubectl")), f"--kubeconfig={world.kubeconfig}"]
            subprocess.run([*kubectl, "apply", "--server-side", "-f", "-"], check=True, capture_output=True,
                           text=True, input=yaml.safe_dump_all(sorted(objs, key=lambda o: o["kind"] != "Namespace")))
            sim = attach(world.kubeconfig, spec)
            sim.close()

            def delete_jobs() -> None:
                subprocess.run([*kubectl, "delete", "jobs.batch.volcano.sh", "--all", "-n", NS, "--wait=false"],
                               check=True, capture_output=True)
            with kube.Kube(world.kubeconfig, pool_size=16, timeout=60) as api:
                waited = wait(f"{args.nodes} nodes Ready", lambda: ready_nodes(api) >= args.nodes, 900, every=2)
                hns = len(api.items(HYPERNODES))
                print(f"{args.nodes} nodes in {leaves} leaves of {args.leaf_size} ({hns} HyperNodes), built in "
                      f"{time.perf_counter() - t0:.0f} s (settled after {waited:.0f} s)", flush=True)
                free = round_(api, delete_jobs, args.gangs, args.workers, constrained=False)
                leaf = round_(api, delete_jobs, args.gangs, args.workers, constrained=True)
            print(f"ratio leaf-constrained / unconstrained: {leaf['rate'] / free['rate']:.2f}x "
                  f"({leaf['rate']:.2f} vs {free['rate']:.2f} gangs per second)")
            if leaf["spanning"]:
                print(f"FAILED: {leaf['spanning']} leaf-constrained gang(s) span leaves", file=sys.stderr)
                return 1
        finally:
            world.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
