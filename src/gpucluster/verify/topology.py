"""``topology-domains``: every node sits, at every fabric tier, in the Volcano HyperNode the spec says.

What the scheduler does with the HyperNodes it reads is judged here the way it would judge them, from the
live objects alone: a tier-1 HyperNode's Node members are matched against the live node (``exactMatch``
by name, ``regexMatch`` by pattern, ``labelMatch`` by the node's labels), a wider HyperNode holds what its
HyperNode members (found by ``exactMatch`` only) hold (volcano v1.14.1
``pkg/scheduler/api/hyper_node_info.go:299-305,495-537``). The expectation is the spec's own
``hosts[].topology``: the HyperNode of domain ``D`` at tier ``T`` is named ``T.D`` and carries
``spec.tier`` (its place in ``topology.tiers``, 1-based) and ``spec.tierName`` ``T``. Nothing here asks the
renderer what it rendered, so a rendering mistake, a node whose label was changed or lost, a HyperNode
deleted or edited, or a node held by two domains of one tier (which the scheduler refuses as a second
parent) all fail a row.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpucluster import labels as L
from gpucluster.spec.model import ClusterSpec
from gpucluster.spec.nvlink import nvlink_domains, nvlink_platform
from gpucluster.verify.model import Result, fail, ok, skip
from gpucluster.verify.snapshot import Snapshot


def _selects_node(selector: dict, node: dict) -> bool:
    name = node["metadata"]["name"]
    labels = node["metadata"].get("labels") or {}
    if "exactMatch" in selector:
        return (selector["exactMatch"] or {}).get("name") == name
    if "regexMatch" in selector:
        try:
            return re.search((selector["regexMatch"] or {}).get("pattern", ""), name) is not None
        except re.error:
            return False
    if "labelMatch" in selector:
        match = selector["labelMatch"] or {}
        if not set((match.get("matchLabels") or {}).items()) <= set(labels.items()):
            return False
        return all(_expression(e, labels) for e in match.get("matchExpressions") or [])
    return False


def _expression(expr: dict, labels: dict[str, str]) -> bool:
    key, op, values = str(expr.get("key", "")), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False


def membership(hypernodes: list[dict], node: dict) -> dict[int, list[str]]:
    """Tier → the HyperNodes holding ``node`` (directly at tier 1, through their members above)."""
    by_name = {h["metadata"]["name"]: h for h in hypernodes}
    holds: dict[str, bool] = {}

    def holding(name: str, seen: frozenset[str]) -> bool:
        if name in holds:
            return holds[name]
        h = by_name.get(name)
        found = False
        if h is not None and name not in seen:
            for m in (h.get("spec") or {}).get("members") or []:
                sel = m.get("selector") or {}
                if m.get("type") == "Node" and _selects_node(sel, node):
                    found = True
                elif m.get("type") == "HyperNode" and "exactMatch" in sel:
                    found = holding((sel["exactMatch"] or {}).get("name", ""), seen | {name})
                if found:
                    break
        holds[name] = found
        return found

    out: dict[int, list[str]] = {}
    for name, h in sorted(by_name.items()):
        if holding(name, frozenset()):
            out.setdefault(int((h.get("spec") or {}).get("tier", 0)), []).append(name)
    return out


def topology_checks(spec: ClusterSpec, snap: Snapshot) -> Iterator[Result]:
    tiers = spec.topology.tiers
    if not tiers or not spec.scheduling.volcano.enabled:
        return
    placed = [h for h in spec.hosts if h.topology]
    if snap.hypernodes is None:
        for host in placed:
            yield skip("topology-domains", host.name,
                       "Volcano's HyperNode CRD (topology.volcano.sh/v1alpha1) is not installed")
        return
    nodes = {n["metadata"]["name"]: n for n in snap.nodes}
    by_name = {h["metadata"]["name"]: h for h in snap.hypernodes}
    for host in placed:
        want = {i + 1: f"{tier}.{host.topology[tier]}" for i, tier in enumerate(tiers) if tier in host.topology}
        what = ", ".join(f"tier {n}: {name}" for n, name in want.items())
        node = nodes.get(host.name)
        if node is None:
            yield skip("topology-domains", host.name, "node is missing (see node-ready)")
            continue
        got = membership(snap.hypernodes, node)
        wrong = []
        for number, name in want.items():
            holders = got.get(number, [])
            live = by_name.get(name)
            if live is None:
                wrong.append(f"HyperNode {name} does not exist")
            elif ((live.get("spec") or {}).get("tier"), (live.get("spec") or {}).get("tierName")) != (
                    number, tiers[number - 1]):
                wrong.append(f"HyperNode {name} has tier {live['spec'].get('tier')!r} "
                             f"({live['spec'].get('tierName')!r}), not {number} ({tiers[number - 1]!r})")
            if holders != [name]:
                wrong.append(f"tier {number} held by {', '.join(holders) or 'no HyperNode'}")
        if wrong:
            yield fail("topology-domains", host.name, what, "; ".join(wrong),
                       "re-apply the platform stack (`gpucluster up`); a node outside its domain or in two "
                       "takes no topology-constrained gang")
        else:
            yield ok("topology-domains", host.name, what, "as the spec places it")


def nvlink_checks(spec: ClusterSpec, snap: Snapshot) -> Iterator[Result]:
    """``nvlink-clique``: the nodes of one NVLink domain (``topology.nvlinkTier``) report one NVLink clique,
    and no two domains report the same one.

    GPU Feature Discovery labels ``nvidia.com/gpu.clique`` from what NVML reports of the node's GPUs
    (k8s-device-plugin v0.19.0 ``internal/lm/imex.go:29-83``): only once the fabric registered them (state
    COMPLETED, a non-zero cluster UUID) and only when every GPU of the node agrees. So a missing label is a
    node outside the fabric (NVLink switch trays or fabric manager down), and a split domain or two racks
    with one clique is cabling that disagrees with the spec; either way a ComputeDomain does not span what
    the spec says. Read from the live labels only, compared with the spec's domains, never computed.
    """
    fabric = {d: [h for h in hosts if nvlink_platform(spec.pool_of(h)) is not None]
              for d, hosts in nvlink_domains(spec).items()}
    domains = {d: hosts for d, hosts in fabric.items() if hosts}
    if not domains:
        return
    nodes = {n["metadata"]["name"]: n for n in snap.nodes}
    owner: dict[str, str] = {}  # clique -> the first domain that reports it
    for domain, hosts in sorted(domains.items()):
        read: dict[str, str] = {}
        for name in hosts:
            node = nodes.get(name)
            if node is None:
                yield skip("nvlink-clique", name, "node is missing (see node-ready)")
                continue
            labels = node["metadata"].get("labels") or {}
            if L.GPU_PRODUCT not in labels:
                yield skip("nvlink-clique", name, "GPU Feature Discovery has not labelled this node (see "
                           "node-labels)")
                continue
            if L.GPU_CLIQUE not in labels:
                yield fail("nvlink-clique", name, f"one clique for NVLink domain {domain}",
                           f"no {L.GPU_CLIQUE} label: NVML does not report this node's GPUs registered in an "
                           "NVLink fabric", "check the NVLink switch trays and nvidia-fabricmanager on the rack "
                           "(`nvidia-smi -q | grep -A4 Fabric` on the node: State Completed, a cluster UUID)")
                continue
            read[name] = labels[L.GPU_CLIQUE]
        cliques = sorted(set(read.values()))
        majority = max(cliques, key=lambda c: (list(read.values()).count(c), c == read.get(hosts[0])),
                       default=None)
        taken = owner.get(majority) if majority is not None else None
        for name, clique in read.items():
            want = f"one clique for NVLink domain {domain}"
            if len(cliques) > 1:
                others = ", ".join(f"{n}: {c}" for n, c in sorted(read.items()) if c != clique)
                yield fail("nvlink-clique", name, want, f"{clique}; other nodes of {domain} report {others}",
                           f"the fabric splits {domain}: fix the spec's {spec.topology.nvlink_tier} domains to "
                           "match the racks, or the NVLink partition")
            elif taken is not None:
                yield fail("nvlink-clique", name, want, f"{clique}, the clique of NVLink domain {taken} too",
                           f"{domain} and {taken} are one NVLink fabric: give their hosts one "
                           f"{spec.topology.nvlink_tier} domain")
            else:
                yield ok("nvlink-clique", name, want, clique)
        if majority is not None and taken is None:
            owner[majority] = domain
