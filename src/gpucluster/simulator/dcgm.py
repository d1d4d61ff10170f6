"""The simulated DCGM exporter: what one node's dcgm-exporter pod serves on ``/metrics``, for SIMULATED GPUs.

No GPU is read here: every value is a knob that tests (and the local world's exporter runtime,
:mod:`gpucluster.simulator.dcgm_live`) set. What is served follows dcgm-exporter 4.5.1-4.8.0 as
the GPU Operator v26.3.0 deploys it (facts in ``tests/upstream/facts/dcgm-exporter.yaml``):

- the series are the fields of the metrics CSV, read the way the exporter reads it (``field, type,
  help`` per line, ``#`` comments); ``label`` fields become a label named after the field;
- labels, in the exporter's order: ``gpu``, ``UUID``, ``pci_bus_id`` (NVML's ``00000000:bb:dd.f``),
  ``device`` (``nvidia<gpu>``), ``modelName``, ``GPU_I_PROFILE``/``GPU_I_ID`` on a MIG instance,
  ``Hostname`` (the node: the operator sets ``NODE_NAME``), the label fields, then the attributes
  sorted by name: ``container``, ``err_code``/``err_msg`` (XID series only), ``namespace``, ``pod``
  and ``pod_uid`` (empty: the pod-UID option is off) while a pod holds the GPU;
- a GPU with MIG instances is served only through its instances (``--devices f``), which keep the
  parent's ``gpu``, ``UUID`` and ``modelName``; ``DCGM_FI_DEV_GPU_UTIL`` and
  ``DCGM_FI_DEV_MEM_COPY_UTIL`` are not reported for instances. Profiling (``DCGM_FI_PROF_*``) and
  framebuffer fields are per instance; the other fields are the parent GPU's (not established on
  hardware, see docs/observability.md);
- no ``node`` label: our ServiceMonitor adds it at scrape time.

One :class:`NodeExporter` is one node's exporter (one endpoint, as one exporter pod per node);
:class:`Fleet` holds one per node::

    fleet = Fleet({"h100-1": [{"index": 0, "uuid": "GPU-…", "model": "NVIDIA H100 80GB HBM3",
                               "memory_mib": 81559}]}).start()
    fleet.set("h100-1", 0, gr_engine_active=0.35, xid=79)
    samples = scrape(fleet.urls["h100-1"])
    fleet.stop()
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpucluster import catalog, versions
from gpucluster.promtext import Sample
from gpucluster.render.monitoring import dcgm_csv
from gpucluster.simulator.endpoint import TextEndpoint
from gpucluster.simulator.silicon import generic_pci_bus_id, gpu_uuid, pci_bus_id

DRIVER_VERSION = versions.NVIDIA_DRIVER
PROMETHEUS_TYPES = ("gauge", "counter", "histogram", "summary", "label")

#: Knob name → DCGM field it drives. ``fb_used`` is MiB; free memory is derived from the total.
KNOBS: dict[str, str] = {
    "utilization": "DCGM_FI_DEV_GPU_UTIL",
    "memory_copy": "DCGM_FI_DEV_MEM_COPY_UTIL",
    "fb_used": "DCGM_FI_DEV_FB_USED",
    "temperature": "DCGM_FI_DEV_GPU_TEMP",
    "power": "DCGM_FI_DEV_POWER_USAGE",
    "xid": "DCGM_FI_DEV_XID_ERRORS",
    "ecc_sbe": "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "ecc_dbe": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "retired_sbe": "DCGM_FI_DEV_RETIRED_SBE",
    "retired_dbe": "DCGM_FI_DEV_RETIRED_DBE",
    "row_remap_failure": "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "gr_engine_active": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "tensor_active": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "dram_active": "DCGM_FI_PROF_DRAM_ACTIVE",
}
FIELD_KNOB = {f: k for k, f in KNOBS.items()}
#: Knobs that are not series: pod attribution (empty string = no pod holds the GPU).
ATTRIBUTION = ("namespace", "pod", "container")
#: Fields DCGM reports as doubles (printed with %f by the exporter); the rest are integers.
DOUBLE_FIELDS = ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_PROF_")
#: Not reported for MIG instances (NVIDIA/dcgm-exporter issues 50, 430).
NOT_PER_INSTANCE = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL")
#: Reported per MIG instance; every other field of an instance reads its parent GPU.
PER_INSTANCE_PREFIXES = ("DCGM_FI_PROF_", "DCGM_FI_DEV_FB_")
XID_FIELD = "DCGM_FI_DEV_XID_ERRORS"
#: err_msg of a few XIDs, as the exporter words them (its table follows NVIDIA's XID catalog).
XID_MESSAGES = {0: "No Error", 13: "Graphics Engine Exception", 31: "GPU memory page fault",
                43: "GPU stopped processing", 48: "Double Bit ECC Error",
                63: "ECC page retirement or row remapping recording event", 74: "NVLINK Error",
                79: "GPU has fallen off the bus", 94: "Contained ECC error", 95: "Uncontained ECC error"}
UNKNOWN_XID = "Unknown Error"
_IDLE: dict[str, float] = {"temperature": 34.0, "power": 61.0}


@dataclass(frozen=True)
class Counter:
    """One record of the metrics CSV."""

    field: str
    kind: str
    help: str


def parse_csv(text: str) -> list[Counter]:
    """The counters of a metrics CSV, as the exporter reads it; ValueError naming the bad line."""
    out = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3:
            raise ValueError(f"metrics CSV line {n}: {len(parts)} fields, want 3 (field, type, help): {raw!r}")
        if parts[1] not in PROMETHEUS_TYPES:
            raise ValueError(f"metrics CSV line {n}: unknown type {parts[1]!r} (known: {', '.join(PROMETHEUS_TYPES)})")
        out.append(Counter(*parts))
    return out


def nvml_bus_id(sysfs: str) -> str:
    """``0000:18:00.0`` → ``00000000:18:00.0`` (NVML widens the PCI domain to 8 hex digits)."""
    domain, rest = sysfs.split(":", 1)
    return f"{int(domain, 16):08x}:{rest}"


@dataclass
class Instance:
    """One MIG GPU instance."""

    gi: int
    profile: str
    memory_mib: int
    values: dict[str, float] = field(default_factory=dict)
    pod: dict[str, str] = field(default_factory=dict)


@dataclass
class Gpu:
    """One simulated GPU and what its knobs hold."""

    index: int
    uuid: str
    model: str
    memory_mib: int
    pci_bus_id: str
    instances: list[Instance] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)
    pod: dict[str, str] = field(default_factory=dict)
    #: DRA holders of the GPU or of a MIG device on it (``KUBERNETES_ENABLE_DRA``): one series copy each.
    dra: list[dict[str, str]] = field(default_factory=list)

    def instance(self, gi: int) -> Instance:
        for inst in self.instances:
            if inst.gi == gi:
                return inst
        raise ValueError(f"GPU {self.index} has no MIG instance {gi}; it has {[i.gi for i in self.instances]}")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format(field_name: str, value: float) -> str:
    if field_name.startswith(DOUBLE_FIELDS):
        return f"{value:f}"
    return str(round(value))


def _gpu_of(d: Mapping[str, Any], node: str) -> Gpu:
    index = int(d.get("index", d.get("gpu", 0)))
    instances = [Instance(int(i["gi"]), str(i["profile"]), int(i.get("memory_mib", 0)))
                 for i in d.get("instances") or []]
    return Gpu(index=index, uuid=str(d.get("uuid", f"GPU-sim-{node}-{index}")),
               model=str(d.get("model", "NVIDIA Simulated GPU")), memory_mib=int(d.get("memory_mib", 81920)),
               pci_bus_id=nvml_bus_id(str(d.get("pci_bus_id", generic_pci_bus_id(index)))), instances=instances)


class NodeExporter:
    """One node's exporter: its GPUs, their knobs, and (once started) an HTTP endpoint on loopback."""

    def __init__(self, node: str, gpus: Sequence[Mapping[str, Any]], *, csv: str | None = None,
                 driver_version: str = DRIVER_VERSION, host: str = "127.0.0.1", port: int = 0) -> None:
        self.node = node
        self.driver_version = driver_version
        self.counters = parse_csv(dcgm_csv() if csv is None else csv)
        self._lock = threading.Lock()
        self._gpus: dict[int, Gpu] = {}
        self.replace(gpus)
        self._endpoint = TextEndpoint(self._produce, name=f"sim-dcgm-{node}", host=host, port=port)
        #: When set, the endpoint answers 503 with this text (the exporter pod cannot start).
        self.unavailable: str | None = None

    # --- devices and knobs ---------------------------------------------------------------------
    def replace(self, gpus: Sequence[Mapping[str, Any]]) -> None:
        """Set the node's devices (e.g. after a MIG reconfiguration); knobs of GPUs that stay are kept."""
        with self._lock:
            new = {g.index: g for g in (_gpu_of(d, self.node) for d in gpus)}
            for index, g in new.items():
                old = self._gpus.get(index)
                if old is not None:
                    g.values = old.values
            self._gpus = new

    def set_counters(self, csv: str) -> None:
        """Use another metrics CSV (the exporter reads it at start; the runtime restarts it then)."""
        counters = parse_csv(csv)
        with self._lock:
            self.counters = counters

    def set(self, gpu: int, instance: int | None = None, **values: float | str) -> None:
        """Set knobs of one GPU (or of one of its MIG instances): any of :data:`KNOBS` or the attribution."""
        unknown = sorted(set(values) - set(KNOBS) - set(ATTRIBUTION))
        if unknown:
            raise ValueError(f"unknown metric knob(s) {unknown}; known: {sorted(KNOBS) + list(ATTRIBUTION)}")
        with self._lock:
            g = self._gpu(gpu)
            target: Gpu | Instance = g.instance(instance) if instance is not None else g
            for key, value in values.items():
                if key in ATTRIBUTION:
                    target.pod[key] = str(value)
                else:
                    target.values[key] = float(value)

    def attribute(self, gpu: int, instance: int | None, holder: Mapping[str, str] | None) -> None:
        """Who holds the GPU or instance (``namespace``, ``pod``, ``container``), or nobody (None)."""
        with self._lock:
            g = self._gpu(gpu)
            target: Gpu | Instance = g.instance(instance) if instance is not None else g
            target.pod = {k: str((holder or {}).get(k, "")) for k in ATTRIBUTION}

    def attribute_dra(self, holders: Mapping[str, Sequence[Mapping[str, str]]]) -> None:
        """DRA holders by GPU UUID (a MIG device's under its parent's), replacing the previous ones.

        As dcgm-exporter 4.5.1-4.8.0 with ``KUBERNETES_ENABLE_DRA`` (``internal/pkg/transformation/
        kubernetes.go:331-395``): every series of a GPU whose UUID some container's claim holds is served
        once per holder, with ``pod``/``namespace``/``container`` and the ``dra_*`` labels of that claim's
        device. The lookup key of a MIG instance's series is ``<gpu>-<instance id>``, never a UUID
        (``internal/pkg/collector/types.go:80-83``), while a DRA MIG device is keyed by its parent's UUID
        (``dra.go`` GetDeviceInfo): instance series never match, so DRA MIG devices are not attributed
        (fact ``dra-mig-key-mismatch``).
        """
        with self._lock:
            for g in self._gpus.values():
                g.dra = [dict(h) for h in holders.get(g.uuid, [])]

    def load_knobs(self, knobs: Mapping[str, Mapping[str, float]]) -> None:
        """Replace every knob of the node: ``{"0": {...}, "0/3": {...}}`` (GPU, or GPU/instance id).

        What is not named goes back to its idle value. Raises ValueError on an unknown GPU,
        instance or knob (nothing is changed then).
        """
        parsed: dict[tuple[int, int | None], dict[str, float]] = {}
        for key, values in knobs.items():
            gpu_text, _, gi_text = str(key).partition("/")
            try:
                target = (int(gpu_text), int(gi_text) if gi_text else None)
            except ValueError:
                raise ValueError(f"knob key {key!r} is not GPU or GPU/instance (e.g. 0 or 0/3)") from None
            unknown = sorted(set(values) - set(KNOBS))
            if unknown:
                raise ValueError(f"unknown metric knob(s) {unknown} for {key!r}; known: {sorted(KNOBS)}")
            parsed[target] = {k: float(v) for k, v in values.items()}
        with self._lock:
            for gpu_index, gi in parsed:
                g = self._gpu(gpu_index)
                if gi is not None:
                    g.instance(gi)
            for g in self._gpus.values():
                g.values = dict(parsed.get((g.index, None), {}))
                for inst in g.instances:
                    inst.values = dict(parsed.get((g.index, inst.gi), {}))

    def inject_xid(self, gpu: int, code: int) -> None:
        """Make the GPU report XID ``code`` as its last error, as DCGM does after the driver logs it."""
        self.set(gpu, xid=code)

    def inject_ecc(self, gpu: int, double_bit: int = 1, single_bit: int = 0) -> None:
        """Add ECC errors to the GPU's volatile counters (they only ever grow)."""
        with self._lock:
            g = self._gpu(gpu)
            g.values["ecc_dbe"] = g.values.get("ecc_dbe", 0.0) + double_bit
            g.values["ecc_sbe"] = g.values.get("ecc_sbe", 0.0) + single_bit

    def _gpu(self, gpu: int) -> Gpu:
        try:
            return self._gpus[gpu]
        except KeyError:
            raise ValueError(f"no simulated GPU {gpu} on node {self.node!r}; it has {sorted(self._gpus)}") from None

    # --- exposition ----------------------------------------------------------------------------
    def exposition(self) -> str:
        """The text exposition (format 0.0.4) this node's exporter serves."""
        with self._lock:
            counters = list(self.counters)
            label_fields = [c.field for c in counters if c.kind == "label"]
            out: list[str] = []
            for c in counters:
                if c.kind == "label":
                    continue
                rows = []
                for g in sorted(self._gpus.values(), key=lambda g: g.index):
                    entities: list[Instance | None] = [*g.instances] or [None]
                    for inst in entities:
                        rows += self._rows(c.field, g, inst, label_fields)
                if rows:
                    out += [f"# HELP {c.field} {c.help}", f"# TYPE {c.field} {c.kind}", *rows]
        return "\n".join(out) + "\n"

    def _rows(self, name: str, g: Gpu, inst: Instance | None, label_fields: list[str]) -> list[str]:
        if inst is not None and name in NOT_PER_INSTANCE:
            return []  # unsupported for GPU instances: the exporter skips blank values
        per_instance = inst is not None and name.startswith(PER_INSTANCE_PREFIXES)
        value = self._value(name, g, inst if per_instance else None)
        labels = [("gpu", str(g.index)), ("UUID", g.uuid), ("pci_bus_id", g.pci_bus_id),
                  ("device", f"nvidia{g.index}"), ("modelName", g.model)]
        if inst is not None:
            labels += [("GPU_I_PROFILE", inst.profile), ("GPU_I_ID", str(inst.gi))]
        labels.append(("Hostname", self.node))
        for f in label_fields:
            if f == "DCGM_FI_DRIVER_VERSION":
                labels.append((f, self.driver_version))
        attrs: dict[str, str] = {}
        if name == XID_FIELD:
            code = round(value)
            attrs["err_code"] = str(code)
            attrs["err_msg"] = XID_MESSAGES.get(code, UNKNOWN_XID)
        holder = (inst or g).pod
        if holder.get("pod"):
            attrs |= {k: holder.get(k, "") for k in ATTRIBUTION} | {"pod_uid": ""}
        # the device plugin's attribution, then DRA's copies: whole-GPU series only (see attribute_dra)
        copies = [attrs | h for h in g.dra] if g.dra and inst is None else [attrs]
        text = _format(name, value)
        out = []
        for a in copies:
            body = ",".join(f'{k}="{_escape(v)}"' for k, v in [*labels, *sorted(a.items())])
            out.append(f"{name}{{{body}}} {text}")
        return out

    @staticmethod
    def _value(name: str, g: Gpu, inst: Instance | None) -> float:
        values = inst.values if inst is not None else g.values
        memory = inst.memory_mib if inst is not None else g.memory_mib
        if name == "DCGM_FI_DEV_FB_FREE":
            return max(memory - values.get("fb_used", 0.0), 0.0)
        knob = FIELD_KNOB.get(name)
        if knob is None:
            return 0.0  # a field the simulator has no knob for reads 0
        return values.get(knob, _IDLE.get(knob, 0.0))

    # --- lifecycle -----------------------------------------------------------------------------
    def _produce(self) -> tuple[int, str]:
        if self.unavailable:
            return 503, self.unavailable
        return 200, self.exposition()

    @property
    def url(self) -> str:
        return self._endpoint.url

    @property
    def port(self) -> int:
        return self._endpoint.port

    def start(self) -> NodeExporter:
        """Listen (port 0 picks a free port) and serve from a daemon thread; returns self."""
        self._endpoint.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; safe to call twice."""
        self._endpoint.stop()


class Fleet:
    """One :class:`NodeExporter` per node, started and stopped together."""

    def __init__(self, devices: Mapping[str, Sequence[Mapping[str, Any]]], *, csv: str | None = None,
                 ports: Mapping[str, int] | None = None, driver_version: str = DRIVER_VERSION) -> None:
        self.nodes = {node: NodeExporter(node, gpus, csv=csv, driver_version=driver_version,
                                         port=(ports or {}).get(node, 0))
                      for node, gpus in devices.items()}

    def __getitem__(self, node: str) -> NodeExporter:
        try:
            return self.nodes[node]
        except KeyError:
            raise ValueError(f"no simulated exporter on node {node!r}; nodes: {sorted(self.nodes)}") from None

    def set(self, node: str, gpu: int, instance: int | None = None, **values: float | str) -> None:
        self[node].set(gpu, instance, **values)

    def inject_xid(self, node: str, gpu: int, code: int) -> None:
        self[node].inject_xid(gpu, code)

    def inject_ecc(self, node: str, gpu: int, double_bit: int = 1, single_bit: int = 0) -> None:
        self[node].inject_ecc(gpu, double_bit, single_bit)

    @property
    def urls(self) -> dict[str, str]:
        """Node → its exporter's URL."""
        return {node: e.url for node, e in self.nodes.items()}

    def start(self) -> Fleet:
        try:
            for e in self.nodes.values():
                e.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for e in self.nodes.values():
            e.stop()

    def __enter__(self) -> Fleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class Fault:
    """A GPU health problem seen in one scrape, naming the node and GPU."""

    node: str
    gpu: str
    uuid: str
    reason: str

    def __str__(self) -> str:
        return f"{self.node} GPU {self.gpu} ({self.uuid}): {self.reason}"


def faults(samples: Sequence[Sample]) -> list[Fault]:
    """Health problems in a scrape: a non-zero XID, any double-bit ECC error, a failed row remap.

    These are the conditions of the critical alerts, read from one scrape so that a check can run
    without Prometheus (verification reads the simulator or a node's exporter directly). A fault
    seen on several MIG instances of one GPU is reported once.
    """
    checks = {XID_FIELD: "XID {v:g}", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "{v:g} double-bit ECC errors",
              "DCGM_FI_DEV_ROW_REMAP_FAILURE": "row remapping failed"}
    out = {Fault(s.labels.get("node", s.labels.get("Hostname", "?")), s.labels.get("gpu", "?"),
                 s.labels.get("UUID", "?"), checks[s.name].format(v=s.value))
           for s in samples if s.name in checks and s.value != 0}
    return sorted(out, key=lambda f: (f.node, f.gpu, f.reason))


def mig_instances(model_key: str, layout: Mapping[str, int] | None) -> list[dict[str, Any]]:
    """The GPU instances one GPU holds under a MIG layout (profile → count), numbered in profile order."""
    if not layout:
        return []
    model = catalog.get(model_key)
    if model.mig is None:
        return []
    out, gi = [], 0
    for profile, n in sorted(layout.items()):
        for _ in range(n):
            out.append({"gi": gi, "profile": profile, "memory_mib": model.mig.profiles[profile].memory_mib})
            gi += 1
    return out


def devices_for(spec: Any, layouts: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Node → simulated GPU list for every GPU host of a spec; ``layouts`` gives MIG layouts per node."""
    from gpucluster.simulator.silicon import silicon_of

    out: dict[str, list[dict[str, Any]]] = {}
    for node, si in silicon_of(spec).items():
        if si.model is None or not si.count:
            continue
        instances = mig_instances(si.model.key, (layouts or {}).get(node))
        out[node] = [{"index": i, "uuid": gpu_uuid(spec.metadata.name, node, i), "model": si.model.product_name,
                      "memory_mib": si.model.memory_mib, "pci_bus_id": pci_bus_id(si.platform, si.count, i),
                      "instances": instances}
                     for i in range(si.count)]
    return out
