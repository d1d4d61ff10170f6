"""Generate promtool rule-test files from a pinned threshold table (tests/promtool/thresholds.yaml).

Series sit right beside the *pinned* thresholds: for ``x > T`` a firing value T + delta and a
non-firing value exactly T; for ``x < T`` a firing value T - delta and a non-firing value T; for a
``for: D`` rule one check at D (firing) and one at D - 1m (still pending). The rules under test are
rendered from the spec, so any threshold that moved in the spec but not in the table makes one of
these checks fail. Expected annotations are computed by expanding the rendered templates here.

Input series carry the labels a real scrape gives them (:func:`gpu_labels`): the exporter's own
(label names from tests/upstream/facts/dcgm-exporter.yaml), ``GPU_I_PROFILE``/``GPU_I_ID`` on MIG
instances, ``err_code``/``err_msg`` on XID series, the workload's ``namespace``/``pod``/``container``
while a pod holds the GPU, and the target labels the Prometheus Operator adds that our
ServiceMonitor keeps (tests/upstream/facts/prometheus.yaml) plus its ``node``.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml

DELTA = 0.001
MODEL = "NVIDIA H100 80GB HBM3"
FACTS = Path(__file__).resolve().parents[1] / "upstream" / "facts"
#: The exporter pod's address and the job our ServiceMonitor's endpoint becomes.
INSTANCE = "10.244.3.17:9400"
JOB = "serviceMonitor/gpu-operator/gpucluster-dcgm-exporter/0"


@cache
def fact(component: str, key: str) -> Any:
    return yaml.safe_load((FACTS / f"{component}.yaml").read_text())["facts"][key]["value"]


def minutes(duration: str) -> int:
    m = re.fullmatch(r"(\d+)([smh])", duration)
    assert m, f"unsupported duration {duration!r}"
    seconds = int(m[1]) * {"s": 1, "m": 60, "h": 3600}[m[2]]
    assert seconds % 60 == 0, f"{duration} is not a whole number of minutes"
    return seconds // 60


def gpu_labels(node: str, gpu: int, namespace: str = "", pod: str = "", model: str = MODEL,
               mig: tuple[str, int] | None = None, claim: str = "") -> dict[str, str]:
    """The labels of one scraped GPU (or MIG instance, ``mig=(profile, gi)``) series."""
    exporter = dict(zip(fact("dcgm-exporter", "series-base-labels"),
                        (str(gpu), f"GPU-{node}-{gpu}", f"00000000:{0x18 + 0x10 * gpu:02x}:00.0", f"nvidia{gpu}",
                         model), strict=True))
    if mig:
        exporter |= dict(zip(fact("dcgm-exporter", "series-mig-labels"), (mig[0], str(mig[1])), strict=True))
    exporter[fact("dcgm-exporter", "series-hostname-label")] = node
    exporter[fact("dcgm-exporter", "series-driver-version-label")] = "580.95.05"
    if namespace:
        exporter |= dict(zip(("namespace", "pod", "container"), (namespace, pod, "main"), strict=True))
    if claim:  # held through a ResourceClaim, named by the exporter's DRA attribution
        dra = fact("dcgm-exporter", "dra-labels")[:5]
        exporter |= dict(zip(dra, (claim, namespace, "gpu.nvidia.com", node, f"gpu-{gpu}"), strict=True))
    kept = {"service": "nvidia-dcgm-exporter", "job": JOB, "endpoint": "gpu-metrics"}
    assert set(kept) | {"namespace", "pod", "container"} == set(fact("prometheus", "servicemonitor-target-labels"))
    return {**exporter, **kept, "instance": INSTANCE, "node": node}


def xid_labels(base: dict[str, str], code: int, message: str) -> dict[str, str]:
    """An XID series: the value is also in err_code (so each XID is its own series)."""
    assert fact("dcgm-exporter", "series-xid-extra-labels") == ["err_code", "err_msg"]
    return {**base, "err_code": str(code), "err_msg": message}


def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    body = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{body}}}", "values": values}


def gpu_request(namespace: str, pod: str, minutes_: int, resource: str = "nvidia_com_gpu", node: str = "n",
                count: int = 1) -> dict[str, str]:
    """kube-state-metrics' request series of a pod (labels: fact ksm-resource-requests-labels)."""
    values = (namespace, pod, f"uid-{pod}", "main", node, resource, "integer")
    labels = dict(zip(fact("dcgm-exporter", "ksm-resource-requests-labels"), values, strict=True))
    return series("kube_pod_container_resource_requests", labels, f"{count}x{minutes_}")


def pod_phase(namespace: str, pod: str, phase: str, minutes_: int) -> dict[str, str]:
    labels = {"namespace": namespace, "pod": pod, "uid": f"uid-{pod}", "phase": phase}
    return series("kube_pod_status_phase", labels, f"1x{minutes_}")


def _go_value(v: float) -> str:
    """``{{ $value }}`` as Go's text/template prints a float64."""
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def expand(template: str, labels: dict[str, str], value: float) -> str:
    out = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m[1], ""), template)
    return out.replace("{{ $value }}", _go_value(value))


class Gen:
    """Collects test groups for one rendered rule set."""

    def __init__(self, rules: dict[str, dict]) -> None:
        self.rules = rules  # alertname -> rendered rule
        self.groups: list[dict[str, Any]] = []
        self.cases: dict[str, dict[str, int]] = {}  # alertname -> {"firing": n, "quiet": n}

    def alert(self, name: str, labels: dict[str, str], value: float) -> dict[str, Any]:
        rule = self.rules[name]
        full = {**labels, **rule.get("labels", {})}
        return {"exp_labels": full,
                "exp_annotations": {k: expand(v, full, value) for k, v in rule.get("annotations", {}).items()}}

    def group(self, title: str, input_series: list[dict], checks: list[tuple[str, int, list[dict]]],
              exprs: list[dict] | None = None) -> None:
        tests = []
        for name, at, expected in checks:
            tests.append({"alertname": name, "eval_time": f"{at}m", "exp_alerts": expected})
            kind = "firing" if expected else "quiet"
            self.cases.setdefault(name, {"firing": 0, "quiet": 0})[kind] += 1
        group: dict[str, Any] = {"name": title, "interval": "1m", "input_series": input_series,
                                 "alert_rule_test": tests}
        if exprs:
            group["promql_expr_test"] = exprs
        self.groups.append(group)


ACTIVITY = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"


def build(rules: dict[str, dict], pinned: dict, constants: dict, tenants: list[dict],
          mig_shares: dict[tuple[str, int], float]) -> tuple[list, dict]:
    """Test groups and the per-alert case counts for the pinned thresholds of one inventory.

    ``mig_shares``: (modelName, compute slices) → the share of the GPU one such instance is, for the
    MIG-capable models of the inventory's pools (computed by the caller from the catalog).
    """
    a = pinned["alerts"]
    g = Gen(rules)
    n = "node-a"

    # GPUAllocatedLowUtilization: activity (0..1) T/100 - delta fires after `for`, T/100 never;
    # unallocated never; a MIG instance held by a pod is a GPU of its own here.
    t, w = a["lowUtilizationPercent"] / 100, minutes(a["lowUtilizationFor"])
    low = t - DELTA / 100
    held = gpu_labels(n, 0, "team", "p0")
    g.group("low utilization of an allocated GPU", [
        series(ACTIVITY, held, f"{low}x{w + 10}"), gpu_request("team", "p0", w + 10)],
        [("GPUAllocatedLowUtilization", w - 1, []),
         ("GPUAllocatedLowUtilization", w, [g.alert("GPUAllocatedLowUtilization", held, low)])])
    g.group("utilization exactly at the threshold", [
        series(ACTIVITY, held, f"{t}x{w + 10}"), gpu_request("team", "p0", w + 10)],
        [("GPUAllocatedLowUtilization", w + 5, [])])
    g.group("low utilization, but no pod requests the GPU any more", [
        series(ACTIVITY, held, f"{low}x{w + 10}")],
        [("GPUAllocatedLowUtilization", w + 5, [])])
    if pinned["draAttribution"]:
        # A pod holding its GPU through a claim requests no GPU resource: its DRA labels say it holds one.
        claimed = gpu_labels(n, 3, "team", "c0", claim="c0-gpu")
        g.group("low utilization of a GPU held through a ResourceClaim", [
            series(ACTIVITY, claimed, f"{low}x{w + 10}"), pod_phase("team", "c0", "Running", w + 10)],
            [("GPUAllocatedLowUtilization", w - 1, []),
             ("GPUAllocatedLowUtilization", w, [g.alert("GPUAllocatedLowUtilization", claimed, low)])])
    instance = gpu_labels(n, 2, "team", "m0", mig=("1g.10gb", 9))
    g.group("low utilization of a MIG instance", [
        series(ACTIVITY, instance, f"{low}x{w + 10}"),
        gpu_request("team", "m0", w + 10, resource="nvidia_com_mig_1g_10gb")],
        [("GPUAllocatedLowUtilization", w, [g.alert("GPUAllocatedLowUtilization", instance, low)])])

    # GPUFramebufferHigh: used/(used+free) exactly P% is quiet, a MiB more fires after `for`.
    p, fb_for = a["framebufferPercent"], minutes(constants["framebufferFor"])
    used, free = round(p * 1000), round((100 - p) * 1000)
    assert used + free == 100_000, f"framebufferPercent {p} needs at most 3 decimals for these tests"
    full, ok = gpu_labels(n, 0), gpu_labels(n, 1)
    g.group("framebuffer", [
        series("DCGM_FI_DEV_FB_USED", full, f"{used + 1}x20"), series("DCGM_FI_DEV_FB_FREE", full, f"{free - 1}x20"),
        series("DCGM_FI_DEV_FB_USED", ok, f"{used}x20"), series("DCGM_FI_DEV_FB_FREE", ok, f"{free}x20")],
        [("GPUFramebufferHigh", fb_for - 1, []),
         ("GPUFramebufferHigh", fb_for, [g.alert("GPUFramebufferHigh", full, (used + 1) / 100_000)])])

    # GPUXidError: each XID value is its own series (err_code). XID 79 appearing on GPU 1 fires for
    # that GPU only, once; steady values are quiet; the same XID on a GPU that changed hands is not new.
    bad, good = gpu_labels(n, 1), gpu_labels(n, 0)
    no_error = fact("dcgm-exporter", "xid-zero-err-msg")
    xid79 = xid_labels(bad, 79, fact("dcgm-exporter", "xid-err-msg-79"))
    g.group("XID on one GPU", [
        series("DCGM_FI_DEV_XID_ERRORS", xid_labels(bad, 0, no_error), "0x10 stale"),
        series("DCGM_FI_DEV_XID_ERRORS", xid79, "_x10 79x20"),
        series("DCGM_FI_DEV_XID_ERRORS", xid_labels(good, 0, no_error), "0x30")],
        [("GPUXidError", 9, []), ("GPUXidError", 12, [g.alert("GPUXidError", xid79, 79)]), ("GPUXidError", 17, [])])
    xid43 = xid_labels(bad, 43, "GPU stopped processing")
    g.group("XID already set when the exporter (re)appears", [series("DCGM_FI_DEV_XID_ERRORS", xid43, "_x5 43x20")],
            [("GPUXidError", 7, [g.alert("GPUXidError", xid43, 43)]), ("GPUXidError", 13, [])])
    before = xid_labels(gpu_labels(n, 1, "team", "old"), 79, fact("dcgm-exporter", "xid-err-msg-79"))
    after = xid_labels(gpu_labels(n, 1, "team", "new"), 79, fact("dcgm-exporter", "xid-err-msg-79"))
    g.group("an old XID on a GPU that another pod now holds", [
        series("DCGM_FI_DEV_XID_ERRORS", before, "79x10 stale"), series("DCGM_FI_DEV_XID_ERRORS", after, "_x10 79x20")],
        [("GPUXidError", 12, [])])

    # GPUDoubleBitECCError: a DBE increment fires; single-bit errors alone do not.
    g.group("ECC", [
        series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", bad, "0x10 1x20"),
        series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", good, "0x30"),
        series("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", good, "0+1x30")],
        [("GPUDoubleBitECCError", 9, []),
         ("GPUDoubleBitECCError", 12, [g.alert("GPUDoubleBitECCError", bad, 1)]),
         ("GPUDoubleBitECCError", 20, [])])
    g.group("row remap failure", [
        series("DCGM_FI_DEV_ROW_REMAP_FAILURE", bad, "0x5 1x10"),
        series("DCGM_FI_DEV_ROW_REMAP_FAILURE", good, "0x15")],
        [("GPURowRemapFailure", 4, []), ("GPURowRemapFailure", 8, [g.alert("GPURowRemapFailure", bad, 1)])])

    # GPUTemperatureHigh: T is quiet, T + delta fires after `for`.
    temp, temp_for = a["temperatureCelsius"], minutes(constants["temperatureFor"])
    hot, warm = gpu_labels(n, 0), gpu_labels(n, 1)
    g.group("temperature", [
        series("DCGM_FI_DEV_GPU_TEMP", hot, f"{temp + DELTA}x20"), series("DCGM_FI_DEV_GPU_TEMP", warm, f"{temp}x20")],
        [("GPUTemperatureHigh", temp_for - 1, []),
         ("GPUTemperatureHigh", temp_for, [g.alert("GPUTemperatureHigh", hot, temp + DELTA)])])

    # GPUCountBelowSpec: every node at its pinned count is quiet; one GPU fewer fires; a node with
    # no GPU series at all (but known to Kubernetes) fires with 0. A MIG GPU whose instances report
    # only their activity (no temperature) still counts, once.
    if "GPUCountBelowSpec" in rules:
        count_for, nodes = minutes(constants["gpuCountFor"]), pinned["nodeGpus"]
        span = count_for + 10

        def fleet(missing: int) -> list[dict]:
            out = [series("kube_node_info", {"node": node}, f"1x{span}") for node in nodes]
            for node, count in nodes.items():
                out += [series("DCGM_FI_DEV_GPU_TEMP", gpu_labels(node, i), f"40x{span}")
                        for i in range(count - missing)]
            return out
        first = next(iter(nodes))
        mig_only = [series("kube_node_info", {"node": first}, f"1x{span}")]
        mig_only += [series(ACTIVITY, gpu_labels(first, i, mig=(profile, gi)), f"0.1x{span}")
                     for i in range(nodes[first]) for gi, profile in ((1, "3g.40gb"), (2, "4g.40gb"))]
        g.group("every node has its GPUs", fleet(0), [("GPUCountBelowSpec", span - 1, [])])
        g.group("MIG instances without temperature count as their GPU", mig_only, [("GPUCountBelowSpec", span - 1, [])])
        g.group("one GPU lost on every node", fleet(1), [
            ("GPUCountBelowSpec", count_for - 1, []),
            ("GPUCountBelowSpec", count_for,
             [g.alert("GPUCountBelowSpec", {"node": node}, count - 1) for node, count in nodes.items()])])
        g.group("a node whose exporter reports no GPU", [series("kube_node_info", {"node": first}, f"1x{span}")],
                [("GPUCountBelowSpec", count_for, [g.alert("GPUCountBelowSpec", {"node": first}, 0)])])

    # GPUsAllocatedIdleInNamespace: N idle allocated GPUs fire; N - 1, or N at the idle bound, do not.
    need, idle = a["idleNamespaceGpus"], constants["idlePercent"] / 100

    def pods(ns: str, utils: list[float]) -> list[dict]:
        out = []
        for i, u in enumerate(utils):
            out += [series(ACTIVITY, gpu_labels(n, i, ns, f"p{i}"), f"{u}x{w + 10}"),
                    gpu_request(ns, f"p{i}", w + 10)]
        return out
    g.group("idle GPUs in a namespace", pods("idle", [0] * need), [
        ("GPUsAllocatedIdleInNamespace", w - 1, []),
        ("GPUsAllocatedIdleInNamespace", w,
         [g.alert("GPUsAllocatedIdleInNamespace", {"namespace": "idle"}, need)])])
    g.group("one idle GPU short", pods("busy", [0] * (need - 1) + [0.5]),
            [("GPUsAllocatedIdleInNamespace", w + 5, [])])
    g.group("GPUs at the idle bound", pods("edge", [idle] * need), [("GPUsAllocatedIdleInNamespace", w + 5, [])])

    g.groups.append(_recording_group(tenants, pinned["sharedGpus"], mig_shares, pinned["draAttribution"]))
    return g.groups, g.cases


def _recording_group(tenants: list[dict], shared: dict, mig_shares: dict[tuple[str, int], float],
                     dra: bool) -> dict[str, Any]:
    """Recording rules: allocated / used GPU-equivalents per namespace and model, GPU-hours, pending pods.

    research: 4 whole H100s at 0.35 → 4 allocated, 1.4 used. serve: 2 L4s at 0.1 and 0.6 → 2 and 0.7.
    inference: a 1g and a 3g instance of an H100 at 0.5 and 0.2 → 4/7 allocated, (0.5 + 0.6)/7 used.
    share: 3 running pods with one replica each on a node of the shared pool (R replicas per GPU), whose
    GPUs average 0.5 → 3/R allocated, 1.5/R used; the pod the exporter names there is not counted
    again, and a pending pod there not at all.
    claims (with DRA attribution): an H100 two pods share through one claim, at 0.4 (one series per pod)
    → 1 allocated, 0.4 used; a whole H100 one pod's claim holds, at 0.2 → 1 and 0.2.
    """
    h100, l4 = MODEL, "NVIDIA L4"
    inp = [series(ACTIVITY, gpu_labels("a", i, "research", f"r{i}", h100), "0.35x70") for i in range(4)]
    inp += [series(ACTIVITY, gpu_labels("b", 0, "serve", "s0", l4), "0.1x70"),
            series(ACTIVITY, gpu_labels("b", 1, "serve", "s1", l4), "0.6x70"),
            series(ACTIVITY, gpu_labels("b", 2), "0.99x70"),  # held by no pod: not allocated
            series(ACTIVITY, gpu_labels("c", 0, "inference", "i1", h100, mig=("1g.10gb", 9)), "0.5x70"),
            series(ACTIVITY, gpu_labels("c", 0, "inference", "i3", h100, mig=("3g.40gb", 2)), "0.2x70"),
            series(ACTIVITY, gpu_labels("c", 0, mig=("3g.40gb", 1)), "0.9x70"),  # an instance nobody holds
            series("kube_pod_status_phase", {"namespace": "research", "pod": "waiting", "phase": "Pending"}, "1x70"),
            series("kube_pod_status_phase", {"namespace": "research", "pod": "cpu-only", "phase": "Pending"}, "1x70"),
            gpu_request("research", "waiting", 70)]
    model = shared["model"]
    node, replicas = next(iter(shared["replicas"].items()))
    inp += [series(ACTIVITY, gpu_labels(node, i, model=model), f"{0.2 * (i + 1):g}x70") for i in range(3)]
    inp += [series(ACTIVITY, gpu_labels(node, 3, "share", "s2", model), "0.8x70")]  # the exporter's pick
    for pod in ("s0", "s1", "s2"):
        inp += [gpu_request("share", pod, 70, node=node), pod_phase("share", pod, "Running", 70)]
    inp += [gpu_request("share", "queued", 70, node=node), pod_phase("share", "queued", "Pending", 70)]

    def sample(metric: str, value: float, **labels: str) -> dict[str, Any]:
        body = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        return {"labels": f"{metric}{{{body}}}", "value": value}

    by_model = {("research", h100): (4, 1.4), ("serve", l4): (2, 0.7), ("inference", h100): (4 / 7, 1.1 / 7),
                ("share", model): (3 / replicas, 1.5 / replicas)}
    if dra:
        inp += [series(ACTIVITY, gpu_labels("d", 0, "claims", pod, h100, claim="shared"), "0.4x70")
                for pod in ("d0", "d1")]
        inp += [series(ACTIVITY, gpu_labels("d", 1, "claims", "d2", h100, claim="own"), "0.2x70")]
        by_model[("claims", h100)] = (2, 0.6)
    by_ns: dict[str, tuple[float, float]] = {}
    for (ns, _), (alloc, busy) in by_model.items():
        a0, b0 = by_ns.get(ns, (0, 0))
        by_ns[ns] = (a0 + alloc, b0 + busy)

    def per_model(metric: str, which: int) -> list[dict[str, Any]]:
        return [sample(metric, v[which], namespace=ns, modelName=m) for (ns, m), v in sorted(by_model.items())]

    def per_ns(metric: str, which: int) -> list[dict[str, Any]]:
        return [sample(metric, v[which], namespace=ns) for ns, v in sorted(by_ns.items())]

    exprs = [
        {"expr": "namespace_model:gpucluster_gpus_allocated:count", "eval_time": "5m",
         "exp_samples": per_model("namespace_model:gpucluster_gpus_allocated:count", 0)},
        {"expr": "namespace_model:gpucluster_gpus_used:sum", "eval_time": "5m",
         "exp_samples": per_model("namespace_model:gpucluster_gpus_used:sum", 1)},
        {"expr": "namespace:gpucluster_gpus_allocated:count", "eval_time": "5m",
         "exp_samples": per_ns("namespace:gpucluster_gpus_allocated:count", 0)},
        {"expr": "namespace:gpucluster_gpus_used:sum", "eval_time": "5m",
         "exp_samples": per_ns("namespace:gpucluster_gpus_used:sum", 1)},
        {"expr": "namespace:gpucluster_gpu_hours_allocated:1h", "eval_time": "70m",
         "exp_samples": per_ns("namespace:gpucluster_gpu_hours_allocated:1h", 0)},
        {"expr": "namespace:gpucluster_gpu_hours_used:1h", "eval_time": "70m",
         "exp_samples": per_ns("namespace:gpucluster_gpu_hours_used:1h", 1)},
        {"expr": "namespace:gpucluster_pending_gpu_pods:count", "eval_time": "5m", "exp_samples": [
            sample("namespace:gpucluster_pending_gpu_pods:count", 1, namespace="research"),
            sample("namespace:gpucluster_pending_gpu_pods:count", 1, namespace="share")]},
        {"expr": "gpucluster:mig_slice_share", "eval_time": "5m", "exp_samples": [
            sample("gpucluster:mig_slice_share", share, modelName=m, mig_compute_slices=str(c))
            for (m, c), share in sorted(mig_shares.items())]},
        {"expr": "gpucluster:node_gpu_replica_share", "eval_time": "5m", "exp_samples": [
            sample("gpucluster:node_gpu_replica_share", 1 / r, node=h, modelName=model)
            for h, r in sorted(shared["replicas"].items())]},
    ]
    if tenants:
        exprs.append({"expr": "gpucluster:tenant_info", "eval_time": "5m", "exp_samples": [
            sample("gpucluster:tenant_info", 1, **t) for t in tenants]})
    return {"name": "recording rules", "interval": "1m", "input_series": inp, "promql_expr_test": exprs}
