"""Every validation rule: feed a bad spec, assert the path and the message (and the hint)."""

from __future__ import annotations

import pytest
from testkit import find, problems

from gpucluster.spec import load_spec, warnings_of


def test_base_spec_is_valid(write_spec, base):
    spec = load_spec(write_spec(base))
    assert spec.node_pools[0].effective_taints[0].key == "nvidia.com/gpu"


def test_shipped_inventories_are_valid(local_inventory, lab_inventory):
    assert load_spec(local_inventory).metadata.name == "local"
    assert load_spec(lab_inventory).metadata.name == "lab"


def test_unknown_gpu_model_suggests_closest(write_spec, base):
    base["nodePools"][0]["gpu"]["model"] = "H100-SXM5-80G"
    p = find(problems(write_spec, base), "nodePools[0].gpu.model")
    assert "unknown GPU model 'H100-SXM5-80G'" in p.message
    assert "H100-SXM5-80GB" in p.hint


def test_mig_on_gpu_without_mig(write_spec, base):
    base["nodePools"][1]["sharing"] = {"mode": "mig", "mig": {"layout": "all-1g.10gb"}}
    p = find(problems(write_spec, base), "nodePools[1].sharing.mode")
    assert "L4 does not support MIG" in p.message


@pytest.mark.parametrize("mig, path, text", [
    # more instances of one profile than the GPU holds
    ({"profiles": {"1g.10gb": 8}}, "nodePools[0].sharing.mig.profiles", "exceeds the 7 instances"),
    # compute slices: 4g + 4g = 8 > 7 (4g max is 1, so use 3g x2 + 2g = 8)
    ({"profiles": {"3g.40gb": 2, "2g.20gb": 1}}, "nodePools[0].sharing.mig.profiles", "compute slices"),
    # memory: 3g.40gb (4 slices) + 4g.40gb (4) + 1g.10gb (1) = 9 > 8
    ({"profiles": {"3g.40gb": 1, "4g.40gb": 1, "1g.10gb": 1}}, "nodePools[0].sharing.mig.profiles", "8 compute"),
    # a profile the model does not have
    ({"profiles": {"1g.5gb": 1}}, "nodePools[0].sharing.mig.profiles", "does not exist on H100-SXM5-80GB"),
    # unknown named layout
    ({"layout": "all-9g.99gb"}, "nodePools[0].sharing.mig.layout", "unknown layout"),
])
def test_mig_layout_that_does_not_fit(write_spec, base, mig, path, text):
    base["nodePools"][0]["sharing"] = {"mode": "mig", "mig": mig}
    p = find(problems(write_spec, base), path)
    assert text in p.message, p


def test_mig_memory_overflow_names_memory(write_spec, base):
    # 1g.20gb x4 uses all 8 memory slices; one more 1g.10gb needs a 9th.
    base["nodePools"][0]["sharing"] = {"mode": "mig", "mig": {"profiles": {"1g.20gb": 4, "1g.10gb": 1}}}
    p = find(problems(write_spec, base), "nodePools[0].sharing.mig.profiles")
    assert "memory slices" in p.message and "GiB" in p.message


def test_a100_4g_plus_3g_is_valid(write_spec, base):
    # 4g.20gb (start 0) + 3g.20gb (start 4) is a documented A100 layout: the placement search finds it.
    base["nodePools"][0]["gpu"]["model"] = "A100-40GB"
    base["nodePools"][0]["sharing"] = {"mode": "mig", "mig": {"profiles": {"4g.20gb": 1, "3g.20gb": 1}}}
    load_spec(write_spec(base))


def test_placement_conflict_is_rejected_even_when_totals_fit():
    # The catalog's real layouts rarely reach the placement search with totals that fit, so a
    # synthetic GPU shows it deciding: two instances that may only start at slice 0.
    from dataclasses import replace

    from gpucluster import catalog
    from gpucluster.catalog import MigProfile, MigSpec
    from gpucluster.spec.mig import LayoutError, check_fits

    pinned = MigProfile("2g.pinned", compute=2, memory=2, max=2, memory_gib=20, starts=(0,))
    loose = MigProfile("2g.loose", compute=2, memory=2, max=2, memory_gib=20, starts=(0, 2, 4))
    gpu = replace(catalog.get("A100-80GB"), mig=MigSpec(7, 8, {p.name: p for p in (pinned, loose)}, {}))
    check_fits(gpu, {"2g.pinned": 1, "2g.loose": 2})  # pinned at 0, the others at 2 and 4
    with pytest.raises(LayoutError, match="cannot be placed"):
        check_fits(gpu, {"2g.pinned": 2})


def test_valid_mixed_layout_and_balanced(write_spec, base):
    base["nodePools"][0]["sharing"] = {"mode": "mig", "mig": {"profiles": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}}
    load_spec(write_spec(base))
    base["nodePools"][0]["sharing"] = {"mode": "mig", "mig": {"layout": "all-balanced"}}
    load_spec(write_spec(base))


@pytest.mark.parametrize("replicas", [None, 1, 0])
def test_time_slicing_needs_two_replicas(write_spec, base, replicas):
    base["nodePools"][1]["sharing"] = {"mode": "time-slicing", "replicas": replicas}
    p = find(problems(write_spec, base), "nodePools[1].sharing.replicas")
    assert "needs replicas >= 2" in p.message


def test_pool_names_unknown_host(write_spec, base):
    base["nodePools"][0]["hosts"] = ["g9"]
    p = find(problems(write_spec, base), "nodePools[0].hosts[0]")
    assert "unknown host 'g9'" in p.message and "g1" in p.hint


def test_host_in_two_pools(write_spec, base):
    base["nodePools"][1]["hosts"] = ["g2", "g1"]
    p = find(problems(write_spec, base), "nodePools[1].hosts[1]")
    assert "already in pool 'h100'" in p.message


@pytest.mark.parametrize("section, item, path", [
    ("hosts", {"name": "g1", "address": "10.0.0.9"}, "hosts[3].name"),
    ("nodePools", {"name": "h100", "hosts": ["cp"]}, "nodePools[2].name"),
    ("tenants", {"name": "team-a"}, "tenants[1].name"),
])
def test_duplicate_names(write_spec, base, section, item, path):
    base[section].append(item)
    p = find(problems(write_spec, base), path)
    assert "duplicate name" in p.message


@pytest.mark.parametrize("version", ["1.33.4", "1.35.4", "1.38.0", "2.0.0"])
def test_unsupported_kubernetes_versions_name_the_supported_ones(write_spec, base, version):
    base["kubernetes"] = {"version": version}
    p = find(problems(write_spec, base), "kubernetes.version")
    assert f"Kubernetes {version} is not supported (supported: 1.36, 1.37)" in p.message


@pytest.mark.parametrize("version", ["1.36.3", "1.37.2"])
def test_both_supported_versions_validate(write_spec, base, version):
    base["kubernetes"] = {"version": version}
    base["nodePools"][0]["dra"] = True
    assert load_spec(write_spec(base)).kubernetes.version == version


@pytest.mark.parametrize(("version", "gate", "locked"), [
    ("1.36.3", "DRAAdminAccess", True), ("1.37.2", "DRAExtendedResource", True),
    ("1.36.3", "DRAExtendedResource", False),  # beta in 1.36: may be turned off there
])
def test_a_locked_gate_set_to_false_is_refused(write_spec, base, version, gate, locked):
    # host-config facts fg-locked-true-*: components refuse to start with a locked gate set to false
    base["kubernetes"] = {"version": version, "featureGates": {gate: False}}
    if locked:
        p = find(problems(write_spec, base), f"kubernetes.featureGates.{gate}")
        assert "locked on" in p.message and "remove the override" in p.hint
    else:
        load_spec(write_spec(base))


def test_pool_served_by_dra_and_device_plugin(write_spec, base):
    base["nodePools"][0].update({"dra": True, "devicePlugin": True})
    p = find(problems(write_spec, base), "nodePools[0].devicePlugin")
    assert "both the DRA driver and the device plugin" in p.message


def test_nfd_in_both_operators(write_spec, base):
    base["networking"] = {"networkOperator": {"nfd": True}}
    p = find(problems(write_spec, base), "networking.networkOperator.nfd")
    assert "only one NFD" in p.hint


def test_tenant_quotas_above_capacity(write_spec, base):
    # capacity: 8 (H100) + 4x4 (L4 time-sliced) = 24 nvidia.com/gpu
    base["tenants"] = [{"name": "a", "quota": {"gpus": 20}}, {"name": "b", "quota": {"gpus": 5}}]
    p = find(problems(write_spec, base), "tenants")
    assert "add up to 25" in p.message and "24 nvidia.com/gpu" in p.message


def test_queue_capabilities_above_capacity_is_a_warning(write_spec, base):
    base["tenants"] = [{"name": "a", "quota": {"gpus": 12}, "queue": {"capabilityGpus": 20}},
                       {"name": "b", "quota": {"gpus": 12}, "queue": {"capabilityGpus": 12}}]
    spec = load_spec(write_spec(base))  # warnings do not fail
    msgs = [str(w) for w in warnings_of(spec)]
    assert any("queue capabilities add up to 32" in m for m in msgs), msgs


@pytest.mark.parametrize("value, hint", [("256GB", "256Gi"), ("16gb", "16Gi"), ("512MB", "512Mi")])
def test_memory_in_wrong_unit(write_spec, base, value, hint):
    base["tenants"][0]["quota"]["memory"] = value
    p = find(problems(write_spec, base), "tenants[0].quota.memory")
    assert hint in p.hint


@pytest.mark.parametrize("path, setter", [
    ("hosts[1].name", lambda s: s["hosts"][1].update(name="GPU_1")),
    ("nodePools[0].name", lambda s: s["nodePools"][0].update(name="h100.pool")),
    ("tenants[0].name", lambda s: s["tenants"][0].update(name="Team-A")),
])
def test_names_must_be_dns1123(write_spec, base, path, setter):
    setter(base)
    probs = problems(write_spec, base)
    p = find(probs, path)
    assert "DNS-1123" in p.message


@pytest.mark.parametrize("kube, path, text", [
    ({"podSubnet": "10.244.0.0/33"}, "kubernetes.podSubnet", "invalid CIDR"),
    ({"podSubnet": "10.244.0.1/16"}, "kubernetes.podSubnet", "invalid CIDR"),
    ({"podSubnet": "10.96.0.0/16", "serviceSubnet": "10.96.0.0/12"}, "kubernetes.serviceSubnet", "overlaps"),
])
def test_bad_and_overlapping_cidrs(write_spec, base, kube, path, text):
    base["kubernetes"] = kube
    p = find(problems(write_spec, base), path)
    assert text in p.message


def test_secondary_network_overlapping_pod_subnet(write_spec, base):
    base["networking"] = {"secondaryNetworks": [
        {"name": "n1", "master": "eth1", "cidr": "10.244.10.0/24", "namespaces": ["team-a"]}]}
    p = find(problems(write_spec, base), "networking.secondaryNetworks[0].cidr")
    assert "overlaps kubernetes.podSubnet" in p.message


@pytest.mark.parametrize("taint, text", [
    ("nvidia.com/gpu=present", "is not a taint"),
    ("nvidia.com/gpu=present:Sometimes", "'Sometimes' is not allowed (hint: one of: 'NoSchedule'"),
])
def test_malformed_taints(write_spec, base, taint, text):
    base["nodePools"][0]["taints"] = [taint]
    probs = problems(write_spec, base)
    assert any(p.path.startswith("nodePools[0].taints[0]") and text in str(p) for p in probs), \
        [str(p) for p in probs]


@pytest.mark.parametrize("key", ["-bad/key", "example.com/", "a" * 64, "Example.COM/x"])
def test_malformed_label_keys(write_spec, base, key):
    base["nodePools"][0]["labels"] = {key: "v"}
    probs = problems(write_spec, base)
    assert any(p.path == "nodePools[0].labels" and "label key" in p.message for p in probs), [str(p) for p in probs]


@pytest.mark.parametrize("where, key, path, suggestion", [
    ("top", "nodepools", "nodepools", "nodePools"),
    ("pool", "taint", "nodePools[0].taint", "taints"),
    ("gpu", "modle", "nodePools[0].gpu.modle", "model"),
    ("tenant", "quotas", "tenants[0].quotas", "quota"),
    ("quota", "gpu", "tenants[0].quota.gpu", "gpus"),
])
def test_unknown_keys_get_a_suggestion(write_spec, base, where, key, path, suggestion):
    target = {"top": base, "pool": base["nodePools"][0], "gpu": base["nodePools"][0]["gpu"],
              "tenant": base["tenants"][0], "quota": base["tenants"][0]["quota"]}[where]
    target[key] = target.get(suggestion, 1) if where != "top" else []
    p = find(problems(write_spec, base), path)
    assert p.message == f"unknown key {key!r}"
    assert suggestion in p.hint


def test_all_errors_are_collected_at_once(write_spec, base):
    base["nodePools"][0]["gpu"]["model"] = "H999"
    base["nodePools"][1]["sharing"]["replicas"] = 1
    base["nodePools"][1]["hosts"] = ["nope"]
    probs = problems(write_spec, base)
    paths = {p.path for p in probs}
    assert {"nodePools[0].gpu.model", "nodePools[1].sharing.replicas", "nodePools[1].hosts[0]"} <= paths


def test_references_are_checked(write_spec, base):
    base["dra"] = {"claimTemplates": [{"name": "x", "deviceClass": "nope"}]}
    base["tenants"][0]["priorityClasses"] = ["trainnig"]
    base["tenants"][0]["claimTemplates"] = ["y"]
    probs = problems(write_spec, base)
    assert "did you mean 'training'" in find(probs, "tenants[0].priorityClasses[0]").hint
    assert "unknown DeviceClass 'nope'" in find(probs, "dra.claimTemplates[0].deviceClass").message
    assert "unknown claim template 'y'" in find(probs, "tenants[0].claimTemplates[0]").message


def test_single_mig_strategy_rejects_mixed_layout(write_spec, base):
    base["gpuOperator"] = {"migStrategy": "single"}
    base["nodePools"][0]["sharing"] = {"mode": "mig", "mig": {"layout": "all-balanced"}}
    p = find(problems(write_spec, base), "nodePools[0].sharing.mig.layout")
    assert "mixes profiles" in p.message


def test_no_control_plane(write_spec, base):
    base["hosts"][0]["roles"] = ["worker"]
    assert "no host has the control-plane role" in find(problems(write_spec, base), "hosts").message


# -- what upstream cannot run (each rule cites its upstream fact) -----------------------------------


def test_operator_driver_on_debian_is_rejected_with_both_ways_out(write_spec, base):
    # NVIDIA builds no driver image for Debian (gpu-operator facts driver-container-ci-dists).
    base["hosts"][1]["os"] = "debian12"
    p = find(problems(write_spec, base), "hosts[1].os")
    assert "no driver container image for debian12" in p.message and "'g1'" in p.message
    assert "managedBy: host" in p.hint and "ubuntu24.04" in p.hint
    base["gpuOperator"] = {"driver": {"managedBy": "host"}}
    load_spec(write_spec(base))  # the host installs the driver: fine


def test_defaults_never_ask_for_a_driver_image_that_does_not_exist(write_spec, base):
    for host in base["hosts"]:
        host.pop("os", None)
    spec = load_spec(write_spec(base))
    assert {h.os for h in spec.hosts} == {"ubuntu24.04"} and spec.gpu_operator.driver.managed_by == "operator"


def test_gpu_hosts_on_two_oses_with_the_operator_driver(write_spec, base):
    base["hosts"][1]["os"] = "ubuntu22.04"
    base["hosts"][2]["os"] = "ubuntu24.04"
    p = find(problems(write_spec, base), "hosts")
    assert "different OSes" in p.message and "ubuntu22.04: g1" in p.message
    base["hosts"][2]["os"] = "ubuntu22.04"
    load_spec(write_spec(base))


def test_dra_pools_need_a_driver_the_dra_driver_supports(write_spec, base):
    base["nodePools"][0]["dra"] = True
    base["gpuOperator"] = {"driver": {"managedBy": "host", "version": "535"}}
    p = find(problems(write_spec, base), "gpuOperator.driver.version")
    assert ">= 565" in p.message and "535" in p.message
    base["gpuOperator"]["driver"]["version"] = "570.172.08"
    load_spec(write_spec(base))


def test_mps_with_the_mixed_mig_strategy_is_refused_like_the_plugin_does(write_spec, base):
    # device-plugin facts mps-with-mig-strategy-mixed-rejected: the plugin does not start.
    base["nodePools"][1]["sharing"] = {"mode": "mps", "replicas": 4}
    p = find(problems(write_spec, base), "gpuOperator.migStrategy")
    assert "MPS pools (l4)" in p.message and "mixed" in p.message and "single" in p.hint
    base["gpuOperator"] = {"migStrategy": "single"}
    load_spec(write_spec(base))


# -- tenants: nothing that would let a tenant out of its quota --------------------------------------


@pytest.mark.parametrize(("section", "value", "owner"), [
    (None, "kube-system", "a Kubernetes system namespace"),
    (None, "default", "a Kubernetes system namespace"),
    (None, "kube-flannel", "a pod network's namespace"),
    (None, "gpu-operator", "the GPU Operator's namespace (gpuOperator.namespace)"),
    (None, "nvidia-dra-driver-gpu", "the DRA driver's namespace (dra.namespace)"),
    (None, "volcano-system", "Volcano's namespace"),
    (None, "nvidia-network-operator", "the network operator's namespace"),
    (None, "monitoring", "the monitoring namespace (monitoring.namespace)"),
    ({"gpuOperator": {"namespace": "gpus"}}, "gpus", "the GPU Operator's namespace"),
])
def test_tenant_namespace_must_not_be_an_operator_or_system_namespace(write_spec, base, section, value, owner):
    base.update(section or {})
    base["tenants"][0]["namespace"] = value
    p = find(problems(write_spec, base), "tenants[0].namespace")
    assert f"tenant namespace {value!r} is" in p.message and owner in p.message
    assert "namespace: team-a-workloads" in p.hint


def test_tenant_named_like_an_operator_namespace_is_caught_too(write_spec, base):
    base["tenants"][0]["name"] = "monitoring"  # namespace defaults to the name
    assert "monitoring namespace" in find(problems(write_spec, base), "tenants[0].namespace").message


def test_claim_template_of_a_class_the_tenant_may_not_claim(write_spec, base):
    base["dra"] = {"deviceClasses": [{"name": "big", "selector": {"minMemory": "80G"}}],
                   "claimTemplates": [{"name": "two-big", "deviceClass": "big", "count": 2}]}
    base["tenants"][0]["claimTemplates"] = ["two-big"]
    p = find(problems(write_spec, base), "tenants[0].claimTemplates[0]")
    assert "claims DeviceClass 'big', which tenant 'team-a' may not claim" in p.message
    assert "quota.deviceClasses.big" in p.hint
    base["tenants"][0]["quota"]["deviceClasses"] = {"big": 1}
    p = find(problems(write_spec, base), "tenants[0].claimTemplates[0]")
    assert "claims 2 'big' devices, above the tenant's quota of 1" in p.message
    base["tenants"][0]["quota"]["deviceClasses"] = {"big": 2}
    assert load_spec(write_spec(base)).tenants[0].allowed_device_classes == ["big"]


def test_the_dra_charts_classes_are_known(write_spec, base):
    base["tenants"][0]["quota"]["deviceClasses"] = {"gpu.nvidia.com": 1, "mig.nvidia.com": 1,
                                                    "vfio.gpu.nvidia.com": 1}
    load_spec(write_spec(base))


@pytest.mark.parametrize(("key", "text", "hint"), [
    ("requests.nvidia.com/mig-1g.10gb", "is a quota key", "nvidia.com/mig-1g.10gb"),
    ("nvidia.com/gpu", "has its own field", "quota.gpus"),
    ("deviceclass.resource.kubernetes.io/big", "DeviceClass's extended resource", "quota.deviceClasses.big"),
    ("gpus", "not an extended resource name", "nvidia.com/mig-1g.10gb"),
])
def test_extended_quota_keys_are_resource_names(write_spec, base, key, text, hint):
    base["tenants"][0]["quota"]["extended"] = {key: 1}
    p = find(problems(write_spec, base), f"tenants[0].quota.extended.{key}")
    assert text in p.message and hint in p.hint


def test_egress_cidrs_are_networks(write_spec, base):
    base["tenants"][0]["egressCidrs"] = ["10.20.0.1/16"]
    p = find(problems(write_spec, base), "tenants[0].egressCidrs[0]")
    assert "invalid CIDR '10.20.0.1/16'" in p.message and "host bits zero" in p.hint


def test_privileged_tenant_and_cdi_off_are_warnings(write_spec, base):
    base["tenants"][0]["podSecurity"] = "privileged"
    base["gpuOperator"] = {"cdi": False}
    warns = {w.path: w for w in warnings_of(load_spec(write_spec(base)))}
    assert "every GPU of the node" in warns["tenants[0].podSecurity"].message
    assert "NVIDIA_VISIBLE_DEVICES" in warns["gpuOperator.cdi"].message
    assert "cdi: true" in warns["gpuOperator.cdi"].hint


def test_warnings_stay_with_the_spec_and_out_of_its_data(write_spec, base):
    base["tenants"][0]["podSecurity"] = "privileged"
    spec = load_spec(write_spec(base))
    assert [w.path for w in spec.warnings] == ["tenants[0].podSecurity"]
    assert [w.path for w in spec.model_copy(deep=True).warnings] == ["tenants[0].podSecurity"]  # tests copy specs
    assert "warnings" not in str(spec.model_dump(by_alias=True))  # never a key of the spec itself
    del base["tenants"][0]["podSecurity"]
    assert load_spec(write_spec(base)).warnings == []


@pytest.mark.parametrize("version", ["~26.3", "26.x", "latest", ">=1.0.0", ""])
def test_a_chart_version_that_is_not_exact_is_refused(write_spec, base, cli, version):
    base["gpuOperator"] = {"chart": {"repository": "https://charts.example.com/nvidia", "chart": "gpu-operator",
                                     "version": version}}
    out = cli("validate", "-i", str(write_spec(base)))
    assert out.exit_code == 2 and "gpuOperator.chart.version" in out.output and "exact" in out.output
    assert "Traceback" not in out.output
