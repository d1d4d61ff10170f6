"""Benchmark: the GPU simulator creating and keeping current a generated N-node GPU cluster.

Needs the toolchain cached (`gpucluster tools install`). Generates a spec of N GPU hosts spread over
four pools (H100 x8 on DRA, A100-80GB MIG all-1g.10gb, L4 x4 time-sliced x4, H200 x8 exclusive),
starts a local world (or uses ``--kubeconfig``), applies the rendered gpu-operator ConfigMaps, then
prints, in seconds:
  agents (no API)   computing every node's labels, resources and devices in-process
  first sync        creating every node (+ its ResourceSlice) with labels, taints, capacity
  all Ready         from the start of the first sync until kwok reports every node Ready
  MIG step sync     the MIG manager's second step on the MIG nodes (pending -> success)
  idle sync         a second sync with nothing changed (its write count must be 0)
  replicas change   sync after the time-slicing replicas change in the deployed ConfigMap

Usage: python benchmarks/bench_simulator.py [--nodes 1000] [--workers 8] [--kubeconfig PATH] [--keep]
"""

from __future__ import annotations

import argparse
import signal
import tempfile
import time
from pathlib import Path

import yaml

from gpucluster.kube import NODES, Kube, with_selector
from gpucluster.local.world import World, missing_tools
from gpucluster.render import gpu_operator
from gpucluster.simulator import oracle
from gpucluster.simulator.agents import NodeView, fleet
from gpucluster.simulator.reconcile import SELECTOR, Simulator
from gpucluster.spec import load_spec

POOLS = [
    {"name": "h100", "gpu": {"model": "H100-SXM5-80GB", "count": 8}, "dra": True},
    {
        "name": "a100",
        "gpu": {"model": "A100-80GB", "count": 8},
        "sharing": {"mode": "mig", "mig": {"layout": "all-1g.10gb"}},
    },
    {"name": "l4", "gpu": {"model": "L4", "count": 4}, "sharing": {"mode": "time-slicing", "replicas": 4}},
    {"name": "h200", "gpu": {"model": "H200-141GB", "count": 8}},
]


def generated_spec(n: int, folder: Path):  # type: ignore[no-untyped-def]
    """A valid spec with ``n`` GPU hosts (round-robin over :data:`POOLS`) and one control plane."""
    hosts = [{"name": "cp-1", "address": "10.0.0.1", "roles": ["control-plane"]}]
    pools = [{**p, "hosts": []} for p in POOLS]
    for i in range(n):
        name = f"gpu-{i:04d}"
        hosts.append({"name": name, "address": f"10.{1 + i // 65000}.{i // 250 % 250}.{i % 250 + 1}"})
        pools[i % len(pools)]["hosts"].append(name)
    data = {
        "metadata": {"name": "bench"},
        "hosts": hosts,
        "nodePools": [p for p in pools if p["hosts"]],
        "kubernetes": {"version": "1.37.2"},
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cluster.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(folder)


def apply_configmaps(kube: Kube, spec) -> None:  # type: ignore[no-untyped-def]
    ns = spec.gpu_operator.namespace
    if kube.get(f"/api/v1/namespaces/{ns}") is None:
        kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for obj in gpu_operator.objects(spec):
        path = f"/api/v1/namespaces/{ns}/configmaps"
        if kube.get(f"{path}/{obj['metadata']['name']}") is None:
            kube.create(path, obj)
        else:
            kube.patch(f"{path}/{obj['metadata']['name']}", {"data": obj["data"]})


def compute_agents(sim: Simulator) -> int:
    """What a sync computes for every node, without writing (one read of the deployed objects, and
    NVIDIA's code through one nvidia-oracle run for the distinct node shapes); the oracle's process
    starts."""
    view = sim.view()
    nodes = [NodeView(si, sim.registration[name]["labels"], {}, sim.registration[name]["taints"], {})
             for name, si in sim.silicon.items()]
    before = oracle.shared().calls
    fleet(view, nodes, oracle.shared())
    return oracle.shared().calls - before


def ready(kube: Kube) -> int:
    count = 0
    for node in kube.items(with_selector(NODES, SELECTOR)):
        conds = {c["type"]: c["status"] for c in (node.get("status") or {}).get("conditions") or []}
        count += conds.get("Ready") == "True"
    return count


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for all Ready")
    parser.add_argument("--kubeconfig", type=Path, default=None, help="use a running cluster")
    parser.add_argument("--keep", action="store_true", help="leave the world running")
    args = parser.parse_args()
    # A SIGTERM (e.g. from `timeout`) must still run the `finally` that stops the world.
    signal.signal(signal.SIGTERM, _interrupt)
    tmp = Path(tempfile.mkdtemp(prefix="gpucluster-bench-sim-"))
    world = None
    if args.kubeconfig is None:
        missing = missing_tools()
        if missing:
            print(f"toolchain not built ({', '.join(missing)}): run `gpucluster tools install` first")
            return 2
        world = World(tmp / "world")
        t0 = time.monotonic()
        world.up()
        print(f"world up          {time.monotonic() - t0:7.1f} s")
    kubeconfig = args.kubeconfig or world.kubeconfig  # type: ignore[union-attr]
    try:
        spec = generated_spec(args.nodes, tmp / "inventory")
        hosts = len(spec.hosts)
        sim = Simulator(spec, kubeconfig, workers=args.workers)
        apply_configmaps(sim.kube, spec)
        t0 = time.monotonic()
        runs = compute_agents(sim)
        print(f"agents (no API)   {time.monotonic() - t0:7.2f} s  (desired state of every node; "
              f"{runs} nvidia-oracle run(s))")
        t1 = time.monotonic()
        first = sim.sync()
        t_first = time.monotonic() - t1
        print(
            f"first sync        {t_first:7.1f} s  ({hosts} nodes, {first.writes} writes, "
            f"{first.writes / t_first:.0f} writes/s)"
        )
        deadline = t1 + args.timeout
        while (n := ready(sim.kube)) < hosts and time.monotonic() < deadline:
            time.sleep(1.0)
        print(f"all Ready         {time.monotonic() - t1:7.1f} s  ({n}/{hosts} Ready)")
        t_mig = time.monotonic()
        mig = sim.sync()  # the MIG manager's second step (pending -> success) on the MIG nodes
        print(f"MIG step sync     {time.monotonic() - t_mig:7.1f} s  ({mig.writes} writes)")
        t2 = time.monotonic()
        idle = sim.sync()
        print(f"idle sync         {time.monotonic() - t2:7.1f} s  ({idle.writes} writes)")
        ns = spec.gpu_operator.namespace
        cm = f"/api/v1/namespaces/{ns}/configmaps/{gpu_operator.DEVICE_PLUGIN_CONFIGMAP}"
        data = sim.kube.get(cm)["data"]  # type: ignore[index]
        doc = yaml.safe_load(data["l4"])
        doc["sharing"]["timeSlicing"]["resources"][0]["replicas"] = 2
        sim.kube.patch(cm, {"data": {"l4": yaml.safe_dump(doc)}})
        t3 = time.monotonic()
        change = sim.sync()
        print(
            f"replicas change   {time.monotonic() - t3:7.1f} s  ({change.writes} writes, "
            f"{len(change.updated)} nodes updated)"
        )
        sim.close()
        return 0 if n == hosts and idle.writes == 0 else 1
    finally:
        if world is not None and not args.keep:
            world.down()


if __name__ == "__main__":
    raise SystemExit(main())
