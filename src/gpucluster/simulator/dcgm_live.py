"""The simulated DCGM exporter in the local world: one endpoint per GPU node, kept current from the cluster.

It stands where the GPU Operator's ``nvidia-dcgm-exporter`` DaemonSet pods would run, one per GPU
node, each on its own loopback port. Every :meth:`LiveExporters.sync` reads from the cluster what the
real exporter gets on its node:

- the metrics CSV from the ConfigMap the operator mounts (``gpucluster-dcgm-metrics`` in the GPU
  Operator namespace); without it the endpoint answers 503, as the pod would not start;
- the node's GPUs: the spec's silicon, with the MIG devices the GPU simulator's MIG manager applied
  (the node annotation ``gpucluster.dev/simulated-mig``, the silicon's state);
- which pod holds which device (:mod:`gpucluster.simulator.podresources`), from the pods bound to the
  node and how GFD says its GPUs are shared (``nvidia.com/gpu.replicas``, ``nvidia.com/mig.strategy``);
- knob values (activity, XID, ECC, …) from the node annotation ``gpucluster.dev/simulate-dcgm``;
- with ``KUBERNETES_ENABLE_DRA`` in the exporter's rendered environment, the pod of each DRA-allocated GPU
  (:func:`gpucluster.simulator.podresources.dra_holders`), from ResourceSlices read as the exporter reads
  them, at ``resource.k8s.io/v1beta1``. As upstream, the exporter serves nothing until that informer has
  synced once (dcgm-exporter 4.5.1-4.8.0 ``internal/pkg/transformation/dra.go:71``, waited for at start
  from ``internal/pkg/server/server.go:70``): while the API server does not serve that version, or the
  exporter's ServiceAccount may not list and watch ResourceSlices, every endpoint answers 503 naming why.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpucluster import kube
from gpucluster import labels as L
from gpucluster.errors import ClusterError
from gpucluster.render import gpu_operator
from gpucluster.render.monitoring import DCGM_CONFIGMAP, DCGM_CSV_KEY, DRA_ENV, EXPORTER_ACCOUNT
from gpucluster.simulator import podresources
from gpucluster.simulator.agents.mig_manager import MigState
from gpucluster.simulator.dcgm import Fleet, devices_for
from gpucluster.simulator.silicon import silicon_of
from gpucluster.spec.model import ClusterSpec

log = logging.getLogger("gpucluster.simulator.dcgm")
#: Where the exporter's informer lists ResourceSlices (gpucluster.spec.features.DCGM_EXPORTER_SLICES_API).
DRA_SLICES = "/apis/resource.k8s.io/v1beta1/resourceslices"
BANNER = ("DCGM exporters are SIMULATED: gpucluster serves what dcgm-exporter would on each GPU node "
          "(values are knobs, attribution from the pods bound to the node)")


class LiveExporters:
    """The simulated exporters of one spec's GPU nodes, synced from one cluster."""

    def __init__(self, spec: ClusterSpec, kubeconfig: Path, ports: Mapping[str, int] | None = None) -> None:
        self.spec = spec
        self.kube = kube.Kube(kubeconfig, hint="is the local world up (`gpucluster local up`)?")
        self.silicon = {n: s for n, s in silicon_of(spec).items() if s.model and s.count}
        self.fleet = Fleet(devices_for(spec), ports=ports)
        self.layouts: dict[str, dict[str, int] | None] = {}
        self.held: dict[str, dict[str, list[tuple[podresources.Holder, podresources.Unit]]]] = {}
        self.csv: str | None = None
        env = ((gpu_operator.values(spec).get("dcgmExporter") or {}).get("env")) or []
        #: The exporter's KUBERNETES_ENABLE_DRA, as rendered (a boolean flag: "true" or "1").
        self.dra = any(e.get("name") == DRA_ENV and str(e.get("value", "")).lower() in ("true", "1") for e in env)
        self._dra_synced = False

    def start(self) -> LiveExporters:
        self.fleet.start()
        return self

    @property
    def urls(self) -> dict[str, str]:
        return self.fleet.urls

    def sync(self, pods: list[dict[str, Any]] | None = None) -> None:
        """Read the cluster once and update every node's exporter (``pods``: a pod list already read)."""
        ns = self.spec.gpu_operator.namespace
        cm = self.kube.get(kube.configmap(ns, DCGM_CONFIGMAP))
        csv = ((cm or {}).get("data") or {}).get(DCGM_CSV_KEY)
        nodes = {n["metadata"]["name"]: n for n in self.kube.items(kube.NODES)}
        pods = self.kube.items(kube.PODS) if pods is None else pods
        waiting, devices, claims = self._dra_view()
        for name, si in self.silicon.items():
            exporter = self.fleet[name]
            if waiting:
                exporter.unavailable = waiting
                continue
            if csv is None:
                exporter.unavailable = (f"ConfigMap {ns}/{DCGM_CONFIGMAP} (key {DCGM_CSV_KEY}) not found: the "
                                        "exporter pod cannot mount its metrics CSV")
                continue
            if csv != self.csv:
                try:
                    exporter.set_counters(csv)
                except ValueError as err:
                    exporter.unavailable = f"the metrics CSV does not parse: {err}"
                    continue
            exporter.unavailable = None
            node = nodes.get(name) or {"metadata": {}}
            labels = node["metadata"].get("labels") or {}
            annotations = node["metadata"].get("annotations") or {}
            applied = MigState.from_json(annotations.get(L.SIMULATED_MIG), si.count).applied
            layout = {p: applied[0].count(p) for p in sorted(set(applied[0]))} if applied and applied[0] else None
            if layout != self.layouts.get(name, "unset"):
                exporter.replace(devices_for(self.spec, {name: layout} if layout else None)[name])
                self.layouts[name] = layout
                self.held.pop(name, None)  # a MIG change restarts every GPU client
            replicas = labels.get(L.GPU_REPLICAS, "1")
            gpus = devices_for(self.spec, {name: layout} if layout else None)[name]
            units = podresources.units(gpus, replicas=max(1, int(replicas) if replicas.isdigit() else 1),
                                       mig_strategy=labels.get(L.MIG_STRATEGY, "none"))
            self.held[name] = podresources.allocate(name, pods, units, self.held.get(name, {}))
            holders = podresources.attribution(self.held[name])
            for g in gpus:
                for inst in g["instances"] or [None]:
                    gi = inst["gi"] if inst else None
                    holder = holders.get((g["index"], gi))
                    exporter.attribute(g["index"], gi, holder.labels() if holder else None)
            exporter.attribute_dra(podresources.dra_holders(name, pods, claims, devices) if self.dra else {})
            self._load_knobs(name, node)
        self.csv = csv

    def _dra_view(self) -> tuple[str | None, dict[tuple[str, str], tuple[str, dict[str, str]]], list[dict[str, Any]]]:
        """(why the exporter still waits, or None; the ResourceSlice devices; the ResourceClaims) for DRA."""
        if not self.dra:
            return None, {}, []
        if not self._dra_synced:
            why = self._dra_blocked()
            if why:
                return (f"the exporter waits for its ResourceSlice informer ({DRA_SLICES}) to sync and serves "
                        f"nothing until then: {why}"), {}, []
            self._dra_synced = True  # once synced the informer only watches on
        devices = podresources.slice_devices(self.kube.items(DRA_SLICES))
        return None, devices, self.kube.items(kube.RESOURCE_CLAIMS)

    def _dra_blocked(self) -> str | None:
        """Why the exporter's ResourceSlice informer cannot list now: the version is not served, or its
        ServiceAccount may not list and watch ResourceSlices (asked of the API server's authorizer)."""
        if self.kube.list(DRA_SLICES) is None:
            return (f"the API server does not serve {DRA_SLICES}; turn it on with "
                    f"--runtime-config={DRA_SLICES.removeprefix('/apis/')}=true")
        ns = self.spec.gpu_operator.namespace
        user = f"system:serviceaccount:{ns}:{EXPORTER_ACCOUNT}"
        for verb in ("list", "watch"):
            status, answer = self.kube.answer("POST", kube.SUBJECT_ACCESS_REVIEWS, {
                "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": user, "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}",
                                                  "system:authenticated"],
                         "resourceAttributes": {"group": "resource.k8s.io", "version": "v1beta1",
                                                "resource": "resourceslices", "verb": verb}}})
            if not 200 <= status < 300:
                return (f"could not ask whether {user} may {verb} resourceslices: HTTP {status} "
                        f"{answer.get('message', '')}")
            if not (answer.get("status") or {}).get("allowed"):
                return f"{user} may not {verb} resourceslices.resource.k8s.io (no RBAC grants it)"
        return None

    def _load_knobs(self, name: str, node: dict[str, Any]) -> None:
        raw = (node["metadata"].get("annotations") or {}).get(L.SIMULATE_DCGM)
        try:
            knobs = json.loads(raw) if raw else {}
            if not isinstance(knobs, dict):
                raise ValueError("not a JSON object")
            self.fleet[name].load_knobs(knobs)
        except ValueError as err:
            log.warning("node %s: annotation %s ignored: %s", name, L.SIMULATE_DCGM, err)

    def run(self, interval: float, stop: threading.Event) -> None:
        """Sync every ``interval`` seconds until ``stop`` is set; transient API errors are logged and retried,
        a refusal that cannot change (403, 422: :func:`gpucluster.kube.transient`) ends the loop."""
        while not stop.is_set():
            try:
                self.sync()
            except ClusterError as exc:
                if not kube.transient(exc):
                    log.error("sync refused, not retrying: %s", exc)
                    raise
                log.warning("sync failed (will retry): %s", exc)
            stop.wait(interval)

    def close(self) -> None:
        self.fleet.stop()
        self.kube.close()
