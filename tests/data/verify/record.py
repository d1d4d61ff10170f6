"""Record the healthy snapshots the unit fault matrix replays, from a fresh local world.

    PYTHONPATH=src python tests/data/verify/record.py [--out-dir tests/data/verify]

Writes two recordings of ``inventories/local`` (what `gpucluster verify` fetches, as
:func:`gpucluster.verify.snapshot.to_data` stores it):

- ``local-world.json``: the world `gpucluster up` builds — the real control plane, the Pulumi stacks,
  Volcano, the GPU simulator's nodes and ResourceSlices (derived from NVIDIA's own agent code through
  ``nvidia-oracle`` and cited facts), the real authorizer's answers to every access review, the
  simulated DCGM exporter's text and, when the Prometheus tools are built, the rules the real
  Prometheus loaded;
- ``real-cluster.json``: the same world given what a real cluster adds and the local world cannot run
  (upstream charts cannot be fetched here): the operators' DaemonSets as their charts name and select
  them (tests/upstream/facts: gpu-operator ``daemonsets``, the DRA driver's kubelet plugin, the RDMA
  plugin) and flannel's DaemonSet with its NetworkPolicy add-on's container (``cni.yaml``: the chart's
  name, labels, node affinity and tolerations, the container ``netpol.enabled`` adds), scheduled and
  counted by the real DaemonSet controller on the kwok nodes, the validator's pods as its code leaves them
  (stopped at plugin-validation where no device plugin advertises a GPU, NVIDIA/gpu-operator#2550,
  :func:`validator_as_upstream`); Helm's release
  record for every release, written in Helm's own format (helm v3.18.6 pkg/storage/driver) with the
  pinned chart and the values the stacks install it with; and the DCGM exporter pods' ``/metrics``.
  The exporter pods run on kwok nodes, where the API server's proxy cannot reach them: their text is
  what the simulated exporter serves for their node (as the monitoring add-on routes Prometheus).
  Likewise each kubelet's running configuration (``/configz``, which kwok nodes do not serve) for the hosts
  of a pool that sets ``resourceManagers``: a real kubelet's answer, captured from the Molecule site
  scenario (``kubelet-configz/``: kubelet v1.37.2 joined by kubeadm with the host layer's patch,
  ``tuned.json`` from the GPU stand-in whose pool sets the same resourceManagers as the local h200-dp
  pool, ``defaults.json`` from a GPU worker whose pool sets none).

Nothing here asks verify's expectation code (``gpucluster.expected``, ``gpucluster.devices``) what a
healthy cluster holds: the recordings are what the cluster holds. Run it again after a change to
what the world builds; ``tests/unit/test_verify_faults.py`` replays the files.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
LOCAL = REPO / "inventories" / "local"
FACTS = REPO / "tests" / "upstream" / "facts"


def fact(component: str, fact_id: str) -> Any:
    return yaml.safe_load((FACTS / f"{component}.yaml").read_text())["facts"][fact_id]["value"]


def _pod_template(labels: dict[str, str], node_selector: dict[str, str], containers: list[str],
                  init: list[str] = ()) -> dict[str, Any]:
    """A pod that tolerates every taint (the operators' DaemonSets run on tainted GPU nodes); kwok runs it."""
    def container(name: str) -> dict[str, Any]:
        return {"name": name, "image": f"{name}:stand-in", "securityContext": {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}

    spec: dict[str, Any] = {"nodeSelector": node_selector, "tolerations": [{"operator": "Exists"}],
                            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534,
                                                "seccompProfile": {"type": "RuntimeDefault"}},
                            "containers": [container(c) for c in containers]}
    if init:
        spec["initContainers"] = [container(c) for c in init]
    return {"metadata": {"labels": labels}, "spec": spec}


def operator_daemonsets(spec: Any) -> list[dict[str, Any]]:
    """The DaemonSets the pinned charts create for ``spec``, named and selecting nodes as upstream does."""
    from gpucluster.render import dra_driver, gpu_operator

    out = []
    values = gpu_operator.values(spec)
    g = spec.gpu_operator
    gated = fact("gpu-operator", "daemonsets")  # name -> the nvidia.com/gpu.deploy.* label it selects
    wanted = {"gpu-feature-discovery", "nvidia-device-plugin-daemonset", "nvidia-operator-validator",
              "nvidia-mig-manager"}
    if values.get("driver", {}).get("enabled", True):
        wanted.add("nvidia-driver-daemonset")
    if values.get("toolkit", {}).get("enabled", True):
        wanted.add("nvidia-container-toolkit-daemonset")
    if values.get("dcgmExporter", {}).get("enabled", True):
        wanted.add("nvidia-dcgm-exporter")
    validator = fact("gpu-operator", "validator-daemonset")
    for name in sorted(wanted):
        label = gated[name].split()[0]
        app = {"app": name}
        init = validator["init-containers"] if name == "nvidia-operator-validator" else []
        out.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": g.namespace,
                    "labels": app}, "spec": {"selector": {"matchLabels": app},
                    "template": _pod_template(app, {label: "true"}, [name], init)}})
    if spec.dra.enabled and dra_driver.enabled(spec):
        # dra-driver-nvidia-gpu 0.4.1 templates/kubeletplugin.yaml:20: <chart name>-kubelet-plugin, on the
        # nodes kubeletPlugin.nodeSelector names
        # and kubeletPlugin.affinity (templates/kubeletplugin.yaml:372-379; the chart's default when unset)
        plugin = dra_driver.values(spec)["kubeletPlugin"]
        app = {"app.kubernetes.io/name": "dra-driver-nvidia-gpu-kubelet-plugin"}
        template = _pod_template(app, plugin["nodeSelector"], ["gpus"])
        template["spec"]["affinity"] = plugin.get("affinity") or fact("dra-driver", "kubelet-plugin-default-affinity")
        out.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {
            "name": "dra-driver-nvidia-gpu-kubelet-plugin", "namespace": spec.dra.namespace, "labels": app},
            "spec": {"selector": {"matchLabels": app}, "template": template}})
    net = spec.networking.network_operator
    if net.enabled and any(p.rdma for p in spec.node_pools):
        # network-operator manifests/state-rdma-shared-device-plugin/0060_rdma-shared-dev-plugin-ds.yaml:17,116
        app = {"app": "rdma-shared-dp"}
        out.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {
            "name": "rdma-shared-dp-ds", "namespace": net.namespace, "labels": app},
            "spec": {"selector": {"matchLabels": app}, "template": _pod_template(
                app, fact("network-operator", "rdma-dp-daemonset-node-selector"), ["rdma-shared-dp"])}})
    return out


def pod_network_daemonsets(spec: Any) -> list[dict[str, Any]]:
    """flannel's DaemonSet as its pinned chart names and places it (flannel v0.28.10
    chart/kube-flannel/templates/daemonset.yaml), with the kube-network-policies container where the values
    we install the chart with turn its ``netpol.enabled`` guard on."""
    from gpucluster.render import pod_network

    if not pod_network.enabled(spec):
        return []
    containers = [fact("cni", "flannel-container-name")]
    if pod_network.values(spec)["netpol"]["enabled"]:
        containers.append(fact("cni", "flannel-netpol-container-name"))
    labels = fact("cni", "flannel-daemonset-labels")
    template = _pod_template(labels, {}, containers)
    del template["spec"]["nodeSelector"]
    template["spec"]["tolerations"] = fact("cni", "flannel-values-tolerations")
    template["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [fact("cni", "flannel-daemonset-node-affinity")]}]}}}
    meta = {"name": fact("cni", "flannel-daemonset-name"), "namespace": spec.networking.pod_network.namespace,
            "labels": dict(labels)}
    return [{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta, "spec": {
        "selector": {"matchLabels": fact("cni", "flannel-daemonset-selector")}, "template": template}}]


def helm_records(spec: Any) -> list[dict[str, Any]]:
    """A deployed release record per release, as Helm's secret driver stores one (revision 1)."""
    from gpucluster.render import releases
    from gpucluster.verify import helm

    out = []
    for rel in releases(spec):
        body = {"name": rel.name, "namespace": rel.namespace, "version": 1, "info": {"status": "deployed"},
                "chart": {"metadata": {"name": rel.chart, "version": rel.version}},
                "config": json.loads(json.dumps(rel.values))}
        out.append({"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                    "metadata": {"name": f"sh.helm.release.v1.{rel.name}.v1", "namespace": rel.namespace,
                                 "labels": {"owner": "helm", "name": rel.name, "status": "deployed", "version": "1"}},
                    "data": {"release": helm.encode(body)}})
    return out


def validator_as_upstream(snap: Any) -> None:
    """The operator's validator pods as its code leaves them: kwok runs init containers as if each passed, but
    the plugin-validation step (gpu-operator v26.3.0 cmd/nvidia-validator/main.go:1435 validateGPUResource)
    passes only on a node whose capacity holds a ``nvidia.com/gpu*`` or ``nvidia.com/mig-*`` resource of at
    least 1 (main.go:1443-1449; fact validator-plugin-validation-waits-for-gpu-resource), and fails after its
    retries; kubelet then restarts it with back-off and the pod never gets Ready (NVIDIA/gpu-operator#2550).
    The DaemonSet's counts follow its pods."""
    prefixes = fact("gpu-operator", "validator-plugin-validation-waits-for-gpu-resource")["resource-prefixes"]
    steps = fact("gpu-operator", "validator-daemonset")["init-containers"]
    capacity = {n["metadata"]["name"]: (n.get("status") or {}).get("capacity") or {} for n in snap.nodes}
    stuck = 0
    for pod in snap.operator_pods or []:
        if pod["metadata"].get("labels", {}).get("app") != "nvidia-operator-validator":
            continue
        have = capacity.get(pod["spec"].get("nodeName"), {})
        if any(k.startswith(tuple(prefixes)) and str(v) not in ("0", "") for k, v in have.items()):
            continue
        stuck += 1
        status = pod["status"]
        done = {"terminated": {"exitCode": 0, "reason": "Completed"}}
        failed = {"terminated": {"exitCode": 1, "reason": "Error"}}
        status["initContainerStatuses"] = [
            {"name": step, "ready": step != steps[-1], "restartCount": 0 if step != steps[-1] else 5,
             "state": done if step != steps[-1] else {"waiting": {"reason": "CrashLoopBackOff"}},
             **({"lastState": failed} if step == steps[-1] else {}), "image": f"{step}:stand-in"}
            for step in steps]
        status["containerStatuses"] = [{**c, "ready": False, "started": False,
                                        "state": {"waiting": {"reason": "PodInitializing"}}}
                                       for c in status.get("containerStatuses") or []]
        status["conditions"] = [{**c, "status": "False"} if c.get("type") in ("Ready", "ContainersReady", "Initialized")
                                else c for c in status.get("conditions") or []]
        status["phase"] = "Pending"
    for ds in snap.daemonsets:
        if ds["metadata"]["name"] == "nvidia-operator-validator" and stuck:
            st = ds["status"]
            st["numberReady"] -= stuck
            st["numberAvailable"] = st.get("numberAvailable", 0) - stuck
            st["numberUnavailable"] = st.get("numberUnavailable", 0) + stuck


def kubelet_configs(spec: Any) -> dict[str, Any]:
    """What each tuned pool's kubelet answers on /configz: the captured real kubelet's configuration."""
    tuned = json.loads((Path(__file__).resolve().parent / "kubelet-configz" / "tuned.json").read_text())
    return {h: tuned["kubeletconfig"] for pool in spec.node_pools if pool.resource_managers for h in pool.hosts}


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    from gpucluster.toolchain import path_of

    return subprocess.run([str(path_of("kubectl")), f"--kubeconfig={kubeconfig}", *args], input=stdin, text=True,
                          capture_output=True, check=True).stdout


def settle(kubeconfig: Path, daemonsets: list[dict[str, Any]], timeout: float = 180) -> None:
    """Wait until the DaemonSet controller counted every stand-in's pods ready on its nodes."""
    deadline = time.monotonic() + timeout
    while True:
        live = json.loads(kubectl(kubeconfig, "get", "daemonsets", "-A", "-o", "json"))["items"]
        mine = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in live}
        pending = [k for k in ((d["metadata"]["namespace"], d["metadata"]["name"]) for d in daemonsets)
                   if k not in mine or (st := mine[k].get("status") or {}).get("numberReady") != st.get(
                       "desiredNumberScheduled") or not st.get("desiredNumberScheduled")
                   or st.get("observedGeneration") != mine[k]["metadata"].get("generation")]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"DaemonSets not ready after {timeout:.0f} s: {pending}")
        time.sleep(2)


def _shape(snap: Any) -> str:
    """What the node agents publish, without the bookkeeping that changes on every write."""
    def clean(o: dict[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in o.get("metadata", {}).items() if k in ("name", "labels", "annotations")}
        status = {k: v for k, v in (o.get("status") or {}).items() if k in ("capacity", "allocatable")}
        return {"metadata": meta, "spec": o.get("spec"), "status": status}

    return json.dumps([[clean(n) for n in snap.nodes], [clean(s) for s in snap.resource_slices or []]],
                      sort_keys=True)


def settled(spec: Any, kubeconfig: Path, *, quiet_s: float = 15, timeout: float = 600) -> None:
    """Wait until the MIG and sharing changes `up` set off are done (the watchdog follows them) and what the
    node agents publish has not changed for ``quiet_s``."""
    from gpucluster.verify import cluster, upgrades, watchdog

    watchdog.live_rows(spec, kubeconfig, None, timeout, upgrades.DEFAULT_DEADLINE)
    deadline = time.monotonic() + timeout
    last, since = "", time.monotonic()
    while time.monotonic() < deadline:
        now = _shape(cluster.fetch(spec, kubeconfig, simulated=True))
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(3)
    raise SystemExit(f"the world did not settle within {timeout:.0f} s")


def record(out_dir: Path) -> None:
    from gpucluster.addons import monitoring
    from gpucluster.errors import ToolMissing
    from gpucluster.flow import run_down, run_up
    from gpucluster.spec import load_spec
    from gpucluster.verify import cluster, health
    from gpucluster.verify.snapshot import to_data

    spec = load_spec(LOCAL)
    with tempfile.TemporaryDirectory(prefix="gpucluster-record-") as tmp:
        world_dir, state = Path(tmp) / "world", Path(tmp) / "state"
        report = run_up(LOCAL, world_dir=world_dir, state_dir=state, quiet=True, verify=False)
        print(f"up: {[(c['stack'], c['created']) for c in report.stacks]}", file=sys.stderr)
        kubeconfig = world_dir / "kubeconfig"
        try:
            from gpucluster.local.world import World

            try:
                monitoring.start(World(world_dir), spec, LOCAL, scrape_interval="5s", evaluation_interval="5s")
                time.sleep(15)  # the first rule evaluation: loaded rules report their health
            except ToolMissing as err:
                print(f"monitoring not started ({err}): the recording holds no Prometheus rules", file=sys.stderr)
            settled(spec, kubeconfig)
            snap = cluster.fetch(spec, kubeconfig, simulated=True)
            (out_dir / "local-world.json").write_text(json.dumps(to_data(snap), indent=1, sort_keys=True) + "\n")
            daemonsets = [*operator_daemonsets(spec), *pod_network_daemonsets(spec)]
            # --force-conflicts: the monitoring add-on's stand-in exporter DaemonSet becomes the operator's
            kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "--field-manager=gpucluster-record",
                    "-f", "-", stdin=yaml.safe_dump_all([*daemonsets, *helm_records(spec)]))
            settle(kubeconfig, daemonsets)
            settled(spec, kubeconfig)
            snap = cluster.fetch(spec, kubeconfig, simulated=True)
            served = {e["node"]: e for e in snap.dcgm if e["source"] == health.SIMULATED}
            snap.dcgm = [{"source": f"DCGM exporter pod {p['metadata']['namespace']}/{p['metadata']['name']}",
                          "node": p["spec"]["nodeName"], "text": served[p["spec"]["nodeName"]]["text"],
                          "error": "", "status": 0}
                         for p in snap.operator_pods or []
                         if p["metadata"]["labels"].get("app") == "nvidia-dcgm-exporter"
                         and p["spec"].get("nodeName") in served]
            validator_as_upstream(snap)
            snap.kubelet_configs = kubelet_configs(spec)
            (out_dir / "real-cluster.json").write_text(json.dumps(to_data(snap), indent=1, sort_keys=True) + "\n")
        finally:
            run_down(LOCAL, world_dir=world_dir, state_dir=state, quiet=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    record(args.out_dir)


if __name__ == "__main__":
    main()
