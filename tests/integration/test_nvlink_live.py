"""Multi-node NVLink on the local world: GFD's clique labels from the simulated fabric, judged by verify.

Real: etcd, kube-apiserver, kube-scheduler, kwok; GPU Feature Discovery's labelers (k8s-device-plugin
v0.19.0, through nvidia-oracle) over a mock NVML whose GPUs report the NVLink fabric. SIMULATED: the GPUs,
the fabric manager (one cluster UUID per NVLink domain of the spec, clique 0) and the kubelets. Spec:
tests/data/nvlink (rack-1: g-1, g-2; rack-2: g-3, g-4, four GB200 each; h-1: a DGX H100).

The tenants' side of ComputeDomains is decided by the real API server too (RBAC, ResourceQuota and the
tenant admission policies, as ``research-users`` and ``inference-users`` through impersonation): the
tenant with IMEX channels in its quota may create ComputeDomains and its channel claim templates (what the
DRA driver's controller creates in the workload's namespace), the other may do neither. The ComputeDomain
CRD itself is the driver chart's (not served by the Go proxy here), so no ComputeDomain object is created:
RBAC is asked by SubjectAccessReview, which needs no CRD.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cluster_helpers import Cluster, wait_for

from gpucluster import labels as L
from gpucluster.render import render
from gpucluster.simulator import Simulator, attach
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec
from gpucluster.verify import snapshot
from gpucluster.verify.topology import nvlink_checks

pytestmark = pytest.mark.integration
DATA = Path(__file__).resolve().parents[1] / "data" / "nvlink"
LOCAL_WORLD = {"crds": False, "tools": ("nvidia-oracle",)}
GB200 = ("g-1", "g-2", "g-3", "g-4")


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return load_spec(DATA)


@pytest.fixture(scope="module")
def sim(lw: Cluster, spec: ClusterSpec) -> Iterator[Simulator]:
    rendered = render(spec).components
    lw.kubectl("apply", "--server-side", "--field-manager=gpucluster-test", "-f", "-",
               stdin=yaml.safe_dump_all([*rendered["namespaces"], *rendered["gpu-operator"]]))
    simulator = attach(lw.kubeconfig, spec)
    yield simulator
    simulator.close()


def test_each_rack_reports_one_clique_through_gfd_and_verify_passes_then_fails_a_relabelled_node(
        lw: Cluster, spec: ClusterSpec, sim: Simulator) -> None:
    def labelled() -> dict[str, dict[str, str]] | None:
        nodes = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in lw.get("nodes")["items"]}
        gfd_done = all(L.GPU_PRODUCT in nodes.get(h, {}) for h in (*GB200, "h-1"))
        return nodes if gfd_done else None

    nodes = wait_for("GFD labels on every GPU node", labelled, timeout=90)
    cliques = {h: nodes[h].get(L.GPU_CLIQUE) for h in (*GB200, "h-1")}
    assert cliques["h-1"] is None  # DGX H100: NVML reports no fabric, GFD writes no clique
    assert cliques["g-1"] and cliques["g-1"] == cliques["g-2"]
    assert cliques["g-3"] and cliques["g-3"] == cliques["g-4"] and cliques["g-3"] != cliques["g-1"]
    assert all(str(c).endswith(".0") for h, c in cliques.items() if h != "h-1")  # <clusterUUID>.<cliqueID>

    snap = snapshot.fetch(lw.kubeconfig)
    rows = {r.subject: r.verdict.value for r in nvlink_checks(spec, snap)}
    assert rows == dict.fromkeys(GB200, "pass")

    # the live snapshot with g-4 reporting rack-1's clique (a tray cabled into the other rack's fabric)
    moved = copy.deepcopy(snap)
    next(n for n in moved.nodes if n["metadata"]["name"] == "g-4")["metadata"]["labels"][L.GPU_CLIQUE] = \
        cliques["g-1"]
    rows = {r.subject: r.verdict.value for r in nvlink_checks(spec, moved)}
    assert rows == {"g-1": "pass", "g-2": "pass", "g-3": "fail", "g-4": "fail"}


RESEARCH, INFERENCE = ("alice", "research-users"), ("bob", "inference-users")
CHANNEL = "compute-domain-default-channel.nvidia.com"


def as_tenant(lw: Cluster, who: tuple[str, str], *args: str, stdin: str | None = None):  # type: ignore[no-untyped-def]
    return lw.run(f"--as={who[0]}", f"--as-group={who[1]}", *args, stdin=stdin)


def channel_template(ns: str) -> str:
    """A ComputeDomain's channel claim template as the controller writes it (one channel, class above)."""
    return json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                       "metadata": {"name": "cd-channel", "namespace": ns},
                       "spec": {"spec": {"devices": {"requests": [{"name": "channel", "exactly": {
                           "deviceClassName": CHANNEL, "allocationMode": "ExactCount", "count": 1}}]}}}})


def test_only_the_tenant_with_imex_channels_may_run_compute_domains(lw: Cluster, spec: ClusterSpec,
                                                                      sim: Simulator) -> None:
    lw.apply(*render(spec).objects("dra-driver", "tenants"))
    for ns in ("research", "inference"):
        hard = wait_for(f"quota of {ns} computed", lambda ns=ns: lw.get(
            "resourcequota", "-n", ns, "gpucluster-quota").get("status", {}).get("hard"))
        assert hard["count/computedomains.resource.nvidia.com"] == ("4" if ns == "research" else "0")
        assert hard[f"{CHANNEL}.deviceclass.resource.k8s.io/devices"] == ("4" if ns == "research" else "0")

    def can(who: tuple[str, str], ns: str) -> bool:
        """The authorizer's answer (a SubjectAccessReview: kubectl auth can-i would first look the resource
        up in discovery, where the CRD is absent)."""
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "user": who[0], "groups": [who[1]], "resourceAttributes": {
                "namespace": ns, "verb": "create", "group": "resource.nvidia.com", "resource": "computedomains"}}}
        out = json.loads(lw.kubectl("create", "-o", "json", "-f", "-", stdin=json.dumps(review)))
        return bool(out["status"].get("allowed"))
    assert can(RESEARCH, "research")
    assert not can(RESEARCH, "inference") and not can(INFERENCE, "inference")

    # the admission policies take effect once the API server's informer has them: poll the refusal
    def refused() -> str | None:
        err = as_tenant(lw, INFERENCE, "create", "--dry-run=server", "-f", "-", stdin=channel_template("inference"))
        return err.stderr if "ValidatingAdmissionPolicy" in err.stderr else None
    message = wait_for("tenant admission active", refused, timeout=60)
    assert CHANNEL in message and "may claim devices of these DeviceClasses only: gb200" in message
    ok = as_tenant(lw, RESEARCH, "create", "--dry-run=server", "-f", "-", stdin=channel_template("research"))
    assert ok.returncode == 0, ok.stderr
