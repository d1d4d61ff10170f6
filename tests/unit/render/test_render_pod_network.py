"""render/pod_network.py: the flannel release, first of all releases, podCidr = kubeadm's podSubnet."""

from __future__ import annotations

from gpucluster import labels as L
from gpucluster.render import pod_network, render


def test_flannel_release_pinned_with_the_pod_subnet(lab):
    lab.kubernetes.pod_subnet = "10.128.0.0/14"
    rels = {r.name: r for r in render(lab).releases}
    rel = rels["pod-network"]
    assert rel.namespace == "kube-flannel"
    assert rel.values == {"podCidr": "10.128.0.0/14", "flannel": {"backend": "vxlan"}, "netpol": {"enabled": True}}


def test_every_other_release_waits_for_the_pod_network(lab):
    rels = render(lab).releases
    assert rels[0].name == "pod-network" and rels[0].after == ()
    assert all("pod-network" in r.after for r in rels[1:]), [(r.name, r.after) for r in rels]


def test_flannel_namespace_is_privileged(lab):
    namespaces = {o["metadata"]["name"]: o for o in render(lab).components["namespaces"]}
    assert namespaces["kube-flannel"]["metadata"]["labels"][L.POD_SECURITY_ENFORCE] == "privileged"


def test_plugin_none_installs_no_pod_network(lab):
    lab.networking.pod_network.plugin = "none"
    r = render(lab)
    assert "pod-network" not in {rel.name for rel in r.releases}
    assert all("pod-network" not in rel.after for rel in r.releases)
    assert "kube-flannel" not in {o["metadata"]["name"] for o in r.components["namespaces"]}
    assert not pod_network.enabled(lab)


def test_backend_choice_reaches_the_values(lab):
    lab.networking.pod_network.backend = "host-gw"
    assert pod_network.values(lab)["flannel"] == {"backend": "host-gw"}


def test_the_network_policy_add_on_runs_only_where_flannel_is_to_enforce(lab):
    assert lab.tenants  # the lab's tenants are isolated by NetworkPolicies: the default enforces them
    assert pod_network.values(lab)["netpol"] == {"enabled": True}
    assert pod_network.enforces_network_policy(lab)
    # an enforcer of the owner's next to flannel: flannel's own stays off (two would judge every packet)
    lab.networking.pod_network.network_policy_enforcement = "bring-your-own"
    assert pod_network.values(lab)["netpol"] == {"enabled": False}
    assert not pod_network.enforces_network_policy(lab)
    lab.networking.pod_network.network_policy_enforcement = "pod-network"
    lab.networking.pod_network.plugin = "none"
    assert not pod_network.enforces_network_policy(lab)  # no pod network of ours, no add-on
