"""Volcano on the local world: gang admission, queue caps and weights, priorities, DRA gangs.

Real: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, vc-scheduler and
vc-controller-manager (built from volcano.sh/volcano), CRDs generated from the Volcano Go types.
SIMULATED: the GPUs and kubelets (gpucluster's simulator publishes nodes, allocatable and
ResourceSlices; kwok marks bound pods Running). Spec: tests/data/volcano (6 nodes x 2 GPUs, two
80 GB DRA devices, two L4 DRA devices). "Bound" means ``spec.nodeName`` is set. Blocker pods that
stand for other users' GPUs name their node directly (no scheduler involved).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from cluster_helpers import Cluster, delete_volcano_jobs_and_pods, free_gpus, gpus_of, volcano_world, wait_for

from gpucluster.addons import volcano as local_volcano
from gpucluster.kube import Kube
from gpucluster.local import addons
from gpucluster.render import render, volcano
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec

pytestmark = [pytest.mark.integration, pytest.mark.slow]
DATA = Path(__file__).resolve().parents[1] / "data" / "volcano"
TEST_NAMESPACES = ("capped", "team-a", "team-b", "inference", "blockers")
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


#: A local world of our own without the operators' CRDs (Volcano installs its own).
LOCAL_WORLD = {"crds": False, "tools": ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager",
                                        "controller-gen")}


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return load_spec(DATA)


@pytest.fixture(scope="module")
def kube(lw: Cluster, spec: ClusterSpec) -> Iterator[Kube]:
    """The world with Volcano running, the rendered objects applied and the simulated nodes Ready."""
    rendered = render(spec).components
    # Tenants' Namespaces and claim templates, not their ResourceQuotas: the tests prove what the
    # queues enforce, so the namespace quota must not be what stops a pod.
    tenant_objs = [o for o in rendered["tenants"] if o["kind"] in ("Namespace", "ResourceClaimTemplate")]
    objs = [*rendered["namespaces"], *rendered["gpu-operator"], *rendered["dra-driver"], *rendered["volcano"],
            *tenant_objs, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "blockers"}}]
    with volcano_world(lw, spec, objs, gpus=12) as client:
        yield client


@pytest.fixture(autouse=True)
def clean(kube: Kube, lw: Cluster) -> Iterator[None]:
    yield
    delete_volcano_jobs_and_pods(lw, kube, TEST_NAMESPACES, claims=True)


# -- helpers ------------------------------------------------------------------------------------
def pods(kube: Kube, ns: str, selector: str = "") -> list[dict]:
    query = f"?labelSelector={selector}" if selector else ""
    return [p for p in kube.items(f"/api/v1/namespaces/{ns}/pods{query}") if not p["metadata"].get("deletionTimestamp")]


def bound(items: list[dict]) -> list[dict]:
    return [p for p in items if p["spec"].get("nodeName")]


def pod_spec(gpus: int, priority: str | None, scheduler: str = "volcano", claim: bool = False) -> dict:
    """A restricted-profile pod spec asking for ``gpus`` (or one claim from one-80gb-gpu)."""
    resources: dict = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    if claim:
        resources["claims"] = [{"name": "gpu"}]
    out: dict = {
        "schedulerName": scheduler,
        "restartPolicy": "Never",
        "tolerations": [GPU_TOLERATION],
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "main", "image": "example/worker:1", "resources": resources,
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
    }
    if priority:
        out["priorityClassName"] = priority
    if claim:
        out["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-80gb-gpu"}]
    return out


def vcjob(name: str, ns: str, replicas: int, gpus: int, *, priority: str = "training",
          min_available: int | None = None, claim: bool = False) -> dict:
    """A Volcano Job with every field the admission webhook would otherwise default."""
    minimum = replicas if min_available is None else min_available
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "schedulerName": volcano.SCHEDULER_NAME, "queue": ns, "minAvailable": minimum, "maxRetry": 3,
            "priorityClassName": priority,
            "tasks": [{"name": "worker", "replicas": replicas, "minAvailable": minimum, "maxRetry": 3,
                       "template": {"metadata": {"labels": {"job": name}},
                                    "spec": pod_spec(gpus, priority, claim=claim)}}],
        },
    }


def plain_pod(name: str, ns: str, gpus: int, *, node: str = "", claim: bool = False) -> dict:
    spec = pod_spec(gpus, None, scheduler="default-scheduler", claim=claim)
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": {"job": name}},
            "spec": spec}


def block(lw: Cluster, nodes: list[str]) -> None:
    """Take both GPUs of each named node with a pod bound there directly."""
    lw.apply(*[plain_pod(f"block-{n}", "blockers", 2, node=n) for n in nodes])


def watch_bound(kube: Kube, ns: str, selector: str, want: int, timeout: float) -> dict[str, float]:
    """Poll until ``want`` pods are bound; return when each pod was first seen bound (monotonic seconds).

    A poll may see some of a gang bound but not all: Volcano decides the gang's placement at once,
    then its binder binds each pod with its own API call (volcano-sh/volcano v1.14.1, the version we
    build, pkg/scheduler/cache/cache.go: DefaultBinder.Bind loops over the tasks, one Pods().Bind
    each; a DRA pod is bound after its claim's allocation is
    written), so a poll can land between two binds (seen in a clean-clone CI run on a busy machine:
    bound counts 0, 1, 2 for a two-pod job). The gang tests check the allocation instead: nothing is
    bound, and nothing held, while the whole gang cannot fit.
    """
    first: dict[str, float] = {}

    def probe() -> bool:
        now = bound(pods(kube, ns, selector))
        for p in now:
            first.setdefault(p["metadata"]["name"], time.monotonic())
        return len(now) == want
    wait_for(f"{want} pods of {selector} bound", probe, timeout=timeout, every=0.1)
    return first


def hold(seconds: float, check: Callable[[], None]) -> None:
    """Run ``check`` repeatedly for ``seconds`` (it asserts a state that must persist)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        check()
        time.sleep(0.5)


# -- the rendered objects against the generated CRDs ----------------------------------------------
def test_rendered_volcano_objects_apply_server_side(kube: Kube, lw: Cluster, spec: ClusterSpec) -> None:
    objs = volcano.objects(spec)
    out = lw.kubectl("apply", "--server-side", "--field-manager=gpucluster-test", "-f", "-",
                  stdin=yaml.safe_dump_all(objs))
    assert "unchanged" in out or "serverside-applied" in out
    for q in (o for o in objs if o["kind"] == "Queue"):
        got = kube.get(f"/apis/scheduling.volcano.sh/v1beta1/queues/{q['metadata']['name']}")
        assert got is not None
        assert {k: got["spec"][k] for k in q["spec"]} == q["spec"]
    # the generated schema carries the Go types' validation markers (weight >= 1)
    bad = dict(objs[-1], spec={**objs[-1]["spec"], "weight": 0})
    proc = lw.run("apply", "--server-side", "--field-manager=gpucluster-test", "--dry-run=server", "-f", "-",
                  stdin=yaml.safe_dump(bad))
    out = proc.stdout + proc.stderr
    assert "spec.weight" in out and "greater than or equal to 1" in out, out


def test_start_again_changes_nothing_and_listens_on_loopback_only(
    kube: Kube, lw: Cluster, spec: ClusterSpec
) -> None:
    before = {n: c.pid for n, c in addons.load(lw.state_dir, local_volcano.NAME).items()}
    assert set(before) == {"vc-webhook-manager", "vc-scheduler", "vc-controller-manager"}
    again = local_volcano.start(lw.world, spec)
    assert {n: c.pid for n, c in again.items()} == before and local_volcano.running(lw.world)
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    mine = [line for line in out.splitlines() if any(f"pid={pid}," in line for pid in before.values())]
    assert mine, out  # both serve /healthz
    assert all(line.split()[3].startswith("127.0.0.1:") for line in mine), mine


# -- gang admission --------------------------------------------------------------------------------
def test_gang_job_waits_for_all_gpus_then_binds_together(kube: Kube, lw: Cluster) -> None:
    block(lw, ["t-1", "t-2", "t-3"])
    wait_for("6 free GPUs", lambda: free_gpus(kube) == 6)
    lw.apply(vcjob("gang", "team-a", replicas=4, gpus=2))
    wait_for("4 gang pods created", lambda: len(pods(kube, "team-a", "job=gang")) == 4)
    hold(8, lambda: not bound(pods(kube, "team-a", "job=gang")) or pytest.fail("a worker was bound early"))
    assert free_gpus(kube) == 6  # nothing held by a half-started job
    lw.kubectl("delete", "pod", "block-t-1", "-n", "blockers", "--wait=false")
    # All or nothing is the allocation (proven above: 6 free GPUs held nothing for 8 s); the four
    # binds that follow are four API calls, and on a loaded machine a poll can land between them.
    first = watch_bound(kube, "team-a", "job=gang", 4, timeout=60)
    assert len(first) == 4


def test_default_scheduler_allocates_part_of_a_gang(kube: Kube, lw: Cluster) -> None:
    """Why Volcano is there: kube-scheduler binds 3 of 4 workers and those 6 GPUs sit idle."""
    block(lw, ["t-1", "t-2", "t-3"])
    wait_for("6 free GPUs", lambda: free_gpus(kube) == 6)
    lw.apply(*[plain_pod(f"worker-{i}", "team-a", 2) for i in range(4)])
    wait_for("3 workers bound", lambda: len(bound(pods(kube, "team-a"))) == 3)
    hold(5, lambda: len(bound(pods(kube, "team-a"))) == 3 or pytest.fail("bound count changed"))
    assert free_gpus(kube) == 0


# -- queues ----------------------------------------------------------------------------------------
def test_queue_capability_caps_a_tenant_while_others_run(kube: Kube, lw: Cluster) -> None:
    lw.apply(*[vcjob(f"c{i}", "capped", replicas=1, gpus=2, priority="batch-inference") for i in range(6)])
    wait_for("4 capped jobs running", lambda: len(bound(pods(kube, "capped"))) == 4)

    def capped_at_8() -> None:
        held = sum(gpus_of(p) for p in bound(pods(kube, "capped")))
        assert held <= 8, f"queue capped holds {held} GPUs, capability is 8"
    hold(6, capped_at_8)
    assert free_gpus(kube) == 4 and len(pods(kube, "capped")) == 6  # two jobs wait despite free GPUs
    lw.apply(vcjob("other", "team-b", replicas=2, gpus=2))
    watch_bound(kube, "team-b", "job=other", 2, timeout=60)
    capped_at_8()


def test_two_busy_queues_share_by_weight(kube: Kube, lw: Cluster) -> None:
    nodes = [f"t-{i}" for i in range(1, 7)]
    block(lw, nodes)  # both queues get all their demand in before anything can run
    wait_for("cluster full", lambda: free_gpus(kube) == 0)
    jobs = [vcjob(f"{t[-1]}{i}", t, replicas=1, gpus=1, priority="batch-inference")
            for i in range(12) for t in ("team-a", "team-b")]
    lw.apply(*jobs)
    groups = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{}/podgroups"
    wait_for("24 podgroups", lambda: sum(len(kube.items(groups.format(t))) for t in ("team-a", "team-b")) == 24)
    lw.kubectl("delete", "pods", "--all", "-n", "blockers", "--wait=false")

    def counts() -> tuple[int, int]:
        return len(bound(pods(kube, "team-a"))), len(bound(pods(kube, "team-b")))

    def settled() -> tuple[int, int] | None:  # the same counts 4 s apart (several scheduling cycles)
        before = counts()
        time.sleep(4)
        return before if sum(before) >= 10 and counts() == before else None
    a, b = wait_for("allocation to settle", settled, timeout=90)
    # weights 60/40 of 12 GPUs deserve 7.2/4.8; one job is one GPU. The fraction (one GPU) either
    # stays idle (7/4) or goes to a queue through backfill (7/5 was seen in a clean-clone run), so
    # the check is the acceptance's: the weights hold within one job's granularity.
    assert abs(a - 7.2) <= 1 and abs(b - 4.8) <= 1 and a > b, (a, b)
    assert a + b <= 12, (a, b)


# -- priorities ------------------------------------------------------------------------------------
def test_online_inference_preempts_batch_when_full(kube: Kube, lw: Cluster) -> None:
    lw.apply(*[vcjob(f"batch{i}", "inference", replicas=1, gpus=2, priority="batch-inference") for i in range(6)])
    wait_for("cluster full of batch", lambda: free_gpus(kube) == 0 and len(bound(pods(kube, "inference"))) == 6)
    lw.apply(vcjob("online", "inference", replicas=1, gpus=2, priority="online-inference"))
    wait_for("online pod bound", lambda: bound(pods(kube, "inference", "job=online")), timeout=90)
    running_batch = [p for p in bound(pods(kube, "inference")) if p["metadata"]["labels"]["job"] != "online"]
    assert len(running_batch) == 5


def test_batch_does_not_preempt_training(kube: Kube, lw: Cluster) -> None:
    lw.apply(vcjob("train", "inference", replicas=6, gpus=2, priority="training"))
    wait_for("training gang bound", lambda: len(bound(pods(kube, "inference", "job=train"))) == 6)
    uids = {p["metadata"]["uid"] for p in pods(kube, "inference", "job=train")}
    lw.apply(vcjob("batch", "inference", replicas=1, gpus=2, priority="batch-inference"))
    wait_for("batch pod created", lambda: pods(kube, "inference", "job=batch"))

    def training_untouched() -> None:
        now = pods(kube, "inference", "job=train")
        assert {p["metadata"]["uid"] for p in now} == uids and len(bound(now)) == 6
        assert not bound(pods(kube, "inference", "job=batch"))
    hold(10, training_untouched)


# -- DRA gangs -------------------------------------------------------------------------------------
def _claim_device(kube: Kube, pod: dict) -> tuple[str, str]:
    name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = kube.get(f"/apis/resource.k8s.io/v1/namespaces/{pod['metadata']['namespace']}/resourceclaims/{name}")
    assert claim is not None
    result = claim["status"]["allocation"]["devices"]["results"][0]
    return result["pool"], result["device"]


def test_dra_gang_binds_two_80gb_devices_together_or_not_at_all(kube: Kube, lw: Cluster) -> None:
    lw.apply(plain_pod("occupant", "capped", 0, claim=True))  # kube-scheduler gives it one 80 GB GPU
    occupant = wait_for("occupant bound", lambda: bound(pods(kube, "capped", "job=occupant")))[0]
    assert occupant["spec"]["nodeName"] in ("d-1", "d-2")
    lw.apply(vcjob("dra", "capped", replicas=2, gpus=0, claim=True))
    wait_for("gang pods created", lambda: len(pods(kube, "capped", "job=dra")) == 2)
    hold(8, lambda: not bound(pods(kube, "capped", "job=dra")) or pytest.fail("bound with one device free"))
    lw.kubectl("delete", "pod", "occupant", "-n", "capped", "--wait=false")
    first_bound = watch_bound(kube, "capped", "job=dra", 2, timeout=60)
    assert max(first_bound.values()) - min(first_bound.values()) <= 30
    gang = bound(pods(kube, "capped", "job=dra"))
    devices = {_claim_device(kube, p) for p in gang}
    assert len(devices) == 2 and {pool for pool, _ in devices} == {"d-1", "d-2"}, devices


def test_default_scheduler_binds_half_a_dra_gang(kube: Kube, lw: Cluster) -> None:
    lw.apply(plain_pod("occupant", "capped", 0, claim=True))
    wait_for("occupant bound", lambda: bound(pods(kube, "capped", "job=occupant")))
    lw.apply(*[plain_pod(f"w{i}", "capped", 0, claim=True) for i in range(2)])
    workers = lambda: [p for p in pods(kube, "capped") if p["metadata"]["name"] != "occupant"]  # noqa: E731
    wait_for("one worker bound", lambda: len(bound(workers())) == 1)
    hold(5, lambda: len(bound(pods(kube, "capped"))) == 2 or pytest.fail("bound count changed"))
