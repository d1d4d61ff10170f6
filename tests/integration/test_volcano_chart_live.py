"""Volcano as its chart deploys it from our values: tenant routing through its webhook, DRA through its scheduler.

Real: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, and Volcano's webhook manager,
scheduler and controller manager (built from volcano.sh/volcano v1.14.1), started with the arguments the
chart's templates give them for the values gpucluster renders (gpucluster.render.volcano_chart), with the
chart's webhook configurations; the rendered objects of tests/data/volcano-dra, the tenant's admission
policies included. SIMULATED: the GPUs and kubelets (the simulator publishes nodes and ResourceSlices).

Each setting the issue found missing is shown twice, next to each other: with our values the behaviour
holds; with the values a plain chart install would have (the setting taken out, Volcano restarted from
them) it breaks as the issue says:

- ``/podgroups/mutate``: a tenant pod naming no queue gets a PodGroup in its tenant's queue and runs;
  without it the PodGroup names ``default``, the tenant's policy refuses it and the pod stays Pending;
- ``DRAPartitionableDevices``: a Volcano gang on a dynamic-MIG pool gets its MIG devices; without it
  Volcano allocates none;
- ``DRADeviceTaints``: Volcano never allocates a quarantined GPU; without it it does.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster_helpers import Cluster, wait_for

from gpucluster import labels as L
from gpucluster.addons import volcano as local_volcano
from gpucluster.cli.main import entrypoint
from gpucluster.render import render, volcano_chart
from gpucluster.render import volcano as render_volcano
from gpucluster.simulator import Simulator, attach
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SPEC = Path(__file__).resolve().parents[2] / "tests" / "data" / "volcano-dra"
TENANT = "team-a"
LOCAL_WORLD = {"crds": False, "tools": ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager",
                                        "controller-gen")}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
RESTRICTED = {"runAsNonRoot": True, "runAsUser": 1000, "allowPrivilegeEscalation": False,
              "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
ATTR = "device.attributes['gpu.nvidia.com']"
HOLD = 10.0  # seconds a refused state must last (the scheduler runs every second)


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return load_spec(SPEC)


@pytest.fixture(scope="module")
def world(lw: Cluster, spec: ClusterSpec) -> Iterator[Cluster]:
    local_volcano.start(lw.world, spec)
    objs = sorted(render(spec).objects(), key=lambda o: o["kind"] != "Namespace")
    lw.apply(*objs)
    sim: Simulator = attach(lw.kubeconfig, spec)
    wait_for("every DRA node's slices", lambda: {"h100-dyn-1", "l4-dra-1"} <= {
        s["spec"].get("pool", {}).get("name") for s in lw.get("resourceslices")["items"]}, timeout=90)
    try:
        yield lw
    finally:
        sim.close()


@pytest.fixture(autouse=True)
def clean(world: Cluster) -> Iterator[None]:
    yield
    world.run("delete", "jobs.batch.volcano.sh,pods,resourceclaims,resourceclaimtemplates.resource.k8s.io",
              "-l", "test=volcano-chart", "-n", TENANT, "--wait=false")
    # the claims of template-made pods go with their pods (owner references)
    wait_for("test pods and their claims gone", lambda: not world.get("pods,resourceclaims", "-n", TENANT)["items"],
             timeout=90)


def restart(lw: Cluster, spec: ClusterSpec, values: dict[str, Any]) -> None:
    """Volcano's three daemons again, from ``values`` (their webhook configurations too)."""
    local_volcano.start(lw.world, spec, values=values)


@pytest.fixture
def plain_chart(world: Cluster, spec: ClusterSpec) -> Iterator[Any]:
    """Restart Volcano from our values less one setting (the test passes a function that takes it out);
    our values again afterwards."""
    def without(take_out: Any) -> None:
        values = copy.deepcopy(render_volcano.values(spec))
        take_out(values["custom"])
        restart(world, spec, values)
    yield without
    restart(world, spec, render_volcano.values(spec))


# -- helpers ----------------------------------------------------------------------------------------------
def vpod(name: str, *, template: str | None = None, priority: str = "batch-inference") -> dict[str, Any]:
    """A restricted tenant pod for Volcano, naming no queue."""
    container: dict[str, Any] = {"name": "main", "image": "registry.invalid/none:0", "securityContext": RESTRICTED,
                                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                               "limits": {"cpu": "100m", "memory": "64Mi"}}}
    spec: dict[str, Any] = {"schedulerName": render_volcano.SCHEDULER_NAME, "priorityClassName": priority,
                            "restartPolicy": "Never", "containers": [container], "tolerations": [GPU_TOLERATION]}
    if template:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
        container["resources"]["claims"] = [{"name": "gpu"}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": TENANT, "labels": {"test": "volcano-chart", "app": name}},
            "spec": spec}


def claim_template(name: str, device_class: str, cel: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1}
    if cel:
        exactly["selectors"] = [{"cel": {"expression": cel}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": TENANT, "labels": {"test": "volcano-chart"}},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}


def gang(name: str, replicas: int, template: str) -> dict[str, Any]:
    """A Volcano Job in the tenant's queue whose ``replicas`` pods each claim one device from ``template``."""
    pod = vpod(name, template=template, priority="training")
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": TENANT, "labels": {"test": "volcano-chart"}},
            "spec": {"schedulerName": render_volcano.SCHEDULER_NAME, "queue": TENANT, "minAvailable": replicas,
                     "priorityClassName": "training",
                     "tasks": [{"name": "worker", "replicas": replicas,
                                "template": {"metadata": {"labels": {"test": "volcano-chart", "app": name}},
                                             "spec": pod["spec"]}}]}}


def pods(lw: Cluster, app: str) -> list[dict[str, Any]]:
    return [p for p in lw.get("pods", "-n", TENANT, "-l", f"app={app}")["items"]
            if not p["metadata"].get("deletionTimestamp")]


def bound(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in items if p["spec"].get("nodeName")]


def devices_of(lw: Cluster, pod: dict[str, Any]) -> list[tuple[str, str]]:
    """(pool, device) the pod's claim holds."""
    name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = lw.get("resourceclaim", "-n", TENANT, name)
    return [(r["pool"], r["device"]) for r in claim["status"]["allocation"]["devices"]["results"]]


def hold(what: str, check: Any, seconds: float = HOLD) -> None:
    """``check()`` stays true for ``seconds`` (a refusal that must last several scheduling cycles)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert check(), what
        time.sleep(0.5)


def podgroup_of(lw: Cluster, pod_name: str) -> dict[str, Any] | None:
    for pg in lw.get("podgroups.scheduling.volcano.sh", "-n", TENANT)["items"]:
        if any(o.get("name") == pod_name for o in pg["metadata"].get("ownerReferences") or []):
            return pg
    return None


# -- tenant routing: /podgroups/mutate -------------------------------------------------------------------
def test_a_tenant_pod_naming_no_queue_runs_in_its_tenants_queue_through_volcanos_webhook(world: Cluster) -> None:
    lw = world
    confs = {c["metadata"]["name"] for c in lw.get("mutatingwebhookconfigurations")["items"]}
    assert "volcano-admission-service-podgroups-mutate" in confs
    lw.apply(vpod("routed"))
    pg = wait_for("the pod's PodGroup", lambda: podgroup_of(lw, "routed"))
    ns = lw.get("namespace", TENANT)
    assert pg["spec"]["queue"] == ns["metadata"]["annotations"][L.VOLCANO_QUEUE_NAME] == TENANT
    wait_for("routed pod bound by Volcano", lambda: bound(pods(lw, "routed")))


def test_without_podgroup_mutate_the_same_pod_stays_pending_refused_by_the_tenant_policy(
        world: Cluster, spec: ClusterSpec, plain_chart: Any) -> None:
    lw = world
    # the chart's default list: exactly what a plain install of the chart runs
    plain_chart(lambda custom: custom.update(enabled_admissions=volcano_chart.ENABLED_ADMISSIONS))
    confs = {c["metadata"]["name"] for c in lw.get("mutatingwebhookconfigurations")["items"]}
    assert "volcano-admission-service-podgroups-mutate" not in confs
    assert "volcano-admission-service-queues-mutate" in confs
    lw.apply(vpod("stranded"))
    hold("no PodGroup, pod unbound", lambda: podgroup_of(lw, "stranded") is None and not bound(pods(lw, "stranded")))
    # why: the controller's PodGroup reaches the API in queue "default", which the tenant may not use
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "probe", "namespace": TENANT}, "spec": {"minMember": 1}}
    done = lw.run("apply", "--server-side", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(pg))
    assert done.returncode != 0 and "submits to its own Volcano queue only" in done.stderr, done.stderr
    assert "names default" in done.stderr, done.stderr


# -- dynamic MIG: DRAPartitionableDevices ------------------------------------------------------------------
MIG_3G = f"{ATTR}.profile == '3g.40gb'"


def test_a_volcano_gang_on_a_dynamic_mig_pool_gets_its_devices(world: Cluster) -> None:
    lw = world
    lw.apply(claim_template("mig-3g", "h100-mig", MIG_3G), gang("mig", 2, "mig-3g"))
    gang_pods = wait_for("both workers bound", lambda: len(bound(pods(lw, "mig"))) == 2 and pods(lw, "mig"),
                         timeout=90)
    held = [d for p in gang_pods for d in devices_of(lw, p)]
    assert len(set(held)) == 2, held
    assert all(pool == "h100-dyn-1" and "-mig-3g40gb-" in dev for pool, dev in held), held


def test_without_partitionable_devices_volcano_gives_the_gang_nothing(world: Cluster, plain_chart: Any) -> None:
    lw = world
    plain_chart(lambda custom: custom.update(scheduler_feature_gates=",".join(
        g for g in custom["scheduler_feature_gates"].split(",") if not g.startswith("DRAPartitionableDevices"))))
    lw.apply(claim_template("mig-3g", "h100-mig", MIG_3G), gang("mig", 2, "mig-3g"))
    wait_for("both workers created", lambda: len(pods(lw, "mig")) == 2, timeout=60)
    hold("no worker bound", lambda: not bound(pods(lw, "mig")))


# -- quarantine: DRADeviceTaints -----------------------------------------------------------------------------
def quarantine(lw: Cluster, device: str, *, lift: bool = False) -> None:
    args = ["quarantine", "l4-dra-1", device, *(["--lift"] if lift else
                                                ["--reason", "XID 79", "--effect", "NoSchedule"])]
    assert entrypoint([*args, "-i", str(SPEC), "--kubeconfig", str(lw.kubeconfig)]) == 0


def l4_devices(lw: Cluster) -> list[str]:
    slices = [s for s in lw.get("resourceslices")["items"] if s["spec"].get("pool", {}).get("name") == "l4-dra-1"]
    return sorted(d["name"] for s in slices for d in s["spec"].get("devices") or [])


@pytest.fixture
def quarantined(world: Cluster) -> Iterator[str]:
    devices = l4_devices(world)
    assert len(devices) == 2, devices
    quarantine(world, devices[0])
    yield devices[0]
    quarantine(world, devices[0], lift=True)


def test_volcano_never_allocates_a_quarantined_gpu(world: Cluster, quarantined: str) -> None:
    lw = world
    lw.apply(vpod("l4-a", template="one-l4"), vpod("l4-b", template="one-l4"))
    first = wait_for("one pod bound", lambda: bound(pods(lw, "l4-a") + pods(lw, "l4-b")), timeout=90)
    assert devices_of(lw, first[0]) == [("l4-dra-1", next(d for d in l4_devices(lw) if d != quarantined))]
    hold("the other pod waits: the only free GPU is quarantined",
         lambda: len(bound(pods(lw, "l4-a") + pods(lw, "l4-b"))) == 1)


def test_without_device_taints_volcano_allocates_the_quarantined_gpu(world: Cluster, quarantined: str,
                                                                     plain_chart: Any) -> None:
    lw = world
    plain_chart(lambda custom: custom.update(scheduler_feature_gates=",".join(
        g for g in custom["scheduler_feature_gates"].split(",") if not g.startswith("DRADeviceTaints"))))
    lw.apply(vpod("l4-a", template="one-l4"), vpod("l4-b", template="one-l4"))
    both = wait_for("both pods bound", lambda: len(bound(pods(lw, "l4-a") + pods(lw, "l4-b"))) == 2
                    and pods(lw, "l4-a") + pods(lw, "l4-b"), timeout=90)
    held = {d for p in both for _, d in devices_of(lw, p)}
    assert quarantined in held, held
