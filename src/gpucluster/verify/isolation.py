"""``network-policy-enforcer``: something enforces the NetworkPolicies that isolate the tenants.

A NetworkPolicy is only an object: the API server stores it whatever the pod network does with it,
and ``tenant-security`` compares the object. Whether packets are judged by it depends on an enforcer
on every node. Where gpucluster installs the pod network (flannel with its kube-network-policies
add-on, ``networkPolicyEnforcement: pod-network``) the row measures that enforcer: flannel's DaemonSet
carries the add-on's container and is current and ready on every host of the spec (judged as the
operators' DaemonSets are). Where flannel's chart is not installed on purpose (the local world,
``--no-chart-repositories``) the row is not measured, and those runs allow that
(:mod:`gpucluster.verify.checks`). An enforcer the cluster's owner brings (``bring-your-own``) is not
known to gpucluster: the row says so and is not measured, never passed, and no run allows it by default
(``--allow-not-measured network-policy-enforcer`` does). Real packets are refused between tenants in the
Molecule site scenario (molecule/site/tests/test_isolation.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from gpucluster.render import pod_network
from gpucluster.spec.model import ClusterSpec
from gpucluster.verify.daemonsets import daemonset_row
from gpucluster.verify.model import Result, fail, skip
from gpucluster.verify.snapshot import Snapshot

#: The subject of the row when there is no DaemonSet of ours to name.
SPEC_SUBJECT = "networking/podNetwork"


def enforcer_checks(spec: ClusterSpec, snap: Snapshot, *, charts_reachable: bool = True) -> Iterator[Result]:
    """One row when the spec has tenants (only they get NetworkPolicies): what enforces them, and is it running."""
    net = spec.networking.pod_network
    if not spec.tenants:
        return
    if net.network_policy_enforcement == "bring-your-own":
        yield skip("network-policy-enforcer", SPEC_SUBJECT,
                   "networkPolicyEnforcement: bring-your-own: the cluster's own enforcer is not known to gpucluster, "
                   "so whether anything enforces the tenants' NetworkPolicies is not measured")
        return
    if not pod_network.enforces_network_policy(spec):
        # validation refuses tenants without an enforcer; a spec that got here unvalidated still fails
        yield fail("network-policy-enforcer", SPEC_SUBJECT, "an enforcer", "none",
                   f"networkPolicyEnforcement: {net.network_policy_enforcement} with plugin: {net.plugin}: "
                   "nothing enforces the tenants' NetworkPolicies")
        return
    subject = f"{net.namespace}/{pod_network.DAEMONSET}"
    hosts = len(spec.hosts)  # flannel's DaemonSet tolerates every taint: it runs on every node
    want = f"{hosts} scheduled, {hosts} ready, with container {pod_network.NETPOL_CONTAINER}"
    ds = next((d for d in snap.daemonsets if d["metadata"].get("namespace") == net.namespace
               and d["metadata"]["name"] == pod_network.DAEMONSET), None)
    if ds is None:
        if not charts_reachable:
            yield skip("network-policy-enforcer", subject,
                       "flannel's chart is not installed here (chart repositories are unreachable), so its "
                       "NetworkPolicy add-on cannot be measured")
        else:
            yield fail("network-policy-enforcer", subject, want, "missing",
                       "flannel's DaemonSet is not there: nothing enforces the tenants' NetworkPolicies")
        return
    template = ds.get("spec", {}).get("template", {}).get("spec", {})
    containers = [str(c.get("name")) for c in template.get("containers") or []]
    if pod_network.NETPOL_CONTAINER not in containers:
        st = ds.get("status") or {}
        yield fail("network-policy-enforcer", subject, want,
                   f"{st.get('desiredNumberScheduled', 0)} scheduled, {st.get('numberReady', 0)} ready, "
                   f"containers {', '.join(containers) or '(none)'}",
                   "flannel runs without its NetworkPolicy add-on (the chart's netpol.enabled is off): flanneld "
                   "enforces no NetworkPolicy, so every tenant can reach every other")
        return
    # the add-on is there: flannel's DaemonSet is judged as the operators' are (current, on every host, ready)
    row = daemonset_row(subject, ds, hosts, check="network-policy-enforcer")
    with_addon = f", with container {pod_network.NETPOL_CONTAINER}"
    reason = row.reason and (f"{row.reason}: on a node whose enforcer is not running, current and ready, "
                             "nothing may be judging the tenants' traffic")
    yield replace(row, expected=row.expected + with_addon, actual=row.actual + with_addon, reason=reason)
