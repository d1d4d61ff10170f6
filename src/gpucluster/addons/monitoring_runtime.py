"""The monitoring add-on's background process: simulated exporters and the operator-config sidecar.

One process (``gpucluster local monitoring run --settings FILE``) does, every ``interval`` seconds:

- the SIMULATED DCGM exporters, one loopback endpoint per GPU node
  (:class:`gpucluster.simulator.dcgm_live.LiveExporters`);
- the SIMULATED kube-state-metrics endpoint, from the pods, nodes and ResourceQuotas it just read
  (:mod:`gpucluster.simulator.ksm`);
- the config-reloader's job for the real Prometheus: the operator's generated configuration and rule
  ConfigMaps written to files, with the pod IP:port of every exporter and kube-state-metrics pod
  routed to the loopback port that serves it (:class:`gpucluster.addons.prometheus_config.ConfigSync`).
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpucluster import inventory as inventories
from gpucluster import kube
from gpucluster.addons.prometheus_config import ConfigSync
from gpucluster.errors import ClusterError
from gpucluster.render.monitoring import EXPORTER_LABELS, EXPORTER_PORT
from gpucluster.simulator import ksm
from gpucluster.simulator.dcgm_live import LiveExporters
from gpucluster.simulator.endpoint import TextEndpoint

log = logging.getLogger("gpucluster.addons.monitoring")

#: kube-state-metrics' pod label, Service port name and port (its chart's defaults).
KSM_LABELS = {"app.kubernetes.io/name": "kube-state-metrics"}
KSM_PORT_NAME = "http"
KSM_PORT = 8080


@dataclass
class Settings:
    """What the add-on hands its background process (JSON in the add-on's folder)."""

    inventory: str
    kubeconfig: str
    folder: str
    prometheus: str
    namespace: str
    exporter_namespace: str
    prometheus_port: int
    ksm_port: int
    exporter_ports: dict[str, int] = field(default_factory=dict)
    interval: float = 1.0

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> Settings:
        return cls(**json.loads(Path(path).read_text()))


def _selected(pod: dict[str, Any], namespace: str, labels: dict[str, str]) -> bool:
    meta = pod["metadata"]
    have = meta.get("labels") or {}
    return meta.get("namespace") == namespace and all(have.get(k) == v for k, v in labels.items())


def addresses(pods: list[dict[str, Any]], s: Settings) -> dict[str, str]:
    """Pod IP:port → the loopback address serving that pod (exporter pods by node, kube-state-metrics)."""
    out = {}
    for pod in pods:
        ip, node = (pod.get("status") or {}).get("podIP"), (pod.get("spec") or {}).get("nodeName")
        if not ip or pod["metadata"].get("deletionTimestamp"):
            continue
        if _selected(pod, s.exporter_namespace, EXPORTER_LABELS) and node in s.exporter_ports:
            out[f"{ip}:{EXPORTER_PORT}"] = f"127.0.0.1:{s.exporter_ports[node]}"
        elif _selected(pod, s.namespace, KSM_LABELS):
            out[f"{ip}:{KSM_PORT}"] = f"127.0.0.1:{s.ksm_port}"
    return out


class Runtime:
    """The process's state: exporters, the kube-state-metrics snapshot, the config sync."""

    def __init__(self, s: Settings) -> None:
        self.settings = s
        spec = inventories.load(Path(s.inventory))
        self.kube = kube.Kube(Path(s.kubeconfig))
        self.exporters = LiveExporters(spec, Path(s.kubeconfig), s.exporter_ports)
        self._snapshot = ksm.exposition([], [], [])
        self.ksm = TextEndpoint(lambda: (200, self._snapshot), name="sim-kube-state-metrics", port=s.ksm_port)
        self.config = ConfigSync(self.kube, namespace=s.namespace, prometheus=s.prometheus, folder=Path(s.folder),
                                 kubeconfig=Path(s.kubeconfig),
                                 env={"POD_NAME": f"prometheus-{s.prometheus}-0", "SHARD": "0"})
        self.config.reload_url = f"http://127.0.0.1:{s.prometheus_port}/-/reload"

    def sync(self) -> None:
        pods = self.kube.items(kube.PODS)
        self.exporters.sync(pods)
        self._snapshot = ksm.exposition(pods, self.kube.items(kube.NODES), self.kube.items(kube.RESOURCE_QUOTAS))
        self.config.sync(addresses(pods, self.settings))

    def run(self, stop: threading.Event) -> None:
        self.exporters.start()
        self.ksm.start()
        try:
            while not stop.is_set():
                try:
                    self.sync()
                except (ClusterError, ValueError) as exc:  # API down, a config we cannot rewrite
                    if isinstance(exc, ClusterError) and not kube.transient(exc):
                        log.error("sync refused, not retrying: %s", exc)  # 403/422 answer the same next time
                        raise
                    log.warning("sync failed (will retry): %s", exc)
                stop.wait(self.settings.interval)
        finally:
            self.ksm.stop()
            self.exporters.close()
            self.kube.close()
