"""DRA as Kubernetes 1.37 ships it, on the real kube-scheduler and kube-controller-manager.

The spec is ``tests/data/dra`` (one pool per feature); its render output is applied, the GPU simulator
publishes what the NVIDIA DRA driver would, and real pods and claims go through the real scheduler,
quota, admission and device-taint eviction. Each feature's negative case sits next to its positive one:

- plain ``nvidia.com/gpu`` through DRA: an opted-in pool serves it (two devices in the pod's claim,
  counted by the tenant's quota); a pool without the opt-in never does, and would, if the chart's own
  class were the newer one (which verify then reports);
- partitionable MIG: the scheduler refuses overlapping placements and fills one GPU with a valid mix and
  no more, and the whole GPU is refused once a partition is taken;
- prioritized claims: the second choice is taken when the first is exhausted, and the allocation says so;
- per-GPU quarantine: the scheduler stops allocating that GPU while the node's other GPUs stay in use,
  NoExecute evicts a claim's pod unless the claim tolerates it, verify lists it, lifting restores it;
- validation: a class it rejects really matches nothing on the cluster, the decimal one it suggests does;
- claim device status: verify lists per tenant the physical devices in use and fails on a vanished one;
- topology: on a DGX H100 node (the cited layout: every GPU under its own PCIe root) a rendered template
  asking two GPUs under one root stays unschedulable while the same two GPUs without the constraint are
  allocated, and two MIG partitions under one root are allocated from one GPU.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster_helpers import Cluster, wait_for

from gpucluster import expected
from gpucluster import labels as L
from gpucluster.cli.main import entrypoint
from gpucluster.render import dra_driver, render
from gpucluster.simulator import Simulator, attach
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClaimTemplate, ClusterSpec, DeviceClass, DeviceSelector
from gpucluster.spec.validate import validate
from gpucluster.verify import cluster as vcluster
from gpucluster.verify import dra_claims

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "tests" / "data" / "dra"
FACTS = REPO / "tests" / "upstream" / "facts" / "dra-driver.yaml"
TENANT = "team-a"
FREE = "dra-free"  # no tenant: no quota, no admission policy
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
RESTRICTED = {"runAsNonRoot": True, "runAsUser": 1000, "allowPrivilegeEscalation": False,
              "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
ATTR = "device.attributes['gpu.nvidia.com']"


def chart_gpu_class() -> dict[str, Any]:
    """The DRA chart's own gpu.nvidia.com class, built from the upstream facts (the chart is not served here)."""
    facts = yaml.safe_load(FACTS.read_text())["facts"]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": facts["deviceclass-gpu-selector"]["value"]}}],
                     "extendedResourceName": facts["deviceclass-gpu-extended-resource-name"]["value"]}}


def pod(name: str, ns: str, *, gpus: int = 0, claim: str | None = None, template: str | None = None,
        node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "registry.invalid/none:0", "securityContext": RESTRICTED,
                                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                               "limits": {"cpu": "100m", "memory": "64Mi"}}}
    spec: dict[str, Any] = {"containers": [container], "tolerations": [GPU_TOLERATION]}
    if gpus:
        container["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)
    if claim or template:
        spec["resourceClaims"] = [{"name": "gpu", **({"resourceClaimName": claim} if claim else
                                                     {"resourceClaimTemplateName": template})}]
        container["resources"]["claims"] = [{"name": "gpu"}]
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def claim(name: str, ns: str, device_class: str, *, count: int = 1, cel: str | None = None,
          tolerate: bool = False) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    if cel:
        exactly["selectors"] = [{"cel": {"expression": cel}}]
    if tolerate:
        # The eviction controller honours only tolerations that name NoExecute (an empty effect,
        # which matches every effect for scheduling, does not keep the pod).
        exactly["tolerations"] = [{"key": L.QUARANTINE, "operator": "Exists", "effect": "NoExecute"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}


def node_of(lw: Cluster, ns: str, name: str) -> str:
    return wait_for(f"{ns}/{name} bound", lambda: lw.get("pod", "-n", ns, name)["spec"].get("nodeName"))


def claim_of(lw: Cluster, ns: str, pod_name: str) -> dict[str, Any]:
    """The allocated claim of a pod: its own claim, a template's, or the scheduler's for extended resources."""
    def find() -> dict[str, Any] | None:
        p = lw.get("pod", "-n", ns, pod_name)
        status = p["status"]
        name = ((status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
                or next((s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []), None)
                or next((c.get("resourceClaimName") for c in p["spec"].get("resourceClaims") or []), None))
        if not name:
            return None
        c = lw.get("resourceclaim", "-n", ns, name)
        return c if (c.get("status") or {}).get("allocation") else None
    return wait_for(f"{ns}/{pod_name}'s claim allocated", find)


def results(c: dict[str, Any]) -> list[dict[str, Any]]:
    return c["status"]["allocation"]["devices"]["results"]


def refused(lw: Cluster, ns: str, name: str) -> str:
    """Wait for the scheduler to refuse a pod; the event's message. The pod must still be unbound."""
    def events() -> list[str]:
        items = lw.get("events", "-n", ns, "--field-selector", f"involvedObject.name={name}")["items"]
        return [e.get("message", "") for e in items if e.get("reason") == "FailedScheduling"]
    msg = wait_for(f"{ns}/{name} refused by the scheduler", events)[0]
    assert not lw.get("pod", "-n", ns, name)["spec"].get("nodeName"), msg
    return msg


def delete(lw: Cluster, ns: str, *names: str, claims: tuple[str, ...] = ()) -> None:
    """Delete pods (and claims) and wait until their devices are free again."""
    for n in names:
        lw.run("delete", "pod", "-n", ns, n, "--wait=false")
    for n in claims:
        lw.run("delete", "resourceclaim", "-n", ns, n, "--wait=false")
    wait_for("pods gone", lambda: not [p for p in lw.get("pods", "-n", ns)["items"]
                                       if p["metadata"]["name"] in names], timeout=90)
    # Template and extended-resource claims go with their pod (owner references, the garbage collector).
    wait_for("claims released", lambda: not [c for c in lw.get("resourceclaims", "-n", ns)["items"]
                                             if c["metadata"]["name"] in claims or any(
                                                 o.get("name") in names for o in c["metadata"].get("ownerReferences")
                                                 or [])], timeout=90)


def cli(lw: Cluster, *args: str) -> int:
    return entrypoint([*args, "-i", str(SPEC), "--kubeconfig", str(lw.kubeconfig)])


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return load_spec(SPEC)


@pytest.fixture(scope="module")
def world(lw: Cluster, spec: ClusterSpec) -> Iterator[tuple[Cluster, Simulator]]:
    # The chart's own class first, as the DRA chart would have created it: ours (rendered after the
    # release) must take nvidia.com/gpu over.
    lw.apply(chart_gpu_class())
    objs = sorted(render(spec).objects(), key=lambda o: o["kind"] not in ("Namespace", "CustomResourceDefinition"))
    lw.apply(*objs)
    lw.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FREE}})
    sim = attach(lw.kubeconfig, spec)
    names = {h.name for h in spec.hosts}
    wait_for("all nodes Ready", lambda: names <= {
        n["metadata"]["name"] for n in lw.get("nodes")["items"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))})
    wait_for("quota status", lambda: lw.get("resourcequota", "-n", TENANT, "gpucluster-quota")
             .get("status", {}).get("hard"))
    try:
        yield lw, sim
    finally:
        sim.close()


def rows(lw: Cluster, spec: ClusterSpec, check: Callable) -> list:
    return list(check(spec, vcluster.fetch(spec, lw.kubeconfig)))


# -- the simulator publishes what verification expects ---------------------------------------------------

def test_slices_of_every_dra_node_match_the_expectation(world, spec) -> None:
    lw, _ = world
    got = {r.subject: r for r in vcluster.dra_checks(spec, vcluster.fetch(spec, lw.kubeconfig),
                                                      expected.host_states(spec)) if r.check == "dra-slices"}
    assert {s: r.verdict.value for s, r in got.items()} == {
        "h100-dyn-1": "pass", "l40s-1": "pass", "l40s-2": "pass", "l4-dra-1": "pass"}, got
    # Kubernetes 1.37 >= 1.35: counters and devices in separate slices (fact split-slices-threshold)
    slices = [s for s in lw.get("resourceslices")["items"] if s["spec"]["nodeName"] == "h100-dyn-1"]
    assert sorted(("sharedCounters" in s["spec"], len(s["spec"].get("devices") or [])) for s in slices) == [
        (False, 26), (True, 0)]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {2}


# -- 2. plain nvidia.com/gpu through DRA ------------------------------------------------------------------

def test_plain_gpu_pod_lands_on_an_opted_in_dra_node_with_two_devices_and_the_quota_counts_them(world) -> None:
    lw, _ = world
    lw.apply(pod("plain-2", TENANT, gpus=2, node_selector={L.DRA: "true"}))
    node = node_of(lw, TENANT, "plain-2")
    assert node in ("l40s-1", "l40s-2")
    c = claim_of(lw, TENANT, "plain-2")
    assert c["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
    assert [r["exactly"]["deviceClassName"] for r in c["spec"]["devices"]["requests"]] == ["dra-nvidia-gpu"]
    got = results(c)
    assert len(got) == 2 and {r["pool"] for r in got} == {node}, got
    slices = [s for s in lw.get("resourceslices")["items"] if s["spec"]["nodeName"] == node]
    names = {d["name"]: d for s in slices for d in s["spec"].get("devices") or []}
    assert all(names[r["device"]]["attributes"]["productName"]["string"] == "NVIDIA L40S" for r in got)
    # The tenant's quota: the pod counts 2 nvidia.com/gpu, the scheduler's claim 2 devices of the class.
    used = wait_for("quota used", lambda: (u := lw.get("resourcequota", "-n", TENANT, "gpucluster-quota")
                                           ["status"].get("used", {})).get("dra-nvidia-gpu.deviceclass.resource.k8s.io"
                                                                           "/devices") == "2" and u)
    assert used["requests.nvidia.com/gpu"] == "2"
    delete(lw, TENANT, "plain-2")


def test_a_pool_without_the_opt_in_never_receives_a_plain_gpu_pod(world) -> None:
    lw, _ = world
    # Pinned to the L4 DRA pool: the scheduler may not serve nvidia.com/gpu from it.
    lw.apply(pod("l4-plain", FREE, gpus=1, node_selector={L.POOL: "l4-dra"}))
    msg = refused(lw, FREE, "l4-plain")
    assert "l4-dra-1" not in (lw.get("pod", "-n", FREE, "l4-plain")["spec"].get("nodeName") or ""), msg
    # Free to go to any DRA node: 5 pods of 2 GPUs; the 8 L40S take 4, none goes to the L4 or the H100.
    names = [f"fill-{i}" for i in range(5)]
    lw.apply(*[pod(n, FREE, gpus=2, node_selector={L.DRA: "true"}) for n in names])
    def bound() -> dict[str, str]:
        return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in lw.get("pods", "-n", FREE)["items"]
                if p["metadata"]["name"] in names and p["spec"].get("nodeName")}

    placed = wait_for("4 pods bound", lambda: (b := bound()) and len(b) == 4 and b)
    assert set(placed.values()) <= {"l40s-1", "l40s-2"}, placed
    pending = next(n for n in names if n not in placed)
    refused(lw, FREE, pending)
    delete(lw, FREE, *names, "l4-plain")


def test_if_the_charts_class_were_newer_any_dra_pool_would_serve_plain_gpus_and_verify_says_so(world, spec) -> None:
    lw, _ = world
    ours = lw.get("deviceclass", "dra-nvidia-gpu")["metadata"]["creationTimestamp"]
    [row] = rows(lw, spec, dra_claims.extended_checks)
    assert row.check == "dra-extended-resource"
    assert row.verdict.value == "pass" and row.actual == "dra-nvidia-gpu"

    def recreated_later() -> bool:  # the chart's class, created again in a later second than ours
        lw.run("delete", "deviceclass", "gpu.nvidia.com", "--wait=true")
        lw.apply(chart_gpu_class())
        return lw.get("deviceclass", "gpu.nvidia.com")["metadata"]["creationTimestamp"] > ours

    try:
        wait_for("gpu.nvidia.com newer than dra-nvidia-gpu", recreated_later, timeout=30, every=0.3)
        [row] = rows(lw, spec, dra_claims.extended_checks)
        assert row.verdict.value == "fail" and row.actual == "gpu.nvidia.com", row
        lw.apply(pod("l4-plain-2", FREE, gpus=1, node_selector={L.POOL: "l4-dra"}))
        assert node_of(lw, FREE, "l4-plain-2") == "l4-dra-1"  # what the opt-in exists to prevent
        delete(lw, FREE, "l4-plain-2")
    finally:
        # As `up` restores it: ours created again, so newer.
        lw.run("delete", "deviceclass", "dra-nvidia-gpu", "--wait=true")
        lw.apply(dra_driver.extended_class(spec))
    [row] = rows(lw, spec, dra_claims.extended_checks)
    assert row.verdict.value == "pass"


# -- 4. prioritized claims --------------------------------------------------------------------------------

def test_second_choice_is_taken_when_the_first_is_exhausted_and_the_claim_says_which(world, spec) -> None:
    lw, _ = world
    [tmpl] = [o for o in dra_driver.tenant_claim_templates(spec, spec.tenants[0])]
    tmpl["metadata"]["namespace"] = FREE  # the rendered template, without the tenant's quota
    lw.apply(tmpl)
    lw.apply(pod("first", FREE, template="h100-else-two-l40s"))
    [r] = results(claim_of(lw, FREE, "first"))
    assert (r["request"], r["pool"], r["device"]) == ("gpu/h100-0", "h100-dyn-1", "gpu-0")
    lw.apply(pod("second", FREE, template="h100-else-two-l40s"))
    got = results(claim_of(lw, FREE, "second"))
    assert [r["request"] for r in got] == ["gpu/l40s-1", "gpu/l40s-1"], got
    assert len({r["pool"] for r in got}) == 1 and got[0]["pool"].startswith("l40s-")
    delete(lw, FREE, "first", "second")


# -- 3. partitionable MIG ---------------------------------------------------------------------------------

def mig_claim(name: str, profile: str) -> dict[str, Any]:
    return claim(name, FREE, "h100-mig", cel=f"{ATTR}.profile == '{profile}'")


def test_the_whole_gpu_and_its_partitions_exclude_each_other(world) -> None:
    lw, _ = world
    lw.apply(claim("whole", FREE, "h100"), pod("whole", FREE, claim="whole"))
    assert [r["device"] for r in results(claim_of(lw, FREE, "whole"))] == ["gpu-0"]
    lw.apply(mig_claim("small", "1g.10gb"), pod("small", FREE, claim="small"))
    assert "claim" in refused(lw, FREE, "small").lower()  # the whole GPU consumed every counter
    delete(lw, FREE, "whole", claims=("whole",))
    # Freed: the waiting partition is allocated now.
    assert results(claim_of(lw, FREE, "small"))[0]["device"].startswith("gpu-0-mig-1g10gb-")
    delete(lw, FREE, "small", claims=("small",))


def test_scheduler_refuses_overlapping_placements_and_fills_a_gpu_with_a_valid_mix_and_no_more(world) -> None:
    lw, _ = world
    steps = [("m4", "4g.40gb", "gpu-0-mig-4g40gb-5-0"),
             # 2g.20gb may start at 0, 2 or 4: 0 and 2 overlap the 4g's slices 0-3, so 4
             ("m2", "2g.20gb", "gpu-0-mig-2g20gb-14-4"),
             # 1g.10gb may start at 0..6: only 6 is free
             ("m1", "1g.10gb", "gpu-0-mig-1g10gb-19-6")]
    for name, profile, device in steps:
        lw.apply(mig_claim(name, profile), pod(name, FREE, claim=name))
        assert [r["device"] for r in results(claim_of(lw, FREE, name))] == [device], name
    # 4 + 2 + 1 compute slices, 7 of 8 memory slices: the GPU is full (1g.10gb has no placement at 7)
    lw.apply(mig_claim("m1b", "1g.10gb"), pod("m1b", FREE, claim="m1b"))
    refused(lw, FREE, "m1b")
    assert not (lw.get("resourceclaim", "-n", FREE, "m1b").get("status") or {}).get("allocation")
    delete(lw, FREE, "m4", "m2", "m1", "m1b", claims=("m4", "m2", "m1", "m1b"))


# -- 6. what validation rejects matches nothing on the cluster either ----------------------------------------

def test_a_class_validation_rejects_matches_no_device_and_the_suggested_one_does(world, spec) -> None:
    lw, _ = world
    bad = spec.model_copy(deep=True)
    bad.dra.device_classes.append(DeviceClass(name="l40s-48gi", selector=DeviceSelector(min_memory="48Gi",
                                                                                         product_name_contains="L40S")))
    [p] = [p for p in validate(bad) if p.path == "dra.deviceClasses[4]"]
    assert "NVIDIA L40S" in p.message and "45.0Gi" in p.message and "48G includes it" in p.hint, p
    good = DeviceClass(name="l40s-48g", selector=DeviceSelector(min_memory="48G", product_name_contains="L40S"))
    lw.apply(dra_driver.device_class(bad.dra.device_classes[4]), dra_driver.device_class(good))
    lw.apply(claim("c48gi", FREE, "l40s-48gi"), pod("c48gi", FREE, claim="c48gi"),
             claim("c48g", FREE, "l40s-48g"), pod("c48g", FREE, claim="c48g"))
    refused(lw, FREE, "c48gi")
    assert node_of(lw, FREE, "c48g") in ("l40s-1", "l40s-2")
    # A claim no single node can satisfy: 5 L40S, though the cluster has 8 (4 per node).
    lw.apply(claim("five", FREE, "l40s", count=5), pod("five", FREE, claim="five"))
    refused(lw, FREE, "five")
    delete(lw, FREE, "c48gi", "c48g", "five", claims=("c48gi", "c48g", "five"))


# -- 5. per-GPU quarantine ----------------------------------------------------------------------------------

def on_l40s_2(name: str, *, tolerate: bool = False) -> list[dict[str, Any]]:
    return [claim(name, FREE, "l40s", tolerate=tolerate),
            pod(name, FREE, claim=name, node_selector={L.HOSTNAME: "l40s-2"})]


def test_quarantine_one_gpu(world, spec) -> None:
    lw, _ = world
    lw.apply(*on_l40s_2("victim"))
    victim_dev = results(claim_of(lw, FREE, "victim"))[0]["device"]
    lw.apply(*on_l40s_2("tolerant", tolerate=True))
    tolerant_dev = results(claim_of(lw, FREE, "tolerant"))[0]["device"]
    # Bad input changes nothing: a device the node does not publish, a lift of what is not quarantined.
    assert cli(lw, "quarantine", "l40s-2", "gpu-9", "--reason", "typo") == 2
    assert cli(lw, "quarantine", "l40s-2", victim_dev, "--lift") == 2
    assert not lw.get("devicetaintrules")["items"]

    assert cli(lw, "quarantine", "l40s-2", victim_dev, "--reason", "XID 79: fell off the bus") == 0
    # NoExecute: the device-taint-eviction controller deletes the pod whose claim holds it.
    wait_for("victim evicted", lambda: not [p for p in lw.get("pods", "-n", FREE)["items"]
                                            if p["metadata"]["name"] == "victim"], timeout=90)
    assert cli(lw, "quarantine", "l40s-2", tolerant_dev, "--reason", "ECC DBE") == 0
    # The tolerating claim's pod keeps its (now quarantined) GPU.
    assert lw.get("pod", "-n", FREE, "tolerant")["status"]["phase"] == "Running"
    # The node's two other GPUs stay in use; a third claim finds none.
    lw.apply(*on_l40s_2("next-1"), *on_l40s_2("next-2"))
    free = {results(claim_of(lw, FREE, n))[0]["device"] for n in ("next-1", "next-2")}
    assert free == {f"gpu-{i}" for i in range(4)} - {victim_dev, tolerant_dev}
    lw.apply(*on_l40s_2("next-3"))
    refused(lw, FREE, "next-3")
    # verify lists both quarantined GPUs; nothing holds them without tolerating.
    got = {r.subject: r for r in rows(lw, spec, dra_claims.quarantine_checks)}
    assert set(got) == {f"l40s-2/{victim_dev}", f"l40s-2/{tolerant_dev}"}
    assert all(r.verdict.value == "pass" for r in got.values()), got
    assert "XID 79: fell off the bus" in got[f"l40s-2/{victim_dev}"].actual
    # Lifting restores the device: the waiting claim gets it.
    assert cli(lw, "quarantine", "l40s-2", victim_dev, "--lift") == 0
    assert results(claim_of(lw, FREE, "next-3"))[0]["device"] == victim_dev
    assert cli(lw, "quarantine", "l40s-2", tolerant_dev, "--lift") == 0
    assert not lw.get("devicetaintrules")["items"]
    delete(lw, FREE, "tolerant", "next-1", "next-2", "next-3",
           claims=("victim", "tolerant", "next-1", "next-2", "next-3"))


def test_a_noschedule_quarantine_stops_allocation_and_leaves_running_pods(world, spec) -> None:
    lw, _ = world
    lw.apply(*on_l40s_2("held"))
    dev = results(claim_of(lw, FREE, "held"))[0]["device"]
    # NoSchedule leaves the pod running (only NoExecute evicts), and verify accepts that it holds the GPU.
    assert cli(lw, "quarantine", "l40s-2", dev, "--reason", "suspect", "--effect", "NoSchedule") == 0
    [row] = rows(lw, spec, dra_claims.quarantine_checks)
    assert row.verdict.value == "pass" and "NoSchedule" in row.actual
    assert lw.get("pod", "-n", FREE, "held")["status"]["phase"] == "Running"
    assert cli(lw, "quarantine", "l40s-2", dev, "--lift") == 0
    delete(lw, FREE, "held", claims=("held",))


# -- 7. claim device status ----------------------------------------------------------------------------------

def test_verify_lists_the_devices_each_tenant_holds_and_fails_on_a_vanished_one(world, spec, tmp_path,
                                                                                  capsys) -> None:
    lw, sim = world
    lw.apply(pod("plain-1", TENANT, gpus=1, node_selector={L.DRA: "true"}))
    node = node_of(lw, TENANT, "plain-1")
    [r] = results(claim_of(lw, TENANT, "plain-1"))
    [row] = [x for x in rows(lw, spec, dra_claims.claim_checks) if x.subject == f"tenants/{TENANT}"]
    assert row.verdict.value == "pass", row
    assert f"{node}/{r['device']} (NVIDIA L40S" in row.actual and "for nvidia.com/gpu" in row.actual
    # ... and feeds `gpucluster cost`: with the exporter's DRA attribution on (the default) a whole GPU is in
    # the recording rules, so --dra adds only MIG devices and nothing here; with it off, the claim's GPU is
    # charged to the tenant from its allocation on.
    snapshot = tmp_path / "usage.json"
    now = int(time.time())
    snapshot.write_text(json.dumps({"kind": "gpucluster-cost-snapshot", "version": 1, "usage": [
        {"start": now - 3600, "end": now + 3600, "namespace": "other", "model": "L4", "allocatedGpus": 1,
         "activity": 0.5}]}))
    assert cli(lw, "cost", "--snapshot", str(snapshot), "--dra", "-o", "json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert not [x for x in doc["rows"] if x["namespace"] == TENANT] and "(MIG devices:" in doc["source"]
    off = tmp_path / "no-attribution"
    off.mkdir()
    (off / "cluster.yaml").write_text((SPEC / "cluster.yaml").read_text()
                                      + "\ngpuOperator:\n  dcgmExporter: {draAttribution: false}\n")
    assert entrypoint(["cost", "--snapshot", str(snapshot), "--dra", "-o", "json", "-i", str(off),
                       "--kubeconfig", str(lw.kubeconfig)]) == 0
    doc = json.loads(capsys.readouterr().out)
    [dra_row] = [x for x in doc["rows"] if x["namespace"] == TENANT]
    assert (dra_row["tenant"], dra_row["model"]) == (TENANT, "L40S")
    assert 0 < dra_row["allocatedGpuHours"] == dra_row["unmeasuredGpuHours"] and dra_row["idleCost"] == 0
    # The device vanishes from the node's slice (driver restart, GPU lost): the claim still holds it.
    sim.inject(node, "missing-devices", r["device"])
    try:
        sim.sync()
        [row] = [x for x in rows(lw, spec, dra_claims.claim_checks) if x.subject == f"tenants/{TENANT}"]
        assert row.verdict.value == "fail" and "no ResourceSlice publishes" in row.reason, row
    finally:
        sim.clear(node, "missing-devices")
        sim.sync()
    delete(lw, TENANT, "plain-1")
    assert not [x for x in rows(lw, spec, dra_claims.claim_checks) if x.subject == f"tenants/{TENANT}"]


# -- 8. topology: devices under one PCIe root ------------------------------------------------------------------

DGX = "h100-dgx-1"
ROOT = "resource.kubernetes.io/pcieRoot"


def scheduling_decided(lw: Cluster, ns: str, name: str) -> dict[str, Any]:
    """The pod's PodScheduled condition once the scheduler has decided: True, or False with its reason."""
    def decided() -> dict[str, Any] | None:
        for c in lw.get("pod", "-n", ns, name)["status"].get("conditions") or []:
            if c["type"] == "PodScheduled" and (c["status"] == "True" or c.get("reason") == "Unschedulable"):
                return c
        return None
    return wait_for(f"{ns}/{name} scheduled or refused", decided)


def roots(lw: Cluster, node: str, claim_results: list[dict[str, Any]]) -> list[str | None]:
    """The pcieRoot each allocated device publishes in its node's ResourceSlices."""
    devs = {d["name"]: d for s in lw.get("resourceslices")["items"] if s["spec"].get("nodeName") == node
            for d in s["spec"].get("devices") or []}
    return [(devs[r["device"]]["attributes"].get(ROOT) or {}).get("string") for r in claim_results]


def test_devices_under_one_pcie_root(world, spec, tmp_path) -> None:
    lw, sim = world
    # One more node: two H100 on the cited DGX H100 layout (gpu-0 under pci0000:15, gpu-1 under pci0000:3d),
    # under dynamic MIG like h100-dyn (the DynamicMIG gate is one per release).
    data = yaml.safe_load((SPEC / "cluster.yaml").read_text())
    data["hosts"].append({"name": DGX, "address": "127.0.0.7"})
    gpu = {"model": "H100-SXM5-80GB", "count": 2, "platform": "dgx-h100"}
    data["nodePools"].append({"name": "h100-dgx", "hosts": [DGX], "gpu": gpu, "dra": True,
                              "sharing": {"mode": "dynamic-mig"}})
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(data))
    wide = load_spec(tmp_path)
    pair = ClaimTemplate(name="h100-pair-one-root", device_class="h100", count=2, match_attribute="pcieRoot")
    any_pair = ClaimTemplate(name="h100-pair", device_class="h100", count=2)
    mig_pair = ClaimTemplate(name="mig-pair-one-root", device_class="h100-mig", count=2, match_attribute="pcieRoot")
    # What validation says of the constrained pair, before the scheduler is asked.
    checked = wide.model_copy(deep=True)
    checked.dra.claim_templates += [pair, mig_pair]
    # A warning, not an error: the module's other H100 pool (h100-dyn) names no platform, so whether its
    # GPUs share a root is not known; on the DGX H100 pool it is known that they do not.
    [p] = [p for p in validate(checked) if p.path.startswith("dra.claimTemplates")]
    assert p.path == "dra.claimTemplates[1].matchAttribute" and p.severity == "warning", p
    assert "at most 1 under one root, pool h100-dgx: NVIDIA DGX H100 layout: every GPU under its own PCIe root" \
        in p.message and "pool(s) h100-dyn may hold them" in p.message, p
    dgx_sim = attach(lw.kubeconfig, wide)
    on_dgx = {L.POOL: "h100-dgx"}
    try:
        wait_for(f"{DGX}'s slices", lambda: [s for s in lw.get("resourceslices")["items"]
                                              if s["spec"].get("nodeName") == DGX and s["spec"].get("devices")])
        lw.apply(*(dra_driver.claim_template(t, FREE) for t in (pair, any_pair, mig_pair)))
        # Two whole GPUs under one root: no DGX H100 has them, and the scheduler says so.
        lw.apply(pod("pair", FREE, template=pair.name, node_selector=on_dgx))
        cond = scheduling_decided(lw, FREE, "pair")
        assert (cond["status"], cond["reason"]) == ("False", "Unschedulable"), cond
        assert "cannot allocate all claims" in cond["message"], cond
        # The same two GPUs without the constraint are free and allocated: the constraint alone refused them.
        lw.apply(pod("pair-any", FREE, template=any_pair.name, node_selector=on_dgx))
        assert scheduling_decided(lw, FREE, "pair-any")["status"] == "True"
        got = results(claim_of(lw, FREE, "pair-any"))
        assert sorted(r["device"] for r in got) == ["gpu-0", "gpu-1"]
        assert sorted(roots(lw, DGX, got)) == ["pci0000:15", "pci0000:3d"]  # DGX H100 GPU0, GPU1 (platforms.yaml)
        delete(lw, FREE, "pair-any")
        assert not lw.get("pod", "-n", FREE, "pair")["spec"].get("nodeName")  # freed GPUs: still two roots
        delete(lw, FREE, "pair")
        # Two MIG partitions under one root: both from one GPU, whose root they carry.
        lw.apply(pod("mig-pair", FREE, template=mig_pair.name, node_selector=on_dgx))
        assert scheduling_decided(lw, FREE, "mig-pair")["status"] == "True"
        got = results(claim_of(lw, FREE, "mig-pair"))
        assert len(got) == 2 and all("-mig-" in r["device"] for r in got), got
        found = roots(lw, DGX, got)
        assert found[0] in ("pci0000:15", "pci0000:3d") and found[0] == found[1], (got, found)
        assert len({r["device"].split("-mig-")[0] for r in got}) == 1
        delete(lw, FREE, "mig-pair")
    finally:
        dgx_sim.close()
        sim.sync()  # the module's own simulator removes the extra node and its slices
