"""``topology``: fabric tiers, each host's domain per tier, and the gang shapes the fabric must hold.

Volcano builds one tree from the HyperNodes we render (:mod:`gpucluster.render.topology`), and one bad
tree stops every topology job: a HyperNode given a second parent is an error that leaves the scheduler's
HyperNode cache not ready ("HyperNode %s already has a parent %s, and cannot set another parent %s",
volcano-sh/volcano v1.14.1 pkg/scheduler/api/hyper_node_info.go:484-486, :547-550), and jobs with a
network topology are then skipped ("hyperNodes are not ready for scheduling", pkg/scheduler/actions/
allocate/allocate.go:174-178). So every domain must have exactly one parent, and every GPU host a domain
at every tier (a host outside the tree never takes a topology job's pods).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

from gpucluster import labels as L
from gpucluster import versions
from gpucluster.spec.model import ClusterSpec
from gpucluster.spec.nvlink import (
    MAX_NODES_PER_IMEX_DOMAIN,
    MIN_COMPUTE_DOMAIN_DRIVER,
    driver_numbers,
    nvlink_domains,
    nvlink_platform,
)
from gpucluster.spec.validate.common import Collector, close

#: The name part of a node label is at most 63 characters: ``topology-`` plus the tier name.
MAX_TIER_NAME = 63 - len(L.TOPOLOGY_PREFIX.partition("/")[2])


def domain_gpus(spec: ClusterSpec, tier: str) -> dict[str, int]:
    """Domain of ``tier`` → the whole GPUs of the hosts in it (hosts without a domain there are left out)."""
    out: dict[str, int] = defaultdict(int)
    for host in spec.hosts:
        domain = host.topology.get(tier)
        if domain is None:
            continue
        pool = spec.pool_of(host.name)
        out[domain] += pool.gpu.count if pool is not None and pool.gpu is not None else 0
    return dict(out)


def check(spec: ClusterSpec, c: Collector) -> None:
    tiers = spec.topology.tiers
    c.duplicates("topology.tiers", tiers, what="tier")
    for i, tier in enumerate(tiers):
        if len(tier) > MAX_TIER_NAME:
            c.error(f"topology.tiers[{i}]", f"tier name {tier!r} is {len(tier)} characters; the node label "
                    f"{L.TOPOLOGY_PREFIX}{tier} allows at most {MAX_TIER_NAME}", "use a shorter name, e.g. leaf")
    gpu_hosts = {h for p in spec.gpu_pools for h in p.hosts}
    for i, host in enumerate(spec.hosts):
        for key in host.topology:
            if key not in tiers:
                hint = (close(key, tiers) if tiers else
                        "declare the fabric's tiers first, closest first, e.g. topology: {tiers: [leaf, spine]}")
                c.error(f"hosts[{i}].topology.{key}", f"{key!r} is not a tier of topology.tiers", hint)
        missing = [t for t in tiers if t not in host.topology]
        if not missing or (not host.topology and host.name not in gpu_hosts):
            continue  # complete, or a host outside the GPU fabric (control plane, CPU pool)
        what = "a GPU host" if host.name in gpu_hosts else "a host with a topology"
        c.error(f"hosts[{i}].topology", f"{host.name} is {what} without a domain for tier(s) {', '.join(missing)}: "
                "Volcano never places a topology-constrained gang's pods on a node outside every domain",
                f"give it one, e.g. topology: {{{', '.join(f'{t}: <{t}-name>' for t in tiers)}}}")
    _one_parent(spec, c)
    _gangs(spec, c)
    _nvlink(spec, c)
    if tiers and not spec.scheduling.volcano.enabled:
        c.warn("topology.tiers", "with scheduling.volcano.enabled false only the node labels are rendered: no "
               "HyperNodes, and nothing enforces a gang's topology", "enable Volcano for topology-aware gangs")


def _one_parent(spec: ClusterSpec, c: Collector) -> None:
    """Each domain of a tier sits in exactly one domain of the next tier (Volcano allows one parent)."""
    tiers = spec.topology.tiers
    for lower, upper in pairwise(tiers):
        parent: dict[str, tuple[str, str]] = {}  # lower domain -> (upper domain, the host that said so)
        for i, host in enumerate(spec.hosts):
            child, up = host.topology.get(lower), host.topology.get(upper)
            if child is None or up is None:
                continue
            seen = parent.setdefault(child, (up, host.name))
            if seen[0] != up:
                c.error(f"hosts[{i}].topology.{upper}",
                        f"{lower} {child!r} is in {upper} {up!r} here but in {upper} {seen[0]!r} on {seen[1]}: "
                        "a domain has one parent (Volcano refuses a HyperNode with two and then schedules no "
                        "topology job at all)", f"put every host of {lower} {child!r} in the same {upper}")


def _gangs(spec: ClusterSpec, c: Collector) -> None:
    tiers = spec.topology.tiers
    c.duplicates("topology.gangs", (g.name for g in spec.topology.gangs))
    for i, gang in enumerate(spec.topology.gangs):
        if gang.within not in tiers:
            c.error(f"topology.gangs[{i}].within", f"{gang.within!r} is not a tier of topology.tiers",
                    close(gang.within, tiers) or "declare topology.tiers, closest first, e.g. [leaf, spine]")
            continue
        sizes = domain_gpus(spec, gang.within)
        biggest = max(sizes.values(), default=0)
        if gang.gpus > biggest:
            where = ", ".join(f"{d}: {n}" for d, n in sorted(sizes.items())) or "none"
            wider = tiers[tiers.index(gang.within) + 1:]
            c.error(f"topology.gangs[{i}].gpus",
                    f"gang {gang.name!r} needs {gang.gpus} GPUs inside one {gang.within}, but the largest "
                    f"{gang.within} holds {biggest} (GPUs per {gang.within}: {where})",
                    (f"let it span a wider tier (within: {wider[0]}), " if wider else "")
                    + f"or add GPU hosts to one {gang.within}")


def _nvlink(spec: ClusterSpec, c: Collector) -> None:
    """Multi-node NVLink (GB200 NVL72): which tier is the NVLink domain, and that each domain can be one."""
    tier, tiers = spec.topology.nvlink_tier, spec.topology.tiers
    if tier is not None and tier not in tiers:
        c.error("topology.nvlinkTier", f"{tier!r} is not a tier of topology.tiers",
                close(tier, tiers) or "add it to topology.tiers (closest first, e.g. [nvlink, leaf, spine])")
        return
    pools = [(i, p, plat) for i, p in enumerate(spec.node_pools) if (plat := nvlink_platform(p)) is not None]
    for i, pool, plat in pools:
        assert pool.gpu is not None
        if tier is None:
            c.error(f"nodePools[{i}].gpu.platform", f"{plat.key} hosts share NVLink with other hosts "
                    f"({plat.nvlink_domain.gpus if plat.nvlink_domain else 0} GPUs per NVLink domain), but the "
                    "spec does not say which tier is the NVLink domain",
                    "add the tier and name each host's domain there, e.g. topology: {tiers: [nvlink, leaf], "
                    "nvlinkTier: nvlink} and hosts[].topology: {nvlink: rack-01, leaf: leaf-01}")
        if not pool.uses_dra:
            c.error(f"nodePools[{i}].dra", f"pool {pool.name!r} is on {plat.key}: its GPUs' ComputeDomains "
                    "(IMEX channels across the NVLink domain) come from the DRA driver's kubelet plugin, which "
                    "runs on DRA pools only", f"set nodePools[{i}].dra: true")
    if pools:
        version = spec.gpu_operator.driver.version
        numbers = driver_numbers(version)
        if numbers is not None and numbers < MIN_COMPUTE_DOMAIN_DRIVER:
            c.error("gpuOperator.driver.version", f"ComputeDomains (pools on {pools[0][2].key}) need NVIDIA "
                    f"driver 570.158.01 or newer: the DRA driver's compute-domain plugin refuses to start on "
                    f"{version}", f"pin a driver >= 570.158.01, e.g. the default {versions.NVIDIA_DRIVER}")
    if tier is None:
        return
    index = {h.name: i for i, h in enumerate(spec.hosts)}
    for domain, hosts in sorted(nvlink_domains(spec).items()):
        plats = {h: nvlink_platform(spec.pool_of(h)) for h in hosts}
        outside = [h for h, p in plats.items() if p is None]
        inside = sorted({p.key for p in plats.values() if p is not None})
        first = f"hosts[{index[hosts[0]]}].topology.{tier}"
        if outside and inside:
            c.error(f"hosts[{index[outside[0]]}].topology.{tier}", f"NVLink domain {domain!r} mixes hosts of a "
                    f"multi-node NVLink platform ({', '.join(inside)}) with hosts outside one "
                    f"({', '.join(outside)}): NVLink does not reach them, and no ComputeDomain can span them",
                    f"give {', '.join(outside)} another {tier} domain")
        elif not inside:
            continue  # a tier named nvlink on other hosts: only a fabric tier there
        elif len(inside) > 1:
            c.error(first, f"NVLink domain {domain!r} mixes platforms {', '.join(inside)}",
                    "one NVLink domain is one system: give each platform's hosts their own domain")
        plat = next(p for p in plats.values() if p is not None)
        assert plat.nvlink_domain is not None
        most = min(plat.nvlink_domain.hosts, MAX_NODES_PER_IMEX_DOMAIN)
        if len(hosts) > most:
            c.error(f"hosts[{index[hosts[most]]}].topology.{tier}",
                    f"NVLink domain {domain!r} has {len(hosts)} hosts; one {plat.key} domain holds "
                    f"{plat.nvlink_domain.hosts} ({plat.nvlink_domain.gpus} GPUs), and the DRA driver's "
                    f"ComputeDomains span at most {MAX_NODES_PER_IMEX_DOMAIN} nodes",
                    f"split the hosts into domains of at most {most} (one per NVLink rack)")
