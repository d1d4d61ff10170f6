"""Generate promtool rule-test files from a pinned threshold table (tests/promtool/thresholds.yaml).

Series sit right beside the *pinned* thresholds: for ``x > T`` a firing value T + delta and a
non-firing value exactly T; for ``x < T`` a firing value T - delta and a non-firing value T; for a
``for: D`` rule one check at D (firing) and one at D - 1m (still pending). The rules under test are
rendered from the spec, so any threshold that moved in the spec but not in the table makes one of
these checks fail. Expected annotations are computed by expanding the rendered templates here.
"""

from __future__ import annotations

import re
from typing import Any

DELTA = 0.001
MODEL = "NVIDIA H100 80GB HBM3"


def minutes(duration: str) -> int:
    m = re.fullmatch(r"(\d+)([smh])", duration)
    assert m, f"unsupported duration {duration!r}"
    seconds = int(m[1]) * {"s": 1, "m": 60, "h": 3600}[m[2]]
    assert seconds % 60 == 0, f"{duration} is not a whole number of minutes"
    return seconds // 60


def gpu_labels(node: str, gpu: int, namespace: str = "", pod: str = "", model: str = MODEL) -> dict[str, str]:
    labels = {"node": node, "Hostname": node, "gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}",
              "device": f"nvidia{gpu}", "modelName": model}
    if namespace:
        labels |= {"namespace": namespace, "pod": pod, "container": "main"}
    return labels


def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    body = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{body}}}", "values": values}


def gpu_request(namespace: str, pod: str, minutes_: int) -> dict[str, str]:
    labels = {"namespace": namespace, "pod": pod, "container": "main", "resource": "nvidia_com_gpu",
              "unit": "integer", "node": "n"}
    return series("kube_pod_container_resource_requests", labels, f"1x{minutes_}")


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


def build(rules: dict[str, dict], pinned: dict, constants: dict, tenants: list[dict]) -> tuple[list, dict]:
    """Test groups and the per-alert case counts for the pinned thresholds of one inventory."""
    a = pinned["alerts"]
    g = Gen(rules)
    n = "node-a"

    # GPUAllocatedLowUtilization: T - delta fires after `for`, T never; unallocated never.
    t, w = a["lowUtilizationPercent"], minutes(a["lowUtilizationFor"])
    held = gpu_labels(n, 0, "team", "p0")
    g.group("low utilization of an allocated GPU", [
        series("DCGM_FI_DEV_GPU_UTIL", held, f"{t - DELTA}x{w + 10}"), gpu_request("team", "p0", w + 10)],
        [("GPUAllocatedLowUtilization", w - 1, []),
         ("GPUAllocatedLowUtilization", w, [g.alert("GPUAllocatedLowUtilization", held, t - DELTA)])])
    g.group("utilization exactly at the threshold", [
        series("DCGM_FI_DEV_GPU_UTIL", held, f"{t}x{w + 10}"), gpu_request("team", "p0", w + 10)],
        [("GPUAllocatedLowUtilization", w + 5, [])])
    g.group("low utilization, but no pod requests the GPU any more", [
        series("DCGM_FI_DEV_GPU_UTIL", held, f"{t - DELTA}x{w + 10}")],
        [("GPUAllocatedLowUtilization", w + 5, [])])

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

    # GPUXidError: a change to 79 on GPU 1 fires for that GPU only; steady values are quiet.
    bad, good = gpu_labels(n, 1), gpu_labels(n, 0)
    g.group("XID on one GPU", [
        series("DCGM_FI_DEV_XID_ERRORS", bad, "0x10 79x20"), series("DCGM_FI_DEV_XID_ERRORS", good, "0x30")],
        [("GPUXidError", 9, []), ("GPUXidError", 12, [g.alert("GPUXidError", bad, 79)]), ("GPUXidError", 17, [])])
    g.group("XID already set when the exporter (re)appears", [
        series("DCGM_FI_DEV_XID_ERRORS", bad, "_x5 43x20")],
        [("GPUXidError", 7, [g.alert("GPUXidError", bad, 43)]), ("GPUXidError", 13, [])])

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
    # no GPU series at all (but known to Kubernetes) fires with 0.
    if "GPUCountBelowSpec" in rules:
        count_for, nodes = minutes(constants["gpuCountFor"]), pinned["nodeGpus"]
        span = count_for + 10

        def fleet(missing: int) -> list[dict]:
            out = [series("kube_node_info", {"node": node}, f"1x{span}") for node in nodes]
            for node, count in nodes.items():
                out += [series("DCGM_FI_DEV_GPU_TEMP", gpu_labels(node, i), f"40x{span}")
                        for i in range(count - missing)]
            return out
        g.group("every node has its GPUs", fleet(0), [("GPUCountBelowSpec", span - 1, [])])
        g.group("one GPU lost on every node", fleet(1), [
            ("GPUCountBelowSpec", count_for - 1, []),
            ("GPUCountBelowSpec", count_for,
             [g.alert("GPUCountBelowSpec", {"node": node}, count - 1) for node, count in nodes.items()])])
        first = next(iter(nodes))
        g.group("a node whose exporter reports no GPU", [series("kube_node_info", {"node": first}, f"1x{span}")],
                [("GPUCountBelowSpec", count_for, [g.alert("GPUCountBelowSpec", {"node": first}, 0)])])

    # GPUsAllocatedIdleInNamespace: N idle allocated GPUs fire; N - 1, or N at the idle bound, do not.
    need, idle = a["idleNamespaceGpus"], constants["idlePercent"]

    def pods(ns: str, utils: list[float]) -> list[dict]:
        out = []
        for i, u in enumerate(utils):
            out += [series("DCGM_FI_DEV_GPU_UTIL", gpu_labels(n, i, ns, f"p{i}"), f"{u}x{w + 10}"),
                    gpu_request(ns, f"p{i}", w + 10)]
        return out
    g.group("idle GPUs in a namespace", pods("idle", [0] * need), [
        ("GPUsAllocatedIdleInNamespace", w - 1, []),
        ("GPUsAllocatedIdleInNamespace", w,
         [g.alert("GPUsAllocatedIdleInNamespace", {"namespace": "idle"}, need)])])
    g.group("one idle GPU short", pods("busy", [0] * (need - 1) + [50]),
            [("GPUsAllocatedIdleInNamespace", w + 5, [])])
    g.group("GPUs at the idle bound", pods("edge", [idle] * need), [("GPUsAllocatedIdleInNamespace", w + 5, [])])

    g.groups.append(_recording_group(tenants))
    return g.groups, g.cases


def _recording_group(tenants: list[dict]) -> dict[str, Any]:
    """Recording rules: allocated / used GPUs per namespace and model, GPU-hours, pending GPU pods."""
    h100, l4 = MODEL, "NVIDIA L4"
    inp = [series("DCGM_FI_DEV_GPU_UTIL", gpu_labels("a", i, "research", f"r{i}", h100), "35x70") for i in range(4)]
    inp += [series("DCGM_FI_DEV_GPU_UTIL", gpu_labels("b", 0, "serve", "s0", l4), "10x70"),
            series("DCGM_FI_DEV_GPU_UTIL", gpu_labels("b", 1, "serve", "s1", l4), "60x70"),
            series("DCGM_FI_DEV_GPU_UTIL", gpu_labels("b", 2), "99x70"),  # held by no pod: not allocated
            series("kube_pod_status_phase", {"namespace": "research", "pod": "waiting", "phase": "Pending"}, "1x70"),
            series("kube_pod_status_phase", {"namespace": "research", "pod": "cpu-only", "phase": "Pending"}, "1x70"),
            gpu_request("research", "waiting", 70)]

    def sample(metric: str, value: float, **labels: str) -> dict[str, Any]:
        body = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        return {"labels": f"{metric}{{{body}}}", "value": value}
    exprs = [
        {"expr": "namespace_model:gpucluster_gpus_allocated:count", "eval_time": "5m", "exp_samples": [
            sample("namespace_model:gpucluster_gpus_allocated:count", 4, namespace="research", modelName=h100),
            sample("namespace_model:gpucluster_gpus_allocated:count", 2, namespace="serve", modelName=l4)]},
        {"expr": "namespace_model:gpucluster_gpus_used:sum", "eval_time": "5m", "exp_samples": [
            sample("namespace_model:gpucluster_gpus_used:sum", 1.4, namespace="research", modelName=h100),
            sample("namespace_model:gpucluster_gpus_used:sum", 0.7, namespace="serve", modelName=l4)]},
        {"expr": "namespace:gpucluster_gpus_allocated:count", "eval_time": "5m", "exp_samples": [
            sample("namespace:gpucluster_gpus_allocated:count", 4, namespace="research"),
            sample("namespace:gpucluster_gpus_allocated:count", 2, namespace="serve")]},
        {"expr": "namespace:gpucluster_gpus_used:sum", "eval_time": "5m", "exp_samples": [
            sample("namespace:gpucluster_gpus_used:sum", 1.4, namespace="research"),
            sample("namespace:gpucluster_gpus_used:sum", 0.7, namespace="serve")]},
        {"expr": "namespace:gpucluster_gpu_hours_allocated:1h", "eval_time": "70m", "exp_samples": [
            sample("namespace:gpucluster_gpu_hours_allocated:1h", 4, namespace="research"),
            sample("namespace:gpucluster_gpu_hours_allocated:1h", 2, namespace="serve")]},
        {"expr": "namespace:gpucluster_gpu_hours_used:1h", "eval_time": "70m", "exp_samples": [
            sample("namespace:gpucluster_gpu_hours_used:1h", 1.4, namespace="research"),
            sample("namespace:gpucluster_gpu_hours_used:1h", 0.7, namespace="serve")]},
        {"expr": "namespace:gpucluster_pending_gpu_pods:count", "eval_time": "5m", "exp_samples": [
            sample("namespace:gpucluster_pending_gpu_pods:count", 1, namespace="research")]},
    ]
    if tenants:
        exprs.append({"expr": "gpucluster:tenant_info", "eval_time": "5m", "exp_samples": [
            sample("gpucluster:tenant_info", 1, **t) for t in tenants]})
    return {"name": "recording rules", "interval": "1m", "input_series": inp, "promql_expr_test": exprs}
