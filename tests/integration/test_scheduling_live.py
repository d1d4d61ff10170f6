"""kube-scheduler against simulated GPU nodes: extended resources, taints, and DRA claims.

The render output of ``inventories/local`` is applied server-side (every kind must be served: the
local world installs the CRDs), the GPU simulator registers the nodes, and real pods and claims go
through the real kube-scheduler. Only GPUs and kubelets are simulated.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cluster_helpers import Cluster, wait_for

from gpucluster.render import render
from gpucluster.simulator import attach
from gpucluster.spec import load_spec
from gpucluster.toolchain import path_of

pytestmark = pytest.mark.integration
LOCAL = Path(__file__).resolve().parents[2] / "inventories" / "local"
NS = "sched-test"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
RESTRICTED = {"runAsNonRoot": True, "runAsUser": 1000, "allowPrivilegeEscalation": False,
              "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


def pod(name: str, ns: str, *, gpus: int = 0, tolerate: bool = True, claim: str | None = None,
        claim_name: str | None = None) -> dict:
    container: dict = {"name": "main", "image": "registry.invalid/none:0", "securityContext": RESTRICTED,
                       "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                     "limits": {"cpu": "100m", "memory": "64Mi"}}}
    spec: dict = {"containers": [container]}
    if gpus:
        container["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)
    if tolerate:
        spec["tolerations"] = [GPU_TOLERATION]
    if claim or claim_name:
        ref = {"name": "gpu"}
        ref["resourceClaimTemplateName" if claim else "resourceClaimName"] = claim or claim_name
        spec["resourceClaims"] = [ref]
        container["resources"]["claims"] = [{"name": "gpu"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def events_for(lw: Cluster, ns: str, name: str) -> list[str]:
    items = lw.get("events", "-n", ns, "--field-selector", f"involvedObject.name={name}")["items"]
    return [f"{e.get('reason')}: {e.get('message')}" for e in items]


@pytest.fixture(scope="module")
def world(lw: Cluster) -> Iterator[Cluster]:
    from gpucluster.addons import volcano

    spec = load_spec(LOCAL)
    volcano.install_crds(lw.kubeconfig)  # Queue; the fixture installed the other operators' CRDs
    objs = sorted(render(spec).objects(), key=lambda o: o["kind"] not in ("Namespace", "CustomResourceDefinition"))
    lw.apply(*objs)  # every rendered kind is served: nothing is left out
    lw.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    sim = attach(lw.kubeconfig, spec)
    sim.close()
    names = {h.name for h in spec.hosts}
    wait_for("all nodes Ready", lambda: names <= {
        n["metadata"]["name"] for n in lw.get("nodes")["items"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))})
    yield lw


def test_rendered_bundle_applies_server_side_and_is_validated(world: Cluster) -> None:
    # The API server validates CRs against the generated schemas: a Queue with weight 0 is refused,
    # and the rendered NicClusterPolicy / PrometheusRule are stored as rendered.
    proc = subprocess.run([str(path_of("kubectl")), f"--kubeconfig={world.kubeconfig}", "apply", "--server-side",
                           "--dry-run=server", "-f", "-"], capture_output=True, text=True, check=False,
                          input=yaml.safe_dump({"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
                                                "metadata": {"name": "bad", "namespace": "monitoring"},
                                                "spec": {"groups": [{"name": "g", "rules": "not-a-list"}]}}))
    assert proc.returncode != 0 and "rules" in proc.stderr
    rule = world.get("prometheusrule", "-n", "monitoring", "gpucluster-gpu-alerts")
    alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert "GPUXidError" in alerts and "GPUDoubleBitECCError" in alerts
    assert world.get("nicclusterpolicy", "nic-cluster-policy")["spec"]["rdmaSharedDevicePlugin"]


def test_gpu_pod_is_scheduled_on_a_device_plugin_node(world: Cluster) -> None:
    world.apply(pod("one-gpu", NS, gpus=1))
    bound = wait_for("one-gpu bound", lambda: world.get("pod", "-n", NS, "one-gpu")["spec"].get("nodeName"))
    assert bound in {"l4-1", "l4-2", "h200-1"}  # only device-plugin pools advertise nvidia.com/gpu
    wait_for("one-gpu Running", lambda: world.get("pod", "-n", NS, "one-gpu")["status"].get("phase") == "Running")


def test_more_gpus_than_any_node_stays_pending(world: Cluster) -> None:
    world.apply(pod("too-many", NS, gpus=17))  # the largest node advertises 16 (L4 x4, time-sliced x4)
    msgs = wait_for("FailedScheduling", lambda: [m for m in events_for(world, NS, "too-many")
                                                 if m.startswith("FailedScheduling")])
    assert "Insufficient nvidia.com/gpu" in msgs[0]
    assert not world.get("pod", "-n", NS, "too-many")["spec"].get("nodeName")


def test_pod_without_toleration_never_lands_on_a_gpu_node(world: Cluster) -> None:
    world.apply(pod("no-toleration-gpu", NS, gpus=1, tolerate=False),
          pod("no-toleration-cpu", NS, tolerate=False))
    cpu_node = wait_for("cpu pod bound",
                        lambda: world.get("pod", "-n", NS, "no-toleration-cpu")["spec"].get("nodeName"))
    assert cpu_node == "cp-1"  # the only node without the GPU taint
    msgs = wait_for("FailedScheduling", lambda: [m for m in events_for(world, NS, "no-toleration-gpu")
                                                 if m.startswith("FailedScheduling")])
    # The 8 GPU nodes refuse it for their taint; cp-1 has no nvidia.com/gpu, and since the class
    # dra-nvidia-gpu backs that resource with DRA the scheduler tries a claim there, which finds no device.
    assert "8 node(s) had untolerated taint" in msgs[0] and "1 cannot allocate all claims" in msgs[0], msgs[0]
    assert not world.get("pod", "-n", NS, "no-toleration-gpu")["spec"].get("nodeName")


def _allocated_device(world: Cluster, ns: str, pod_name: str) -> dict:
    status = world.get("pod", "-n", ns, pod_name)["status"]
    claim_name = status["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = world.get("resourceclaim", "-n", ns, claim_name)
    result = claim["status"]["allocation"]["devices"]["results"][0]
    slices = world.get("resourceslices")["items"]
    dev = next(d for s in slices if s["spec"]["pool"]["name"] == result["pool"] for d in s["spec"]["devices"]
               if d["name"] == result["device"])
    attrs = {k: next(iter(v.values())) for k, v in dev["attributes"].items()}
    return {"node": result["pool"], **attrs, "memory": dev["capacity"]["memory"]["value"]}


def test_claim_for_80gb_gets_an_80gb_device_never_an_l4(world: Cluster) -> None:
    names = [f"big-{i}" for i in range(3)]
    world.apply(*[pod(n, "ml-research", claim="one-80gb-gpu") for n in names])
    for n in names:
        wait_for(f"{n} bound", lambda n=n: world.get("pod", "-n", "ml-research", n)["spec"].get("nodeName"))
        dev = _allocated_device(world, "ml-research", n)
        assert dev["node"] != "l4-3" and "L4" not in dev["productName"], dev
        assert int(dev["memory"]) >= 80 * 10**9, dev


def test_mig_claim_gets_a_mig_device(world: Cluster) -> None:
    world.apply(pod("mig", "ml-research", claim="one-mig-1g-10gb"))
    wait_for("mig bound", lambda: world.get("pod", "-n", "ml-research", "mig")["spec"].get("nodeName"))
    dev = _allocated_device(world, "ml-research", "mig")
    assert dev["type"] == "mig" and dev["profile"] == "1g.10gb" and dev["node"] == "a100-2", dev


def test_claim_nothing_matches_stays_unallocated_with_a_reason(world: Cluster) -> None:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "b200", "namespace": "ml-research"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu-80gb", "allocationMode": "ExactCount", "count": 1,
                 "selectors": [{"cel": {"expression":
                                        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"}}]}}]}}}
    world.apply(claim, pod("wants-b200", "ml-research", claim_name="b200"))
    msgs = wait_for("FailedScheduling", lambda: [m for m in events_for(world, "ml-research", "wants-b200")
                                                 if m.startswith("FailedScheduling")])
    assert "claim" in msgs[0].lower(), msgs
    assert not world.get("resourceclaim", "-n", "ml-research", "b200").get("status", {}).get("allocation")
