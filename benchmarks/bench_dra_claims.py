"""Benchmark: claims scheduled per second on simulated DRA nodes, next to device-plugin pods, as a ratio.

Two local worlds in turn (toolchain must be built), each with --nodes simulated L40S nodes of 8 GPUs:
  dra            the nodes served by the DRA driver (the simulator publishes one ResourceSlice per node);
                 --pods pods, each with a claim from one ResourceClaimTemplate (1 device): the real
                 kube-controller-manager creates the claims, the real kube-scheduler allocates and binds
  device-plugin  the same nodes served by the device plugin (nvidia.com/gpu: 8); --pods pods asking
                 nvidia.com/gpu: 1
For each: the time from the first pod POST until every pod is bound (and, for DRA, every claim
allocated), and pods (claims) per second. Prints both and the ratio DRA / device plugin.
Where the time goes, over that window: CPU seconds of each control-plane process (a process near one CPU
second per second is the cap: it works one pod at a time), the time the scheduler's and controller-manager's
API clients waited in their client-side rate limiter (``--kube-api-qps/--kube-api-burst``; near zero: the
limit is not the cap), and the scheduler's time per extension point (PreFilter/Filter/Reserve...: which
plugin work dominates), from their own /metrics.
It also prints the control plane's CPU per pod and the ceiling that puts on this machine (CPUs / CPU per
pod): a rate near its ceiling is bound by the machine, not by a limit of the components.
Usage: python benchmarks/bench_dra_claims.py [--nodes 500] [--pods 2500] [--mode both|dra|device-plugin]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from gpucluster import kube, procs
from gpucluster.local.world import World
from gpucluster.render import render
from gpucluster.simulator import attach
from gpucluster.spec import load_spec
from gpucluster.toolchain import path_of

NS = "bench"
TEMPLATE = "one-l40s"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def spec_doc(nodes: int, dra: bool) -> dict[str, Any]:
    hosts = [{"name": "cp-1", "address": "10.0.0.1", "roles": ["control-plane"]}]
    names = [f"l40s-{i:04d}" for i in range(nodes)]
    hosts += [{"name": n, "address": f"10.1.{i // 250}.{1 + i % 250}"} for i, n in enumerate(names)]
    pool: dict[str, Any] = {"name": "l40s", "hosts": names, "gpu": {"model": "L40S", "count": 8}, "dra": dra}
    doc: dict[str, Any] = {"metadata": {"name": f"bench-dra-{nodes}"}, "hosts": hosts, "nodePools": [pool],
                           "scheduling": {"volcano": {"enabled": False}}, "monitoring": {"enabled": False},
                           "networking": {"multus": False, "networkOperator": {"enabled": False}}}
    if dra:
        doc["dra"] = {"deviceClasses": [{"name": "l40s", "selector": {"productNameContains": "L40S"}}]}
    return doc


def pod(i: int, dra: bool) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "registry.invalid/none:0",
                                 "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}
    spec: dict[str, Any] = {"containers": [container], "tolerations": [TOLERATION]}
    if dra:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}]
        container["resources"]["claims"] = [{"name": "gpu"}]
    else:
        container["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{i:05d}", "namespace": NS}, "spec": spec}


def template() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": TEMPLATE, "namespace": NS},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "l40s", "allocationMode": "ExactCount", "count": 1}}]}}}}


def apply(kubeconfig: str, objs: list[dict[str, Any]]) -> None:
    subprocess.run([str(path_of("kubectl")), f"--kubeconfig={kubeconfig}", "apply", "--server-side", "-f", "-"],
                   input=yaml.safe_dump_all(sorted(objs, key=lambda o: o["kind"] != "Namespace")),
                   text=True, check=True, capture_output=True)


def settled(api: kube.Kube, nodes: int, dra: bool, limit: float = 900) -> float:
    """Wait (bounded) until every node is Ready and, for DRA, has its ResourceSlice."""
    t0 = time.perf_counter()
    while True:
        ready = sum(1 for n in api.items(kube.NODES) if n["metadata"]["name"] != "cp-1" and any(
            c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", [])))
        slices = len(api.items(kube.RESOURCE_SLICES)) if dra else nodes
        if ready >= nodes and slices >= nodes:
            return time.perf_counter() - t0
        if time.perf_counter() - t0 > limit:
            raise SystemExit(f"only {ready} of {nodes} nodes Ready ({slices} slices) after {limit:.0f}s")
        time.sleep(2)


CAP_COMPONENTS = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "etcd", "kwok")
SERIES = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$", re.M)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metrics(world: World, name: str) -> dict[str, float]:
    """The sums that locate the cap, from component ``name``'s /metrics (admin client certificate)."""
    state = world.state()
    assert state is not None
    tls = procs.tls_context(world.pki.ca, world.pki.cert("admin"), world.pki.key("admin"))
    with urllib.request.urlopen(f"https://{procs.HOST}:{state.ports[name]}/metrics", context=tls, timeout=30) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for m in SERIES.finditer(text):
        key, labels = m["name"], m["labels"] or ""
        if key in ("rest_client_rate_limiter_duration_seconds_sum", "rest_client_rate_limiter_duration_seconds_count",
                   "rest_client_requests_total"):
            out[key] = out.get(key, 0.0) + float(m["value"])
        elif key == "scheduler_framework_extension_point_duration_seconds_sum":
            point = re.search(r'extension_point="([^"]+)"', labels)
            if point:
                out[f"ext:{point[1]}"] = out.get(f"ext:{point[1]}", 0.0) + float(m["value"])
    return out


def sample(world: World) -> dict[str, Any]:
    state = world.state()
    assert state is not None
    return {"cpu": {n: cpu_seconds(state.components[n].pid) for n in CAP_COMPONENTS if n in state.components},
            "metrics": {n: metrics(world, n) for n in ("kube-scheduler", "kube-controller-manager")},
            "t": time.perf_counter()}


def where_the_time_went(before: dict[str, Any], after: dict[str, Any], pods: int) -> str:
    wall = after["t"] - before["t"]
    used = {n: after["cpu"][n] - before["cpu"][n] for n in before["cpu"]}
    cpus = os.cpu_count() or 1
    lines = [f"  CPU seconds over those {wall:.1f} s ({cpus} CPUs): "
             + ", ".join(f"{n} {v:.1f}" for n, v in used.items())]
    # The ceiling the machine sets: were these processes alone on every CPU, no faster than CPUs / CPU per pod.
    per_pod = sum(used.values()) / pods
    lines.append(f"  control plane CPU per pod: {per_pod * 1000:.1f} ms "
                 f"(scheduler {used['kube-scheduler'] / pods * 1000:.1f}, "
                 f"API server {used['kube-apiserver'] / pods * 1000:.1f}); this machine's ceiling at that cost: "
                 f"{cpus / per_pod:.1f} per second, reached {pods / wall / (cpus / per_pod):.0%}")
    for name in ("kube-scheduler", "kube-controller-manager"):
        b, a = before["metrics"][name], after["metrics"][name]
        d = {k: a.get(k, 0.0) - b.get(k, 0.0) for k in a}
        waits = d.get("rest_client_rate_limiter_duration_seconds_count", 0.0)
        line = (f"  {name}: {d.get('rest_client_requests_total', 0):.0f} API requests, client rate limiter waited "
                f"{d.get('rest_client_rate_limiter_duration_seconds_sum', 0):.2f} s in all over {waits:.0f} waits")
        points = sorted(((k[4:], v) for k, v in d.items() if k.startswith("ext:")), key=lambda kv: -kv[1])
        if points:
            line += "; extension points (s): " + ", ".join(f"{k} {v:.1f}" for k, v in points[:5])
        lines.append(line)
    return "\n".join(lines)


def run(nodes: int, pods: int, dra: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        inv = Path(tmp) / "inv"
        inv.mkdir()
        (inv / "cluster.yaml").write_text(yaml.safe_dump(spec_doc(nodes, dra), sort_keys=False))
        spec = load_spec(inv)
        world = World(Path(tmp) / "world")
        t0 = time.perf_counter()
        world.up()
        kc = str(world.kubeconfig)
        try:
            objs = [o for o in render(spec).objects() if o["kind"] in ("Namespace", "ConfigMap", "DeviceClass")]
            apply(kc, [*objs, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
            if dra:
                apply(kc, [template()])
            sim = attach(world.kubeconfig, spec)
            sim.close()
            with kube.Kube(world.kubeconfig, pool_size=16, timeout=60) as api:
                waited = settled(api, nodes, dra)
                built = time.perf_counter() - t0
                before = sample(world)
                start = time.perf_counter()
                with ThreadPoolExecutor(16) as pool:
                    list(pool.map(lambda i: api.create(kube.namespaced(NS, "pods"), pod(i, dra)), range(pods)))
                created = time.perf_counter() - start
                while True:
                    items = api.items(kube.namespaced(NS, "pods"))
                    bound = sum(1 for p in items if p["spec"].get("nodeName"))
                    allocated = sum(1 for c in api.items(kube.namespaced(NS, "resourceclaims", group="resource.k8s.io"))
                                    if (c.get("status") or {}).get("allocation")) if dra else bound
                    if bound >= pods and allocated >= pods:
                        break
                    if time.perf_counter() - start > 1800:
                        raise SystemExit(f"{bound} of {pods} pods bound ({allocated} claims allocated) after 1800 s")
                    time.sleep(0.5)
                took = time.perf_counter() - start
                after = sample(world)
            what = "DRA claims" if dra else "device-plugin pods"
            print(f"{what}: {nodes} nodes x 8 GPUs (built in {built:.0f} s, settled after {waited:.0f} s); "
                  f"{pods} pods created in {created:.1f} s, all bound{' and allocated' if dra else ''} after "
                  f"{took:.1f} s: {pods / took:.1f} per second", flush=True)
            print(where_the_time_went(before, after, pods), flush=True)
            return {"seconds": took, "rate": pods / took}
        finally:
            world.down()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=2500)
    ap.add_argument("--mode", choices=("both", "dra", "device-plugin"), default="both")
    args = ap.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)", flush=True)
    if args.pods > args.nodes * 8:
        raise SystemExit(f"--pods {args.pods} exceeds the {args.nodes * 8} GPUs of {args.nodes} nodes")
    out = {}
    if args.mode in ("both", "dra"):
        out["dra"] = run(args.nodes, args.pods, dra=True)
    if args.mode in ("both", "device-plugin"):
        out["dp"] = run(args.nodes, args.pods, dra=False)
    if len(out) == 2:
        print(f"ratio DRA / device plugin: {out['dra']['rate'] / out['dp']['rate']:.2f}x "
              f"({out['dra']['rate']:.1f} vs {out['dp']['rate']:.1f} pods per second)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
