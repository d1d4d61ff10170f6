"""Mistakes a new operator made that validation used to accept or word badly (issue 30 item 7).

Each rule is tested negative next to positive: the mistake is refused at its spec path with a hint (or
warned about, labelled), and the right way of writing it passes. Duplicate host addresses and hosts inside
the pod or Service range are tested in test_spec_inputs.py (cases ``address-duplicate``,
``ansible-host-duplicate``, ``address-in-pod-range``, ``address-in-service-range``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from testkit import find, problems

from gpucluster import components
from gpucluster.errors import SpecError
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec
from gpucluster.spec.reference import _models, markdown

LAB = Path(__file__).resolve().parents[2] / "inventories" / "lab" / "cluster.yaml"


def _k8s(base: dict, **values: object) -> dict:
    base.setdefault("kubernetes", {}).update(values)
    return base


# -- controlPlaneEndpoint: host[:port], as kubeadm takes it -------------------------------------------------


@pytest.mark.parametrize("endpoint, text, hint", [
    ("https://10.0.0.9:6443", "has a scheme (https://)", "write '10.0.0.9:6443'"),
    ("http://api.lab.example.com", "has a scheme (http://)", "write 'api.lab.example.com'"),
    ("10.0.0.9:6443/api", "has a path", "write '10.0.0.9:6443'"),
    ("10.0.0.9:99999", "the port '99999' is not a TCP port", "10.20.0.10:6443"),
    ("10.0.0.9:", "the port '' is not a TCP port", "10.20.0.10:6443"),
    ("[10.0.0.9]:6443", "in brackets is not an IPv6 address", "[fd00::10]:6443"),
    ("[fd00::10:6443", "is not host[:port]", "[fd00::10]:6443"),
    ("api_lab:6443", "'api_lab' is neither an IP address nor a host name", "host[:port]"),
])
def test_control_plane_endpoint_is_host_and_port_only(write_spec, base, endpoint, text, hint):
    p = find(problems(write_spec, _k8s(base, controlPlaneEndpoint=endpoint)), "kubernetes.controlPlaneEndpoint")
    assert repr(endpoint) in p.message and text in p.message, p
    assert hint in p.hint, p


@pytest.mark.parametrize("endpoint", ["10.0.0.9:6443", "10.0.0.9", "api.lab.example.com:443", "[fd00::10]:6443",
                                      "fd00::10"])
def test_control_plane_endpoints_kubeadm_takes_pass(write_spec, base, endpoint):
    spec = load_spec(write_spec(_k8s(base, controlPlaneEndpoint=endpoint)))
    assert spec.kubernetes.control_plane_endpoint == endpoint


@pytest.mark.parametrize("endpoint, key", [("10.244.0.10:6443", "kubernetes.podSubnet"),
                                           ("10.96.0.10", "kubernetes.serviceSubnet")])
def test_a_control_plane_endpoint_inside_the_pod_or_service_range_is_refused(write_spec, base, endpoint, key):
    p = find(problems(write_spec, _k8s(base, controlPlaneEndpoint=endpoint)), "kubernetes.controlPlaneEndpoint")
    assert f"lies inside {key}" in p.message and f"give {key} a range" in p.hint, p
    # the same address with the range moved away passes
    moved = {"podSubnet": "10.128.0.0/16"} if key.endswith("podSubnet") else {"serviceSubnet": "10.112.0.0/12"}
    assert load_spec(write_spec(_k8s(base, **moved))).kubernetes.control_plane_endpoint == endpoint


def test_an_endpoint_with_a_scheme_exits_2_on_the_command_line(write_spec, base, cli):
    out = cli("validate", "-i", str(write_spec(_k8s(base, controlPlaneEndpoint="https://10.0.0.9:6443"))))
    assert out.exit_code == 2, out.output
    assert "kubernetes.controlPlaneEndpoint: 'https://10.0.0.9:6443' has a scheme" in out.stderr


# -- more than one control plane: a shared endpoint, and one keepalived-haproxy can serve --------------------


def _control_planes(base: dict, n: int) -> dict:
    base["hosts"] += [{"name": f"cp{i}", "address": f"10.0.0.{100 + i}", "roles": ["control-plane"]}
                      for i in range(2, n + 1)]
    return base


def test_a_second_control_plane_without_an_endpoint_is_refused(write_spec, base):
    p = find(problems(write_spec, _control_planes(base, 2)), "kubernetes.controlPlaneEndpoint")
    assert "2 control-plane hosts (cp, cp2) need one API endpoint" in p.message, p
    assert "controlPlaneEndpointProvider: keepalived-haproxy" in p.hint, p
    # two with an endpoint pass (one control plane needs none: the base spec has one and passes everywhere)
    spec = load_spec(write_spec(_k8s(base, controlPlaneEndpoint="10.0.0.10:8443",
                                     controlPlaneEndpointProvider="keepalived-haproxy")))
    assert spec.kubernetes.control_plane_endpoint_provider == "keepalived-haproxy"
    assert [h.name for h in spec.hosts if h.roles[0].value == "control-plane"] == ["cp", "cp2"]


@pytest.mark.parametrize("endpoint, text, hint", [
    (None, "keepalived-haproxy serves controlPlaneEndpoint, and none is set", "set kubernetes.controlPlaneEndpoint"),
    ("api.lab.example.com:8443", "'api.lab.example.com' is a name: keepalived holds an IP address",
     "controlPlaneEndpointProvider: external"),
    ("10.0.0.10", "has no port, so kubeadm uses 6443", "10.0.0.10:8443"),
    ("10.0.0.10:6443", "uses port 6443", "10.0.0.10:8443"),
    ("[fd00::10]:8443", "fd00::10 is IPv6", "free IPv4 address"),
    ("10.0.0.1:8443", "10.0.0.1 is the address of hosts[0] ('cp')", "pick a free address"),
])
def test_an_endpoint_keepalived_haproxy_cannot_serve_is_refused(write_spec, base, endpoint, text, hint):
    values: dict[str, object] = {"controlPlaneEndpointProvider": "keepalived-haproxy"}
    if endpoint:
        values["controlPlaneEndpoint"] = endpoint
    found = problems(write_spec, _k8s(_control_planes(base, 1), **values))
    p = next((p for p in found if text in p.message), None)
    assert p is not None, found
    assert hint in p.hint, p
    # the same endpoint in front of a load balancer of the operator's own passes
    if endpoint:
        spec = load_spec(write_spec(_k8s(base, controlPlaneEndpointProvider="external")))
        assert spec.kubernetes.control_plane_endpoint == endpoint


# -- quota for a resource no pool offers --------------------------------------------------------------------


def _extended(base: dict, **quota: int) -> dict:
    base["tenants"][0]["quota"]["extended"] = quota
    return base


def test_quota_for_a_mig_profile_no_pool_offers_is_refused_with_the_offered_ones(write_spec, base):
    # a typo of 1g.10gb: no MIG resource is spelled like that
    p = find(problems(write_spec, _extended(base, **{"nvidia.com/mig-1g.10g": 2})),
             "tenants[0].quota.extended.nvidia.com/mig-1g.10g")
    assert p.severity == "error" and "no node pool offers nvidia.com/mig-1g.10g" in p.message, p
    assert "did you mean 'nvidia.com/mig-1g.10gb'?" in p.hint, p


def test_mig_quota_under_the_single_strategy_names_the_setting(write_spec, base):
    base["gpuOperator"] = {"migStrategy": "single"}  # MIG instances are then nvidia.com/gpu
    p = find(problems(write_spec, _extended(base, **{"nvidia.com/mig-1g.10gb": 2})),
             "tenants[0].quota.extended.nvidia.com/mig-1g.10gb")
    assert "migStrategy: mixed" in p.message, p
    del base["gpuOperator"]  # mixed (the default): the H100 pool offers every profile of its model
    assert load_spec(write_spec(base)).tenants[0].quota.extended == {"nvidia.com/mig-1g.10gb": 2}


def test_shared_gpu_quota_needs_a_pool_that_renames_its_shared_gpus(write_spec, base):
    p = find(problems(write_spec, _extended(base, **{"nvidia.com/gpu.shared": 4})),
             "tenants[0].quota.extended.nvidia.com/gpu.shared")
    assert "renameByDefault: true" in p.message, p
    base["nodePools"][1]["sharing"]["renameByDefault"] = True  # the time-sliced L4 pool now offers it
    assert load_spec(write_spec(base)).tenants[0].quota.extended == {"nvidia.com/gpu.shared": 4}


def test_rdma_quota_needs_an_rdma_pool_of_that_resource_name(write_spec, base):
    p = find(problems(write_spec, _extended(base, **{"rdma/rdma_shared_device_a": 2})),
             "tenants[0].quota.extended.rdma/rdma_shared_device_a")
    assert "the pools offer nvidia.com/mig-" in p.hint and "rdma/" not in p.hint, p
    base["nodePools"][0]["rdma"] = {"interfaces": ["ibp12s0"]}
    assert load_spec(write_spec(base)).tenants[0].quota.extended == {"rdma/rdma_shared_device_a": 2}


def test_quota_for_a_resource_of_another_domain_is_a_labelled_warning(write_spec, base):
    # another device plugin outside the spec may advertise it: the spec loads, with a warning
    spec = load_spec(write_spec(_extended(base, **{"example.com/fpga": 1})))
    (w,) = spec.warnings
    assert (w.path, w.severity) == ("tenants[0].quota.extended.example.com/fpga", "warning")
    assert "no node pool of this spec offers example.com/fpga" in w.message


# -- queue settings while Volcano is off --------------------------------------------------------------------


def test_queue_settings_with_volcano_off_are_refused(write_spec, base):
    base["scheduling"] = {"volcano": {"enabled": False}}
    base["tenants"][0]["queue"] = {"weight": 5}
    p = find(problems(write_spec, base), "tenants[0].queue")
    assert "scheduling.volcano.enabled: false" in p.message and "remove the queue settings" in p.hint, p
    del base["tenants"][0]["queue"]  # no queue settings: Volcano may be off
    assert load_spec(write_spec(base)).scheduling.volcano.enabled is False
    base["tenants"][0]["queue"] = {"weight": 5}
    del base["scheduling"]  # Volcano on: the queue is its
    assert load_spec(write_spec(base)).tenants[0].queue.weight == 5


# -- chart versions spelled as their repository spells them ------------------------------------------------


def _chart(name: str, version: str, repository: str | None = None) -> dict:
    pin = components.get(name).chart
    assert pin is not None
    return {"repository": repository or pin.repository, "chart": pin.name, "version": version}


@pytest.mark.parametrize("section, name, given, fixed", [
    # NVIDIA's index names the GPU Operator's releases v26.3.0 (the pin carries its v) ...
    (("gpuOperator",), "gpu-operator", "26.3.0", "v26.3.0"),
    # ... and the DRA driver's 0.4.1 (no v)
    (("dra",), "dra-driver", "v0.4.1", "0.4.1"),
])
def test_a_chart_version_without_its_repositorys_v_is_refused(write_spec, base, section, name, given, fixed):
    base[section[0]] = {"chart": _chart(name, given)}
    p = find(problems(write_spec, base), f"{section[0]}.chart.version")
    assert f"{given!r} names no release" in p.message and p.hint == f"write version: {fixed}", p
    base[section[0]] = {"chart": _chart(name, fixed)}
    load_spec(write_spec(base))


def test_a_chart_from_another_repository_is_not_judged_by_the_pins_spelling(write_spec, base):
    base["gpuOperator"] = {"chart": _chart("gpu-operator", "26.3.0", "oci://mirror.example.com/charts")}
    assert load_spec(write_spec(base)).gpu_operator.chart.version == "26.3.0"


def test_the_spec_references_chart_version_examples_pass_validation(write_spec, base):
    line = next(ln for ln in markdown().splitlines() if ln.startswith("| `version` | str | **required**"))
    for name, section in (("gpu-operator", "gpuOperator"), ("dra-driver", "dra")):
        pin = components.get(name).chart
        assert pin is not None and f"({pin.version})" in line, line
        base[section] = {"chart": _chart(name, pin.version)}
    load_spec(write_spec(base))


# -- type errors in our words --------------------------------------------------------------------------------

SPEC_TEXT = """\
metadata: {name: t}
hosts: [{name: cp, address: 10.0.0.1, roles: [control-plane]}]
"""


def _text_problems(write_spec, extra: str) -> list:
    """The problems of the minimal spec plus ``extra`` (YAML text; a ``hosts:`` line replaces the spec's)."""
    text = "metadata: {name: t}\n" + extra if extra.startswith("hosts:") else SPEC_TEXT + extra
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(text))
    return info.value.problems


@pytest.mark.parametrize("extra, path, message, hint", [
    ("tenants: [{name: a, queue: big}]\n", "tenants[0].queue",
     "expected a mapping (key: value lines), got the text 'big'", "weight, capabilityGpus"),
    ("tenants: [{name: a, queue: {weight: high}}]\n", "tenants[0].queue.weight",
     "expected a whole number, got the text 'high'", ""),
    ("tenants: [{name: a, queue: {weight: 0}}]\n", "tenants[0].queue.weight", "0 is below the minimum of 1",
     "give 1 or more"),
    ("tenants: [{name: a, queue: {weight: 1001}}]\n", "tenants[0].queue.weight", "1001 is above the maximum of 1000",
     "give 1000 or less"),
    ("nodePools: {name: p}\n", "nodePools", "expected a list, got a mapping (keys: name)", "'- item'"),
    ("scheduling: {volcano: {enabled: maybe}}\n", "scheduling.volcano.enabled",
     "expected true or false, got the text 'maybe'", ""),
    # an int | str field: one problem naming both, not one per member of the union
    ("gpuOperator: {driver: {upgradePolicy: {maxUnavailable: [1]}}}\n",
     "gpuOperator.driver.upgradePolicy.maxUnavailable", "expected a whole number or text, got a list of 1", ""),
    ("hosts: [{name: cp, address: 10.0.0.1, roles: [master]}]\n", "hosts[0].roles[0]", "'master' is not allowed",
     "'control-plane' or 'worker'"),  # an enum
    ("hosts: [{name: cp, address: 10.0.0.1, roles: [control-plane], os: centos7}]\n", "hosts[0].os",
     "'centos7' is not allowed", "'debian12', 'ubuntu22.04'"),  # a Literal
])
def test_type_errors_echo_the_value_in_our_words(write_spec, extra, path, message, hint):
    probs = _text_problems(write_spec, extra)
    assert [p.message for p in probs if p.path == path] == [message], [str(p) for p in probs]
    assert hint in find(probs, path).hint
    names = {m.__name__ for m in _models(ClusterSpec)}
    for p in probs:  # never pydantic's wording, never our class names
        assert "Input should" not in p.message and "instance of" not in p.message, p
        assert not any(re.search(rf"\b{name}\b", f"{p.message} {p.hint}") for name in names), p


@pytest.mark.parametrize("value, shown", [("1.30", "the number 1.3"), ("1.37", "the number 1.37"),
                                          ("yes", "the boolean true")])
def test_an_unquoted_value_yaml_reads_as_a_number_gets_a_quote_it_hint_with_the_text_as_written(
        write_spec, value, shown):
    probs = _text_problems(write_spec, f"kubernetes: {{version: {value}}}\n")
    p = find(probs, "kubernetes.version")
    assert p.message == f"expected text, got {shown}", p
    assert p.hint.endswith(f'quote it: "{value}"'), p


def test_a_quoted_value_of_the_wrong_type_gets_no_quote_it_hint(write_spec):
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(SPEC_TEXT.replace("{name: t}", "{name: t, environment: [lab]}")))
    p = find(info.value.problems, "metadata.environment")
    assert p.message == "expected text, got a list of 1" and "quote" not in p.hint, p


# -- GPU model hints by prefix -------------------------------------------------------------------------------


@pytest.mark.parametrize("model, hits", [
    ("H100", ["H100-NVL-94GB", "H100-SXM5-80GB"]),  # not GH200, which is 1 edit away
    ("h100", ["H100-NVL-94GB", "H100-SXM5-80GB"]),
    ("A100", ["A100-40GB", "A100-80GB"]),
    ("H100-PCIe-80GB", ["H100-NVL-94GB", "H100-SXM5-80GB"]),  # the family when the whole name is unknown
    ("H100-SXM5-80G", ["H100-SXM5-80GB"]),
])
def test_gpu_model_hints_are_the_catalog_models_starting_with_what_was_written(write_spec, base, model, hits):
    base["nodePools"][0]["gpu"]["model"] = model
    p = find(problems(write_spec, base), "nodePools[0].gpu.model")
    assert f"unknown GPU model {model!r}" in p.message
    assert all(repr(h) in p.hint for h in hits) and "GH200" not in p.hint, p
    if len(hits) == 1:
        assert p.hint == f"did you mean {hits[0]!r}?"


def test_cost_rates_get_the_same_model_hint(write_spec, base):
    base["cost"] = {"rates": {"H100": 2.5}}
    p = find(problems(write_spec, base), "cost.rates.H100")
    assert "'H100-SXM5-80GB'" in p.hint and "GH200" not in p.hint, p
    base["cost"] = {"rates": {"H100-SXM5-80GB": 2.5}}
    assert load_spec(write_spec(base)).cost.rates == {"H100-SXM5-80GB": 2.5}


# -- no knock-on errors from an invalid name -----------------------------------------------------------------


@pytest.mark.parametrize("change", [
    {"name": "Training"},  # invalid: the copy without it still fails (required) ...
    {"name": None},  # ... and so does one with the name missing altogether
])
def test_an_invalid_tenant_name_blames_only_itself(write_spec, change):
    lab = yaml.safe_load(LAB.read_text())
    lab["tenants"][0].update(change)
    if change["name"] is None:
        del lab["tenants"][0]["name"]
    probs = problems(write_spec, lab)
    # the lab's secondary network names the tenant's namespace `training`: it must not be blamed
    assert [p.path for p in probs if p.severity == "error"] == ["tenants[0].name"], [str(p) for p in probs]


def test_an_invalid_optional_key_still_lets_the_other_rules_run(write_spec, base):
    base["tenants"][0]["namespace"] = "Team_A"  # refused; the copy without it is checked for the rest
    base["nodePools"][1]["hosts"] = ["nope"]
    paths = {p.path for p in problems(write_spec, base)}
    assert {"tenants[0].namespace", "nodePools[1].hosts[0]"} <= paths


@pytest.mark.parametrize("value", ["0", '"0%"'])
def test_a_max_unavailable_of_zero_is_refused(write_spec, value):
    # k8s-operator-libs would start no upgrade, and the chart's `default "25%"` turns an integer 0 into 25%
    probs = _text_problems(write_spec, f"gpuOperator: {{driver: {{upgradePolicy: {{maxUnavailable: {value}}}}}}}\n")
    p = find(probs, "gpuOperator.driver.upgradePolicy.maxUnavailable")
    assert "no node" in p.message, p
    load_spec(write_spec(SPEC_TEXT + "gpuOperator: {driver: {upgradePolicy: {maxUnavailable: 1}}}\n"))


def test_a_mig_layout_left_to_a_disabled_operator_is_refused(write_spec):
    pool = ("nodePools: [{name: m, hosts: [g1], gpu: {model: A100-80GB, count: 1}, "
            "sharing: {mode: mig, mig: {layout: all-1g.10gb, managedBy: %s}}}]\ngpuOperator: {enabled: false}\n")
    hosts = "hosts: [{name: cp, address: 10.0.0.1, roles: [control-plane]}, {name: g1, address: 10.0.0.2}]\n"
    probs = _text_problems(write_spec, hosts + pool % "operator")
    p = find(probs, "nodePools[0].sharing.mig.managedBy")
    assert "nothing would apply it" in p.message and "managedBy: host" in p.hint
    load_spec(write_spec("metadata: {name: t}\n" + hosts + pool % "host"))  # the host's mig-parted applies it
