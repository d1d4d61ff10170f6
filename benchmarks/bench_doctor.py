"""Benchmark: `gpucluster doctor pod` for one Pending pod on a simulated 1,000-node cluster.

Starts a local world in a temporary folder (toolchain must be built), registers the generated spec's
nodes with the GPU simulator, applies the render output, binds --pods running pods onto the nodes
(as a busy cluster has), then times (best of --repeat) the whole command in-process — spec loading and
validation, the LIST calls, the diagnosis — for three Pending pods that take different paths:
  too-big      asks for more GPUs than any node has (decided from the spec's pools)
  untolerated  fits hundreds of nodes but tolerates none of their taints (every candidate node examined)
  dra          claims an 80 GB device no published one matches (every ResourceSlice and claim read)
and prints each time with its API calls and the cause found (target: <= 2 s each).
Usage: python benchmarks/bench_doctor.py [--nodes 1000] [--pods 1000] [--repeat 3] [--world DIR [--keep]]
(--world builds, or reuses, the world and spec in DIR; --keep leaves it running for the next run.)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml
from bench_verify import wait_ready
from gen_spec import write

from gpucluster.cli.main import entrypoint
from gpucluster.local.world import World
from gpucluster.render import render
from gpucluster.simulator import attach
from gpucluster.spec import load_spec
from gpucluster.toolchain import path_of

NS = "bench"  # no tenant: no Pod Security level or quota to satisfy
TOLERATION = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def kubectl(kc: str, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run([str(path_of("kubectl")), f"--kubeconfig={kc}", *args], input=stdin, text=True,
                          check=False, capture_output=True)
    if proc.returncode:
        raise SystemExit(f"kubectl {' '.join(args)}: {proc.stderr[-2000:]}")
    return proc.stdout


def pod(name: str, *, gpus: int = 0, node: str = "", tolerate: bool = True, claim: str = "") -> dict:
    res: dict = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "10m", "memory": "16Mi"}}
    if gpus:
        res["limits"]["nvidia.com/gpu"] = str(gpus)
    spec: dict = {"containers": [{"name": "c", "image": "example/x:1", "resources": res}]}
    if tolerate:
        spec["tolerations"] = TOLERATION
    if node:
        spec["nodeName"] = node
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        res["claims"] = [{"name": "gpu"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def doctor(inv: Path, kc: str, name: str) -> tuple[float, dict]:
    out = io.StringIO()
    t0 = time.perf_counter()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        entrypoint(["doctor", "pod", f"{NS}/{name}", "-i", str(inv), "--kubeconfig", kc, "-o", "json"])
    return time.perf_counter() - t0, json.loads(out.getvalue())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--world", type=Path, default=None, help="Folder to build (or reuse) the world and spec in.")
    ap.add_argument("--keep", action="store_true", help="Leave the world running (with --world).")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.world or Path(scratch)
        inv = write(args.nodes, Path(tmp) / "inv")
        spec = load_spec(inv)
        world = World(Path(tmp) / "world")
        t0 = time.perf_counter()
        world.up()
        kc = str(world.kubeconfig)
        try:
            objs = [o for o in render(spec).objects() if o["kind"] in (
                "Namespace", "ConfigMap", "DeviceClass", "ResourceQuota", "LimitRange", "PriorityClass",
                "ResourceClaimTemplate")]
            objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            kubectl(kc, "apply", "--server-side", "-f", "-",
                    stdin=yaml.safe_dump_all(sorted(objs, key=lambda o: o["kind"] != "Namespace")))
            attach(world.kubeconfig, spec).close()
            waited = wait_ready(kc, len(spec.hosts))
            gpu_hosts = [h for p in spec.gpu_pools for h in p.hosts]
            busy = [pod(f"busy-{i}", node=gpu_hosts[i % len(gpu_hosts)]) for i in range(args.pods)]
            for i in range(0, len(busy), 500):
                kubectl(kc, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(busy[i:i + 500]))
            dra_hosts = [h for p in spec.gpu_pools if p.dra for h in p.hosts]
            b200 = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": "b200", "namespace": NS},
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                        "deviceClassName": "gpu-80g", "selectors": [{"cel": {"expression":
                            "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"}}]}}]}}}
            kubectl(kc, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all([
                b200, pod("too-big", gpus=64), pod("untolerated", gpus=1, tolerate=False), pod("dra", claim="b200")]))
            print(f"cluster: {args.nodes} simulated nodes, {args.pods} running pods, {len(dra_hosts)} DRA nodes, "
                  f"built in {time.perf_counter() - t0:.1f}s (all Ready after {waited:.1f}s)")
            for name in ("too-big", "untolerated", "dra"):
                runs = [doctor(inv, kc, name) for _ in range(args.repeat)]
                best, answer = min(runs, key=lambda r: r[0])
                d = answer["diagnoses"][0]
                cpu = time.process_time()
                doctor(inv, kc, name)
                cpu = time.process_time() - cpu
                print(f"doctor pod {NS}/{name}: {best:.2f} s (best of {args.repeat}; {answer['apiCalls']} API reads; "
                      f"cause {d['cause']}; {cpu:.2f} s of this process's CPU per run) "
                      f"{'<=' if best <= 2 else '>'} 2 s target")
            load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
            print(f"load average while measuring: {' '.join(load)} on {os.cpu_count()} CPUs")
        finally:
            if not (args.world and args.keep):
                world.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
