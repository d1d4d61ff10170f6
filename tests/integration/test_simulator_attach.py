"""attach() leaves the nodes it creates as their agents publish them once the nodes are up.

A new Node starts with the not-ready taint the API server's admission puts on it (cited fact
kubernetes.yaml new-node-not-ready-taint) until the node lifecycle controller of kube-controller-manager
lifts it; the RDMA shared device plugin's DaemonSet does not tolerate it, so an RDMA host publishes its
RDMA devices only after that. On an idle machine the controller lifts it within milliseconds; CI saw
attach() settle inside that window on a loaded machine and leave an RDMA host without its devices
(test_simulator_live, h100-2). Here kube-controller-manager is held (SIGSTOP, a process of this test's
world) so the window lasts: attach must still be waiting once the nodes are Ready and tainted, and return
with every node as expected once the controller goes on.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
import yaml
from cluster_helpers import Cluster, wait_for

from gpucluster import expected
from gpucluster.render import network_operator as network
from gpucluster.render import render
from gpucluster.simulator import Simulator, attach
from gpucluster.simulator.reconcile import LIFECYCLE_TAINTS, NOT_READY_TAINT
from gpucluster.spec import load_spec

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_attach_waits_for_new_nodes_to_come_up_and_publishes_them_as_running(lw: Cluster) -> None:
    spec = load_spec(REPO / "inventories" / "local")
    rendered = render(spec)
    objs = [*rendered.components["namespaces"], *rendered.components["gpu-operator"], network.nic_cluster_policy(spec)]
    lw.kubectl("apply", "--server-side", "--field-manager=gpucluster-test", "-f", "-", stdin=yaml.safe_dump_all(objs))
    rdma_hosts = [h for h, s in expected.host_states(spec).items() if any(k.startswith("rdma/") for k in s.resources)]
    assert rdma_hosts, "the local inventory must have an RDMA host for this test to mean anything"
    state = lw.world.state()
    assert state is not None
    controllers = state.components["kube-controller-manager"].pid
    attached: list[Simulator] = []
    thread = threading.Thread(target=lambda: attached.append(attach(lw.kubeconfig, spec)), daemon=True)
    os.kill(controllers, signal.SIGSTOP)
    try:
        thread.start()

        def ready_but_tainted():  # type: ignore[no-untyped-def]
            nodes = lw.get("nodes")["items"]
            if {n["metadata"]["name"] for n in nodes} != {h.name for h in spec.hosts}:
                return None
            return all(any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or [])
                       and any(t["key"] == NOT_READY_TAINT for t in n["spec"].get("taints") or []) for n in nodes)

        wait_for("every node registered and made Ready by kwok, still tainted not-ready", ready_but_tainted)
        # While the taint stays, the RDMA plugin runs nothing on those nodes: the simulator's own sync says so.
        probe = Simulator(spec, lw.kubeconfig)
        probe.sync()
        probe.close()
        for host in rdma_hosts:
            capacity = lw.get("nodes", host)["status"]["capacity"]
            assert not any(k.startswith("rdma/") for k in capacity), (host, capacity)
        assert thread.is_alive(), "attach returned before its new nodes were up"
    finally:
        os.kill(controllers, signal.SIGCONT)
    thread.join(timeout=180)
    assert not thread.is_alive() and attached, "attach did not return once the nodes were up"
    attached[0].close()
    states = expected.host_states(spec)
    for node in lw.get("nodes")["items"]:
        name = node["metadata"]["name"]
        assert not any(t["key"] in LIFECYCLE_TAINTS for t in node["spec"].get("taints") or []), name
        for field in ("capacity", "allocatable"):
            got = {k: int(v) for k, v in node["status"][field].items() if "/" in k}
            assert got == states[name].resources, (name, field)
