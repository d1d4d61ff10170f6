"""`gpucluster doctor` against the real scheduler: one scenario per cause, and a healthy pod next to each.

Real: etcd, kube-apiserver (quota, Priority and ValidatingAdmissionPolicy admission), kube-scheduler,
kube-controller-manager (Job controller, quota and DRA claim controllers), kwok, vc-scheduler and
vc-controller-manager. SIMULATED: GPUs and kubelets (the GPU simulator runs in the background, as in
`gpucluster up`). Spec: tests/data/doctor (L4 x4 device-plugin nodes, an A100 MIG node, an H100 DRA
node; tenants team-a, team-b with queue capability 2, team-c).

Each test creates the situation, waits for the component that reacts to it (the scheduler's
FailedScheduling event, a controller's FailedCreate event, Volcano's PodGroup), runs the CLI as a user
would and checks the cause it names. The MIG test needs the simulator's MIG-manager sequence and wedge
fault (gpucluster.dev/simulate-mig-wedge).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import RESTRICTED, RESTRICTED_POD, Cluster, wait_for

from gpucluster import labels
from gpucluster.addons import gpu_simulator
from gpucluster.addons import volcano as local_volcano
from gpucluster.cli.main import entrypoint
from gpucluster.render import render
from gpucluster.simulator import FAULTS
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec

pytestmark = [pytest.mark.integration, pytest.mark.slow]
DATA = Path(__file__).resolve().parents[1] / "data" / "doctor"
LOCAL_WORLD = {"tools": ("vc-scheduler", "vc-controller-manager", "controller-gen")}
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
NAMESPACES = ("team-a", "team-b", "team-c", "plain")
WEDGE = "gpucluster.dev/simulate-mig-wedge"
needs_mig_sequence = pytest.mark.skipif(
    WEDGE not in {*FAULTS.values(), *(v for v in vars(labels).values() if isinstance(v, str))},
    reason=f"waits on the GPU simulator playing the MIG manager's sequence and its wedge fault ({WEDGE})")


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return load_spec(DATA)


@pytest.fixture(scope="module")
def world(lw: Cluster, spec: ClusterSpec) -> Iterator[Cluster]:
    local_volcano.start(lw.world, spec)
    objs = sorted(render(spec).objects(), key=lambda o: o["kind"] not in ("Namespace", "CustomResourceDefinition"))
    lw.apply(*objs, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "plain"}})
    if not any(o["kind"] == "ValidatingAdmissionPolicy" for o in objs):
        lw.apply(*priority_policy(spec))
    gpu_simulator.spawn(lw.state_dir, lw.kubeconfig, DATA, interval=1.0)
    wait_for("8 L4 GPUs advertised on Ready nodes", lambda: sum(
        int(n["status"].get("allocatable", {}).get("nvidia.com/gpu", 0)) for n in lw.get("nodes")["items"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))) == 8,
        timeout=120)
    yield lw
    gpu_simulator.stop(lw.state_dir)


@pytest.fixture(autouse=True)
def clean(world: Cluster) -> Iterator[None]:
    yield
    for ns in NAMESPACES:
        world.kubectl("delete", "jobs.batch,jobs.batch.volcano.sh,podgroups.scheduling.volcano.sh,pods,"
                      "resourceclaims", "--all", "-n", ns, "--wait=false")
    wait_for("test pods gone", lambda: not any(world.get("pods", "-n", ns)["items"] for ns in NAMESPACES),
             timeout=90)


def priority_policy(spec: ClusterSpec) -> list[dict]:
    """Until the tenant admission policies of issue 14 are rendered: one that refuses, per tenant, the
    PriorityClasses the spec does not allow it (the rendered ones replace this when present)."""
    out = []
    for t in spec.tenants:
        allowed = ", ".join(f"'{p}'" for p in t.priority_classes)
        name = f"test-priority-{t.name}"
        out += [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                 "metadata": {"name": name},
                 "spec": {"failurePolicy": "Fail",
                          "matchConstraints": {"namespaceSelector": {"matchLabels": {
                              "kubernetes.io/metadata.name": t.ns}},
                              "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                 "resources": ["pods"]}]},
                          "validations": [{"expression": f"!has(object.spec.priorityClassName) || "
                                                         f"object.spec.priorityClassName in [{allowed}]",
                                           "message": f"tenant {t.name} may use these PriorityClasses only: "
                                                      f"{', '.join(t.priority_classes)}"}]}},
                {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                 "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}}]
    return out


# -- helpers ------------------------------------------------------------------------------------
def pod_spec(gpus: int = 0, *, tolerate: bool = True, resource: str = "nvidia.com/gpu", claim: str = "",
             scheduler: str = "", priority: str = "") -> dict:
    resources: dict = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}
    if gpus:
        resources["limits"][resource] = str(gpus)
    spec: dict = {"restartPolicy": "Never", "securityContext": RESTRICTED_POD,
                  "containers": [{"name": "main", "image": "example/worker:1", "resources": resources,
                                  "securityContext": RESTRICTED}]}
    if tolerate:
        spec["tolerations"] = [TOLERATION]
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claim}]
        resources["claims"] = [{"name": "gpu"}]
    if scheduler:
        spec["schedulerName"] = scheduler
    if priority:
        spec["priorityClassName"] = priority
    return spec


def pod(name: str, ns: str, *, group: str = "", **kw: object) -> dict:
    meta: dict = {"name": name, "namespace": ns}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec(**kw)}  # type: ignore[arg-type]


def job(name: str, ns: str, **kw: object) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": {"backoffLimit": 0, "template": {"spec": pod_spec(**kw)}}}  # type: ignore[arg-type]


def vcjob(name: str, ns: str, gpus: int) -> dict:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": {"schedulerName": "volcano", "queue": ns, "minAvailable": 1, "maxRetry": 1,
                     "priorityClassName": "batch-inference",
                     "tasks": [{"name": "w", "replicas": 1, "minAvailable": 1, "maxRetry": 1,
                                "template": {"metadata": {"labels": {"job": name}},
                                             "spec": pod_spec(gpus, scheduler="volcano",
                                                              priority="batch-inference")}}]}}


def podgroup(name: str, ns: str, members: int) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name,
            "namespace": ns}, "spec": {"minMember": members, "queue": ns}}


def events(world: Cluster, ns: str, name: str, reason: str) -> list[str]:
    items = world.get("events", "-n", ns, "--field-selector", f"involvedObject.name={name},reason={reason}")["items"]
    return [e.get("message", "") for e in items]


def doctor(world: Cluster, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    """Run the CLI in-process (JSON output); its exit code and the decoded answer."""
    capsys.readouterr()
    rc = entrypoint(["doctor", *args, "-i", str(DATA), "--kubeconfig", str(world.kubeconfig), "-o", "json"])
    out = capsys.readouterr().out
    return rc, json.loads(out)


def diagnose(world: Cluster, target: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    rc, out = doctor(world, "pod", target, capsys=capsys)
    return rc, out["diagnoses"][0]


def bound(world: Cluster, ns: str, name: str) -> str:
    return world.get("pod", "-n", ns, name)["spec"].get("nodeName", "")


def scheduled_or_refused(world: Cluster, ns: str, name: str) -> None:
    wait_for(f"{ns}/{name}: FailedScheduling", lambda: events(world, ns, name, "FailedScheduling"), timeout=60)


# -- scenarios ----------------------------------------------------------------------------------
def test_bad_target_is_exit_2_and_a_missing_pod_names_how_to_look(world: Cluster,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert entrypoint(["doctor", "pod", "no-slash", "-i", str(DATA), "--kubeconfig", str(world.kubeconfig)]) == 2
    assert "NAMESPACE/NAME" in capsys.readouterr().err
    assert entrypoint(["doctor", "pod", "plain/ghost", "-i", str(DATA), "--kubeconfig", str(world.kubeconfig)]) == 2
    err = capsys.readouterr().err
    assert "no pod plain/ghost" in err and "Traceback" not in err
    assert entrypoint(["doctor", "pending", "-n", "nowhere", "-i", str(DATA),
                       "--kubeconfig", str(world.kubeconfig)]) == 2
    assert "namespace nowhere does not exist" in capsys.readouterr().err


def test_over_quota(world: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    world.apply(pod("holder", "team-a", gpus=2))  # team-a's whole quota
    wait_for("holder bound", lambda: bound(world, "team-a", "holder"))
    world.apply(job("more", "team-a", gpus=1, priority="batch-inference"))
    wait_for("FailedCreate on Job more", lambda: events(world, "team-a", "more", "FailedCreate"))
    rc, d = diagnose(world, "team-a/more", capsys)
    assert rc == 1 and d["cause"] == "quota-exceeded", d
    assert "gpucluster-quota" in d["summary"] and "tenants[0].quota.gpus" in d["fix"], d
    rc, holder = diagnose(world, "team-a/holder", capsys)  # the pod using the quota is not blamed
    assert rc == 0 and holder["cause"] == "running" and not holder["blocked"], holder
    rc, listed = doctor(world, "pending", "-n", "team-a", capsys=capsys)
    assert [x["subject"] for x in listed["diagnoses"]] == ["Job team-a/more"], listed


def test_priority_class_not_allowed_and_missing(world: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    world.apply(job("wrong-class", "team-a", gpus=1, priority="training"),
                job("no-class", "team-a", gpus=1, priority="does-not-exist"),
                job("right-class", "team-a", gpus=1, priority="batch-inference"))
    for name in ("wrong-class", "no-class"):
        wait_for(f"FailedCreate on Job {name}", lambda name=name: events(world, "team-a", name, "FailedCreate"))
    rc, d = diagnose(world, "team-a/wrong-class", capsys)
    assert rc == 1 and d["cause"] == "priority-class-not-allowed", d
    assert "training" in d["summary"] and "batch-inference" in d["fix"], d
    rc, d = diagnose(world, "team-a/no-class", capsys)
    assert d["cause"] == "priority-class-missing" and "does-not-exist" in d["summary"], d
    # the allowed class: its pod is created and runs, and is not blamed
    right = wait_for("right-class pod bound", lambda: [p for p in world.get("pods", "-n", "team-a")["items"]
                                                       if p["metadata"]["name"].startswith("right-class")
                                                       and p["spec"].get("nodeName")])
    rc, ok = diagnose(world, f"team-a/{right[0]['metadata']['name']}", capsys)
    assert rc == 0 and ok["cause"] == "running", ok


def test_queue_capability_reached(world: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    world.apply(vcjob("first", "team-b", 2))  # the queue's whole capability (2)
    first = wait_for("first bound", lambda: [p for p in world.get("pods", "-n", "team-b", "-l", "job=first")["items"]
                                             if p["spec"].get("nodeName")])
    world.apply(vcjob("second", "team-b", 1))
    second = wait_for("second's pod", lambda: world.get("pods", "-n", "team-b", "-l", "job=second")["items"])
    rc, d = diagnose(world, f"team-b/{second[0]['metadata']['name']}", capsys)
    assert rc == 1 and d["cause"] == "queue-capability", d
    assert "holds 2 of its capability 2" in d["summary"] and "capabilityGpus" in d["fix"], d
    rc, ok = diagnose(world, f"team-b/{first[0]['metadata']['name']}", capsys)
    assert rc == 0 and ok["cause"] == "running", ok


def test_gang_incomplete(world: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    world.apply(podgroup("three", "team-c", 3),
                *[pod(f"three-{i}", "team-c", gpus=1, scheduler="volcano", group="three") for i in range(2)])
    rc, d = diagnose(world, "team-c/three-0", capsys)
    assert rc == 1 and d["cause"] == "gang-incomplete", d
    assert "needs 3" in d["summary"] and "only 2 exist" in d["summary"], d
    assert not bound(world, "team-c", "three-0")


def test_complete_gang_runs_and_is_not_blamed(world: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    world.apply(podgroup("two", "team-c", 2),
                *[pod(f"two-{i}", "team-c", gpus=1, scheduler="volcano", group="two") for i in range(2)])
    wait_for("both members bound", lambda: all(bound(world, "team-c", f"two-{i}") for i in range(2)), timeout=90)
    rc, d = diagnose(world, "team-c/two-1", capsys)
    assert rc == 0 and d["cause"] == "running", d


def test_missing_toleration(world: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    world.apply(pod("untolerated", "plain", gpus=1, tolerate=False), pod("tolerated", "plain", gpus=1))
    scheduled_or_refused(world, "plain", "untolerated")
    rc, d = diagnose(world, "plain/untolerated", capsys)
    assert rc == 1 and d["cause"] == "untolerated-taint", d
    assert "nvidia.com/gpu=present:NoSchedule" in d["summary"] and "tolerations:" in d["fix"], d
    wait_for("tolerated bound", lambda: bound(world, "plain", "tolerated"))
    rc, ok = diagnose(world, "plain/tolerated", capsys)
    assert rc == 0 and ok["cause"] == "running", ok


def test_no_pool_can_ever_fit(world: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    world.apply(pod("five", "plain", gpus=5), pod("big-mig", "plain", gpus=1, resource="nvidia.com/mig-3g.40gb"),
                pod("four", "plain", gpus=4))
    for name in ("five", "big-mig"):
        scheduled_or_refused(world, "plain", name)
    rc, d = diagnose(world, "plain/five", capsys)
    assert rc == 1 and d["cause"] == "no-pool-fits", d
    assert "largest node advertises 4" in d["summary"] and "at most 4" in d["fix"], d
    rc, d = diagnose(world, "plain/big-mig", capsys)
    assert d["cause"] == "no-pool-fits" and "no pool offers nvidia.com/mig-3g.40gb" in d["summary"], d
    wait_for("four bound", lambda: bound(world, "plain", "four"))
    rc, ok = diagnose(world, "plain/four", capsys)
    assert rc == 0 and ok["cause"] == "running", ok


def test_dra_class_matches_nothing_free(world: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    world.apply(pod("b200", "team-b", claim="one-b200"),
                *[pod(f"h100-{i}", "team-b", claim="one-80gb-gpu") for i in range(2)])
    wait_for("both H100 claims bound", lambda: all(bound(world, "team-b", f"h100-{i}") for i in range(2)))
    world.apply(pod("h100-2", "team-b", claim="one-80gb-gpu"))
    for name in ("b200", "h100-2"):
        scheduled_or_refused(world, "team-b", name)
    rc, d = diagnose(world, "team-b/b200", capsys)
    assert rc == 1 and d["cause"] == "dra-no-free-device", d
    assert "DeviceClass b200 matches none" in d["summary"], d
    rc, d = diagnose(world, "team-b/h100-2", capsys)
    assert d["cause"] == "dra-no-free-device" and "are allocated" in d["summary"], d
    assert any("held by claim team-b/" in e for e in d["evidence"]), d
    rc, ok = diagnose(world, "team-b/h100-0", capsys)
    assert rc == 0 and ok["cause"] == "running", ok


def test_pending_lists_every_blocked_gpu_pod_once(world: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    world.apply(pod("a", "plain", gpus=1, tolerate=False), pod("b", "plain", gpus=9), pod("c", "plain", gpus=1),
                pod("cpu-only", "plain", tolerate=False))
    for name in ("a", "b"):
        scheduled_or_refused(world, "plain", name)
    wait_for("c bound", lambda: bound(world, "plain", "c"))
    rc, out = doctor(world, "pending", "-n", "plain", capsys=capsys)
    got = {d["subject"]: d["cause"] for d in out["diagnoses"]}
    assert rc == 1 and got == {"plain/a": "untolerated-taint", "plain/b": "no-pool-fits"}, got


@needs_mig_sequence
def test_node_advertising_no_gpus_during_a_mig_change(world: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    """Waits on the simulator's MIG-manager sequence and its wedge fault (gpucluster.dev/simulate-mig-wedge)."""
    world.apply(pod("mig-ok", "plain", gpus=1, resource="nvidia.com/mig-1g.10gb"))
    wait_for("mig-ok bound", lambda: bound(world, "plain", "mig-ok"))
    rc, ok = diagnose(world, "plain/mig-ok", capsys)
    assert rc == 0 and ok["cause"] == "running", ok
    world.kubectl("delete", "pod", "-n", "plain", "mig-ok")
    world.kubectl("annotate", "node", "a100-1", f"{WEDGE}=true", "--overwrite")
    try:  # a layout change that wedges (gpu-operator issue 2833): pending, clients paused, 0 GPUs advertised
        world.kubectl("label", "node", "a100-1", "nvidia.com/mig.config=all-disabled", "--overwrite")

        def wedged() -> bool:
            node = world.get("node", "a100-1")
            return node["metadata"]["labels"].get("nvidia.com/mig.config.state") == "pending" and \
                int(node["status"]["allocatable"].get("nvidia.com/mig-1g.10gb", "0")) == 0
        wait_for("a100-1 wedged in its MIG change", wedged, timeout=60)
        world.apply(pod("mig-wait", "plain", gpus=1, resource="nvidia.com/mig-1g.10gb"))
        scheduled_or_refused(world, "plain", "mig-wait")
        rc, d = diagnose(world, "plain/mig-wait", capsys)
        assert rc == 1 and d["cause"] == "mig-change-in-progress", d
        assert any(e.startswith("a100-1:") and "state=pending" in e and "paused-for-mig-change" in e
                   for e in d["evidence"]), d
        assert "mig-reconfig" in d["fix"], d
    finally:  # the recovery `gpucluster verify` prints for this wedge
        world.kubectl("annotate", "node", "a100-1", f"{WEDGE}-")
        labels = world.get("node", "a100-1")["metadata"]["labels"]
        paused = [k for k, v in labels.items() if v == "paused-for-mig-change"]
        if paused:
            world.kubectl("label", "node", "a100-1", *[f"{k}=true" for k in paused], "--overwrite")
        world.kubectl("label", "node", "a100-1", "nvidia.com/mig.config=gpucluster-a100-mig", "--overwrite")
