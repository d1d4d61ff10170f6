"""Multi-node NVLink on the local world: GFD's clique labels from the simulated fabric, judged by verify.

Real: etcd, kube-apiserver, kube-scheduler, kwok; GPU Feature Discovery's labelers (k8s-device-plugin
v0.19.0, through nvidia-oracle) over a mock NVML whose GPUs report the NVLink fabric. SIMULATED: the GPUs,
the fabric manager (one cluster UUID per NVLink domain of the spec, clique 0) and the kubelets. Spec:
tests/data/nvlink (rack-1: g-1, g-2; rack-2: g-3, g-4, four GB200 each; h-1: a DGX H100).
"""

from __future__ import annotations

import copy
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
