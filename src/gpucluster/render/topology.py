"""The fabric for the schedulers: node labels per tier, Volcano HyperNodes, the topology plugin's settings.

Upstream (volcano.sh/apis v1.14.0, the module the local world's CRDs are generated from, and the
Volcano chart 1.15.1 that installs the CRD on a real cluster):

- ``HyperNode`` (``topology.volcano.sh/v1alpha1``, cluster-scoped): ``spec.tier`` (1 is the closest
  level, wider domains count up), ``spec.tierName``, ``spec.members[]`` of ``type: Node`` or
  ``type: HyperNode`` with exactly one ``selector`` of ``exactMatch.name``, ``regexMatch.pattern`` or
  ``labelMatch`` (``pkg/apis/topology/v1alpha1/hypernode_types.go:60-147``); a HyperNode member is only
  found by ``exactMatch`` (volcano v1.14.1 ``pkg/scheduler/api/hyper_node_info.go:299-305``), a
  ``labelMatch`` works on Node members only (``hypernode_types.go:126-128``).
- The scheduler reads HyperNodes itself: static objects need no controller (the hyperNode controller only
  writes ``status.nodeCount`` and runs discovery). We never set the label
  ``volcano.sh/network-topology-source``: the discovery controller deletes every HyperNode carrying it
  that it did not discover (``pkg/controllers/hypernode/hypernode_controller.go:154-200``).
- Only the scheduler plugin ``network-topology-aware`` supplies the HyperNodes a hard-mode job may use;
  without it a job with ``networkTopology`` is placed anywhere in the cluster (``framework/
  session_plugins.go:1048-1067``). The chart's default scheduler configuration lacks it, so
  :func:`scheduler_plugin` is added to ours whenever the spec declares tiers.

Tier ``i`` of the spec's ``topology.tiers`` (0-based) is Volcano tier ``i + 1``. Tier-1 HyperNodes select
their nodes by our node label ``gpucluster.dev/topology-<tier>`` (:func:`node_labels`, written by the
platform stack and the simulator the same way as the pool label); each wider HyperNode lists the
narrower ones by name. A HyperNode is named ``<tier>.<domain>``: tier and domain are DNS labels, so the
name is a DNS subdomain and two domains never share one.
"""

from __future__ import annotations

from gpucluster import labels as L
from gpucluster.render.common import Obj, obj
from gpucluster.spec.model import ClusterSpec, Host

API = "topology.volcano.sh/v1alpha1"
KIND = "HyperNode"
PLUGIN = "network-topology-aware"


def label_key(tier: str) -> str:
    """The node label that names a host's domain at ``tier``."""
    return f"{L.TOPOLOGY_PREFIX}{tier}"


def node_labels(host: Host) -> dict[str, str]:
    """The topology labels of one host (none when it has no place in the fabric)."""
    return {label_key(tier): domain for tier, domain in host.topology.items()}


def hypernode_name(tier: str, domain: str) -> str:
    return f"{tier}.{domain}"


def enabled(spec: ClusterSpec) -> bool:
    """HyperNodes and the topology plugin are rendered: tiers are declared and Volcano runs."""
    return bool(spec.topology.tiers) and spec.scheduling.volcano.enabled


def scheduler_plugin() -> dict:
    """The ``network-topology-aware`` plugin entry of the scheduler configuration's second tier.

    Besides restricting hard-mode jobs to one domain, it scores domains for every other pod; we weight
    ``nvidia.com/gpu`` in that bin-packing so that single pods fill partly used domains first and leave
    whole domains free for gangs (argument names: volcano v1.14.1
    pkg/scheduler/plugins/network-topology-aware/network_topology_aware.go:37-62).
    """
    return {"name": PLUGIN, "arguments": {"weight": 10, "hypernode.binpack.resources": "nvidia.com/gpu",
                                          "hypernode.binpack.resources.nvidia.com/gpu": 10}}


def domains(spec: ClusterSpec) -> dict[str, dict[str, str | None]]:
    """Tier → {domain: its parent domain at the next tier (None at the widest tier)}, in the spec's order."""
    tiers = spec.topology.tiers
    out: dict[str, dict[str, str | None]] = {t: {} for t in tiers}
    for host in spec.hosts:
        for i, tier in enumerate(tiers):
            domain = host.topology.get(tier)
            if domain is None:
                continue
            parent = host.topology.get(tiers[i + 1]) if i + 1 < len(tiers) else None
            out[tier].setdefault(domain, parent)
    return out


def hypernodes(spec: ClusterSpec) -> list[Obj]:
    """One HyperNode per domain of every tier, closest tier first."""
    if not enabled(spec):
        return []
    tiers = spec.topology.tiers
    tree = domains(spec)
    out: list[Obj] = []
    for i, tier in enumerate(tiers):
        for domain in tree[tier]:
            if i == 0:
                members = [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {label_key(tier): domain}}}}]
            else:
                below = tiers[i - 1]
                members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": hypernode_name(below, child)}}}
                           for child, parent in tree[below].items() if parent == domain]
            out.append(obj(API, KIND, hypernode_name(tier, domain),
                           spec={"tier": i + 1, "tierName": tier, "members": members}))
    return out
