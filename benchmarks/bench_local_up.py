"""Benchmark: local control plane start-up, and N kwok nodes becoming Ready.

Needs the toolchain cached (`gpucluster tools install`). Prints, in seconds:
  up→healthy        `World.up()` until every component answers its health check
  crds              server-side apply of the operators' CRDs until Established
  nodes created     creating N kwok nodes (``--workers`` parallel API calls)
  up→N nodes Ready  from the start of `up` until all N nodes report Ready

Usage: python benchmarks/bench_local_up.py [--nodes 1000] [--workers 8] [--keep]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kubernetes import client, config

from gpucluster.local.crds import install_crds
from gpucluster.local.stages import MANAGE_ANNOTATION
from gpucluster.local.world import World, missing_tools

_EFFECT = "NoSchedule"


def _node(i: int) -> client.V1Node:
    name = f"bench-node-{i:04d}"
    return client.V1Node(
        metadata=client.V1ObjectMeta(
            name=name,
            annotations={MANAGE_ANNOTATION: "fake"},
            labels={"type": "kwok", "kubernetes.io/hostname": name},
        ),
        spec=client.V1NodeSpec(taints=[client.V1Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")]),
    )


def _ready_count(api: client.CoreV1Api) -> int:
    # raw JSON: the client's model objects cost seconds of CPU per 1,000-node list
    resp = api.list_node(label_selector="type=kwok", _preload_content=False)
    ready = 0
    for node in json.loads(resp.data)["items"]:
        for cond in node.get("status", {}).get("conditions") or []:
            if cond["type"] == "Ready" and cond["status"] == "True":
                ready += 1
    return ready


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="leave the world running")
    args = parser.parse_args()
    missing = missing_tools()
    if missing:
        print(f"toolchain not built ({', '.join(missing)}): run `gpucluster tools install` first")
        return 2
    state_dir = args.state_dir or Path(tempfile.mkdtemp(prefix="gpucluster-bench-"))
    world = World(state_dir)
    t0 = time.monotonic()
    world.up()
    t_up = time.monotonic() - t0
    print(f"up→healthy        {t_up:7.1f} s")
    try:
        t1 = time.monotonic()
        install_crds(world.kubeconfig)
        print(f"crds              {time.monotonic() - t1:7.1f} s")
        api_client = config.new_client_from_config(str(world.kubeconfig))
        api_client.configuration.connection_pool_maxsize = args.workers * 2
        api = client.CoreV1Api(api_client)
        t2 = time.monotonic()
        with ThreadPoolExecutor(args.workers) as pool:
            list(pool.map(lambda i: api.create_node(_node(i)), range(args.nodes)))
        print(f"nodes created     {time.monotonic() - t2:7.1f} s  ({args.nodes} nodes, {args.workers} workers)")
        deadline = t0 + args.timeout
        ready = 0
        while time.monotonic() < deadline:
            ready = _ready_count(api)
            if ready >= args.nodes:
                break
            time.sleep(2.0)
        total = time.monotonic() - t0
        if ready < args.nodes:
            print(f"timed out: {ready}/{args.nodes} nodes Ready after {total:.1f} s")
            return 1
        print(f"up→{args.nodes} nodes Ready {total:7.1f} s  (nodes alone: {time.monotonic() - t2:.1f} s)")
    finally:
        if not args.keep:
            world.down()
        else:
            print(f"kept running; KUBECONFIG={world.kubeconfig}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
