"""Reconcile simulated nodes: :class:`Simulator` keeps a spec's kwok nodes what NVIDIA's agents would make them.

For every host of the spec it registers a Node as kubelet would (names, the pool/user labels and
taints of :func:`gpucluster.render.nodes.node_config`, the machine's CPU/memory), annotated so kwok
manages it and marked ``gpucluster.dev/simulated=true``. Each :meth:`Simulator.sync` then does what
GPU Feature Discovery, the device plugin, the MIG manager, the DRA kubelet plugin and the RDMA
shared device plugin would do on that node, reading their configuration from the cluster (see
:mod:`gpucluster.simulator.agents`): GFD labels, capacity/allocatable in the node status, and
one ResourceSlice per DRA node. Only the silicon (GPU model and count, NICs) comes from the spec.

A sync writes only what differs, so a second sync with nothing changed writes nothing. Faults are
node annotations (:data:`FAULTS`), so ``kubectl annotate`` injects them as well as :meth:`inject`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster import kube
from gpucluster import labels as L
from gpucluster.errors import AlreadyExists, ApiError, ClusterError, SimulatorError
from gpucluster.render import dra_driver, gpu_operator
from gpucluster.render.gpu_operator import DEVICE_PLUGIN_CONFIGMAP, MIG_CONFIGMAP
from gpucluster.render.network_operator import NIC_POLICY_NAME
from gpucluster.render.nodes import node_config
from gpucluster.simulator import oracle
from gpucluster.simulator.agents import ClusterView, Desired, NodeView, describe, fleet
from gpucluster.simulator.agents.operator import Operator
from gpucluster.simulator.objects import content_key, node_object, quantities, slice_name, slice_object, slice_spec
from gpucluster.simulator.silicon import Silicon, silicon_of
from gpucluster.spec.model import ClusterSpec

log = logging.getLogger("gpucluster.simulator")

#: Fault name -> the node annotation that injects it.
FAULTS = {
    "unhealthy-gpus": L.FAULT_UNHEALTHY_GPUS,  # "0,3": those GPUs are unhealthy (allocatable drops)
    "missing-devices": L.FAULT_MISSING_DEVICES,  # "gpu-2": left out of the node's ResourceSlice
    "product": L.FAULT_PRODUCT,  # GFD's nvidia.com/gpu.product shows this value
    "not-ready": L.FAULT_NOT_READY,  # "true": kwok keeps the node NotReady
    "mig-wedge": L.FAULT_MIG_WEDGE,  # "true": a MIG change stays pending with the GPU clients paused
    "mig-fail": L.FAULT_MIG_FAIL,  # "true": applying a MIG change fails (state failed, clients paused)
    "mig-reboot": L.FAULT_MIG_REBOOT,  # "true": a MIG mode change shows rebooting for one sync
}
BANNER = (
    "GPUs are SIMULATED (no real GPU, driver or kubelet): "
    "gpucluster's simulator publishes what NVIDIA's agents would"
)
SELECTOR = f"{L.SIMULATED}=true"
#: The taint the API server puts on every new Node until the node lifecycle controller sees it Ready
#: (TaintNodesByCondition admission; tests/upstream/facts/kubernetes.yaml new-node-not-ready-taint).
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
#: The node lifecycle controller's taints of a node that is not up (fact node-lifecycle-taints): it
#: swaps not-ready for unreachable when a new node has not reported within the grace period.
LIFECYCLE_TAINTS = (NOT_READY_TAINT, "node.kubernetes.io/unreachable")
#: How long :func:`attach` waits for the nodes it created to come up (kwok, the node lifecycle controller).
START_TIMEOUT_S = 120.0
NODES = kube.NODES
SLICES = kube.RESOURCE_SLICES


@dataclass
class SyncReport:
    """What one sync did; ``writes`` is the number of write calls it made."""

    nodes: int = 0
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    writes: int = 0
    notes: dict[str, list[str]] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return self.writes > 0


class Simulator:
    """Keeps the simulated nodes of one spec current in one cluster."""

    def __init__(
        self,
        spec: ClusterSpec,
        kubeconfig: Path,
        *,
        workers: int = 8,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.spec = spec
        self.kube = kube.Kube(kubeconfig, pool_size=max(workers, 4),
                              hint="is the local world up (`gpucluster local up`)?")
        self.workers = workers
        # One pool for the simulator's life: a new pool per sync started threads every second in the
        # background loop, and one such start was seen to hang the loop for good (Thread.start waiting
        # on a thread that had already started).
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="gpu-simulator")
        self.say = say or log.info
        self.silicon = silicon_of(spec)
        self.registration = node_config(spec)
        self.control_plane = {h.name for h in spec.control_planes}
        self.oracle = oracle.shared()
        self._stop = threading.Event()

    # -- reconcile ------------------------------------------------------------------------------
    def view(self) -> ClusterView:
        """What the agents read from the cluster now (one read per object)."""
        spec = self.spec
        ns = spec.gpu_operator.namespace
        dp = self.kube.get(kube.configmap(ns, DEVICE_PLUGIN_CONFIGMAP))
        mig = self.kube.get(kube.configmap(ns, MIG_CONFIGMAP))
        nic = self.kube.get(f"{kube.NIC_CLUSTER_POLICIES}/{NIC_POLICY_NAME}")
        # The operator and the DRA driver count as installed once their namespace exists: their
        # charts cannot be fetched here, and the simulator stands in for their node agents.
        operator_ns = spec.gpu_operator.enabled and self.kube.get(f"{kube.NAMESPACES}/{ns}") is not None
        dra = spec.dra.enabled and self.kube.get(f"{kube.NAMESPACES}/{spec.dra.namespace}") is not None
        version = self.kube.get("/version") or {}
        minor = int("".join(ch for ch in str(version.get("minor", "")) if ch.isdigit()) or 0)
        return ClusterView(
            operator=Operator.from_values(gpu_operator.values(spec), installed=operator_ns),
            device_plugin_data=(dp or {}).get("data", {}) if dp else None,
            mig_data=(mig or {}).get("data", {}) if mig else None,
            host_mig={"config.yaml": gpu_operator.dump(gpu_operator.mig_parted_config(spec))},
            nic_policy=nic,
            dra=dra,
            cluster=spec.metadata.name,
            driver_version=spec.gpu_operator.driver.version,
            # The driver's release values (FEATURE_GATES of its kubelet plugins) and the server's version.
            dra_gates=dict(dra_driver.values(spec).get("featureGates") or {}),
            dra_plugin=dict(dra_driver.values(spec).get("kubeletPlugin") or {}),
            server_minor=minor,
        )

    def sync(self) -> SyncReport:
        """Reconcile every simulated node once (idempotent: nothing differs, nothing is written)."""
        start_writes = self.kube.writes
        view = self.view()
        nodes = {n["metadata"]["name"]: n for n in self.kube.items(kube.with_selector(NODES, SELECTOR))}
        slices = {s["metadata"]["name"]: s for s in self.kube.items(kube.with_selector(SLICES, SELECTOR))}
        by_node: dict[str, list[dict]] = {}
        for s in slices.values():
            by_node.setdefault(s["spec"].get("nodeName", ""), []).append(s)
        names = list(self.silicon)
        desired = fleet(view, [self._node_view(self.silicon[n], nodes.get(n)) for n in names], self.oracle)
        report = SyncReport(nodes=len(self.silicon))
        results = list(self._pool.map(
            lambda i: self._sync_node(self.silicon[names[i]], nodes.get(names[i]),
                                      by_node.get(names[i], []), desired[i]),
            range(len(names)),
        ))
        for name, (outcome, notes) in zip(names, results, strict=True):
            if outcome == "created":
                report.created.append(name)
            elif outcome == "updated":
                report.updated.append(name)
            if notes:
                report.notes[name] = notes
        for name in sorted(set(nodes) - set(self.silicon)):  # hosts removed from the spec
            self.kube.delete(f"{NODES}/{name}")
            report.deleted.append(name)
        for name, s in slices.items():
            if s["spec"].get("nodeName") not in self.silicon:
                self.kube.delete(f"{SLICES}/{name}")
        report.writes = self.kube.writes - start_writes
        return report

    def wait_started(self, names: list[str], timeout: float = START_TIMEOUT_S) -> list[str]:
        """Wait until the nodes ``names`` are up: Ready, and without lifecycle taints; returns those still not.

        A new node starts NotReady with :data:`NOT_READY_TAINT` until kwok marks it Ready and the node
        lifecycle controller lifts the taint (:data:`LIFECYCLE_TAINTS`); DaemonSets that do not tolerate
        it run nothing there meanwhile, so what the agents publish on the node changes once it is up.
        """
        from gpucluster.poll import poll

        def pending() -> list[str]:
            nodes = {n["metadata"]["name"]: n for n in self.kube.items(kube.with_selector(NODES, SELECTOR))}
            return [name for name in names if not _started(nodes.get(name))]

        return poll(pending, timeout=timeout, every=0.25, done=lambda left: not left)

    def settle(self, rounds: int = 6) -> SyncReport:
        """Sync until a sync writes nothing (at most ``rounds``): MIG changes take one step per sync."""
        total = self.sync()
        report = total
        for _ in range(rounds - 1):
            if not report.changed:
                break
            report = self.sync()
            total.updated = sorted(set(total.updated) | set(report.updated) - set(total.created))
            total.deleted += report.deleted
            total.writes += report.writes
            total.notes = report.notes
        return total

    def _node_view(self, si: Silicon, node: dict | None) -> NodeView:
        if node is None:
            reg = self.registration[si.node]
            return NodeView(si, reg["labels"], {}, reg["taints"], {})
        meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
        return NodeView(si, meta.get("labels") or {}, meta.get("annotations") or {},
                        spec.get("taints") or [], status.get("capacity") or {})

    def _sync_node(
        self, si: Silicon, node: dict | None, rslices: list[dict], desired: Desired
    ) -> tuple[str, list[str]]:
        if node is None:
            reg = self.registration[si.node]
            try:
                node = self.kube.create(
                    NODES, node_object(si.node, reg, desired, control_plane=si.node in self.control_plane)
                )
            except AlreadyExists:
                # Another simulator (the world's daemon next to a foreground sync) registered it
                # between our list and this create: bring the node it made up to date instead.
                node = self.kube.get(f"{NODES}/{si.node}")
                if node is None:
                    raise
                rslices = [s for s in self.kube.items(kube.with_selector(SLICES, SELECTOR))
                           if s["spec"].get("nodeName") == si.node]
            else:
                self._sync_slices(node, desired, rslices)
                return "created", desired.notes
        meta = node["metadata"]
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        wrote = False
        label_patch: dict[str, str | None] = {k: v for k, v in desired.labels.items() if labels.get(k) != v}
        label_patch.update({k: None for k in labels if L.is_agent_label(k) and k not in desired.labels})
        want_annotations = {**desired.annotations, L.SIMULATOR_DERIVED: describe(desired, desired.labels)}
        annotation_patch = {k: v for k, v in want_annotations.items() if annotations.get(k) != v}
        meta_patch: dict[str, Any] = {}
        if label_patch:
            meta_patch["labels"] = label_patch
        if annotation_patch:
            meta_patch["annotations"] = annotation_patch
        if meta_patch:
            self.kube.patch(f"{NODES}/{si.node}", {"metadata": meta_patch})
            wrote = True
        status = node.get("status") or {}
        status_patch = {}
        for fld in ("capacity", "allocatable"):
            want, have = getattr(desired, fld), status.get(fld) or {}
            if quantities(want) != quantities(have):
                status_patch[fld] = {**{k: None for k in have if k not in want}, **want}
        if status_patch:
            self.kube.patch(f"{NODES}/{si.node}/status", {"status": status_patch})
            wrote = True
        wrote = self._sync_slices(node, desired, rslices) or wrote
        return ("updated" if wrote else "unchanged"), desired.notes

    def _sync_slices(self, node: dict, desired: Desired, existing: list[dict]) -> bool:
        """Create, update or delete the node's ResourceSlices; True when it wrote something.

        A pool's content changes as a whole: every slice is written with a new pool generation, which
        tells the scheduler to use only those (as the driver's resourceslice controller does).
        """
        name, uid = node["metadata"]["name"], node["metadata"]["uid"]
        wanted = desired.slices
        if wanted is None and desired.devices is not None:
            wanted = [{"devices": desired.devices}]
        names = [slice_name(name, i) for i in range(len(wanted or []))]
        wrote = False
        current: dict[str, dict] = {}
        for rs in existing:
            owners = {o.get("uid") for o in rs["metadata"].get("ownerReferences") or []}
            if uid not in owners or rs["metadata"]["name"] not in names:
                # Not a DRA node (any more), fewer slices now, or left from a deleted node of that name.
                self.kube.delete(f"{SLICES}/{rs['metadata']['name']}")
                wrote = True
            else:
                current[rs["metadata"]["name"]] = rs
        if not wanted:
            return wrote
        same = len(current) == len(names) and all(
            content_key(current[n]["spec"]) == content_key(content) and
            current[n]["spec"]["pool"].get("resourceSliceCount") == len(names)
            for n, content in zip(names, wanted, strict=True))
        if same:
            return wrote
        generation = max((rs["spec"]["pool"].get("generation", 0) for rs in current.values()), default=0) + 1
        for n, content in zip(names, wanted, strict=True):
            spec = slice_spec(name, content, generation, len(names))
            if n in current:
                # Merge patch: name the keys this content drops (devices <-> sharedCounters) as null.
                spec.update({k: None for k in ("devices", "sharedCounters") if k not in content})
                self.kube.patch(f"{SLICES}/{n}", {"spec": spec})
            else:
                body = slice_object(node, spec)
                body["metadata"]["name"] = n
                try:
                    self.kube.create(SLICES, body)
                except AlreadyExists:
                    # Published by another simulator since our list (see _sync_node): ours replaces it.
                    spec.update({k: None for k in ("devices", "sharedCounters") if k not in content})
                    self.kube.patch(f"{SLICES}/{n}", {"spec": spec})
        return True

    # -- faults ---------------------------------------------------------------------------------
    def inject(self, node: str, fault: str, value: str = "true") -> None:
        """Set fault ``fault`` (a :data:`FAULTS` key) on ``node``; the next sync applies it."""
        self._annotate(node, {self._fault_key(fault): value})

    def clear(self, node: str, fault: str | None = None) -> None:
        """Remove one fault (or all of them) from ``node``."""
        keys = [self._fault_key(fault)] if fault else list(FAULTS.values())
        self._annotate(node, {k: None for k in keys})

    def _fault_key(self, fault: str) -> str:
        if fault not in FAULTS:
            raise SimulatorError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        return FAULTS[fault]

    def _annotate(self, node: str, annotations: dict[str, str | None]) -> None:
        if node not in self.silicon:
            raise SimulatorError(
                f"{node!r} is not a simulated node of this spec; known: {', '.join(self.silicon)}"
            )
        self.kube.patch(f"{NODES}/{node}", {"metadata": {"annotations": annotations}})

    # -- keep current ---------------------------------------------------------------------------
    def run(self, interval: float = 5.0, stop: threading.Event | None = None) -> None:
        """Sync every ``interval`` seconds until ``stop`` is set.

        An unreachable API server and transient answers (409, 429, 5xx: :func:`gpucluster.kube.transient`) are
        logged and retried; any other refusal (403 forbidden, 422 invalid) fails the same way every time, so
        it ends the loop with that error instead of retrying forever (see :func:`retryable`).
        """
        stop = stop or self._stop
        last: dict[str, list[str]] = {}
        while not stop.is_set():
            try:
                report = self.sync()
                if report.changed:
                    log.info(
                        "sync: %d writes (created %d, updated %d)",
                        report.writes,
                        len(report.created),
                        len(report.updated),
                    )
                for line in summarize_notes({n: v for n, v in report.notes.items() if v != last.get(n)}):
                    log.warning("%s", line)
                last = report.notes
            except ClusterError as exc:
                if not retryable(exc):
                    log.error("sync refused, not retrying: %s", exc)
                    raise
                log.warning("sync failed (will retry in %.0f s): %s", interval, exc)
            stop.wait(interval)

    def stop(self) -> None:
        """End :meth:`run` (from another thread or a signal handler)."""
        self._stop.set()

    def close(self) -> None:
        self.stop()
        self._pool.shutdown(wait=True)
        self.kube.close()


def retryable(err: ClusterError) -> bool:
    """The simulator's rule: :func:`gpucluster.kube.transient`, plus 404 (a node or slice deleted between the
    sync's list and its write: the next sync lists again and recreates it)."""
    return kube.transient(err) or (isinstance(err, ApiError) and err.status == 404)


def summarize_notes(notes: dict[str, list[str]]) -> list[str]:
    """One line per distinct note, naming the nodes it concerns (a fleet says one thing once)."""
    by_note: dict[str, list[str]] = {}
    for node, lines in sorted(notes.items()):
        for line in lines:
            by_note.setdefault(line, []).append(node)
    out = []
    for note, nodes in by_note.items():
        who = ", ".join(nodes[:4]) + (f" and {len(nodes) - 4} more" if len(nodes) > 4 else "")
        out.append(f"{note} ({len(nodes)} node{'s' if len(nodes) != 1 else ''}: {who})")
    return out


def _started(node: dict | None) -> bool:
    if node is None:
        return False
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (node.get("status") or {}).get("conditions") or [])
    return ready and not any(t.get("key") in LIFECYCLE_TAINTS for t in (node.get("spec") or {}).get("taints") or [])


def attach(kubeconfig: Path, spec: ClusterSpec, *, say: Callable[[str], None] | None = None) -> Simulator:
    """Create the spec's simulated nodes in the cluster of ``kubeconfig`` and sync them once.

    The agents' configuration (device-plugin and MIG ConfigMaps) usually is not deployed yet at this
    point, so notes are not reported as problems here: one line says the nodes wait for it. Report
    the settled state with :func:`summarize_notes` after the stacks ran.
    """
    sim = Simulator(spec, Path(kubeconfig), say=say)
    report = sim.settle()
    if report.created:
        # New nodes come up after this first settle (the not-ready taint keeps the RDMA plugin's DaemonSet
        # off them until then): settle again once they are up, so the nodes are left as their agents
        # would publish them on a running node, not as they looked a moment after registration.
        late = sim.wait_started(report.created)
        again = sim.settle()
        report.writes += again.writes
        report.notes = again.notes
        if late:
            sim.say(f"  {len(late)} new node(s) not up after {START_TIMEOUT_S:.0f} s ({', '.join(late)}): "
                    "published as they are now; the simulator's next sync follows them")
    sim.say(BANNER)
    sim.say(
        f"✓ {report.nodes} simulated nodes ({len(report.created)} created, {len(report.updated)} updated, "
        f"{report.writes} writes)"
    )
    if report.notes:
        sim.say(f"  {len(report.notes)} GPU node(s) wait for their agents' configuration (the GPU Operator's "
                "namespace and ConfigMaps, deployed by the platform stack); no GPUs are advertised until then")
    return sim
