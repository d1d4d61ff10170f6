"""GPU health per GPU node (``gpu-health``), read from what a cluster gpucluster builds actually runs.

One row per GPU node. It names every source it read, fails on any problem one of them shows (naming
the GPU and the source), and is not measured (never passed) where no source covers the node:

- **the DCGM exporter's metrics**: the GPU Operator's ``nvidia-dcgm-exporter`` pod on the node, scraped
  through the API server's pod proxy (verify's identity needs ``get pods/proxy`` in the operator's
  namespace); endpoints given with ``--metrics-url`` (an exporter, or a Prometheus ``/federate``
  endpoint; series are matched to nodes by the ``node`` label our ServiceMonitor sets, ``Hostname`` as
  a fallback); in the local world, the SIMULATED exporter (:mod:`gpucluster.simulator.dcgm_live`),
  read in-process from the same cluster state its background process serves. A GPU is unhealthy when
  its last XID is not 0 and not an application error (:data:`gpucluster.upstream.APPLICATION_XIDS`,
  the XIDs NVIDIA's device plugin ignores), it has double-bit volatile ECC errors, row remapping failed,
  or it retired :data:`PAGE_RETIREMENT_LIMIT` pages; a node fails when fewer GPUs report than its pool
  has, or the exporter does not report XIDs, double-bit ECC errors and one of row remapping or page
  retirement (the fields gpucluster's metrics CSV enables);
- **the GPU Operator's validation**: the ``nvidia-operator-validator`` pod on the node is Ready exactly
  when its driver, toolkit, CUDA and plugin validations all passed; otherwise the row names the
  validation it stopped at;
- **the DRA driver's device taints**: a device its ResourceSlice publishes tainted under
  ``gpu.nvidia.com/`` (the driver's ``NVMLDeviceHealthCheck`` gate) with effect ``NoSchedule`` or
  ``NoExecute`` fails the row (``None`` marks an application XID, which the driver leaves in service, as
  the DCGM rows pass those XIDs); the taints count as a source only where the rendered driver values turn
  that gate on (upstream it is alpha and off by default, and refused next to DynamicMIG: with it off an
  unhealthy GPU stays published untainted, so their absence proves nothing);
- **node conditions**, only where a node-problem-detector DaemonSet runs: a condition whose type names a
  GPU set to ``True`` is a problem.

``gpu-metrics`` is the other row of this module: an endpoint given with ``--metrics-url`` that cannot
be scraped.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

from gpucluster import kube
from gpucluster.errors import ApiError, GpuclusterError
from gpucluster.expected import HostState
from gpucluster.promtext import Sample, parse
from gpucluster.render import dra_driver
from gpucluster.spec.model import ClusterSpec
from gpucluster.upstream import (
    APPLICATION_XIDS,
    DCGM_EXPORTER_POD_LABELS,
    DCGM_EXPORTER_POD_PORT,
    DRA_DRIVER,
    DRA_HEALTH_GATE,
    DRA_HEALTH_TAINT_PREFIX,
    OPERATOR_VALIDATIONS,
    OPERATOR_VALIDATOR_LABELS,
)
from gpucluster.verify.model import Result, fail, ok, skip
from gpucluster.verify.snapshot import Obj, Snapshot

XID = "DCGM_FI_DEV_XID_ERRORS"
ECC_DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
RETIRED_SBE = "DCGM_FI_DEV_RETIRED_SBE"
RETIRED_DBE = "DCGM_FI_DEV_RETIRED_DBE"
#: Pages a GPU with page retirement (before Ampere) can retire in its life: at the limit it retires no more
#: (NVIDIA, "A100 GPU memory error management", row remapping: "a maximum of 64 retirements").
PAGE_RETIREMENT_LIMIT = 64
#: Where the simulated exporter's rows say their metrics came from.
SIMULATED = "the local world's SIMULATED DCGM exporter"
#: Scrapes in flight at once (one small GET through the API server each).
SCRAPE_THREADS = 8
#: DaemonSet names and ``app``/``app.kubernetes.io/name`` labels of node-problem-detector (the upstream
#: manifest and chart use ``node-problem-detector``).
NPD_NAME = "node-problem-detector"


# -- reading the sources (the snapshot keeps what was read: recorded snapshots replay it) ------------

def _selected(obj: Obj, labels: dict[str, str]) -> bool:
    have = (obj.get("metadata") or {}).get("labels") or {}
    return all(have.get(k) == v for k, v in labels.items())


def scrape_exporter_pods(api: kube.Kube, pods: Sequence[Obj]) -> list[Obj]:
    """``/metrics`` of every running DCGM exporter pod, through the API server's pod proxy (one GET each)."""
    targets = [p for p in pods if _selected(p, DCGM_EXPORTER_POD_LABELS) and (p.get("spec") or {}).get("nodeName")
               and (p.get("status") or {}).get("phase") == "Running"]

    def one(pod: Obj) -> Obj:
        meta = pod["metadata"]
        source = f"DCGM exporter pod {meta['namespace']}/{meta['name']}"
        out: Obj = {"source": source, "node": pod["spec"]["nodeName"], "text": "", "error": "", "status": 0}
        try:
            out["text"] = api.text(kube.pod_proxy(meta["namespace"], meta["name"], DCGM_EXPORTER_POD_PORT, "metrics"))
        except ApiError as err:
            out["error"], out["status"] = str(err), err.status
        except GpuclusterError as err:
            out["error"] = str(err)
        return out

    with ThreadPoolExecutor(SCRAPE_THREADS) as pool:
        return list(pool.map(one, targets))


def scrape_urls(urls: Iterable[str]) -> list[Obj]:
    """Each endpoint given with ``--metrics-url`` (series are matched to nodes by their labels)."""
    out = []
    for url in urls:
        entry: Obj = {"source": url, "node": "", "text": "", "error": "", "url": True}
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                entry["text"] = resp.read().decode(errors="replace")
        except (OSError, ValueError) as err:
            entry["error"] = str(err)
        out.append(entry)
    return out


def read_simulated(spec: ClusterSpec, kubeconfig: str | Path | None) -> list[Obj]:
    """What the local world's simulated exporter serves on each GPU node, from the cluster as it is now.

    The same code as the world's background exporter process (:class:`LiveExporters`), run once in this
    process: the metrics CSV from the ConfigMap the operator would mount (without it the exporter "cannot
    start"), the GPUs and MIG instances the simulator applied, the knobs from the node annotations.
    """
    from gpucluster.simulator.dcgm_live import LiveExporters

    if kubeconfig is None:
        return []
    live = LiveExporters(spec, Path(kubeconfig))
    try:
        live.sync()
        out = []
        for node, exporter in sorted(live.fleet.nodes.items()):
            down = exporter.unavailable
            out.append({"source": SIMULATED, "node": node, "text": "" if down else exporter.exposition(),
                        "error": down or "", "status": 503 if down else 0})
        return out
    finally:
        live.close()


# -- judging them ------------------------------------------------------------------------------------

#: The series health is judged by (an exporter serves some hundred others, which are not parsed).
HEALTH_FIELDS = (XID, ECC_DBE, ROW_REMAP_FAILURE, RETIRED_SBE, RETIRED_DBE)


@lru_cache(maxsize=256)
def _health_samples(text: str) -> tuple[Sample, ...]:
    """The samples of :data:`HEALTH_FIELDS` in an exposition (ValueError when those lines do not parse)."""
    lines = [line for line in text.splitlines() if line.startswith(HEALTH_FIELDS)]
    return tuple(parse("\n".join(lines) + "\n")) if lines else ()


def _samples(entry: Obj) -> tuple[list[Sample], str]:
    if entry.get("error"):
        return [], str(entry["error"])
    try:
        return list(_health_samples(str(entry.get("text", "")))), ""
    except ValueError as err:
        return [], str(err)


def _gpu_problems(samples: list[Sample]) -> list[str]:
    """Per-GPU problems in one node's DCGM samples (MIG instances of one GPU are reported once)."""
    out: dict[tuple[str, str], str] = {}
    for s in samples:
        gpu = f"GPU {s.labels.get('gpu', '?')}"
        if s.name == XID and s.value and int(s.value) not in APPLICATION_XIDS:
            msg = s.labels.get("err_msg")
            out[(gpu, s.name)] = f"{gpu}: XID {int(s.value)}" + (f" ({msg})" if msg else "")
        elif s.name == ECC_DBE and s.value > 0:
            out[(gpu, s.name)] = f"{gpu}: {int(s.value)} double-bit ECC errors"
        elif s.name == ROW_REMAP_FAILURE and s.value > 0:
            out[(gpu, s.name)] = f"{gpu}: row remapping failed"
    # a MIG GPU repeats its parent's counters on every instance: one value per GPU and field
    retired: dict[tuple[str, str], float] = {}
    for s in samples:
        if s.name in (RETIRED_SBE, RETIRED_DBE):
            key = (f"GPU {s.labels.get('gpu', '?')}", s.name)
            retired[key] = max(retired.get(key, 0.0), s.value)
    for gpu in sorted({g for g, _ in retired}):
        n = retired.get((gpu, RETIRED_SBE), 0.0) + retired.get((gpu, RETIRED_DBE), 0.0)
        if n >= PAGE_RETIREMENT_LIMIT:
            out[(gpu, "retired")] = f"{gpu}: {int(n)} retired pages (the limit is {PAGE_RETIREMENT_LIMIT})"
    return [out[k] for k in sorted(out)]


def _dcgm(name: str, state: HostState, entries: list[Obj]) -> tuple[list[str], list[str], str]:
    """(sources, problems, why not measured) of the DCGM exporter for one node."""
    sources: list[str] = []
    problems: list[str] = []
    unreadable: list[str] = []
    samples: list[Sample] = []
    for entry in entries:
        got, error = _samples(entry)
        if error and entry.get("status") in (401, 403):
            unreadable.append(f"{entry['source']} could not be read ({error}; verify's identity needs get on "
                              "pods/proxy in the GPU Operator's namespace)")
            continue
        if entry.get("url"):
            # an endpoint of many nodes is a source for this one where it has series of it (its own row,
            # gpu-metrics, says when it cannot be scraped at all)
            got = [s for s in got if (s.labels.get("node") or s.labels.get("Hostname")) == name]
            if not got:
                continue
        sources.append(str(entry["source"]))
        if error:
            problems.append(f"{entry['source']} does not answer: {error[:200]}")
            continue
        samples += got
    if not sources:
        return [], [], "; ".join(unreadable)
    if problems:
        return sources, problems, ""
    fields = {s.name for s in samples}
    gpus = {s.labels.get("gpu") for s in samples if s.labels.get("gpu") is not None}
    if len(gpus) < state.gpu_count:
        problems.append(f"{len(gpus)} of {state.gpu_count} GPUs report DCGM metrics (GPUs fell off the bus, or "
                        "the exporter does not see them)")
    missing = [f for f in (XID, ECC_DBE) if f not in fields]
    if not {ROW_REMAP_FAILURE, RETIRED_DBE} & fields:
        missing.append(f"{ROW_REMAP_FAILURE} or {RETIRED_DBE}")
    if gpus and missing:
        problems.append(f"the exporter reports no {', '.join(missing)} (gpucluster's metrics CSV enables them: is "
                        "another CSV mounted?)")
    problems += _gpu_problems(samples)
    return sources, problems, ""


#: Why a validator pod on a DRA-only node of a mixed cluster never gets Ready, and what is measured instead.
PLUGIN_VALIDATION_BLIND = (
    "driver, toolkit and CUDA validated; its plugin-validation waits for nvidia.com/gpu, which a DRA-only node "
    "never advertises while the device plugin is on for other pools (NVIDIA/gpu-operator#2550, open: "
    "v26.3.0 drops that step only with the device plugin off cluster-wide, controllers/object_controls.go:2348)")


def dra_only_hosts(spec: ClusterSpec) -> set[str]:
    """GPU hosts served by the DRA driver alone in a cluster whose other pools keep the device plugin: the
    operator's validator there stops at plugin-validation (:data:`PLUGIN_VALIDATION_BLIND`)."""
    if not spec.gpu_operator.enabled or not any(p.uses_device_plugin for p in spec.gpu_pools):
        return set()
    return {h for p in spec.gpu_pools if not p.uses_device_plugin for h in p.hosts}


def validator_pod(name: str, pods: Sequence[Obj]) -> Obj | None:
    """The GPU Operator's validator pod on node ``name`` (not one being deleted)."""
    return next((p for p in pods if _selected(p, OPERATOR_VALIDATOR_LABELS)
                 and (p.get("spec") or {}).get("nodeName") == name
                 and not (p.get("metadata") or {}).get("deletionTimestamp")), None)


def stopped_at_plugin_validation(pod: Obj) -> bool:
    """Every validation before plugin-validation passed (exit 0) and plugin-validation has not."""
    inits = {c.get("name"): c for c in (pod.get("status") or {}).get("initContainerStatuses") or []}

    def passed(step: str) -> bool:
        return (((inits.get(step) or {}).get("state") or {}).get("terminated") or {}).get("exitCode") == 0

    *before, last = OPERATOR_VALIDATIONS
    return all(passed(step) for step in before) and last in inits and not passed(last)


def _validation(name: str, pods: Sequence[Obj], *, dra_only: bool = False) -> tuple[list[str], list[str]]:
    """(sources, problems) of the GPU Operator's validator pod on the node (``dra_only``: a DRA-only node of a
    mixed cluster, where the pod stopping at plugin-validation is upstream's behaviour, not a fault)."""
    pod = validator_pod(name, pods)
    if pod is None:
        return [], []
    where = f"GPU Operator validator pod {pod['metadata'].get('namespace')}/{pod['metadata']['name']}"
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    if ready:
        return [where], []
    if dra_only and stopped_at_plugin_validation(pod):
        return [f"{where} ({PLUGIN_VALIDATION_BLIND})"], []
    inits = {c.get("name"): c for c in status.get("initContainerStatuses") or []}
    for step in OPERATOR_VALIDATIONS:
        st = inits.get(step)
        if st is None:
            continue
        done = ((st.get("state") or {}).get("terminated") or {}).get("exitCode") == 0
        if done:
            continue
        now = (st.get("state") or {}).get("terminated") or {}
        last = now if now.get("exitCode") not in (None, 0) else (st.get("lastState") or {}).get("terminated") or {}
        waiting = (st.get("state") or {}).get("waiting") or {}
        if last.get("exitCode") not in (None, 0):
            detail = f"failed (exit {last.get('exitCode')}{', ' + waiting['reason'] if waiting.get('reason') else ''})"
        else:
            detail = f"not passed yet ({waiting.get('reason') or 'running'})"
        return [where], [f"{where}: {step} {detail}"]
    return [where], [f"{where}: not Ready ({status.get('phase', 'no phase')})"]


def _taints(name: str, snap: Snapshot) -> list[str]:
    out = []
    for rs in snap.resource_slices or []:
        s = rs.get("spec") or {}
        if s.get("driver") != DRA_DRIVER or s.get("nodeName") != name:
            continue
        for dev in s.get("devices") or []:
            for t in dev.get("taints") or []:
                # effect None: an application XID, informational (the driver keeps the device in service)
                if str(t.get("key", "")).startswith(DRA_HEALTH_TAINT_PREFIX) and t.get("effect") != "None":
                    value = f"={t['value']}" if t.get("value") else ""
                    out.append(f"DRA device {dev.get('name')} tainted {t['key']}{value}:{t.get('effect')}")
    return out


def _npd(snap: Snapshot) -> bool:
    for ds in snap.daemonsets:
        meta = ds.get("metadata") or {}
        labels = meta.get("labels") or {}
        if NPD_NAME in (meta.get("name"), labels.get("app"), labels.get("app.kubernetes.io/name")):
            return True
    return False


def _conditions(node: Obj | None) -> tuple[bool, list[str]]:
    """(any GPU condition, the problems among them)."""
    conds = [c for c in ((node or {}).get("status") or {}).get("conditions") or []
             if c.get("type") != "Ready" and "gpu" in str(c.get("type", "")).lower()]
    return bool(conds), [f"condition {c['type']}=True: {c.get('message') or c.get('reason') or ''}".rstrip(": ")
                         for c in conds if c.get("status") == "True"]


def health_checks(spec: ClusterSpec, snap: Snapshot, states: dict[str, HostState]) -> Iterator[Result]:
    """``gpu-health`` per GPU node, and ``gpu-metrics`` per ``--metrics-url`` endpoint (module docstring)."""
    for entry in snap.dcgm:
        if entry.get("url"):
            _got, error = _samples(entry)
            if error:
                yield fail("gpu-metrics", str(entry["source"]), "a reachable DCGM endpoint",
                           f"unreachable: {error[:200]}")
            else:
                yield ok("gpu-metrics", str(entry["source"]), "a reachable DCGM endpoint", "scraped")
    nodes = {n["metadata"]["name"]: n for n in snap.nodes}
    gate = bool((dra_driver.values(spec).get("featureGates") or {}).get(DRA_HEALTH_GATE))
    npd = _npd(snap)
    pods = snap.operator_pods or []
    dra_only = dra_only_hosts(spec)
    for name, state in states.items():
        if not state.gpu_count:
            continue
        if name not in nodes:
            yield skip("gpu-health", name, "node is missing (see node-ready)")
            continue
        entries = [e for e in snap.dcgm if e.get("node") == name or e.get("url")]
        sources, problems, unreadable = _dcgm(name, state, entries)
        v_sources, v_problems = _validation(name, pods, dra_only=name in dra_only)
        sources += v_sources
        problems += v_problems
        tainted = _taints(name, snap)
        problems += tainted
        if gate and state.devices:
            sources.append(f"DRA device taints ({DRA_HEALTH_GATE} on)")
        has_conditions, c_problems = _conditions(nodes.get(name))
        if npd and has_conditions:
            sources.append("node-problem-detector conditions")
            problems += c_problems
        if problems:
            yield fail("gpu-health", name, "healthy GPUs", "; ".join(problems[:6]),
                       f"read from: {', '.join(sources) or 'DRA device taints'}; see docs/runbooks.md")
        elif not sources:
            pods_why = snap.operator_pods_error or "no DCGM exporter pod runs on it (GPU Operator, dcgmExporter)"
            looked = [unreadable or pods_why, "no GPU Operator validator pod" if not snap.operator_pods_error else "",
                      "no node-problem-detector reports GPU conditions"]
            if not gate:
                looked.append(f"DRA device taints prove nothing with the driver's {DRA_HEALTH_GATE} gate off")
            yield skip("gpu-health", name,
                       "no GPU health source covers this node: " + "; ".join(w for w in looked if w))
        else:
            yield ok("gpu-health", name, "healthy GPUs", f"healthy per {', '.join(sources)}")
