"""The simulated DCGM exporter: a DCGM-exporter-style metrics endpoint for *simulated* GPUs, on 127.0.0.1.

No GPU is read here: every value is a knob that tests (and the GPU simulator) set. The series names
and help texts are the ones our DCGM CSV configures (:data:`monitoring.DCGM_FIELDS`), and the labels
are those a scraped exporter's series carry after our ServiceMonitor's relabeling: ``gpu``, ``UUID``,
``device``, ``modelName``, ``Hostname`` and ``node`` (both the node name), ``DCGM_FI_DRIVER_VERSION``,
plus ``namespace``/``pod``/``container`` while a pod holds the GPU. One server serves every simulated
node (``/metrics``); ``/metrics?node=NAME`` serves one node, as that node's exporter would.

Devices are plain data (node → list of dicts) so the simulator can pass what it already has::

    server = MetricsServer({"h100-1": [{"index": 0, "uuid": "GPU-…", "model": "NVIDIA H100 80GB HBM3",
                                        "memory_mib": 81920}]}).start()
    server.set("h100-1", 0, utilization=35, xid=79)
    samples = scrape(server.url)
    server.stop()
"""

from __future__ import annotations

import threading
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gpucluster import versions
from gpucluster.promtext import Sample
from gpucluster.render.monitoring import DCGM_FIELDS

DRIVER_VERSION = versions.NVIDIA_DRIVER

#: Knob name → DCGM series it drives. ``fb_used`` is MiB; free memory is derived from the total.
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
}
#: Knobs that are not series: pod attribution (empty string = no pod holds the GPU).
ATTRIBUTION = ("namespace", "pod", "container")
_IDLE: dict[str, float] = {"temperature": 34.0, "power": 61.0}


@dataclass
class _Gpu:
    node: str
    index: int
    uuid: str
    model: str
    memory_mib: int
    values: dict[str, float] = field(default_factory=dict)
    pod: dict[str, str] = field(default_factory=dict)

    def labels(self) -> dict[str, str]:
        base = {"gpu": str(self.index), "UUID": self.uuid, "device": f"nvidia{self.index}",
                "modelName": self.model, "Hostname": self.node, "node": self.node,
                "DCGM_FI_DRIVER_VERSION": DRIVER_VERSION}
        return base | {k: v for k, v in self.pod.items() if v}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class MetricsServer:
    """Serves Prometheus text exposition for simulated GPUs; values change through :meth:`set`."""

    def __init__(self, devices: Mapping[str, Sequence[Mapping[str, Any]]], host: str = "127.0.0.1",
                 port: int = 0) -> None:
        if not host.startswith("127."):
            raise ValueError(f"the simulated metrics server only listens on loopback, not {host}")
        self._lock = threading.Lock()
        self._gpus: dict[tuple[str, int], _Gpu] = {}
        for node, gpus in devices.items():
            for d in gpus:
                index = int(d.get("index", d.get("gpu", 0)))
                self._gpus[(node, index)] = _Gpu(
                    node=node, index=index, uuid=str(d.get("uuid", f"GPU-sim-{node}-{index}")),
                    model=str(d.get("model", "NVIDIA Simulated GPU")),
                    memory_mib=int(d.get("memory_mib", 81920)))
        self._host, self._port = host, port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- knobs ---------------------------------------------------------------------------------
    def set(self, node: str, gpu: int, **values: float | str) -> None:
        """Set knobs of one GPU: any of :data:`KNOBS` (numbers) or ``namespace``/``pod``/``container``."""
        unknown = sorted(set(values) - set(KNOBS) - set(ATTRIBUTION))
        if unknown:
            raise ValueError(f"unknown metric knob(s) {unknown}; known: {sorted(KNOBS) + list(ATTRIBUTION)}")
        with self._lock:
            g = self._gpu(node, gpu)
            for key, value in values.items():
                if key in ATTRIBUTION:
                    g.pod[key] = str(value)
                else:
                    g.values[key] = float(value)

    def inject_xid(self, node: str, gpu: int, code: int) -> None:
        """Make the GPU report XID ``code`` as its last error, as DCGM does after the driver logs it."""
        self.set(node, gpu, xid=code)

    def inject_ecc(self, node: str, gpu: int, double_bit: int = 1, single_bit: int = 0) -> None:
        """Add ECC errors to the GPU's volatile counters (they only ever grow)."""
        with self._lock:
            g = self._gpu(node, gpu)
            g.values["ecc_dbe"] = g.values.get("ecc_dbe", 0.0) + double_bit
            g.values["ecc_sbe"] = g.values.get("ecc_sbe", 0.0) + single_bit

    def _gpu(self, node: str, gpu: int) -> _Gpu:
        try:
            return self._gpus[(node, gpu)]
        except KeyError:
            known = sorted({n for n, _ in self._gpus})
            raise ValueError(f"no simulated GPU {gpu} on node {node!r}; nodes: {known}") from None

    # --- exposition ----------------------------------------------------------------------------
    def exposition(self, node: str | None = None) -> str:
        """The text exposition (format 0.0.4) for all nodes, or one node."""
        helps = {name: (kind, text) for name, kind, text in DCGM_FIELDS}
        with self._lock:
            gpus = [g for g in self._gpus.values() if node is None or g.node == node]
            rows: dict[str, list[str]] = {}
            for g in sorted(gpus, key=lambda g: (g.node, g.index)):
                labels = ",".join(f'{k}="{_escape(v)}"' for k, v in g.labels().items())
                for knob, series in KNOBS.items():
                    rows.setdefault(series, []).append(f"{series}{{{labels}}} {self._value(g, knob):g}")
                free = max(g.memory_mib - g.values.get("fb_used", 0.0), 0.0)
                rows.setdefault("DCGM_FI_DEV_FB_FREE", []).append(f"DCGM_FI_DEV_FB_FREE{{{labels}}} {free:g}")
        out = []
        for name, (kind, text) in helps.items():
            if name in rows:
                out += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", *rows[name]]
        return "\n".join(out) + "\n"

    @staticmethod
    def _value(g: _Gpu, knob: str) -> float:
        return g.values.get(knob, _IDLE.get(knob, 0.0))

    # --- lifecycle -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("metrics server is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/metrics"

    def start(self) -> MetricsServer:
        """Listen (port 0 picks a free port) and serve from a daemon thread; returns self."""
        server_ref = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parsed = urllib.parse.urlparse(self.path)
                if parsed.path != "/metrics":
                    self.send_error(404, "only /metrics is served")
                    return
                node = urllib.parse.parse_qs(parsed.query).get("node", [None])[0]
                body = server_ref.exposition(node).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

        self._server = ThreadingHTTPServer((self._host, self._port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="sim-dcgm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; safe to call twice."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> MetricsServer:
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
    without Prometheus (verification reads the simulator or a node's exporter directly).
    """
    checks = {"DCGM_FI_DEV_XID_ERRORS": "XID {v:g}", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "{v:g} double-bit ECC errors",
              "DCGM_FI_DEV_ROW_REMAP_FAILURE": "row remapping failed"}
    out = [Fault(s.labels.get("node", s.labels.get("Hostname", "?")), s.labels.get("gpu", "?"),
                 s.labels.get("UUID", "?"), checks[s.name].format(v=s.value))
           for s in samples if s.name in checks and s.value != 0]
    return sorted(out, key=lambda f: (f.node, f.gpu, f.reason))


def devices_for(spec: Any) -> dict[str, list[dict[str, Any]]]:
    """Node → simulated GPU list for every GPU host of a spec (UUIDs as the DRA simulator makes them)."""
    from gpucluster import catalog, devices

    out: dict[str, list[dict[str, Any]]] = {}
    for pool in spec.gpu_pools:
        model = catalog.get(pool.gpu.model)
        for host in pool.hosts:
            out[host] = [{"index": i, "uuid": devices.device_uuid(spec.metadata.name, host, i),
                          "model": model.product_name, "memory_mib": model.memory_mib}
                         for i in range(pool.gpu.count)]
    return out
