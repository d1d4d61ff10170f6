"""Which of the spec's pools could ever run a pod: per-node resources, labels and taints from the spec.

"Ever" means on an empty, healthy node of the pool as the spec builds it, so a request no pool can
hold (17 GPUs where the largest node advertises 16, a MIG profile no layout has, a nodeSelector no
pool carries) is told apart from a request that only has to wait. The per-host expectations come from
:func:`gpucluster.expected.host_states` (the same numbers verification checks the nodes against).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpucluster import expected
from gpucluster import labels as L
from gpucluster.doctor.objects import Obj, selects
from gpucluster.spec.model import ClusterSpec


@dataclass(frozen=True)
class Pool:
    """One spec pool as one of its nodes looks when empty and healthy."""

    name: str
    hosts: tuple[str, ...]
    resources: dict[str, int]  # extended resources one node advertises (device plugin, RDMA)
    labels: dict[str, str]  # labels one node carries (ours and the agents'), without the hostname
    dra: bool  # served by the DRA driver (claims can be allocated here)
    gpu: str = ""  # GPU model and count, for messages
    taints: tuple[Obj, ...] = field(default_factory=tuple)


def spec_pools(spec: ClusterSpec) -> list[Pool]:
    """Every pool of the spec, plus one pseudo-pool per host outside any pool (named after the host)."""
    by_host = spec.pools_by_host()
    # Every host of a pool looks alike: expectations for one host per pool (and the pool-less hosts)
    # cost a few dozen host computations on a 1,000-node spec instead of a thousand.
    firsts = {p.hosts[0] for p in spec.node_pools} | {h.name for h in spec.hosts if h.name not in by_host}
    states = expected.host_states(spec.model_copy(update={"hosts": [h for h in spec.hosts if h.name in firsts]}))
    out: list[Pool] = []
    for pool in spec.node_pools:
        state = states[pool.hosts[0]]
        out.append(Pool(
            name=pool.name, hosts=tuple(pool.hosts), resources=dict(state.resources), labels=dict(state.labels),
            dra=pool.uses_dra, gpu=f"{pool.gpu.count}x {pool.gpu.model}" if pool.gpu else "",
            taints=tuple({"key": t.key, "value": t.value, "effect": t.effect} for t in pool.effective_taints)))
    for host in spec.hosts:
        if host.name not in by_host:
            state = states[host.name]
            out.append(Pool(name=host.name, hosts=(host.name,), resources={}, labels=dict(state.labels), dra=False))
    return out


def fits(pool: Pool, requests: dict[str, int]) -> bool:
    """True when one empty node of ``pool`` advertises at least ``requests``."""
    return all(pool.resources.get(k, 0) >= v for k, v in requests.items())


def selected(pool: Pool, pod: Obj) -> list[str]:
    """The hosts of ``pool`` the pod's nodeSelector / required node affinity accept."""
    return [h for h in pool.hosts if selects(pod, {**pool.labels, L.HOSTNAME: h})]


def largest(pools: list[Pool], resource: str) -> tuple[int, str]:
    """The most of ``resource`` one node advertises, and the pool that has it."""
    best = max(pools, key=lambda p: p.resources.get(resource, 0), default=None)
    return (best.resources.get(resource, 0), best.name) if best else (0, "")
