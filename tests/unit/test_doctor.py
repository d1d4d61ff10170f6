"""The doctor's reasoning on recorded objects: each cause found where it holds, and not where it does not.

Objects are written in the shape the API server returns them, with only the fields the doctor reads
(tests/integration/test_doctor_live.py proves the same causes on objects the real scheduler, quota
admission, Volcano and DRA allocation wrote). Spec: tests/data/doctor.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.doctor import diagnose_pod
from gpucluster.doctor.model import Diagnosis, Finding, View
from gpucluster.doctor.objects import extended_requests, selects, tolerates
from gpucluster.doctor.pools import Pool
from gpucluster.doctor.report import text, to_json
from gpucluster.doctor.workloads import cause_of, diagnose_workload, short_of_pods
from gpucluster.spec import load_spec

SPEC = load_spec(Path(__file__).resolve().parents[1] / "data" / "doctor")
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
T0 = "2026-01-01T00:00:00Z"


def node(name: str, alloc: dict[str, str], *, labels: dict[str, str] | None = None, ready: bool = True,
         taints: list[dict] | None = None, cordoned: bool = False, fields: list[dict] | None = None) -> dict:
    meta = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}, "managedFields": fields or []}
    return {"metadata": meta,
            "spec": {"taints": [GPU_TAINT] if taints is None else taints,
                     **({"unschedulable": True} if cordoned else {})},
            "status": {"allocatable": {"cpu": "32", **alloc},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def l4_nodes(**kw: object) -> list[dict]:
    return [node(n, {"nvidia.com/gpu": "4"}, **kw) for n in ("l4-1", "l4-2")]  # type: ignore[arg-type]


def pod(name: str, ns: str = "plain", *, gpus: int = 0, resource: str = "nvidia.com/gpu", tolerate: bool = True,
        node_name: str = "", phase: str = "Pending", group: str = "", claim: str = "", scheduler: str = "",
        priority: str = "", selector: dict | None = None) -> dict:
    limits = {resource: str(gpus)} if gpus else {}
    spec: dict = {"containers": [{"name": "main", "resources": {"limits": limits}}]}
    if tolerate:
        spec["tolerations"] = [TOLERATION]
    if node_name:
        spec["nodeName"] = node_name
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    if scheduler:
        spec["schedulerName"] = scheduler
    if priority:
        spec["priorityClassName"] = priority
    if selector:
        spec["nodeSelector"] = selector
    meta: dict = {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def event(ns: str, kind: str, name: str, reason: str, message: str, api: str = "v1") -> dict:
    return {"involvedObject": {"kind": kind, "namespace": ns, "name": name, "apiVersion": api}, "reason": reason,
            "type": "Warning", "message": message, "lastTimestamp": T0, "count": 1}


def view(nodes: list[dict], pods: list[dict], **kw: object) -> View:
    return View(spec=SPEC, nodes=nodes, pods=pods, **kw)  # type: ignore[arg-type]


def why(p: dict, v: View) -> Diagnosis:
    return diagnose_pod(p, v)


# -- reading objects ------------------------------------------------------------------------------
def test_tolerations_follow_the_core_v1_rules() -> None:
    assert tolerates([TOLERATION], GPU_TAINT)
    assert tolerates([{"operator": "Exists"}], GPU_TAINT)  # empty key + Exists tolerates everything
    assert tolerates([{"key": "nvidia.com/gpu", "value": "present"}], GPU_TAINT)  # Equal is the default
    assert not tolerates([{"key": "nvidia.com/gpu", "value": "absent"}], GPU_TAINT)
    assert not tolerates([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], GPU_TAINT)
    assert not tolerates([{"key": "other", "operator": "Exists"}], GPU_TAINT)


def test_requests_count_limits_and_the_largest_init_container() -> None:
    p = pod("x", gpus=2)
    p["spec"]["initContainers"] = [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "3"}}}]
    p["spec"]["containers"].append({"name": "b", "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "1"}}})
    assert extended_requests(p) == {"nvidia.com/gpu": 3}  # max(3, 2 + 1)


def test_node_selector_and_required_affinity() -> None:
    p = pod("x", selector={"gpucluster.dev/pool": "l4"})
    assert selects(p, {"gpucluster.dev/pool": "l4"}) and not selects(p, {"gpucluster.dev/pool": "h100"})
    p = pod("y")
    p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["40000"]}]}]}}}
    assert selects(p, {"nvidia.com/gpu.memory": "81559"}) and not selects(p, {"nvidia.com/gpu.memory": "23034"})


# -- healthy pods are not blamed ------------------------------------------------------------------
def test_a_running_pod_is_not_blamed() -> None:
    p = pod("ok", gpus=1, node_name="l4-1", phase="Running")
    d = why(p, view(l4_nodes(), [p]))
    assert not d.blocked and d.cause.cause == "running" and d.node == "l4-1"


def test_a_pending_pod_that_fits_is_schedulable() -> None:
    p = pod("fits", gpus=4)
    d = why(p, view(l4_nodes(), [p]))
    assert not d.blocked and d.cause.cause == "schedulable" and "2 more pod(s)" in d.cause.summary


# -- per cause: the positive next to the negative ---------------------------------------------------
def test_missing_toleration() -> None:
    p = pod("x", gpus=1, tolerate=False)
    d = why(p, view(l4_nodes(), [p]))
    assert d.cause.cause == "untolerated-taint"
    assert "nvidia.com/gpu=present:NoSchedule" in d.cause.summary
    assert "{key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}" in d.cause.fix
    assert why(pod("y", gpus=1), view(l4_nodes(), [])).cause.cause == "schedulable"


def test_no_pool_can_ever_fit_too_many_gpus_or_an_unknown_resource_or_a_selector() -> None:
    d = why(pod("x", gpus=5), view(l4_nodes(), []))
    assert d.cause.cause == "no-pool-fits"
    assert "largest node advertises 4 (pool l4)" in d.cause.summary and "at most 4" in d.cause.fix
    d = why(pod("m", gpus=1, resource="nvidia.com/mig-3g.40gb"), view(l4_nodes(), []))
    assert d.cause.cause == "no-pool-fits" and "no pool offers nvidia.com/mig-3g.40gb" in d.cause.summary
    assert "nvidia.com/mig-1g.10gb" in d.cause.summary  # what the pools do offer
    d = why(pod("s", gpus=1, selector={"gpucluster.dev/pool": "h100-dra"}), view(l4_nodes(), []))
    assert d.cause.cause == "no-pool-fits" and "gpucluster.dev/pool=l4" in d.cause.fix
    assert why(pod("ok", gpus=4, selector={"gpucluster.dev/pool": "l4"}), view(l4_nodes(
        labels={"gpucluster.dev/pool": "l4"}), [])).cause.cause == "schedulable"


def test_node_advertising_no_gpus_during_a_mig_change() -> None:
    fields = [{"manager": "nvidia-mig-manager", "operation": "Update", "time": T0, "fieldsV1": {
        "f:metadata": {"f:labels": {"f:nvidia.com/mig.config.state": {}}}}}]
    paused = {"nvidia.com/mig.config": "gpucluster-a100-mig", "nvidia.com/mig.config.state": "pending",
              "nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change",
              "nvidia.com/gpu.deploy.gpu-feature-discovery": "paused-for-mig-change"}
    wedged = node("a100-1", {"nvidia.com/mig-1g.10gb": "0"}, labels=paused, fields=fields)
    p = pod("x", gpus=1, resource="nvidia.com/mig-1g.10gb")
    v = view([wedged], [p])
    v.now = 1767225600.0 + 900  # 15 minutes after T0
    d = why(p, v)
    assert d.cause.cause == "mig-change-in-progress"
    assert any("a100-1" in e and "state=pending for at least 900 s" in e and "2 nvidia.com/gpu.deploy.*" in e
               for e in d.cause.evidence), d.cause.evidence
    done = node("a100-1", {"nvidia.com/mig-1g.10gb": "14"}, labels={
        "nvidia.com/mig.config": "gpucluster-a100-mig", "nvidia.com/mig.config.state": "success"})
    assert why(p, view([done], [p])).cause.cause == "schedulable"


def test_gpus_not_advertised_by_a_stopped_device_plugin() -> None:
    off = [node("l4-1", {}, labels={"nvidia.com/gpu.deploy.device-plugin": "false"}), node("l4-2", {})]
    crashing = {"metadata": {"name": "nvidia-device-plugin-daemonset-abcde", "namespace": "gpu-operator"},
                "spec": {"nodeName": "l4-2"}, "status": {"phase": "Running", "containerStatuses": [
                    {"ready": False, "restartCount": 7, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}
    d = why(pod("x", gpus=1), view(off, [crashing]))
    assert d.cause.cause == "gpus-not-advertised"
    assert any("nvidia.com/gpu.deploy.device-plugin=false" in e and "no device-plugin pod" in e
               for e in d.cause.evidence), d.cause.evidence
    assert any(e.startswith("l4-2:") and "not Ready (CrashLoopBackOff), 7 restarts" in e for e in d.cause.evidence)


def test_nodes_unavailable_and_busy() -> None:
    down = [node("l4-1", {"nvidia.com/gpu": "4"}, ready=False), node("l4-2", {"nvidia.com/gpu": "4"}, cordoned=True)]
    d = why(pod("x", gpus=1), view(down, []))
    assert d.cause.cause == "nodes-unavailable"
    assert {"l4-1: NotReady", "l4-2: cordoned (spec.unschedulable)"} <= set(d.cause.evidence)
    holders = [pod(f"h{i}", gpus=3, node_name=f"l4-{i}", phase="Running") for i in (1, 2)]
    d = why(pod("x", gpus=2), view(l4_nodes(), holders))
    assert d.cause.cause == "insufficient-gpus" and "l4-1: 1 of 4 nvidia.com/gpu free" in d.cause.evidence
    assert why(pod("y", gpus=1), view(l4_nodes(), holders)).cause.cause == "schedulable"


def _volcano(members: int, *, queue_used: int = 0) -> tuple[list[dict], list[dict], list[dict]]:
    groups = [{"metadata": {"name": "g", "namespace": "team-b"}, "spec": {"minMember": members, "queue": "team-b"},
               "status": {"conditions": [{"type": "Unschedulable", "status": "True",
                                          "message": "1/1 tasks in gang unschedulable"}]}}]
    pods = [pod(f"g-{i}", "team-b", gpus=1, group="g", scheduler="volcano") for i in range(2)]
    if queue_used:
        groups.append({"metadata": {"name": "run", "namespace": "team-b"}, "spec": {"minMember": 1,
                       "queue": "team-b"}})
        pods.append(pod("run-0", "team-b", gpus=queue_used, group="run", node_name="l4-2", phase="Running"))
    queues = [{"metadata": {"name": "team-b"}, "spec": {"capability": {"nvidia.com/gpu": "2"}},
               "status": {"state": "Open"}}]
    return groups, pods, queues


def test_gang_incomplete() -> None:
    groups, pods, queues = _volcano(3)
    d = why(pods[0], view(l4_nodes(), pods, podgroups=groups, queues=queues))
    assert d.cause.cause == "gang-incomplete" and "needs 3" in d.cause.summary and "only 2 exist" in d.cause.summary
    assert "PodGroup g Unschedulable: 1/1 tasks in gang unschedulable" in d.cause.evidence
    groups, pods, queues = _volcano(2)
    assert why(pods[0], view(l4_nodes(), pods, podgroups=groups, queues=queues)).cause.cause == "schedulable"


def test_queue_capability_reached() -> None:
    groups, pods, queues = _volcano(1, queue_used=2)
    d = why(pods[0], view(l4_nodes(), pods, podgroups=groups, queues=queues))
    assert d.cause.cause == "queue-capability"
    assert "holds 2 of its capability 2" in d.cause.summary and "tenants[1].queue.capabilityGpus" in d.cause.fix
    groups, pods, queues = _volcano(1, queue_used=1)
    assert why(pods[0], view(l4_nodes(), pods, podgroups=groups, queues=queues)).cause.cause == "schedulable"


def test_gang_that_does_not_fit_at_once() -> None:
    groups, pods, queues = _volcano(2)
    queues[0]["spec"]["capability"]["nvidia.com/gpu"] = "8"
    blockers = [pod("b1", gpus=4, node_name="l4-1", phase="Running"), pod("b2", gpus=3, node_name="l4-2",
                                                                           phase="Running")]
    d = why(pods[0], view(l4_nodes(), pods + blockers, podgroups=groups, queues=queues))
    assert d.cause.cause == "gang-does-not-fit" and "holds only 1" in d.cause.summary


def _dra(allocated: int) -> View:
    devices = [{"name": f"gpu-{i}", "attributes": {"gpu.nvidia.com/productName": {"string": "NVIDIA H100 80GB HBM3"}},
                "capacity": {"gpu.nvidia.com/memory": {"value": "81559Mi"}}} for i in range(2)]
    slices = [{"spec": {"driver": "gpu.nvidia.com", "pool": {"name": "h100-1"}, "nodeName": "h100-1",
                        "devices": devices}}]
    classes = [{"metadata": {"name": n}, "spec": {"selectors": [{"cel": {"expression": e}}]}} for n, e in (
        ("gpu-80gb", "device.driver == 'gpu.nvidia.com' && "
                     "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80G')) >= 0"),
        ("b200", "device.driver == 'gpu.nvidia.com' && "
                 "device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('b200')"))]

    def claim(name: str, cls: str, device: str = "") -> dict:
        out: dict = {"metadata": {"name": name, "namespace": "team-b"}, "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": cls, "count": 1}}]}}}
        if device:
            out["status"] = {"allocation": {"devices": {"results": [
                {"driver": "gpu.nvidia.com", "pool": "h100-1", "device": device, "request": "gpu"}]}}}
        return out
    claims = [claim(f"held-{i}", "gpu-80gb", f"gpu-{i}") for i in range(allocated)]
    claims += [claim("want-80gb", "gpu-80gb"), claim("want-b200", "b200")]
    return view([node("h100-1", {}, labels={"gpucluster.dev/dra": "true"})], [], slices=slices, claims=claims,
                device_classes=classes)


def test_dra_class_matches_nothing_free() -> None:
    d = why(pod("b", "team-b", claim="want-b200"), _dra(0))
    assert d.cause.cause == "dra-no-free-device" and "DeviceClass b200 matches none of the 2" in d.cause.summary
    d = why(pod("h", "team-b", claim="want-80gb"), _dra(2))
    assert d.cause.cause == "dra-no-free-device" and "all 2 devices DeviceClass gpu-80gb matches are allocated" \
        in d.cause.summary
    assert "held by claim team-b/held-0" in d.cause.evidence
    assert why(pod("h", "team-b", claim="want-80gb"), _dra(1)).cause.cause == "schedulable"


def test_a_device_under_a_taint_the_claim_does_not_tolerate_is_not_free() -> None:
    """One GPU held, the other tainted by the DRA driver's health monitor (in its slice) or by gpucluster's
    quarantine (a DeviceTaintRule): blocked, naming the taint and whose it is; effect None and a
    toleration leave it free."""
    def blocked(v: View) -> Finding:
        d = why(pod("h", "team-b", claim="want-80gb"), v)
        assert d.cause.cause == "dra-no-free-device", d.cause
        return d.cause

    v = _dra(1)
    gpu1 = v.slices[0]["spec"]["devices"][1]  # type: ignore[index]
    gpu1["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]
    cause = blocked(v)
    assert "of the 2 devices DeviceClass gpu-80gb matches, 1 carry a taint the request does not tolerate" \
        in cause.summary
    assert "h100-1/gpu-1 tainted gpu.nvidia.com/xid=79:NoSchedule (the DRA driver's health monitor)" in cause.evidence
    assert "held by claim team-b/held-0" in cause.evidence and "gpucluster quarantine --list" in cause.fix
    gpu1["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "13", "effect": "None"}]  # informational
    assert why(pod("h", "team-b", claim="want-80gb"), v).cause.cause == "schedulable"
    want = next(c for c in v.claims if c["metadata"]["name"] == "want-80gb")  # type: ignore[union-attr]
    gpu1["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]
    want["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [
        {"key": "gpu.nvidia.com/xid", "operator": "Exists"}]
    assert why(pod("h", "team-b", claim="want-80gb"), v).cause.cause == "schedulable"

    q = _dra(1)
    q.taint_rules = [{"metadata": {"name": "gpucluster-quarantine-h100-1-gpu-1"}, "spec": {
        "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "h100-1", "device": "gpu-1"},
        "taint": {"key": "gpucluster.dev/quarantine", "value": "XID-79", "effect": "NoExecute"}}},
        {"metadata": {"name": "elsewhere"}, "spec": {"deviceSelector": {"pool": "h100-9"},
                                                      "taint": {"key": "k", "effect": "NoSchedule"}}}]
    assert "h100-1/gpu-1 tainted gpucluster.dev/quarantine=XID-79:NoExecute (DeviceTaintRule " \
           "gpucluster-quarantine-h100-1-gpu-1)" in blocked(q).evidence


def test_a_selector_whose_evaluation_fails_blocks_the_request() -> None:
    # The devices publish no profile: Kubernetes' CEL fails on them ("no such key") and the scheduler fails
    # the allocation, so the doctor names that, not "matches none".
    v = _dra(0)
    v.device_classes.append({"metadata": {"name": "mig-1g"}, "spec": {"selectors": [{"cel": {
        "expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}})
    v.claims.append({"metadata": {"name": "want-mig", "namespace": "team-b"}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "mig-1g", "count": 1}}]}}})
    d = why(pod("m", "team-b", claim="want-mig"), v)
    assert d.cause.cause == "dra-selector-error"
    assert "fails on device gpu-0 (no such key: profile" in d.cause.summary and "has(" in d.cause.fix


def test_the_scheduler_message_is_the_answer_when_no_rule_explains_it() -> None:
    p = pod("x", gpus=1)
    msg = "0/5 nodes are available: 2 Insufficient cpu."
    d = why(p, view(l4_nodes(), [p], events=[event("plain", "Pod", "x", "FailedScheduling", msg)]))
    assert d.cause.cause == "unknown" and d.cause.evidence == (f"scheduler: {msg}",)


def test_a_pod_with_a_priority_class_outside_its_tenant_gets_a_note_not_the_blame() -> None:
    p = pod("x", "team-a", gpus=1, node_name="l4-1", phase="Running", priority="training")
    d = why(p, view(l4_nodes(), [p]))
    assert not d.blocked and [f.cause for f in d.also] == ["priority-class-not-allowed"]


# -- workloads whose pods are refused at creation -----------------------------------------------------
QUOTA_MSG = ('Error creating: pods "more-x1" is forbidden: exceeded quota: gpucluster-quota, requested: '
             "limits.nvidia.com/gpu=1,requests.nvidia.com/gpu=1, used: limits.nvidia.com/gpu=2,"
             "requests.nvidia.com/gpu=2, limited: limits.nvidia.com/gpu=2,requests.nvidia.com/gpu=2")


def _job(priority: str = "") -> dict:
    spec = {"priorityClassName": priority} if priority else {}
    return {"spec": {"parallelism": 1, "template": {"spec": spec}}, "status": {}}


def test_over_quota() -> None:
    v = view([], [], quotas=[{"metadata": {"name": "gpucluster-quota", "namespace": "team-a"},
                              "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}}])
    f = cause_of(QUOTA_MSG, "team-a", _job(), v)
    assert f.cause == "quota-exceeded"
    assert "requests.nvidia.com/gpu used 2 of 2" in f.summary and "tenants[0].quota.gpus in the spec (now 2)" in f.fix


def test_priority_class_not_allowed_by_policy_or_by_a_scoped_quota_and_missing() -> None:
    v = view([], [])
    vap = 'Error creating: pods "x" is forbidden: ValidatingAdmissionPolicy \'p\' denied request: tenant team-a ...'
    f = cause_of(vap, "team-a", _job("training"), v)
    assert f.cause == "priority-class-not-allowed" and "allowed: batch-inference" in f.summary
    assert "tenants[0].priorityClasses" in f.fix
    assert cause_of(vap, "team-a", _job("batch-inference"), v).cause == "create-refused"  # refused for another reason
    scoped = view([], [], quotas=[{"metadata": {"name": "no-training", "namespace": "team-a"}, "spec": {
        "hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["training"]}]}}}])
    msg = ('pods "x" is forbidden: exceeded quota: no-training, requested: pods=1, used: pods=0, limited: pods=0')
    assert cause_of(msg, "team-a", _job("training"), scoped).cause == "priority-class-not-allowed"
    missing = 'pods "x" is forbidden: no PriorityClass with name nope was found'
    f = cause_of(missing, "team-a", _job("nope"), v)
    assert f.cause == "priority-class-missing" and "nope" in f.summary


def test_workload_diagnosis_and_whether_it_is_still_short_of_pods() -> None:
    v = view([], [], events=[event("team-a", "Job", "more", "FailedCreate", QUOTA_MSG, "batch/v1")])
    d = diagnose_workload("Job", "team-a", "more", v.events, v)
    assert d.subject == "Job team-a/more" and d.phase == "NotCreated" and d.blocked
    assert short_of_pods("Job", _job())
    assert not short_of_pods("Job", {**_job(), "status": {"active": 1}})
    assert not short_of_pods("Job", {**_job(), "status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    assert short_of_pods("ReplicaSet", {"spec": {"replicas": 2}, "status": {"replicas": 1}})


def test_reports() -> None:
    d = Diagnosis("plain/x", "Pending", Finding("no-pool-fits", "too big", "ask less", ("scheduler: no",)))
    out = text([d])
    assert "plain/x  Pending  BLOCKED" in out and "[no-pool-fits] too big" in out and "1 diagnosed, 1 blocked" in out
    assert '"cause": "no-pool-fits"' in to_json([d], {})
    with pytest.raises(ValueError):
        Finding("made-up", "x")


def test_the_node_cause_most_nodes_share_is_the_answer_and_the_rest_are_listed() -> None:
    nodes = [node("l4-1", {"nvidia.com/gpu": "4"}, cordoned=True), node("l4-2", {"nvidia.com/gpu": "4"})]
    holders = [pod("h", gpus=4, node_name="l4-2", phase="Running")]
    d = why(pod("x", gpus=1), view(nodes, holders))
    # one node each: the cause examined first on a node wins the tie
    assert d.cause.cause == "nodes-unavailable" and [f.cause for f in d.also] == ["insufficient-gpus"]
    more = [*nodes, node("l4-3", {"nvidia.com/gpu": "4"})]
    busy = [*holders, pod("h3", gpus=4, node_name="l4-3", phase="Running")]
    v = view(more, busy)
    three = Pool("l4", ("l4-1", "l4-2", "l4-3"), {"nvidia.com/gpu": 4}, {"gpucluster.dev/pool": "l4"}, dra=False)
    d = diagnose_pod(pod("x", gpus=1), v, pools=[three])
    assert d.cause.cause == "insufficient-gpus" and [f.cause for f in d.also] == ["nodes-unavailable"]


def test_a_dra_node_publishing_an_old_mig_layout_is_named() -> None:
    # GFD relabels after the MIG change; the DRA kubelet plugin still publishes what it read at start
    def mig(i: int, profile: str) -> dict:
        return {"name": f"gpu-0-mig-{profile.replace('.', '')}-{i}", "attributes": {
            "type": {"string": "mig"}, "profile": {"string": profile}, "uuid": {"string": f"MIG-{i}"}}}
    slices = [{"spec": {"driver": "gpu.nvidia.com", "pool": {"name": "a100-2"}, "nodeName": "a100-2",
                        "devices": [mig(0, "3g.40gb"), mig(1, "3g.40gb")]}}]
    classes = [{"metadata": {"name": "mig-1g"}, "spec": {"selectors": [{"cel": {"expression":
               "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}}]
    claims = [{"metadata": {"name": "want-1g", "namespace": "team-b"}, "spec": {"devices": {"requests": [
        {"name": "mig", "exactly": {"deviceClassName": "mig-1g", "count": 1}}]}}}]

    def labels(state: str, count: str) -> dict[str, str]:
        return {"gpucluster.dev/dra": "true", "nvidia.com/mig.config.state": state,
                "nvidia.com/mig-1g.10gb.count": count}

    stale = why(pod("m", "team-b", claim="want-1g"), view([node("a100-2", {}, labels=labels("success", "7"))], [],
                                                        slices=slices, claims=claims, device_classes=classes))
    assert stale.cause.cause == "dra-no-free-device" and "once, at start" in stale.cause.fix
    assert any("GFD labels MIG devices {'1g.10gb': 7}" in e and "{'3g.40gb': 2}" in e for e in stale.cause.evidence)
    # while the MIG manager is still at work, or when GFD agrees with the slice, the plain advice stays
    for state, count in (("pending", "7"), ("success", "0")):
        d = why(pod("m", "team-b", claim="want-1g"), view([node("a100-2", {}, labels=labels(state, count))], [],
                                                      slices=slices, claims=claims, device_classes=classes))
        assert d.cause.cause == "dra-no-free-device" and "once, at start" not in d.cause.fix
