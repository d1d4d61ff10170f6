"""The primary pod network: the flannel chart, with its pod CIDR equal to kubeadm's podSubnet.

Without a primary CNI nodes stay NotReady, every pod without hostNetwork stays in ContainerCreating, and
the network operator's Multus (thin, ``--multus-conf-file=auto``) finds no config to wrap. flannel runs
with ``--kube-subnet-mgr``: it uses each Node's ``spec.podCIDR``, which kube-controller-manager carves out
of kubeadm's ``networking.podSubnet``, and it refuses a node whose podCIDR lies outside its own network
(``podCidr``). So ``podCidr`` is the spec's ``kubernetes.podSubnet``, the same value the inventory plugin
hands kubeadm (roles/kubernetes_node). flannel's CNI plugin delegates to the reference plugins (bridge,
host-local, portmap) in /opt/cni/bin, which the host layer installs. ``plugin: none`` leaves the pod
network to the cluster's owner.

flanneld itself enforces no NetworkPolicy, and the tenants are isolated by NetworkPolicies. With
``networkPolicyEnforcement: pod-network`` (the default) the chart's ``netpol.enabled`` runs
kube-network-policies as a second container of flannel's DaemonSet (``kube-flannel-ds``), with the
ClusterRole rules it needs (flannel v0.28.10 ``chart/kube-flannel/templates/daemonset.yaml`` lines
124-149, ``rbac.yaml`` lines 22-38); ``bring-your-own`` and ``none`` leave it off.
"""

from __future__ import annotations

from gpucluster.render.common import Obj
from gpucluster.render.contract import Kind
from gpucluster.spec.model import ChartRef, ClusterSpec

#: Every other release waits for this one: their pods (and Helm's wait for them) need pod networking.
BEFORE_OTHER_RELEASES = True
#: What the chart creates (names fixed by its templates, not by values): flannel's DaemonSet, and the
#: container ``netpol.enabled`` adds to it (tests/upstream/facts/cni.yaml).
DAEMONSET = "kube-flannel-ds"
NETPOL_CONTAINER = "kube-network-policies"
#: flannel's chart installs no CRD we render objects of.
CHART_KINDS: tuple[Kind, ...] = ()
AFTER_KINDS: dict[Kind, Kind] = {}


def enabled(spec: ClusterSpec) -> bool:
    return spec.networking.pod_network.plugin == "flannel"


def objects(spec: ClusterSpec) -> list[Obj]:
    # Only the release (and its privileged namespace, from render/namespaces.py).
    return []


def enforces_network_policy(spec: ClusterSpec) -> bool:
    """Whether the pod network installed here runs a NetworkPolicy enforcer (flannel's add-on)."""
    return enabled(spec) and spec.networking.pod_network.network_policy_enforcement == "pod-network"


def values(spec: ClusterSpec) -> dict:
    net = spec.networking.pod_network
    return {"podCidr": spec.kubernetes.pod_subnet, "flannel": {"backend": net.backend},
            "netpol": {"enabled": enforces_network_policy(spec)}}


def after(spec: ClusterSpec) -> list[str]:
    return []


def namespace(spec: ClusterSpec) -> str:
    return spec.networking.pod_network.namespace


def chart(spec: ClusterSpec) -> ChartRef:
    return spec.networking.pod_network.chart
