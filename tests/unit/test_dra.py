"""DRA as Kubernetes 1.37 ships it, without a cluster: the spec rules, what is rendered, what verify
concludes from a snapshot, the quarantine rule and the cost of DRA claims (live: test_dra_live.py)."""

from __future__ import annotations

import copy
from decimal import Decimal
from pathlib import Path

import pytest
from pinned_rows import pin
from testkit import find as at
from testkit import problems

from gpucluster import expected, quarantine, upstream
from gpucluster.cost import dra as dra_cost
from gpucluster.cost.report import compute
from gpucluster.errors import InputError
from gpucluster.render import dra_driver, nodes, tenants
from gpucluster.spec import features, load_spec
from gpucluster.spec.validate import validate
from gpucluster.spec.validate.kubernetes import used_features
from gpucluster.verify import cluster, dra_claims
from gpucluster.verify.snapshot import Snapshot

DRA_SPEC = Path(__file__).resolve().parents[2] / "tests" / "data" / "dra"


@pytest.fixture(scope="module")
def dra_spec():
    return load_spec(DRA_SPEC)


@pytest.fixture
def spec(dra_spec):
    return dra_spec.model_copy(deep=True)


@pytest.fixture
def dra_base(base) -> dict:
    """The shared base spec with its H100 pool on DRA."""
    base["nodePools"][0]["dra"] = True
    return base


# -- spec rules -----------------------------------------------------------------------------------------

def test_the_dra_test_spec_is_valid_and_names_the_features_it_uses(dra_spec):
    assert used_features(dra_spec) == ["claim-device-status", "extended-resource", "device-taints",
                                       "device-taint-rules", "partitionable-devices", "prioritized-list"]
    # nothing to set on 1.37; on 1.36 DeviceTaintRules are beta-off and served in v1beta2
    assert features.gates(37, used_features(dra_spec)) == {}
    assert features.gates(36, used_features(dra_spec)) == {"DRADeviceTaintRules": True}
    assert features.runtime_config(36, used_features(dra_spec)) == ["resource.k8s.io/v1beta2=true"]


def test_extended_resource_needs_a_dra_pool_with_whole_gpus(write_spec, base):
    base["nodePools"][0]["extendedResource"] = True
    assert "not served by the DRA driver" in at(problems(write_spec, base), "nodePools[0].extendedResource").message
    base["nodePools"][0].update(dra=True, sharing={"mode": "mig", "mig": {"layout": "all-1g.10gb"}})
    assert "MIG devices only" in at(problems(write_spec, base), "nodePools[0].extendedResource").message


def test_a_pool_without_the_opt_in_must_not_share_a_product_name_with_one_that_has_it(write_spec, dra_base):
    dra_base["hosts"].append({"name": "g3", "address": "10.0.0.4"})
    dra_base["nodePools"][0]["extendedResource"] = True
    dra_base["nodePools"].append({"name": "h100b", "hosts": ["g3"], "gpu": {"model": "H100-SXM5-80GB", "count": 8},
                                  "dra": True})
    p = at(problems(write_spec, dra_base), "nodePools[2].extendedResource")
    assert "never by node" in p.message and "NVIDIA H100 80GB HBM3" in p.message


@pytest.mark.parametrize(("pool", "text"), [
    ({"dra": False}, "must be served by DRA"),
    ({"gpu": {"model": "L4", "count": 4}}, "does not support MIG"),
    ({"gpu": {"model": "A100-80GB", "count": 8}}, "cannot switch MIG mode without a GPU reset"),
])
def test_dynamic_mig_needs_dra_and_a_gpu_that_toggles_mig_mode(write_spec, dra_base, pool, text):
    dra_base["nodePools"][0].update(sharing={"mode": "dynamic-mig"}, **pool)
    assert text in at(problems(write_spec, dra_base), "nodePools[0].sharing.mode").message


def test_one_dynamic_mig_gate_for_every_mig_capable_dra_pool(write_spec, dra_base):
    dra_base["hosts"].append({"name": "g3", "address": "10.0.0.4"})
    dra_base["nodePools"][0]["sharing"] = {"mode": "dynamic-mig"}
    dra_base["nodePools"].append({"name": "a100", "hosts": ["g3"], "gpu": {"model": "A100-80GB", "count": 8},
                                  "dra": True, "sharing": {"mode": "mig", "mig": {"layout": "all-balanced"}}})
    p = at(problems(write_spec, dra_base), "nodePools[2].sharing.mode")
    assert "one setting for the whole release" in p.message and "static MIG devices deleted" in p.message


def test_the_health_monitor_cannot_run_next_to_dynamic_mig(write_spec, dra_base):
    """The driver refuses NVMLDeviceHealthCheck with DynamicMIG (featuregates.go:205): the gate is left out,
    and a spec that asked for it by name is told so; by default it is on."""
    assert dra_driver.values(load_spec(write_spec(dra_base)))["featureGates"] == {"NVMLDeviceHealthCheck": True}
    dra_base["nodePools"][0]["sharing"] = {"mode": "dynamic-mig"}
    spec = load_spec(write_spec(dra_base))
    assert dra_driver.values(spec)["featureGates"] == {"DynamicMIG": True}
    assert not [w for w in validate(spec) if w.path == "dra.deviceHealthCheck"]
    dra_base["dra"] = {"deviceHealthCheck": True}
    w = at(validate(load_spec(write_spec(dra_base))), "dra.deviceHealthCheck")
    assert w.severity == "warning" and "cannot run its health monitor with DynamicMIG" in w.message


def test_claim_templates_take_one_class_or_alternatives(write_spec, dra_base):
    dra_base["dra"] = {"claimTemplates": [{"name": "x", "deviceClass": "gpu.nvidia.com",
                                           "firstAvailable": [{"deviceClass": "gpu.nvidia.com"}]}]}
    assert "either deviceClass" in problems(write_spec, dra_base)[0].message
    dra_base["dra"] = {"claimTemplates": [{"name": "x", "firstAvailable": [
        {"deviceClass": "gpu.nvidia.com"}, {"deviceClass": "nope", "count": 2}]}]}
    p = at(problems(write_spec, dra_base), "dra.claimTemplates[0].firstAvailable[1].deviceClass")
    assert "unknown DeviceClass 'nope'" in p.message


def test_an_80gi_class_next_to_h100s_names_the_nearest_devices(write_spec, dra_base):
    dra_base["dra"] = {"deviceClasses": [{"name": "big", "selector": {"minMemory": "80Gi"}}]}
    p = at(problems(write_spec, dra_base), "dra.deviceClasses[0]")
    assert "DeviceClass 'big' matches none" in p.message
    assert "NVIDIA H100 80GB HBM3 of pool h100: memory is 79.6Gi" in p.message and "below 80Gi" in p.message
    assert "minMemory: 80G includes it" in p.hint


def test_a_template_no_single_node_can_satisfy(write_spec, dra_base):
    dra_base["dra"] = {"claimTemplates": [{"name": "nine", "deviceClass": "gpu.nvidia.com", "count": 9}]}
    p = at(problems(write_spec, dra_base), "dra.claimTemplates[0].count")
    assert "9x 'gpu.nvidia.com' (at most 8 on one node, pool h100)" in p.message
    # an alternative that fits keeps the template valid; the impossible one is a warning
    dra_base["dra"]["claimTemplates"][0] = {"name": "nine", "firstAvailable": [
        {"deviceClass": "gpu.nvidia.com", "count": 9}, {"deviceClass": "gpu.nvidia.com", "count": 8}]}
    warns = [w for w in validate(load_spec(write_spec(dra_base))) if w.path.startswith("dra.claimTemplates")]
    assert [w.severity for w in warns] == ["warning"] and "can never be allocated" in warns[0].message


def test_dynamic_mig_counts_what_fits_one_gpu_at_once(spec):
    # 1 H100 under dynamic MIG publishes 7 1g.10gb placements, but 1g.10gb+me shares the jpeg/ofa engine and
    # every partition shares the 7 compute slices: at most 7 MIG devices at once, 1 whole GPU.
    spec.tenants[0].quota.device_classes["h100-mig"] = 8
    [w] = [p for p in validate(spec) if p.path == "tenants[0].quota.deviceClasses.h100-mig"]
    assert w.severity == "warning" and "never allocate more than 7" in w.message


def test_quota_on_a_class_that_does_not_exist(write_spec, dra_base):
    dra_base["tenants"][0]["quota"]["deviceClasses"] = {"hoper": 2}
    assert "unknown DeviceClass 'hoper'" in at(problems(write_spec, dra_base),
                                                "tenants[0].quota.deviceClasses.hoper").message


def test_a_class_validation_cannot_evaluate_is_not_passed_silently(spec):
    spec.dra.device_classes[0].selector.cel = ["device.attributes['gpu.nvidia.com'].productName.find('H1') != ''"]
    [w] = [p for p in validate(spec) if p.path == "dra.deviceClasses[0].selector.cel"]
    assert w.severity == "warning" and "not checked" in w.message and "outside what gpucluster evaluates" in w.message
    # an attribute no spec can predict (a GPU's uuid): a warning too, never "matches nothing"
    spec.dra.device_classes[0].selector.cel = ["device.attributes['gpu.nvidia.com'].uuid == 'GPU-1'"]
    [w] = [p for p in validate(spec) if p.path.startswith("dra.deviceClasses[0]")]
    assert w.severity == "warning" and "cannot predict" in w.message
    # brand and driver version are known: a class on them is checked
    spec.dra.device_classes[0].selector.cel = ["device.attributes['gpu.nvidia.com'].brand == 'Nvidia'",
                                               "device.attributes['gpu.nvidia.com'].driverVersion.compareTo("
                                               "semver('580.0.0')) >= 0"]
    assert not [p for p in validate(spec) if p.path.startswith("dra.deviceClasses[0]")]


@pytest.mark.parametrize(("extra", "why"), [
    # whole GPUs publish no profile: Kubernetes' evaluation fails on them ("no such key")
    ("device.attributes['gpu.nvidia.com'].profile != ''", "no such key: profile"),
    # a string compared with a number by order: no such overload at run time
    ("device.attributes['gpu.nvidia.com'].productName > 1", "No matching overloads found : _>_(string, int64)"),
    # refused by the type checker, as the API server refuses it
    ("device.driver == 1", "does not compile"),
])
def test_a_class_kubernetes_cannot_evaluate_is_an_error(spec, extra, why):
    spec.dra.device_classes[0].selector.cel = [extra]
    [e] = [p for p in validate(spec) if p.path == "dra.deviceClasses[0].selector"]
    assert e.severity == "error" and why in e.message and "has(" in e.hint


def test_a_guarded_optional_attribute_is_evaluated(spec):
    spec.dra.device_classes[0].selector.cel = ["!has(device.attributes['gpu.nvidia.com'].profile)"]
    assert not [p for p in validate(spec) if p.path.startswith("dra.deviceClasses[0]")]


# -- render ---------------------------------------------------------------------------------------------

def test_the_extended_class_selects_only_the_opted_in_pools(spec, local):
    cls = dra_driver.extended_class(spec)
    assert cls["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert "productName in ['NVIDIA L40S']" in cls["spec"]["selectors"][0]["cel"]["expression"]
    # no pool opts in: it matches nothing, so the chart's class cannot hand plain GPU pods to DRA pools
    assert local.dra.enabled and not any(p.extended_resource for p in local.node_pools)
    assert dra_driver.extended_class(local)["spec"]["selectors"][0]["cel"]["expression"].endswith("&& false")
    # the class wins a same-second tie against the chart's (fact extended-resource-class-newest-wins)
    assert upstream.DRA_EXTENDED_CLASS < "gpu.nvidia.com"


def test_dynamic_mig_turns_the_driver_gate_on_and_keeps_the_mig_manager_off(spec, local):
    assert dra_driver.values(spec)["featureGates"] == {"DynamicMIG": True}
    assert dra_driver.values(local)["featureGates"] == {"NVMLDeviceHealthCheck": True}  # static MIG: health on
    labels = nodes.node_config(spec)["h100-dyn-1"]["labels"]
    assert labels["nvidia.com/gpu.deploy.mig-manager"] == "false" and "nvidia.com/mig.config" not in labels


def test_prioritized_template_renders_first_available(spec):
    [tmpl] = dra_driver.tenant_claim_templates(spec, spec.tenants[0])
    [req] = tmpl["spec"]["spec"]["devices"]["requests"]
    assert req == {"name": "gpu", "firstAvailable": [
        {"name": "h100-0", "deviceClassName": "h100", "allocationMode": "ExactCount", "count": 1},
        {"name": "l40s-1", "deviceClassName": "l40s", "allocationMode": "ExactCount", "count": 2}]}


def test_tenants_may_use_the_extended_class_up_to_their_gpu_quota(spec):
    assert tenants.device_quota(spec, spec.tenants[0])["dra-nvidia-gpu"] == spec.tenants[0].quota.gpus == 6
    hard = tenants.quota_hard(spec, spec.tenants[0])
    assert hard["dra-nvidia-gpu.deviceclass.resource.k8s.io/devices"] == "6"
    spec.tenants[0].quota.gpus = 0
    assert "dra-nvidia-gpu" not in tenants.device_quota(spec, spec.tenants[0])


# -- verify ---------------------------------------------------------------------------------------------

def dynamic_devices(spec) -> tuple[list[dict], list[dict]]:
    """What the driver publishes for h100-dyn-1, written from the expectation (one counter set)."""
    state = expected.host_states(spec)["h100-dyn-1"]
    out = []
    for d in state.devices:
        start = d.starts[0]
        name = d.name if d.type == "gpu" else f"{d.name}-7-{start}"
        attrs = {"type": {"string": d.type}, "productName": {"string": d.product_name}}
        if d.profile:
            attrs["profile"] = {"string": d.profile}
        if d.pci_bus_id and d.pcie_root:  # the cited DGX H100 layout, which MIG partitions take from their GPU
            attrs["resource.kubernetes.io/pciBusID"] = {"string": d.pci_bus_id}
            attrs["resource.kubernetes.io/pcieRoot"] = {"string": d.pcie_root}
        out.append({"name": name, "attributes": attrs, "capacity": {"memory": {"value": str(d.memory_bytes)}},
                    "consumesCounters": [{"counterSet": "gpu-0-counter-set", "counters": {
                        f"memory-slice-{i}": {"value": "1"} for i in range(start, start + d.slices)}}]})
    counters = [{"name": n, "counters": {k: {"value": str(v)} for k, v in c.items()}}
                for n, c in state.counter_sets.items()]
    return out, counters


def test_dynamic_devices_every_placement_once_with_its_memory_slices(spec):
    want = expected.host_states(spec)["h100-dyn-1"]
    got, counters = dynamic_devices(spec)
    assert cluster.device_problems(want.devices, got) == []
    assert cluster.counter_problems(want.counter_sets, counters) == []
    dropped = [d for d in got if d["name"] != "gpu-0-mig-1g10gb-7-3"]
    assert cluster.device_problems(want.devices, dropped) == [
        "gpu-0-mig-1g10gb-*: placements [0, 1, 2, 4, 5, 6] (want [0, 1, 2, 3, 4, 5, 6])"]
    wrong = copy.deepcopy(got)
    wrong[1]["consumesCounters"][0]["counters"]["memory-slice-5"] = {"value": "1"}
    assert "consumes memory slices" in cluster.device_problems(want.devices, wrong)[0]
    assert cluster.counter_problems(want.counter_sets, []) == ["missing counter set gpu-0-counter-set"]


def alloc(ns: str, name: str, pool: str, device: str, *, request: str = "gpu", cls: str = "l40s",
          tolerations: list | None = None) -> dict:
    result = {"request": request, "driver": "gpu.nvidia.com", "pool": pool, "device": device}
    if tolerations:
        result["tolerations"] = tolerations
    return {"metadata": {"name": name, "namespace": ns, "creationTimestamp": "2026-11-01T00:00:00Z"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}},
            "status": {"allocation": {"allocationTimestamp": "2026-11-01T10:00:00Z",
                                      "devices": {"results": [result]}}}}


def l40s_slice(node: str, n: int = 4) -> dict:
    return {"spec": {"driver": "gpu.nvidia.com", "nodeName": node, "pool": {"name": node}, "devices": [
        {"name": f"gpu-{i}", "attributes": {"productName": {"string": "NVIDIA L40S"},
                                            "uuid": {"string": f"GPU-{node}-{i}"}}} for i in range(n)]}}


def test_claim_rows_list_each_tenants_devices_and_fail_beyond_quota_or_on_a_vanished_device(spec):
    claims = [alloc("team-a", f"c{i}", "l40s-1", f"gpu-{i}") for i in range(3)]
    snap = Snapshot(resource_slices=[l40s_slice("l40s-1")], resource_claims=claims)
    [row] = dra_claims.claim_checks(spec, snap)
    pin([row])
    assert row.check == "dra-claims"
    assert row.verdict.value == "pass" and row.subject == "tenants/team-a"
    assert "3 devices: l40s-1/gpu-0 (NVIDIA L40S; claim c0)" in row.actual
    snap.resource_slices = [l40s_slice("l40s-1", n=2)]  # gpu-2 vanished
    [row] = dra_claims.claim_checks(spec, snap)
    pin([row])
    assert row.verdict.value == "fail" and "holds l40s-1/gpu-2, which no ResourceSlice publishes" in row.reason
    snap.resource_slices = [l40s_slice("l40s-1", n=4)]
    snap.resource_claims = [alloc("team-a", f"c{i}", "l40s-1", f"gpu-{i}", cls="h100") for i in range(2)]
    [row] = dra_claims.claim_checks(spec, snap)
    pin([row])
    assert row.verdict.value == "fail" and "2 'h100' devices held, above the quota of 1" in row.reason


def test_extended_resource_row_fails_when_another_class_takes_the_mapping(spec):
    def cls(name: str, ts: str) -> dict:
        return {"metadata": {"name": name, "creationTimestamp": ts},
                "spec": {"extendedResourceName": "nvidia.com/gpu"}}
    snap = Snapshot(device_classes=[cls("gpu.nvidia.com", "2026-11-01T00:00:00Z"),
                                    cls("dra-nvidia-gpu", "2026-11-01T00:00:01Z")])
    [row] = dra_claims.extended_checks(spec, snap)
    pin([row])
    assert (row.check, row.verdict.value, row.actual) == ("dra-extended-resource", "pass", "dra-nvidia-gpu")
    snap.device_classes[0]["metadata"]["creationTimestamp"] = "2026-11-01T00:00:02Z"  # the chart's, recreated
    [row] = dra_claims.extended_checks(spec, snap)
    pin([row])
    assert (row.check, row.verdict.value, row.actual) == ("dra-extended-resource", "fail", "gpu.nvidia.com")


def test_the_scheduler_maps_an_extended_resource_to_the_newest_class_ties_to_the_lower_name():
    def cls(name: str, ts: str) -> dict:
        return {"metadata": {"name": name, "creationTimestamp": ts},
                "spec": {"extendedResourceName": "nvidia.com/gpu"}}
    assert dra_claims.mapped_class([cls("gpu.nvidia.com", "2026-11-01T00:00:01Z"),
                                    cls("dra-nvidia-gpu", "2026-11-01T00:00:00Z")])["metadata"]["name"] == \
        "gpu.nvidia.com"
    assert dra_claims.mapped_class([cls("gpu.nvidia.com", "2026-11-01T00:00:00Z"),
                                    cls("dra-nvidia-gpu", "2026-11-01T00:00:00Z")])["metadata"]["name"] == \
        "dra-nvidia-gpu"
    assert dra_claims.mapped_class([{"metadata": {"name": "x"}, "spec": {}}]) is None


def test_quarantine_rows_fail_while_an_untolerating_claim_holds_a_noexecute_gpu(spec):
    rule = quarantine.rule_object(37, "l40s-1", "gpu-1", "XID 79", "NoExecute")
    rule["spec"]["taint"]["timeAdded"] = "2026-11-01T00:00:00Z"
    snap = Snapshot(resource_slices=[l40s_slice("l40s-1")], device_taint_rules=[rule],
                    resource_claims=[alloc("team-a", "c", "l40s-1", "gpu-1")])
    [row] = dra_claims.quarantine_checks(spec, snap)
    pin([row])
    assert row.check == "dra-quarantine"
    assert row.verdict.value == "fail" and "team-a/c still holds it" in row.reason
    # an empty effect tolerates the taint for scheduling, not for eviction (fact
    # device-taint-eviction-needs-noexecute-toleration)
    snap.resource_claims = [alloc("team-a", "c", "l40s-1", "gpu-1", tolerations=[
        {"key": "gpucluster.dev/quarantine", "operator": "Exists"}])]
    assert next(dra_claims.quarantine_checks(spec, snap)).verdict.value == "fail"
    snap.resource_claims = [alloc("team-a", "c", "l40s-1", "gpu-1", tolerations=[
        {"key": "gpucluster.dev/quarantine", "operator": "Exists", "effect": "NoExecute"}])]
    [row] = dra_claims.quarantine_checks(spec, snap)
    pin([row])
    assert row.verdict.value == "pass" and "quarantined (NoExecute) since 2026-11-01T00:00:00Z: XID 79" in row.actual
    snap.resource_slices = [l40s_slice("l40s-1", n=1)]
    assert "no ResourceSlice publishes gpu-1" in next(dra_claims.quarantine_checks(spec, snap)).reason


def test_the_quarantine_rule(spec):
    rule = quarantine.rule_object(37, "l40s-1", "gpu-1", "XID 79: fell off the bus", "NoExecute")
    assert rule["apiVersion"] == "resource.k8s.io/v1"
    assert rule["metadata"]["name"] == "gpucluster-quarantine-l40s-1-gpu-1"
    assert rule["spec"]["deviceSelector"] == {"driver": "gpu.nvidia.com", "pool": "l40s-1", "device": "gpu-1"}
    assert rule["spec"]["taint"] == {"key": "gpucluster.dev/quarantine", "value": "XID-79-fell-off-the-bus",
                                     "effect": "NoExecute"}
    assert rule["metadata"]["annotations"]["gpucluster.dev/quarantine-reason"] == "XID 79: fell off the bus"
    assert quarantine.rule_object(36, "n", "d", "r", "NoSchedule")["apiVersion"] == "resource.k8s.io/v1beta2"
    with pytest.raises(InputError, match=r"not served by Kubernetes 1\.35"):
        quarantine.api_version(35)


def test_driver_taints_are_read_from_the_drivers_slices_beside_our_rules():
    slices = [{"spec": {"driver": "gpu.nvidia.com", "pool": {"name": "h100-1"}, "nodeName": "h100-1", "devices": [
        {"name": "gpu-0", "taints": [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule",
                                      "timeAdded": "2026-12-03T14:00:00Z"}]},
        {"name": "gpu-1", "taints": [{"key": "example.com/other", "effect": "NoSchedule"}]},  # not the driver's
        {"name": "gpu-2"}]}},
        {"spec": {"driver": "other.example.com", "pool": {"name": "h100-1"}, "devices": [
            {"name": "x", "taints": [{"key": "gpu.nvidia.com/xid", "effect": "NoSchedule"}]}]}}]
    assert quarantine.driver_taints(slices) == [quarantine.DriverTaint(
        "h100-1", "gpu-0", "gpu.nvidia.com/xid", "79", "NoSchedule", "2026-12-03T14:00:00Z")]
    assert quarantine.driver_taints(slices)[0].text == "gpu.nvidia.com/xid=79:NoSchedule"
    assert quarantine.driver_taints(None) == []


def test_quarantine_refuses_bad_input_before_touching_the_cluster(cli):
    result = cli("quarantine", "-i", str(DRA_SPEC), "--kubeconfig", "/nonexistent")
    assert result.exit_code == 2 and "give NODE and DEVICE" in result.output
    result = cli("quarantine", "l40s-1", "gpu-0", "--effect", "Sometimes", "-i", str(DRA_SPEC))
    assert result.exit_code == 2 and "Sometimes" in result.output


# -- cost -----------------------------------------------------------------------------------------------

def test_dra_claims_are_charged_from_their_allocation_and_unmeasured_is_never_idle(spec):
    claims = [alloc("team-a", "c0", "l40s-1", "gpu-0")]
    snap = Snapshot(resource_slices=[l40s_slice("l40s-1")], resource_claims=claims)
    day = Decimal(1_793_491_200)  # 2026-11-01T00:00:00Z; allocated at 10:00
    [u] = dra_cost.usage(dra_claims.held(snap), day, day + 86400)
    assert (u.namespace, u.model, u.start, u.allocated, u.measured) == ("team-a", "NVIDIA L40S", day + 36000, 1,
                                                                        False)
    report = compute([u], spec, day, day + 86400, "test", "spec")
    [row] = report.rows
    assert row.allocated_h == 14 and row.unmeasured_h == 14 and row.idle == 0 and row.gross == Decimal("12.6")
    [measured] = dra_cost.usage(dra_claims.held(snap), day, day + 86400,
                                activity=lambda uuid, lo, hi: Decimal("0.25") if uuid == "GPU-l40s-1-0" else None)
    assert measured.measured and measured.used == Decimal("0.25")


def test_a_mig_device_costs_its_share_of_the_gpu():
    h = dra_claims.Held("ns", "c", "gpu", "h100-mig", "n", "gpu-0-mig-3g40gb-9-0", "NVIDIA H100 80GB HBM3",
                        "3g.40gb", "GPU-x", "2026-11-01T00:00:00Z", False)
    assert dra_cost.share(h) == Decimal(3) / Decimal(7)
