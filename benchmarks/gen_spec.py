"""Generate a large, valid cluster spec for benchmarks: N GPU hosts spread over every sharing mode."""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

# (pool suffix, model, count, sharing, dra) - repeated round-robin over the hosts
SHAPES = [
    ("h100", "H100-SXM5-80GB", 8, {"mode": "exclusive"}, True),
    ("a100mig", "A100-80GB", 8, {"mode": "mig", "mig": {"layout": "all-1g.10gb"}}, False),
    ("l4ts", "L4", 8, {"mode": "time-slicing", "replicas": 4}, False),
    ("h200", "H200-141GB", 8, {"mode": "exclusive"}, False),
]


def generate(nodes: int, pools: int = 20) -> dict:
    hosts = [{"name": "cp-1", "address": "10.0.0.1", "roles": ["control-plane"]}]
    node_pools = []
    per_pool = max(1, nodes // pools)
    made = 0
    for p in range(pools):
        suffix, model, count, sharing, use_dra = SHAPES[p % len(SHAPES)]
        n = per_pool if p < pools - 1 else nodes - made
        names = [f"{suffix}-{p:02d}-{i:04d}" for i in range(n)]
        made += n
        for i, name in enumerate(names):
            hosts.append({"name": name, "address": f"10.{1 + p}.{i // 250}.{1 + i % 250}"})
        pool = {"name": f"{suffix}-{p:02d}", "hosts": names, "gpu": {"model": model, "count": count},
                "sharing": sharing}
        if use_dra:
            pool["dra"] = True
        node_pools.append(pool)
    return {
        "metadata": {"name": f"bench-{nodes}"},
        "hosts": hosts,
        "nodePools": node_pools,
        # 80G, not 80Gi: an "80GB" H100 reports 81559 MiB (79.6Gi), see docs/spec-reference.md.
        "dra": {"deviceClasses": [{"name": "gpu-80g", "selector": {"minMemory": "80G"}}],
                "claimTemplates": [{"name": "one-80g", "deviceClass": "gpu-80g"}]},
        "tenants": [{"name": f"team-{i}", "quota": {"gpus": 64, "cpu": "256", "memory": "1Ti",
                                                    "deviceClasses": {"gpu-80g": 8}},
                     "claimTemplates": ["one-80g"]} for i in range(20)],
    }


def write(nodes: int, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cluster.yaml").write_text(yaml.safe_dump(generate(nodes), sort_keys=False))
    return folder


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    print(write(args.nodes, args.out))
