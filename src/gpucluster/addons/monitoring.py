"""GPU monitoring in the local world: the real Prometheus Operator and the real Prometheus, on loopback.

``start(world, spec)`` runs the Prometheus Operator (``cmd/operator`` of
prometheus-operator v0.85.0) out of cluster against the world's API server, creates a ``Prometheus``
object whose selectors pick up our ServiceMonitor and PrometheusRule (``monitoring.prometheusLabel``),
and lets the operator generate the scrape configuration Secret and rule ConfigMaps as it would for its
StatefulSet. That pod cannot run (no kubelets), so the real ``prometheus`` binary (v3.16.0) runs on
127.0.0.1 with that configuration, changed only where running outside the cluster forces it (see
:mod:`gpucluster.addons.prometheus_config`).

What it scrapes is SIMULATED, created the way the upstream installers would:

- the GPU Operator's ``nvidia-dcgm-exporter`` Service (name, label, port ``gpu-metrics``/9400) and a
  DaemonSet of exporter pods on the GPU nodes (kwok runs them and gives them pod IPs); each pod's
  endpoint is served by gpucluster's simulated exporter on a loopback port of its node;
- kube-state-metrics: a Deployment, its Service and a ServiceMonitor with ``honorLabels: true`` (as
  kube-prometheus ships it: its ``namespace``/``pod`` labels describe objects, not the target), served
  by gpucluster's simulated kube-state-metrics.

Processes (recorded as add-on ``monitoring``, stopped by pid with ``gpucluster local down``):
``prometheus-operator``, ``monitoring-sim`` (``gpucluster local monitoring run``: the simulated
endpoints and the config sync) and ``prometheus``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpucluster import kube, procs
from gpucluster.addons.monitoring_runtime import KSM_LABELS, KSM_PORT, KSM_PORT_NAME, Settings
from gpucluster.errors import LocalWorldError
from gpucluster.local import addons, runtime
from gpucluster.local.crds import all_crds, apply_crds
from gpucluster.local.runtime import Launch
from gpucluster.local.world import World
from gpucluster.procs import Component
from gpucluster.render import monitoring
from gpucluster.render.common import Obj, obj
from gpucluster.simulator.silicon import silicon_of
from gpucluster.spec.model import ClusterSpec
from gpucluster.toolchain import path_of
from gpucluster.toolchain.versions import PROMETHEUS_OPERATOR_BINARY, PROMTOOL
from gpucluster.versions import DCGM_EXPORTER, PROMETHEUS

NAME = "monitoring"
#: The Prometheus object; the operator names its Secret and rule ConfigMaps after it.
PROMETHEUS_NAME = "gpucluster"
TOOLS = ("prometheus", "prometheus-operator")
BANNER = ("monitoring: the Prometheus Operator and Prometheus are REAL (on 127.0.0.1); the DCGM exporters "
          "and kube-state-metrics they scrape are SIMULATED by gpucluster")
Say = Callable[[str], None]


# -- objects, as the upstream installers would create them ----------------------------------------
def exporter_objects(spec: ClusterSpec) -> list[Obj]:
    """The GPU Operator's exporter Service and a DaemonSet of exporter pods on the GPU nodes.

    Service: name, label, selector, port name and number as the operator's state-dcgm-exporter
    assets. The DaemonSet selects ``nvidia.com/gpu.present=true`` (GFD's label, which the simulator
    publishes) instead of the operator's ``nvidia.com/gpu.deploy.dcgm-exporter``, which only the
    operator's node labelling would set. Its container never runs: kwok marks the pod Running.
    """
    ns = spec.gpu_operator.namespace
    labels = dict(monitoring.EXPORTER_LABELS)
    service = obj("v1", "Service", monitoring.EXPORTER_SERVICE, ns, labels=labels,
                  annotations={"prometheus.io/scrape": "true"},
                  spec={"selector": labels, "ports": [{"name": monitoring.EXPORTER_PORT_NAME, "protocol": "TCP",
                                                       "port": monitoring.EXPORTER_PORT,
                                                       "targetPort": monitoring.EXPORTER_PORT}]})
    container = {
        "name": "nvidia-dcgm-exporter", "image": f"dcgm-exporter:{DCGM_EXPORTER}-simulated",
        "ports": [{"name": "metrics", "containerPort": monitoring.EXPORTER_PORT}],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
                *monitoring.exporter_env(spec)],
    }
    daemonset = obj("apps/v1", "DaemonSet", "nvidia-dcgm-exporter", ns, labels=labels, spec={
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": _pod_spec(
            container, node_selector={"nvidia.com/gpu.present": "true"})},
    })
    return [service, daemonset]


def ksm_objects(spec: ClusterSpec) -> list[Obj]:
    """kube-state-metrics' Deployment, Service and ServiceMonitor (honorLabels: true)."""
    ns, labels = spec.monitoring.namespace, dict(KSM_LABELS)
    container = {"name": "kube-state-metrics", "image": "kube-state-metrics:simulated",
                 "ports": [{"name": KSM_PORT_NAME, "containerPort": KSM_PORT}]}
    deployment = obj("apps/v1", "Deployment", "kube-state-metrics", ns, labels=labels, spec={
        "replicas": 1, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": _pod_spec(container)}})
    service = obj("v1", "Service", "kube-state-metrics", ns, labels=labels, spec={
        "selector": labels, "ports": [{"name": KSM_PORT_NAME, "port": KSM_PORT, "targetPort": KSM_PORT}]})
    monitor = obj("monitoring.coreos.com/v1", "ServiceMonitor", "kube-state-metrics", ns,
                  labels={**labels, **spec.monitoring.prometheus_label},
                  spec={"selector": {"matchLabels": labels}, "namespaceSelector": {"matchNames": [ns]},
                        "endpoints": [{"port": KSM_PORT_NAME, "honorLabels": True}]})
    return [deployment, service, monitor]


def _pod_spec(container: dict[str, Any], node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod spec that any Pod Security level admits, tolerating every taint (GPU nodes are tainted)."""
    secure = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    out: dict[str, Any] = {
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
        "tolerations": [{"operator": "Exists"}],
        "containers": [{**container, "securityContext": secure}],
    }
    if node_selector:
        out["nodeSelector"] = node_selector
    return out


def prometheus_object(spec: ClusterSpec, *, scrape_interval: str, evaluation_interval: str) -> Obj:
    """The Prometheus object: selects our ServiceMonitors and PrometheusRules in every namespace.

    Selectors are the spec's ``monitoring.prometheusLabel`` (a null selector selects nothing, a null
    namespace selector only the object's own namespace). ``replicas: 0``: the operator still
    generates the configuration, and no pod is created that could not run anyway.
    """
    selector = {"matchLabels": dict(spec.monitoring.prometheus_label)}
    return obj("monitoring.coreos.com/v1", "Prometheus", PROMETHEUS_NAME, spec.monitoring.namespace, spec={
        "version": f"v{PROMETHEUS}", "replicas": 0,
        "serviceMonitorSelector": selector, "serviceMonitorNamespaceSelector": {},
        "ruleSelector": selector, "ruleNamespaceSelector": {},
        "scrapeInterval": scrape_interval, "evaluationInterval": evaluation_interval,
    })


def _path(o: Obj) -> str:
    """The API path of a namespaced object of the kinds this module creates."""
    kinds = {"Service": ("", "services"), "DaemonSet": ("apps", "daemonsets"), "Deployment": ("apps", "deployments"),
             "ServiceMonitor": ("monitoring.coreos.com", "servicemonitors"),
             "Prometheus": ("monitoring.coreos.com", "prometheuses"), "Namespace": ("", "namespaces")}
    group, plural = kinds[o["kind"]]
    if o["kind"] == "Namespace":
        return f"{kube.NAMESPACES}/{o['metadata']['name']}"
    return kube.namespaced(o["metadata"]["namespace"], plural, o["metadata"]["name"], group=group)


# -- lifecycle -----------------------------------------------------------------------------------
def running(world: World) -> bool:
    return addons.running(world.dir, NAME, ("prometheus-operator", "monitoring-sim", "prometheus"))


def launches(world: World, spec: ClusterSpec, settings_file: Path, ports: dict[str, int],
             gpu_nodes: list[str]) -> list[list[Launch]]:
    """What the three processes are, in start order: each needs the one before it.

    The operator reads the world's API server with the admin credentials; the background process serves
    the simulated endpoints and writes the operator's configuration, which Prometheus then runs with.
    """
    folder, logs, pki = settings_file.parent, Path(world.dir) / "logs", world.pki
    config = folder / "prometheus.yaml"
    base = f"http://{procs.HOST}"
    operator = Launch(
        "prometheus-operator", path_of("prometheus-operator"),
        (f"--apiserver={_apiserver(world)}", f"--ca-file={pki.ca}", f"--cert-file={pki.cert('admin')}",
         f"--key-file={pki.key('admin')}", f"--web.listen-address={procs.HOST}:{ports['operator']}",
         f"--prometheus-instance-namespaces={spec.monitoring.namespace}", "--log-level=info"),
        logs / "prometheus-operator.log", port=ports["operator"], health_url=f"{base}:{ports['operator']}/healthz",
        env={"KUBECONFIG": None},  # the flags name the world; an inherited KUBECONFIG would win
        label=f"prometheus-operator ({PROMETHEUS_OPERATOR_BINARY})")
    written = runtime.Check(f"the operator's generated configuration (Secret prometheus-{PROMETHEUS_NAME}) "
                            f"written to {config}", lambda: (config.is_file(), "not written yet"))
    sim = Launch(
        "monitoring-sim", Path(sys.executable),
        ("-m", "gpucluster", "local", "monitoring", "run", "--settings", str(settings_file)),
        logs / "monitoring-sim.log", port=ports["ksm"], health_url=f"{base}:{ports['ksm']}/metrics", ready=(written,),
        label=f"simulated DCGM exporters on {len(gpu_nodes)} GPU nodes and kube-state-metrics")
    prometheus = Launch(
        "prometheus", path_of("prometheus"),
        (f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
         f"--web.listen-address={procs.HOST}:{ports['prometheus']}", "--web.enable-lifecycle",
         "--storage.tsdb.retention.time=1d"),
        logs / "prometheus.log", port=ports["prometheus"], health_url=f"{base}:{ports['prometheus']}/-/ready",
        label=f"prometheus ({PROMETHEUS}, module {PROMTOOL})")
    return [[operator], [sim], [prometheus]]


def start(world: World, spec: ClusterSpec, inventory: Path, *, scrape_interval: str = "30s",
          evaluation_interval: str = "30s", timeout: float = 120.0, say: Say | None = None) -> dict[str, Component]:
    """Install and start everything of the module docstring for ``world``; returns the recorded processes.

    Idempotent: when all three processes run healthy nothing changes. ``inventory`` is the spec's
    folder (the background process loads it again). Raises ToolMissing when the Prometheus binaries
    are not built, LocalWorldError when something does not come up (what started is stopped).
    """
    say = say or (lambda _m: None)
    if running(world):
        say("monitoring already running; nothing changed")
        return addons.load(world.dir, NAME)
    stop(world)
    for name in TOOLS:
        path_of(name)  # ToolMissing says how to build them, before anything is installed
    docs, _ = all_crds(everything=True)
    apply_crds(world.kubeconfig, [d for d in docs if d["spec"]["group"] == "monitoring.coreos.com"])
    client = kube.Kube(world.kubeconfig)
    try:
        for ns in sorted({spec.monitoring.namespace, spec.gpu_operator.namespace}):
            client.apply(f"{kube.NAMESPACES}/{ns}", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        objs = [*exporter_objects(spec), *ksm_objects(spec),
                prometheus_object(spec, scrape_interval=scrape_interval, evaluation_interval=evaluation_interval)]
        for o in objs:
            client.apply(_path(o), o)
    finally:
        client.close()
    say(BANNER)
    folder = addons.folder(world.dir, NAME)
    gpu_nodes = sorted(n for n, s in silicon_of(spec).items() if s.model and s.count)
    ports = procs.free_ports(["operator", "prometheus", "ksm", *gpu_nodes])
    settings = Settings(inventory=str(Path(inventory).resolve()), kubeconfig=str(world.kubeconfig),
                        folder=str(folder), prometheus=PROMETHEUS_NAME, namespace=spec.monitoring.namespace,
                        exporter_namespace=spec.gpu_operator.namespace, prometheus_port=ports["prometheus"],
                        ksm_port=ports["ksm"], exporter_ports={n: ports[n] for n in gpu_nodes})
    settings_file = folder / "settings.json"
    settings.save(settings_file)
    return addons.start(world.dir, NAME, launches(world, spec, settings_file, ports, gpu_nodes), timeout=timeout,
                        say=say)


def url(world: World) -> str:
    """The running Prometheus' base URL."""
    comp = addons.load(world.dir, NAME).get("prometheus")
    if comp is None:
        raise LocalWorldError(f"monitoring is not running in {world.dir}; "
                              "start it with `gpucluster local monitoring up`")
    return f"http://{procs.HOST}:{comp.port}"


def stop(world: World) -> list[str]:
    """Stop the add-on's processes (only while their pids are still ours); returns their names."""
    return addons.stop(world.dir, NAME)


def _apiserver(world: World) -> str:
    state = world.state()
    if state is None:
        raise LocalWorldError(f"the local world in {world.dir} is not running")
    return f"https://{procs.HOST}:{state.ports['kube-apiserver']}"
