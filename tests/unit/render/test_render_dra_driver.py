"""render/dra_driver.py: DeviceClasses by attributes, claim templates, chart values."""

from __future__ import annotations

from testkit import by_kind

from gpucluster.render import dra_driver as dra
from gpucluster.render import render, tenants


def test_device_classes_select_by_attributes(local):
    classes = {o["metadata"]["name"]: o for o in dra.objects(local)}
    assert all(o["apiVersion"] == "resource.k8s.io/v1" for o in classes.values())
    expr = classes["gpu-80gb"]["spec"]["selectors"][0]["cel"]["expression"]
    assert "device.driver == 'gpu.nvidia.com'" in expr
    assert "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80G')) >= 0" in expr
    assert "architecture == 'Hopper'" in classes["hopper"]["spec"]["selectors"][0]["cel"]["expression"]
    mig = classes["mig-1g-10gb"]["spec"]["selectors"][0]["cel"]["expression"]
    assert ".type == 'mig'" in mig and ".profile == '1g.10gb'" in mig
    for o in classes.values():
        assert "index" not in o["spec"]["selectors"][0]["cel"]["expression"]


def test_compute_capability_is_semver(local):
    spec = local.model_copy(deep=True)
    spec.dra.device_classes[1].selector.min_compute_capability = "9.0"
    expr = dra.cel(spec.dra.device_classes[1])
    assert "cudaComputeCapability.compareTo(semver('9.0.0')) >= 0" in expr


def test_claim_templates_in_tenant_namespaces(local):
    t = by_kind(tenants.objects(local), "ResourceClaimTemplate", "one-80gb-gpu")
    assert [o["metadata"]["namespace"] for o in t] == ["ml-research"]
    req = t[0]["spec"]["spec"]["devices"]["requests"][0]
    assert req["exactly"] == {"deviceClassName": "gpu-80gb", "allocationMode": "ExactCount", "count": 1}


def test_dra_values_carry_override(local):
    v = dra.values(local)
    assert v["gpuResourcesEnabledOverride"] is True
    assert v["resources"]["gpus"]["enabled"] is True
    assert v["nvidiaDriverRoot"] == "/run/nvidia/driver"


def test_the_spec_can_point_the_release_at_another_chart(local):
    # The spec's dra.chart defaults to the registry row's pin (test_render_core); a site's mirror wins.
    local.dra.chart = local.dra.chart.model_copy(update={"repository": "/srv/charts", "version": "0.4.0"})
    (rel,) = [r for r in render(local).releases if r.name == "dra-driver"]
    assert (rel.repository, rel.version) == ("/srv/charts", "0.4.0")


def test_kubelet_plugin_tolerates_every_taint_of_the_dra_pools(local):
    from gpucluster.spec.model import Taint

    h200 = next(p for p in local.node_pools if p.uses_dra)
    h200.taints = [Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule"),
                   Taint(key="dedicated", value="training", effect="NoExecute")]
    tolerations = dra.values(local)["kubeletPlugin"]["tolerations"]
    assert {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoExecute"} in tolerations
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in tolerations
