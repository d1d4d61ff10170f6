"""Remove a node for good: drain it, reset its host (``kubeadm reset``), delete its Node object.

The order is kubeadm's own (kubernetes/website, content/en/docs/setup/production-environment/tools/kubeadm/
create-cluster-kubeadm.md, "Remove the node": ``kubectl drain``, ``kubeadm reset``, ``kubectl delete
node``): the Node is deleted once the kubelet is stopped and its configuration gone, since a kubelet that
starts (a restart, a reboot) registers its Node again (kubernetes v1.37.2 pkg/kubelet/kubelet_node_status.go,
``registerWithAPIServer``). ``kubeadm reset`` stops the kubelet but leaves it enabled at boot, and leaves
the CNI configuration and iptables rules (kubeadm-reset.md, "Cleanup of CNI configuration"): the host is
reset through Ansible (``playbooks/remove-node.yml`` limited to that host: ``kubeadm reset --force``, the
kubelet stopped and disabled, the bridge pod network's files our role wrote removed), so it must still be
a host of the inventory; a machine that is gone is removed with ``reset_host=None`` (drain and delete only).

The platform stack's server-side-apply patch of the Node (its labels and taints) is dropped from the stack
state once the Node is gone (``forget_patches``): deleting a patch resource makes the Kubernetes provider
relinquish its fields with an apply of the bare object (pulumi/pulumi-kubernetes v4.25.0
``provider/pkg/await/await.go`` ``Deletion`` → ``provider/pkg/ssa/actions.go`` ``Relinquish``), and an apply
creates what does not exist, so the next ``up`` would bring back a Node with no kubelet (seen on the Molecule
site cluster: verify failed ``node-known``).

What stays the operator's: taking the host out of ``cluster.yaml`` (until then ``gpucluster up`` joins it
again and ``verify`` reports it missing).

A control-plane host is removed the same way: its reset (the playbook) first stops keepalived and haproxy
there when the control planes serve the endpoint themselves (roles/api_endpoint ``remove.yml``: the virtual
IP moves to another control-plane host, and the playbook waits until the endpoint answers from there), then
``kubeadm reset`` removes its etcd member from the cluster (its ``remove-etcd-member`` phase) before it
stops its static pods (kubernetes v1.37.2 ``cmd/kubeadm/app/cmd/phases/reset/removeetcdmember.go``).

Refused before any change (exit 2): the local world (no hosts: its simulator registers a Node per host
of the spec and deletes the Node of a host taken out of it on the next ``up``,
:meth:`gpucluster.simulator.reconcile.Simulator.sync`), the first control-plane host of the spec (kubeadm
init's, where joins get their tokens), a control-plane node the spec does not list or with ``--no-reset``
(its etcd member would stay), a name that is neither a Node nor a host of the spec, a reset of a host the
spec does not list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpucluster import kube
from gpucluster.drain import Plan, drain
from gpucluster.errors import GpuclusterError, InputError
from gpucluster.labels import CONTROL_PLANE
from gpucluster.poll import poll
from gpucluster.spec.model import ClusterSpec

#: The playbook that resets one host (run with ``--limit HOST``).
PLAYBOOK = "remove-node.yml"


@dataclass
class Removal:
    """What ``gpucluster node remove`` did (or, on a dry run, would do)."""

    node: str
    dry_run: bool = False
    drained: Plan | None = None
    reset: bool = False          # the reset changed the host (False on a host reset before)
    forgotten: list[str] = field(default_factory=list)  # URNs of the Node's patches dropped from the stack state
    deleted: bool = False        # the Node object was deleted by this run
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "dryRun": self.dry_run, "drained": self.drained.to_dict() if self.drained else None,
                "reset": self.reset, "deleted": self.deleted, "forgotten": self.forgotten, "notes": self.notes}


def check(spec: ClusterSpec, node: str, node_obj: dict[str, Any] | None, *, reset: bool, local: bool) -> None:
    """Refuse what ``node remove`` must not do (exit 2), before anything changes."""
    if local:
        raise InputError(f"node remove {node}: the local world has no hosts to remove; its Nodes follow its spec. "
                         "Take the host out of cluster.yaml (hosts and its pool) and run `gpucluster up`: the "
                         "simulator deletes its Node")
    host = next((h for h in spec.hosts if h.name == node), None)
    labels = (node_obj or {}).get("metadata", {}).get("labels") or {}
    control_planes = [h.name for h in spec.control_planes]
    if node in control_planes or CONTROL_PLANE in labels:
        if host is None:
            raise InputError(f"node remove {node}: {node} is a control-plane node that {spec.metadata.name}'s spec "
                             "does not list, so its etcd member cannot be removed through its host: run `kubeadm "
                             "reset` on that machine (it removes the member), then `kubectl delete node "
                             f"{node}` (docs/operations.md, Removing a node)")
        if node == control_planes[0]:
            raise InputError(f"node remove {node}: {node} is the first control-plane host of the spec, where kubeadm "
                             "init ran and where every later join gets its token and certificate key; `node "
                             "remove` removes the other control-plane hosts only (docs/operations.md, Removing a "
                             "node)")
        if not reset:
            raise InputError(f"node remove {node}: a control-plane node is removed with its host's reset, which "
                             "removes its etcd member (kubeadm reset); without it the member stays and etcd counts a "
                             "member that never answers against its quorum. Leave out --no-reset")
    if node_obj is None and host is None:
        raise InputError(f"node remove {node}: no Node and no host of {spec.metadata.name} is named {node} "
                         "(kubectl get nodes)")
    if reset and host is None:
        raise InputError(f"node remove {node}: {node} is not a host of the spec of {spec.metadata.name}, so it "
                         "cannot be reached to reset it. Pass --no-reset to drain and delete the Node only (reset "
                         "the machine yourself with `kubeadm reset`), or put the host back in cluster.yaml")


#: The provider's type of a server-side-apply patch of a Node (gpucluster.pulumi.objects.type_token).
NODE_PATCH = "kubernetes:core/v1:NodePatch"


def patch_urns(resources: list[dict[str, Any]], node: str) -> list[str]:
    """URNs of the stack-state ``resources`` that patch the Node ``node``."""
    return sorted(r["urn"] for r in resources if r.get("type") == NODE_PATCH and r.get("urn")
                  and ((r.get("inputs") or {}).get("metadata") or {}).get("name") == node)


def remove(api: kube.Kube, spec: ClusterSpec, node: str, *, reset_host: Callable[[], int] | None,
           forget_patches: Callable[[], list[str]] | None = None, timeout: float = 300.0,
           evict_gangs: bool = False, force: bool = False, dry_run: bool = False,
           say: Callable[[str], None] = lambda _: None) -> Removal:
    """Drain ``node``, reset its host with ``reset_host`` (returns how many changes it made; None: not
    reset), delete its Node, then drop its patches from the stack state with ``forget_patches`` (returns
    the URNs it dropped).

    Raises :class:`InputError` (see :func:`check`) before any change, and
    :class:`~gpucluster.drain.DrainBlocked` when the drain is blocked (the node stays cordoned, its host
    is not reset and its Node not deleted).
    """
    path = f"{kube.NODES}/{node}"
    node_obj = api.get(path)
    check(spec, node, node_obj, reset=reset_host is not None, local=False)
    out = Removal(node=node, dry_run=dry_run)
    if node_obj is not None:
        out.drained = drain(api, node, timeout=timeout, evict_gangs=evict_gangs, force=force, dry_run=dry_run, say=say)
        if not dry_run:
            say(f"{node} drained")
    else:
        say(f"{node}: no Node object (already deleted): nothing to drain or delete")
    if reset_host is not None:
        if dry_run:
            what = "kubeadm reset, kubelet stopped"
            if any(h.name == node for h in spec.control_planes):
                what = "the endpoint handed over, kubeadm reset with its etcd member removed, kubelet stopped"
            say(f"would reset {node} (playbooks/{PLAYBOOK}: {what})")
        else:
            out.reset = reset_host() > 0
            say(f"{node} reset" if out.reset else f"{node}: its host was reset before (nothing changed)")
    else:
        out.notes.append(f"{node} was not reset (--no-reset): run `kubeadm reset` on the machine before it joins "
                         "any cluster again")
    if node_obj is not None:
        if dry_run:
            say(f"would delete Node {node}")
        else:
            api.delete(path)
            if poll(lambda: api.get(path), timeout=60.0, every=0.5, done=lambda n: n is None) is not None:
                raise GpuclusterError(f"Node {node} still exists 60 s after its deletion (a finalizer on it? "
                                      f"kubectl get node {node} -o yaml)")
            out.deleted = True
            say(f"Node {node} deleted")
    if forget_patches is not None and not dry_run and api.get(path) is None:
        out.forgotten = forget_patches()
        if out.forgotten:
            say(f"dropped {len(out.forgotten)} patch(es) of Node {node} from the platform stack's state")
    if any(h.name == node for h in spec.hosts) and not dry_run:
        out.notes.append(f"{node} is still a host of cluster.yaml: take it out (hosts and its pool) before the next "
                         "`gpucluster up`, which would join it again; until then verify reports it missing")
        if (node in [h.name for h in spec.control_planes]
                and spec.kubernetes.control_plane_endpoint_provider == "keepalived-haproxy"):
            out.notes.append("the other control-plane hosts' haproxy and keepalived still name it (as a server that "
                             "is down and a silent peer): the next `gpucluster up` without --skip-hosts rewrites them")
    return out
