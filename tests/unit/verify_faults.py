"""Named faults for the cluster checks: each a mutation of a healthy snapshot recorded from the local world.

The healthy snapshots are recordings (tests/data/verify/record.py), never built from verify's own
expectation code: ``real-cluster`` is the local world with what a real cluster adds (the operators'
DaemonSets, Helm's records, the DCGM exporter pods), ``local-world`` the world as `gpucluster up` leaves
it. A :class:`Fault` names the rows it must fail; :func:`problems` runs faults against their recording
and says where one changed any other row, or failed to fail its own (tests/unit/test_check_coverage.py
runs every fault through it; tests/unit/test_verify_faults.py shows each one's message).
"""

from __future__ import annotations

import copy
import json
import pickle
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpucluster import quarantine
from gpucluster.render import releases
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec
from gpucluster.verify import cluster, helm
from gpucluster.verify.model import Result, Verdict
from gpucluster.verify.snapshot import AccessQuestion, Snapshot, from_data

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "verify"
LOCAL = REPO / "inventories" / "local"
Row = tuple[str, str]


@cache
def spec() -> ClusterSpec:
    return load_spec(LOCAL)


@cache
def _recorded(name: str) -> tuple[bytes, dict[AccessQuestion, bool] | None]:
    """The recording, read once: its data pickled (unpickling copies it faster than decoding JSON) and its
    access reviews decoded."""
    data = json.loads((DATA / f"{name}.json").read_text())
    access = from_data({"access": data.pop("access")}).access
    return pickle.dumps(data), access


def recorded(name: str) -> Snapshot:
    """A fresh copy of a recorded snapshot (``real-cluster`` or ``local-world``)."""
    data, access = _recorded(name)
    snap = from_data(pickle.loads(data))
    snap.access = None if access is None else dict(access)
    return snap


def run(snap: Snapshot, base: str) -> list[Result]:
    """The rows `gpucluster verify` shows for a snapshot of ``base``: the local world is judged as the local
    world (no chart installed, the GPU simulator standing in), the real-cluster shape as a real cluster."""
    local = base == "local-world"
    return cluster.run(spec(), snap, charts_reachable=not local, simulated=local)


@dataclass(frozen=True)
class Fault:
    """A mutation of the ``base`` recording and the rows it must fail (and nothing else may change)."""

    mutate: Callable[[Snapshot], None]
    fails: frozenset[Row]
    base: str = "real-cluster"


def fault(mutate: Callable[[Snapshot], None], *rows: Row, base: str = "real-cluster") -> Fault:
    return Fault(mutate, frozenset(rows), base)


@cache
def healthy(base: str) -> dict[Row, Verdict]:
    return {(r.check, r.subject): r.verdict for r in run(recorded(base), base)}


def outcome(f: Fault) -> tuple[dict[Row, Result], set[Row]]:
    """The mutated rows and the rows whose verdict differs from the healthy recording's (new rows included)."""
    snap = recorded(f.base)
    f.mutate(snap)
    rows = {(r.check, r.subject): r for r in run(snap, f.base)}
    before = healthy(f.base)
    changed = {k for k in set(rows) | set(before) if (rows[k].verdict if k in rows else None) != before.get(k)}
    return rows, changed


def problems(faults: dict[str, Fault]) -> list[str]:
    """Where a fault does not fail exactly its rows: a row of its that passed, another row that changed."""
    return [p for name, f in faults.items() for p in judge(name, f, *outcome(f))]


def judge(name: str, f: Fault, rows: dict[Row, Result], changed: set[Row]) -> list[str]:
    """:func:`problems` of one fault whose :func:`outcome` is known."""
    out = []
    for row in sorted(f.fails):
        got = rows.get(row)
        if got is None or got.verdict is not Verdict.failed:
            out.append(f"{name}: {row[0]}[{row[1]}] did not fail ({got.verdict.value if got else 'no such row'})")
        elif not (got.expected and got.actual and got.expected != got.actual):
            out.append(f"{name}: {row[0]}[{row[1]}] fails without saying expected and actual")
    for row in sorted(changed - f.fails):
        was = healthy(f.base).get(row)
        now = rows[row].verdict.value if row in rows else "gone"
        out.append(f"{name}: {row[0]}[{row[1]}] changed too ({was.value if was else 'new'} -> {now})")
    return out


#: Every row the recordings and the faults give, as a user reads it (check, subject, verdict, expected,
#: actual, reason). Rewritten by ``GPUCLUSTER_WRITE_ROWS=1 pytest tests/unit/test_check_coverage.py
#: tests/unit/test_verify_faults.py``, then reviewed in the diff: a changed message is a change a user sees.
ROWS = DATA / "rows.json"


def read(rows: Iterable[Result]) -> list[list[str]]:
    return [[r.check, r.subject, r.verdict.value, r.expected, r.actual, r.reason] for r in rows]


@cache
def _recorded_rows() -> dict[str, Any]:
    return json.loads(ROWS.read_text()) if ROWS.exists() else {"faults": {}}


def recorded_rows(key: str, now: list[list[str]], fault: bool = False) -> list[list[str]] | None:
    """The rows ``rows.json`` holds for a recording (or, ``fault``, for a fault's changed rows); with
    ``GPUCLUSTER_WRITE_ROWS=1``, ``now`` is written there first."""
    import os

    if os.environ.get("GPUCLUSTER_WRITE_ROWS") == "1":
        data = json.loads(ROWS.read_text()) if ROWS.exists() else {"faults": {}}
        (data["faults"] if fault else data)[key] = now
        ROWS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        return now
    data = _recorded_rows()
    return (data["faults"] if fault else data).get(key)


# -- helpers the mutations share --------------------------------------------------------------------------

def node(s: Snapshot, name: str) -> dict[str, Any]:
    return next(n for n in s.nodes if n["metadata"]["name"] == name)


def of(items: Iterable[dict[str, Any]], ns: str | None, name: str) -> dict[str, Any]:
    return next(o for o in items if o["metadata"].get("namespace") == ns and o["metadata"]["name"] == name)


def exporter(s: Snapshot, node_name: str) -> dict[str, Any]:
    return next(e for e in s.dcgm if e["node"] == node_name)


def set_series(text: str, field: str, gpu: int, value: float, **labels: str) -> str:
    """The exposition with ``field`` of GPU ``gpu`` (every MIG instance of it) set to ``value``."""
    def edit(m: re.Match[str]) -> str:
        body = m.group(2)
        for k, v in labels.items():
            body = re.sub(rf'{k}="[^"]*"', f'{k}="{v}"', body)
        return f"{m.group(1)}{{{body}}} {value:g}"

    out, n = re.subn(rf'^({field}){{(gpu="{gpu}",[^}}]*)}} \S+$', edit, text, flags=re.M)
    assert n, f"no {field} series of GPU {gpu}"
    return out


def drop_gpu(text: str, gpu: int) -> str:
    return "\n".join(line for line in text.splitlines() if f'{{gpu="{gpu}",' not in line) + "\n"


def question(s: Snapshot, group: str, verb: str, api: str, resource: str, ns: str | None = None,
             name: str | None = None) -> AccessQuestion:
    q = AccessQuestion(group, verb, api, resource, ns, name)
    assert s.access is not None and q in s.access, f"the recording asked no {q}"
    return q


def helm_record(name: str, namespace: str, chart: str, version: str, config: dict[str, Any],
                revision: int = 1) -> dict[str, Any]:
    body = {"name": name, "namespace": namespace, "version": revision, "info": {"status": "deployed"},
            "chart": {"metadata": {"name": chart, "version": version}}, "config": config}
    return {"metadata": {"name": f"sh.helm.release.v1.{name}.v{revision}", "namespace": namespace,
                         "labels": {"owner": "helm", "name": name, "status": "deployed"}},
            "type": "helm.sh/release.v1", "data": {"release": helm.encode(body)}}


def release(name: str) -> Any:
    return next(r for r in releases(spec()) if r.name == name)


def record_of(s: Snapshot, name: str) -> dict[str, Any]:
    return next(r for r in s.helm_releases or [] if r["metadata"]["labels"]["name"] == name)


def decoded(record: dict[str, Any]) -> dict[str, Any]:
    import base64
    import gzip

    return json.loads(gzip.decompress(base64.b64decode(base64.b64decode(record["data"]["release"]))))


def reencode(record: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> None:
    body = decoded(record)
    change(body)
    record["data"]["release"] = helm.encode(body)


# -- the mutations ----------------------------------------------------------------------------------------

def _not_ready(s: Snapshot) -> None:
    for c in node(s, "a100-1")["status"]["conditions"]:
        if c["type"] == "Ready":
            c.update(status="False", reason="KubeletNotReady")


def _unknown_node(s: Snapshot) -> None:
    stray = copy.deepcopy(node(s, "cp-1"))
    stray["metadata"]["name"] = "stray-1"
    s.nodes.append(stray)


def _allocatable_lowered(s: Snapshot) -> None:
    alloc = node(s, "l4-1")["status"]["allocatable"]
    alloc["nvidia.com/gpu"] = str(int(alloc["nvidia.com/gpu"]) - 1)


def _replicas_halved(s: Snapshot) -> None:
    # what the device plugin would advertise, and GFD label, had the sharing ConfigMap half the replicas
    for name in ("l4-1", "l4-2"):
        n = node(s, name)
        replicas = int(n["metadata"]["labels"]["nvidia.com/gpu.replicas"])
        for key in ("capacity", "allocatable"):
            gpus = int(n["status"][key]["nvidia.com/gpu"]) // replicas
            n["status"][key]["nvidia.com/gpu"] = str(gpus * (replicas // 2))
        n["metadata"]["labels"]["nvidia.com/gpu.replicas"] = str(replicas // 2)


def _wrong_product(s: Snapshot) -> None:
    node(s, "h200-1")["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"


def _taint_removed(s: Snapshot) -> None:
    n = node(s, "h200-1")
    n["spec"]["taints"] = [t for t in n["spec"].get("taints") or [] if t["key"] != "nvidia.com/gpu"]


def _extra_managed_taint(s: Snapshot) -> None:
    node(s, "l4-1")["spec"].setdefault("taints", []).append(
        {"key": "nvidia.com/gpu", "value": "maintenance", "effect": "NoExecute"})


def _device_plugin_on_a_dra_node(s: Snapshot) -> None:
    # the operator's device plugin also runs on a DRA node: the same GPUs published a second way
    n = node(s, "h100-1")
    for key in ("capacity", "allocatable"):
        n["status"][key]["nvidia.com/gpu"] = "8"


def _dra_plugin_on_a_device_plugin_node(s: Snapshot) -> None:
    src = next(x for x in s.resource_slices or [] if x["spec"]["nodeName"] == "l4-3")
    twin = copy.deepcopy(src)
    twin["metadata"]["name"] = "l4-1-gpu.nvidia.com-twin"
    twin["spec"]["nodeName"] = twin["spec"]["pool"]["name"] = "l4-1"
    assert s.resource_slices is not None
    s.resource_slices.append(twin)


def _device_removed(s: Snapshot) -> None:
    sl = next(x for x in s.resource_slices or [] if x["spec"]["nodeName"] == "h100-2")
    sl["spec"]["devices"] = sl["spec"]["devices"][:-1]


def _stale_static_mig_layout(s: Snapshot) -> None:
    # a100-2's plugin started before its MIG manager applied all-balanced: every GPU still whole
    sl = next(x for x in s.resource_slices or [] if x["spec"]["nodeName"] == "a100-2")
    gpus = [dict(copy.deepcopy(sl["spec"]["devices"][0]), name=f"gpu-{i}") for i in range(8)]
    for d in gpus:
        d["attributes"] = {k: v for k, v in d["attributes"].items() if k not in ("profile", "parentUUID")}
        d["attributes"]["type"] = {"string": "gpu"}
    sl["spec"]["devices"] = gpus


def _extra_device(s: Snapshot) -> None:
    sl = next(x for x in s.resource_slices or [] if x["spec"]["nodeName"] == "h100-1")
    sl["spec"]["devices"].append(dict(copy.deepcopy(sl["spec"]["devices"][0]), name="gpu-8"))


def _class(s: Snapshot, name: str) -> dict[str, Any]:
    return next(d for d in s.device_classes or [] if d["metadata"]["name"] == name)


def _selector_widened(s: Snapshot) -> None:
    _class(s, "gpu-80gb")["spec"]["selectors"] = [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]


def _selectors_deleted(s: Snapshot) -> None:
    _class(s, "hopper")["spec"]["selectors"] = []


def _charts_class_newer(s: Snapshot) -> None:
    ours = _class(s, "dra-nvidia-gpu")
    assert s.device_classes is not None
    s.device_classes.append({"metadata": {"name": "gpu.nvidia.com", "creationTimestamp": "2999-01-01T00:00:00Z"},
                             "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
                                      "extendedResourceName": ours["spec"]["extendedResourceName"]}})


def _claim_holds_a_vanished_device(s: Snapshot) -> None:
    assert s.resource_claims is not None
    s.resource_claims.append({
        "metadata": {"name": "train-0", "namespace": "ml-research", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu-80gb"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "h100-1", "device": "gpu-9"}]}}}})


def _quarantined_device_gone(s: Snapshot) -> None:
    assert s.device_taint_rules is not None
    s.device_taint_rules.append(quarantine.rule_object(spec().kubernetes.minor[1], "h100-1", "gpu-9",
                                                            "XID 79", "NoExecute"))


def _ds(s: Snapshot, name: str) -> dict[str, Any]:
    return next(d for d in s.daemonsets if d["metadata"]["name"] == name)


def _daemonset_missing(s: Snapshot) -> None:
    s.daemonsets = [d for d in s.daemonsets if d["metadata"]["name"] != "nvidia-device-plugin-daemonset"]


def _daemonset_on_fewer_nodes(s: Snapshot) -> None:
    st = _ds(s, "gpu-feature-discovery")["status"]
    for key in ("desiredNumberScheduled", "currentNumberScheduled", "updatedNumberScheduled", "numberReady",
                "numberAvailable"):
        st[key] -= 1


def _daemonset_not_ready(s: Snapshot) -> None:
    st = _ds(s, "nvidia-mig-manager")["status"]
    st["numberReady"] = st["numberAvailable"] = 0
    st["numberUnavailable"] = st["desiredNumberScheduled"]


def _daemonset_stale(s: Snapshot) -> None:
    # a new spec the controller has not acted on: the status still counts the old pods
    _ds(s, "nvidia-container-toolkit-daemonset")["metadata"]["generation"] += 1


def _flannel(s: Snapshot) -> dict[str, Any]:
    return of(s.daemonsets, "kube-flannel", "kube-flannel-ds")


def _netpol_addon_off(s: Snapshot) -> None:
    # what the chart renders with netpol.enabled false (daemonset.yaml's guard): flanneld's container alone
    spec_ = _flannel(s)["spec"]["template"]["spec"]
    spec_["containers"] = [c for c in spec_["containers"] if c["name"] != "kube-network-policies"]


def _enforcer_not_ready(s: Snapshot) -> None:
    st = _flannel(s)["status"]
    st["numberReady"] -= 1
    st["numberAvailable"] -= 1
    st["numberUnavailable"] = 1


def _enforcer_on_fewer_nodes(s: Snapshot) -> None:
    # a node the DaemonSet does not place a pod on (a nodeSelector, or a taint its tolerations miss)
    st = _flannel(s)["status"]
    for key in ("desiredNumberScheduled", "currentNumberScheduled", "updatedNumberScheduled", "numberReady",
                "numberAvailable"):
        st[key] -= 1


def _flannel_missing(s: Snapshot) -> None:
    s.daemonsets.remove(_flannel(s))


def _xid(s: Snapshot) -> None:
    e = exporter(s, "h200-1")
    e["text"] = set_series(e["text"], "DCGM_FI_DEV_XID_ERRORS", 3, 79, err_code="79",
                           err_msg="GPU has fallen off the bus")


def _ecc(s: Snapshot) -> None:
    e = exporter(s, "l4-2")
    e["text"] = set_series(e["text"], "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1, 2)


def _row_remap_failed(s: Snapshot) -> None:
    e = exporter(s, "a100-1")
    e["text"] = set_series(e["text"], "DCGM_FI_DEV_ROW_REMAP_FAILURE", 0, 1)


def _gpu_off_the_bus(s: Snapshot) -> None:
    e = exporter(s, "h100-2")
    e["text"] = drop_gpu(e["text"], 7)


def _exporter_down(s: Snapshot) -> None:
    e = exporter(s, "h100-1")
    e.update(text="", error="GET /api/v1/namespaces/gpu-operator/pods/x:9400/proxy/metrics: HTTP 503: "
                            "connection refused", status=503)


def _validator_failed(s: Snapshot) -> None:
    pod = next(p for p in s.operator_pods or [] if p["metadata"]["labels"].get("app") == "nvidia-operator-validator"
               and p["spec"]["nodeName"] == "l4-1")
    st = pod["status"]
    st["conditions"] = [dict(c, status="False") if c["type"] in ("Ready", "ContainersReady") else c
                        for c in st.get("conditions") or []]
    st["initContainerStatuses"] = [
        {"name": "driver-validation", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "toolkit-validation", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "cuda-validation", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}},
        {"name": "plugin-validation", "state": {"waiting": {"reason": "PodInitializing"}}}]
    ds = _ds(s, "nvidia-operator-validator")["status"]  # the DaemonSet counts the pod not ready, too
    ds["numberReady"] -= 1
    ds["numberAvailable"] -= 1


def _validator_pod(s: Snapshot, node: str) -> dict[str, Any]:
    return next(p for p in s.operator_pods or [] if p["metadata"]["labels"].get("app") == "nvidia-operator-validator"
                and p["spec"]["nodeName"] == node)


def _validator_stops_at_plugin_on_a_device_plugin_node(s: Snapshot) -> None:
    # what NVIDIA/gpu-operator#2550 does on DRA-only nodes (the recording holds it there), on h200-1, whose
    # device plugin should advertise its GPUs: a real fault here
    h200, h100 = _validator_pod(s, "h200-1"), _validator_pod(s, "h100-1")
    h200["status"] = copy.deepcopy(h100["status"])
    ds = _ds(s, "nvidia-operator-validator")["status"]
    ds["numberReady"] -= 1
    ds["numberAvailable"] -= 1


def _validator_driver_fails_on_a_dra_only_node(s: Snapshot) -> None:
    # h100-1 (DRA only) stops at plugin-validation as upstream's does; now its driver validation fails first
    st = _validator_pod(s, "h100-1")["status"]
    st["initContainerStatuses"] = [
        {"name": "driver-validation", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}},
        *({"name": n, "state": {"waiting": {"reason": "PodInitializing"}}}
          for n in ("toolkit-validation", "cuda-validation", "plugin-validation"))]


def _dra_device_tainted(s: Snapshot) -> None:
    sl = next(x for x in s.resource_slices or [] if x["spec"]["nodeName"] == "h100-1")
    sl["spec"]["devices"][0]["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]


def _npd_reports_a_gpu(s: Snapshot) -> None:
    s.daemonsets.append({"metadata": {"name": "node-problem-detector", "namespace": "kube-system"},
                         "status": {"desiredNumberScheduled": 9, "numberReady": 9}})
    node(s, "h200-1")["status"]["conditions"].append(
        {"type": "GpuUnhealthy", "status": "True", "reason": "XidError", "message": "XID 79 on GPU 3"})


def _metrics_url_unreachable(s: Snapshot) -> None:
    s.dcgm.append({"source": "http://127.0.0.1:9/metrics", "node": "", "text": "", "url": True,
                   "error": "<urlopen error [Errno 111] Connection refused>"})


def _quota(s: Snapshot, ns: str) -> dict[str, Any]:
    return of(s.quotas, ns, "gpucluster-quota")


def _quota_raised(s: Snapshot) -> None:
    _quota(s, "inference")["spec"]["hard"]["requests.nvidia.com/gpu"] = "99"


def _quota_key_dropped(s: Snapshot) -> None:
    del _quota(s, "ml-research")["spec"]["hard"]["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"]


def _quota_deleted(s: Snapshot) -> None:
    s.quotas = [q for q in s.quotas if q["metadata"]["namespace"] != "inference"]


def _limit_range_deleted(s: Snapshot) -> None:
    s.limit_ranges = [lr for lr in s.limit_ranges if lr["metadata"]["namespace"] != "inference"]


def _limit_range_changed(s: Snapshot) -> None:
    of(s.limit_ranges, "inference", "gpucluster-defaults")["spec"]["limits"][0]["default"]["cpu"] = "64"


def _policy_allow_all(s: Snapshot) -> None:
    np = of(s.network_policies, "inference", "gpucluster-isolate")
    np["spec"]["ingress"], np["spec"]["egress"] = [{}], [{}]


def _extra_policy(s: Snapshot) -> None:
    s.network_policies.append({"metadata": {"name": "open", "namespace": "inference"},
                               "spec": {"podSelector": {}, "ingress": [{}], "policyTypes": ["Ingress"]}})


def _ns(s: Snapshot, name: str) -> dict[str, Any]:
    return next(n for n in s.namespaces if n["metadata"]["name"] == name)


def _pod_security_lowered(s: Snapshot) -> None:
    _ns(s, "inference")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "privileged"


def _binding_warns_only(s: Snapshot) -> None:
    b = next(b for b in s.admission_bindings or []
             if b["metadata"]["name"] == "gpucluster-tenant-resourceclaims")
    b["spec"]["validationActions"] = ["Warn"]


def _policy_deleted(s: Snapshot) -> None:
    s.admission_policies = [p for p in s.admission_policies or [] if p["metadata"]["name"] != "gpucluster-tenant-pods"]


def _allowances_widened(s: Snapshot) -> None:
    _ns(s, "inference")["metadata"]["annotations"]["gpucluster.dev/allowed-device-classes"] = "gpu.nvidia.com"


def _cluster_admin_bound(s: Snapshot) -> None:
    # what the authorizer answers once `inference` is bound to cluster-admin: yes to everything
    assert s.access is not None
    s.access = {q: True if q.group == "inference" else a for q, a in s.access.items()}


def _role_lost_a_grant(s: Snapshot) -> None:
    assert s.access is not None
    s.access[question(s, "inference", "create", "", "pods", "inference")] = False


def _deletecollection_quotas(s: Snapshot) -> None:
    # a tenant Role given deletecollection on ResourceQuotas: the one verb the others do not imply
    assert s.access is not None
    s.access[question(s, "inference-admins", "deletecollection", "", "resourcequotas", "inference")] = True


def _reads_another_tenants_secrets(s: Snapshot) -> None:
    assert s.access is not None
    s.access[question(s, "inference", "get", "", "secrets", "ml-research")] = True


def _enters_the_operators_pods(s: Snapshot) -> None:
    assert s.access is not None
    s.access[question(s, "ml-research-admins", "create", "", "pods/exec", "gpu-operator")] = True


def _queue(s: Snapshot, name: str) -> dict[str, Any]:
    return next(q for q in s.queues or [] if q["metadata"]["name"] == name)


def _queue_capability_raised(s: Snapshot) -> None:
    _queue(s, "inference")["spec"]["capability"]["nvidia.com/gpu"] = "999"


def _queue_weight_changed(s: Snapshot) -> None:
    _queue(s, "ml-research")["spec"]["weight"] += 7


def _queue_not_reclaimable(s: Snapshot) -> None:
    q = _queue(s, "inference")["spec"]
    q["reclaimable"] = not q.get("reclaimable", True)


def _queue_guarantee_added(s: Snapshot) -> None:
    q = _queue(s, "inference")["spec"]
    q["guarantee"] = {"resource": {"nvidia.com/gpu": "4"}}
    q["deserved"] = {"nvidia.com/gpu": "4"}


def _node_moved_to_another_leaf(s: Snapshot) -> None:
    node = next(n for n in s.nodes if n["metadata"]["name"] == "h200-1")
    node["metadata"]["labels"]["gpucluster.dev/topology-leaf"] = "leaf-1"  # its HyperNode is leaf.leaf-3


def _leaf_hypernode_deleted(s: Snapshot) -> None:
    s.hypernodes = [h for h in s.hypernodes or [] if h["metadata"]["name"] != "leaf.leaf-2"]


def _kubelet_config(name: str) -> dict[str, Any]:
    """A real kubelet's running configuration (v1.37.2, the Molecule site scenario: tests/data/verify/record.py)."""
    return json.loads((DATA / "kubelet-configz" / f"{name}.json").read_text())["kubeletconfig"]


def _kubelet_joined_before_the_pool_set_its_policies(s: Snapshot) -> None:
    assert s.kubelet_configs is not None
    s.kubelet_configs["h200-1"] = _kubelet_config("defaults")  # a kubelet that runs the defaults


def _kubelet_reserved_memory_edited(s: Snapshot) -> None:
    assert s.kubelet_configs is not None
    s.kubelet_configs["h200-1"]["reservedMemory"][0]["limits"]["memory"] = "512Mi"


def _kubelet_cpus_reserved_differently(s: Snapshot) -> None:
    assert s.kubelet_configs is not None
    s.kubelet_configs["h200-1"]["reservedSystemCPUs"] = "0-1"


def _priority_value_changed(s: Snapshot) -> None:
    pc = next(p for p in s.priority_classes if p["metadata"]["name"] == "training")
    pc["value"] += 1


def _priority_made_global_default(s: Snapshot) -> None:
    next(p for p in s.priority_classes if p["metadata"]["name"] == "notebooks")["globalDefault"] = True


def _another_global_default(s: Snapshot) -> None:
    s.priority_classes.append({"metadata": {"name": "everyone-high"}, "value": 900000, "globalDefault": True,
                               "preemptionPolicy": "PreemptLowerPriority"})


def _rules(s: Snapshot) -> dict[str, Any]:
    return next(r for r in s.prometheus_rules or [] if r["metadata"]["name"] == "gpucluster-gpu-alerts")


def _alert(s: Snapshot, name: str) -> dict[str, Any]:
    return next(r for g in _rules(s)["spec"]["groups"] for r in g["rules"] if r.get("alert") == name)


def _alert_dropped(s: Snapshot) -> None:
    for g in _rules(s)["spec"]["groups"]:
        g["rules"] = [r for r in g["rules"] if r.get("alert") != "GPUXidError"]


def _alert_neutered(s: Snapshot) -> None:
    _alert(s, "GPUDoubleBitECCError")["expr"] = "vector(0) > 1"


def _alert_delayed(s: Snapshot) -> None:
    _alert(s, "GPURowRemapFailure")["for"] = "8760h"


def _alert_downgraded(s: Snapshot) -> None:
    _alert(s, "GPUXidError")["labels"]["severity"] = "info"


def _rules_unselected(s: Snapshot) -> None:
    labels = _rules(s)["metadata"]["labels"]
    for key in list(labels):
        labels[key] = "someone-else"


def _loaded(s: Snapshot, name: str) -> dict[str, Any]:
    return next(r for g in s.prometheus_loaded or [] for r in g.get("rules") or [] if r.get("name") == name)


def _prometheus_evaluates_another_expr(s: Snapshot) -> None:
    # the object is as rendered, but the Prometheus kept (or was handed) another rule file
    _loaded(s, "GPURowRemapFailure")["query"] = "DCGM_FI_DEV_ROW_REMAP_FAILURE > 1"


def _alert_not_loaded(s: Snapshot) -> None:
    for g in s.prometheus_loaded or []:
        g["rules"] = [r for r in g.get("rules") or [] if r.get("name") != "GPUXidError"]


def _alert_fails_to_evaluate(s: Snapshot) -> None:
    _loaded(s, "GPUCountBelowSpec").update(health="err", lastError="many-to-many matching not allowed")


def _chart_other_version(s: Snapshot) -> None:
    reencode(record_of(s, "gpu-operator"), lambda b: b["chart"]["metadata"].update(version="v25.10.0"))


def _chart_missing(s: Snapshot) -> None:
    s.helm_releases = [r for r in s.helm_releases or [] if r["metadata"]["labels"]["name"] != "volcano"]


def _chart_values_changed(s: Snapshot) -> None:
    reencode(record_of(s, "gpu-operator"), lambda b: b["config"]["dcgmExporter"].update(enabled=False))


def _newer_revision_of_another_chart(s: Snapshot) -> None:
    # two records say deployed (Helm's history corrupted by concurrent runs): Helm takes the newer one
    rel = release("dra-driver")
    assert s.helm_releases is not None
    s.helm_releases.append(helm_record(rel.name, rel.namespace, rel.chart, "0.1.0", rel.values, revision=7))


def _forged_record_in_a_tenant_namespace(s: Snapshot) -> None:
    # the release is gone; a tenant admin (who may write Secrets) forges its record in the tenant namespace
    rel = release("gpu-operator")
    assert s.helm_releases is not None
    s.helm_releases = [r for r in s.helm_releases if r["metadata"]["labels"]["name"] != rel.name]
    s.helm_releases.append(helm_record(rel.name, "inference", rel.chart, rel.version, rel.values))


def _exporter_csv_gone(s: Snapshot) -> None:
    # local world: the ConfigMap the simulated exporter mounts is deleted, so no exporter can start
    for e in s.dcgm:
        e.update(text="", status=503, error="ConfigMap gpu-operator/gpucluster-dcgm-metrics (key dcgm-metrics.csv) "
                                            "not found: the exporter pod cannot mount its metrics CSV")


GPU_NODES = ("h100-1", "h100-2", "a100-1", "a100-2", "l4-1", "l4-2", "l4-3", "h200-1")

#: Every named fault, by id: what it breaks and the rows that must fail (nothing else may change).
FAULTS: dict[str, Fault] = {
    "node-not-ready": fault(_not_ready, ("node-ready", "a100-1")),
    "unknown-node": fault(_unknown_node, ("node-known", "stray-1")),
    "allocatable-lowered": fault(_allocatable_lowered, ("node-allocatable", "l4-1")),
    # a changed sharing config changes what the nodes advertise *and* their replicas label
    "replicas-halved": fault(_replicas_halved, *((c, n) for c in ("node-capacity", "node-allocatable", "node-labels")
                                                 for n in ("l4-1", "l4-2"))),
    "wrong-product": fault(_wrong_product, ("node-labels", "h200-1")),
    "taint-removed": fault(_taint_removed, ("node-taints", "h200-1")),
    "extra-managed-taint": fault(_extra_managed_taint, ("node-taints", "l4-1")),
    "gpus-published-twice-device-plugin": fault(_device_plugin_on_a_dra_node, ("node-capacity", "h100-1"),
                                                ("node-allocatable", "h100-1")),
    "gpus-published-twice-dra": fault(_dra_plugin_on_a_device_plugin_node, ("dra-slices", "l4-1")),
    "device-removed": fault(_device_removed, ("dra-slices", "h100-2")),
    "extra-dra-device": fault(_extra_device, ("dra-slices", "h100-1")),
    # the only node with 1g.10gb MIG devices for DRA publishes none: the class that asks for them matches nothing
    "stale-static-mig-layout": fault(_stale_static_mig_layout, ("dra-slices", "a100-2"),
                                     ("deviceclass-matches", "deviceclass/mig-1g-10gb")),
    "class-selector-widened": fault(_selector_widened, ("deviceclass-matches", "deviceclass/gpu-80gb")),
    "class-selectors-deleted": fault(_selectors_deleted, ("deviceclass-matches", "deviceclass/hopper")),
    "charts-class-newer": fault(_charts_class_newer, ("dra-extended-resource", "extended-resource/nvidia.com/gpu")),
    "claim-holds-a-vanished-device": fault(_claim_holds_a_vanished_device, ("dra-claims", "tenants/ml-research")),
    "quarantined-device-gone": fault(_quarantined_device_gone, ("dra-quarantine", "h100-1/gpu-9")),
    "daemonset-missing": fault(_daemonset_missing,
                               ("daemonsets-ready", "gpu-operator/nvidia-device-plugin-daemonset")),
    "daemonset-on-fewer-nodes": fault(_daemonset_on_fewer_nodes,
                                      ("daemonsets-ready", "gpu-operator/gpu-feature-discovery")),
    "daemonset-not-ready": fault(_daemonset_not_ready, ("daemonsets-ready", "gpu-operator/nvidia-mig-manager")),
    "daemonset-status-stale": fault(_daemonset_stale,
                                    ("daemonsets-ready", "gpu-operator/nvidia-container-toolkit-daemonset")),
    "netpol-addon-off": fault(_netpol_addon_off, ("network-policy-enforcer", "kube-flannel/kube-flannel-ds")),
    "enforcer-not-ready": fault(_enforcer_not_ready, ("network-policy-enforcer", "kube-flannel/kube-flannel-ds")),
    "enforcer-on-fewer-nodes": fault(_enforcer_on_fewer_nodes,
                                     ("network-policy-enforcer", "kube-flannel/kube-flannel-ds")),
    "flannel-missing": fault(_flannel_missing, ("network-policy-enforcer", "kube-flannel/kube-flannel-ds")),
    "xid-79": fault(_xid, ("gpu-health", "h200-1")),
    "double-bit-ecc": fault(_ecc, ("gpu-health", "l4-2")),
    "row-remap-failed": fault(_row_remap_failed, ("gpu-health", "a100-1")),
    "gpu-off-the-bus": fault(_gpu_off_the_bus, ("gpu-health", "h100-2")),
    "exporter-down": fault(_exporter_down, ("gpu-health", "h100-1")),
    "validator-failed": fault(_validator_failed, ("gpu-health", "l4-1"),
                              ("daemonsets-ready", "gpu-operator/nvidia-operator-validator")),
    "validator-2550-on-a-device-plugin-node": fault(_validator_stops_at_plugin_on_a_device_plugin_node,
                                                    ("gpu-health", "h200-1"),
                                                    ("daemonsets-ready", "gpu-operator/nvidia-operator-validator")),
    "validator-driver-fails-on-a-dra-only-node": fault(_validator_driver_fails_on_a_dra_only_node,
                                                       ("gpu-health", "h100-1"),
                                                       ("daemonsets-ready", "gpu-operator/nvidia-operator-validator")),
    "dra-device-tainted": fault(_dra_device_tainted, ("gpu-health", "h100-1")),
    "npd-gpu-condition": fault(_npd_reports_a_gpu, ("gpu-health", "h200-1")),
    "metrics-url-unreachable": fault(_metrics_url_unreachable, ("gpu-metrics", "http://127.0.0.1:9/metrics")),
    "exporter-csv-gone": fault(_exporter_csv_gone, *(("gpu-health", n) for n in GPU_NODES), base="local-world"),
    "quota-raised": fault(_quota_raised, ("tenant-quota", "tenants/inference")),
    "quota-key-dropped": fault(_quota_key_dropped, ("tenant-quota", "tenants/ml-research")),
    "quota-deleted": fault(_quota_deleted, ("tenant-quota", "tenants/inference")),
    "limit-range-deleted": fault(_limit_range_deleted, ("tenant-limitrange", "tenants/inference")),
    "limit-range-changed": fault(_limit_range_changed, ("tenant-limitrange", "tenants/inference")),
    "network-policy-allow-all": fault(_policy_allow_all, ("tenant-security", "tenants/inference")),
    "extra-network-policy": fault(_extra_policy, ("tenant-security", "tenants/inference")),
    "pod-security-lowered": fault(_pod_security_lowered, ("tenant-security", "tenants/inference")),
    "binding-warns-only": fault(_binding_warns_only,
                                ("tenant-admission", "validatingadmissionpolicy/gpucluster-tenant-resourceclaims")),
    "policy-deleted": fault(_policy_deleted, ("tenant-admission", "validatingadmissionpolicy/gpucluster-tenant-pods")),
    "allowances-widened": fault(_allowances_widened, ("tenant-admission", "tenants/inference")),
    "cluster-admin-bound": fault(_cluster_admin_bound, ("tenant-rbac", "tenants/inference")),
    "role-lost-a-grant": fault(_role_lost_a_grant, ("tenant-rbac", "tenants/inference")),
    "deletecollection-on-quotas": fault(_deletecollection_quotas, ("tenant-rbac", "tenants/inference")),
    "reads-another-tenants-secrets": fault(_reads_another_tenants_secrets, ("tenant-rbac", "tenants/inference")),
    "execs-into-operator-pods": fault(_enters_the_operators_pods, ("tenant-rbac", "tenants/ml-research")),
    "queue-capability-raised": fault(_queue_capability_raised, ("tenant-queue", "tenants/inference")),
    "queue-weight-changed": fault(_queue_weight_changed, ("tenant-queue", "tenants/ml-research")),
    "queue-reclaimable-flipped": fault(_queue_not_reclaimable, ("tenant-queue", "tenants/inference")),
    "queue-guarantee-added": fault(_queue_guarantee_added, ("tenant-queue", "tenants/inference")),
    "node-moved-to-another-leaf": fault(_node_moved_to_another_leaf, ("topology-domains", "h200-1"),
                                        ("node-labels", "h200-1")),
    "leaf-hypernode-deleted": fault(_leaf_hypernode_deleted, ("topology-domains", "a100-1"),
                                    ("topology-domains", "a100-2")),
    "kubelet-joined-before-the-pool-set-its-policies": fault(_kubelet_joined_before_the_pool_set_its_policies,
                                                             ("kubelet-resource-managers", "h200-1")),
    "kubelet-reserved-memory-edited": fault(_kubelet_reserved_memory_edited, ("kubelet-resource-managers", "h200-1")),
    "kubelet-cpus-reserved-differently": fault(_kubelet_cpus_reserved_differently,
                                               ("kubelet-resource-managers", "h200-1")),
    "priority-class-value-changed": fault(_priority_value_changed, ("priority-classes", "priorityclass/training")),
    "priority-class-made-global-default": fault(_priority_made_global_default,
                                                ("priority-classes", "priorityclass/notebooks")),
    "another-global-default": fault(_another_global_default, ("priority-classes", "priorityclass/everyone-high")),
    "alert-dropped": fault(_alert_dropped, ("alert-rules", "prometheusrule/monitoring/gpucluster-gpu-alerts")),
    "alert-neutered": fault(_alert_neutered, ("alert-rules", "prometheusrule/monitoring/gpucluster-gpu-alerts")),
    "alert-delayed": fault(_alert_delayed, ("alert-rules", "prometheusrule/monitoring/gpucluster-gpu-alerts")),
    "alert-downgraded": fault(_alert_downgraded, ("alert-rules", "prometheusrule/monitoring/gpucluster-gpu-alerts")),
    "rules-unselected": fault(_rules_unselected, ("alert-rules", "prometheusrule/monitoring/gpucluster-gpu-alerts")),
    "prometheus-evaluates-another-expr": fault(_prometheus_evaluates_another_expr,
                                               ("alert-rules", "prometheusrule/monitoring/gpucluster-gpu-alerts")),
    "alert-not-loaded": fault(_alert_not_loaded, ("alert-rules", "prometheusrule/monitoring/gpucluster-gpu-alerts")),
    "alert-fails-to-evaluate": fault(_alert_fails_to_evaluate,
                                     ("alert-rules", "prometheusrule/monitoring/gpucluster-gpu-alerts")),
    "chart-other-version": fault(_chart_other_version, ("charts-installed", "release/gpu-operator")),
    "chart-missing": fault(_chart_missing, ("charts-installed", "release/volcano")),
    "chart-values-changed": fault(_chart_values_changed, ("charts-installed", "release/gpu-operator")),
    "newer-revision-of-another-chart": fault(_newer_revision_of_another_chart,
                                             ("charts-installed", "release/dra-driver")),
    "forged-record-in-a-tenant-namespace": fault(_forged_record_in_a_tenant_namespace,
                                                 ("charts-installed", "release/gpu-operator")),
}
