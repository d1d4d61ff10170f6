"""The stack components under Pulumi mocks: what they register, with which inputs, under which parent.

A recording mock keeps every registered resource (type, name, inputs); tests compare that graph with
the render core's output for ``inventories/lab`` and ``inventories/local``. No engine, no cluster.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import pulumi
import pytest

from gpucluster.errors import InputError
from gpucluster.pulumi import programs
from gpucluster.pulumi.objects import object_key, type_token
from gpucluster.pulumi.plan import ClusterFacts, chart_source, plan
from gpucluster.render import Release, render
from gpucluster.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
CHARTS = REPO / "tests" / "fixtures" / "charts"


class Recorder(pulumi.runtime.Mocks):
    """Records every resource registration; outputs echo the inputs."""

    def __init__(self) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.resources.append(args)
        return [f"{args.name}_id", args.inputs]

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


def run(stack: str, inventory: str, facts: ClusterFacts | None = None, mutate=None):
    """Run one stack program under mocks; return (recorded resources, {component: urns})."""
    rec = Recorder()
    pulumi.runtime.set_mocks(rec, project=f"gpucluster-{stack}", stack="test", preview=False)
    plans = plan(render(load_spec(REPO / "inventories" / inventory)), facts)
    if mutate:
        mutate(plans[stack])
    urns: dict[str, list[str]] = {}

    @pulumi.runtime.test
    def program():
        comps = programs.PROGRAMS[stack](plans[stack], "/nonexistent/kubeconfig")
        outs = {name: pulumi.Output.all(*[r.urn for r in (*c.resources.values(), *c.releases.values())])
                for name, c in comps.items()}
        return pulumi.Output.all(**outs).apply(urns.update)

    program()
    return rec.resources, urns


def of_type(resources, suffix: str):
    return [r for r in resources if r.typ.endswith(suffix)]


@pytest.fixture
def dependencies(monkeypatch) -> dict[str, set[str]]:
    """What each registration tells the engine it depends on: logical name → names of its dependencies.

    Read from the RegisterResource requests themselves (the mock monitor drops them before the mocks
    see a resource), so this is exactly the ordering the engine would enforce.
    """
    from pulumi.runtime import mocks

    seen: dict[str, set[str]] = {}
    original = mocks.MockMonitor.RegisterResource

    def register(self, request):
        seen[request.name] = {urn.rsplit("::", 1)[-1] for urn in request.dependencies}
        return original(self, request)

    monkeypatch.setattr(mocks.MockMonitor, "RegisterResource", register)
    return seen


def test_type_tokens_match_the_typed_sdk_classes():
    assert type_token("v1", "ConfigMap") == "kubernetes:core/v1:ConfigMap"
    assert type_token("resource.k8s.io/v1", "DeviceClass") == "kubernetes:resource.k8s.io/v1:DeviceClass"
    assert type_token("v1", "Node", patch=True) == "kubernetes:core/v1:NodePatch"


def test_platform_lab_registers_every_rendered_platform_object_once_under_one_provider():
    resources, urns = run("platform", "lab")
    rendered = plan(render(load_spec(REPO / "inventories" / "lab")))["platform"]
    expected = sorted((type_token(o["apiVersion"], o["kind"]), object_key(o)) for o in rendered.objects())
    got = sorted((r.typ, r.name) for r in resources
                 if r.typ.startswith("kubernetes:") and not r.typ.endswith(("Release", "Patch")))
    assert got == expected
    assert len(of_type(resources, "pulumi:providers:kubernetes")) == 1
    # Every object is a child of the component named after its render component.
    for comp, comp_urns in urns.items():
        token = "gpucluster:platform:" if comp != "nodes" else "gpucluster:platform:NodeConfig"
        assert all(token in u for u in comp_urns), (comp, comp_urns)
    assert all("GpuOperator$kubernetes:core/v1:ConfigMap" in u for u in urns["gpu-operator"]
               if "ConfigMap" in u)


def test_gpu_operator_release_uses_the_rendered_sharing_configmap():
    resources, urns = run("platform", "lab")
    (release,) = [r for r in of_type(resources, "helm.sh/v3:Release") if r.inputs["name"] == "gpu-operator"]
    configmaps = {r.inputs["metadata"]["name"]: r for r in of_type(resources, "core/v1:ConfigMap")}
    name = release.inputs["values"]["devicePlugin"]["config"]["name"]
    assert name in configmaps, f"devicePlugin.config.name {name!r} is not a registered ConfigMap"
    assert configmaps[name].inputs["metadata"]["namespace"] == release.inputs["namespace"]
    # The sharing config (time-slicing replicas) is in that ConfigMap, not invented by the release.
    assert release.inputs["values"]["devicePlugin"]["config"]["create"] is False
    assert any("GpuOperator$kubernetes:helm.sh/v3:Release" in u for u in urns["gpu-operator"])


def test_dra_release_carries_the_override_and_the_v1_device_classes(dependencies):
    resources, urns = run("platform", "local")
    releases = of_type(resources, "helm.sh/v3:Release")
    (dra,) = [r for r in releases if r.inputs["name"] == "dra-driver"]
    assert dra.inputs["values"]["gpuResourcesEnabledOverride"] is True
    classes = of_type(resources, "kubernetes:resource.k8s.io/v1:DeviceClass")
    spec = load_spec(REPO / "inventories" / "local")
    # the spec's classes, and ours that serves plain nvidia.com/gpu
    assert {c.inputs["metadata"]["name"] for c in classes} == {d.name for d in spec.dra.device_classes} | {
        "dra-nvidia-gpu"}
    # every class waits for the chart's release: ours must be newer than the chart's gpu.nvidia.com, which
    # names nvidia.com/gpu too (the scheduler maps an extended resource to the newest class)
    for c in classes:
        assert "release/dra-driver" in dependencies[f"deviceclass/{c.inputs['metadata']['name']}"]
    assert len(classes) >= 2
    assert all("selectors" in c.inputs["spec"] for c in classes)
    assert all("gpucluster:platform:DraDriver$" in u for u in urns["dra-driver"])


def test_one_nic_cluster_policy_and_exactly_one_nfd():
    resources, _ = run("platform", "lab")
    assert len(of_type(resources, "mellanox.com/v1alpha1:NicClusterPolicy")) == 1
    nfd = [r.inputs["name"] for r in of_type(resources, "helm.sh/v3:Release")
           if (r.inputs["values"].get("nfd") or {}).get("enabled")]
    assert nfd == ["gpu-operator"]


def test_install_order_pod_network_then_nfd_then_the_network_operator_then_its_policy(dependencies):
    resources, _ = run("platform", "lab")
    releases = {r.inputs["name"] for r in of_type(resources, "helm.sh/v3:Release")}
    assert releases == {"pod-network", "gpu-operator", "volcano", "network-operator"}
    # every release waits for the pod network (its pods, and Helm's wait for them, need it)
    for name in releases - {"pod-network"}:
        assert "release/pod-network" in dependencies[f"release/{name}"], name
    assert not {d for d in dependencies["release/pod-network"] if d.startswith("release/")}
    # the network operator's chart renders a NodeFeatureRule whose CRD the GPU Operator's NFD brings
    assert "release/gpu-operator" in dependencies["release/network-operator"]
    # the NicClusterPolicy's CRD comes with the network-operator chart
    ncp = "nicclusterpolicy/nic-cluster-policy"
    assert "release/network-operator" in dependencies[ncp]
    # nv-ipam's IPPool CRD is applied by the operator once it reconciles the policy's spec.nvIpam
    (pool,) = [n for n in dependencies if n.startswith("ippool/")]
    assert ncp in dependencies[pool]
    assert "namespace/nvidia-network-operator" in dependencies[pool]


def test_without_the_gpu_operator_nfd_the_network_operator_does_not_wait_for_it(dependencies):
    def no_gpu_nfd(p):
        for src in p.releases["network-operator"]:
            object.__setattr__(src.release, "after", ("pod-network",))

    run("platform", "lab", mutate=no_gpu_nfd)
    assert "release/gpu-operator" not in dependencies["release/network-operator"]


def test_plan_admits_kinds_the_releases_of_this_run_install():
    rendered = render(load_spec(REPO / "inventories" / "lab"))
    core = frozenset((o["apiVersion"], o["kind"]) for o in rendered.objects()
                     if "." not in o["apiVersion"].split("/")[0] or o["apiVersion"].startswith(
                         ("scheduling.k8s.io", "rbac.authorization.k8s.io", "resource.k8s.io")))
    plans = plan(rendered, ClusterFacts(served=core))
    platform_kinds = {o["kind"] for o in plans["platform"].objects()}
    # the network-operator chart installs the NicClusterPolicy and NAD CRDs: admitted on the first run
    assert "NicClusterPolicy" in platform_kinds
    assert [o["kind"] for o in plans["tenants"].objects() if o["kind"] == "NetworkAttachmentDefinition"]
    # the IPPool CRD only appears once the operator has reconciled the policy: left for the next run
    skipped = {s.what: s.reason for p in plans.values() for s in p.skipped}
    assert "CRD is not installed" in skipped["IPPool ib-rail-0"]
    # without the release (charts unreachable) nothing is admitted on its behalf
    plans = plan(rendered, ClusterFacts(served=core, remote_charts=False))
    assert "NicClusterPolicy" not in {o["kind"] for o in plans["platform"].objects()}


def test_a_second_nfd_is_refused_before_anything_is_registered():
    def second_nfd(p):
        for src in p.releases["network-operator"]:
            src.release.values["nfd"] = {"enabled": True}

    with pytest.raises(InputError, match="only one NFD"):
        run("platform", "lab", mutate=second_nfd)


def test_tenants_lab_quota_and_namespace_per_tenant():
    resources, urns = run("tenants", "lab")
    spec = load_spec(REPO / "inventories" / "lab")
    quotas = {r.inputs["metadata"]["namespace"]: r for r in of_type(resources, "core/v1:ResourceQuota")}
    assert set(quotas) == {t.name for t in spec.tenants}
    for t in spec.tenants:
        assert quotas[t.name].inputs["spec"]["hard"]["requests.nvidia.com/gpu"] == str(t.quota.gpus)
        assert all("gpucluster:tenants:Tenant$" in u for u in urns[t.name])
    namespaces = of_type(resources, "core/v1:Namespace")
    assert all("pod-security.kubernetes.io/enforce" in n.inputs["metadata"]["labels"] for n in namespaces)


def test_attachments_in_tenant_namespaces_move_to_the_tenants_stack():
    plans = plan(render(load_spec(REPO / "inventories" / "local")))
    nads = [o for o in plans["tenants"].objects() if o["kind"] == "NetworkAttachmentDefinition"]
    assert [o["metadata"]["namespace"] for o in nads] == ["ml-research"]
    assert not [o for o in plans["platform"].objects() if o["kind"] == "NetworkAttachmentDefinition"]


def test_plan_leaves_out_unserved_kinds_remote_charts_and_absent_nodes_with_reasons():
    rendered = render(load_spec(REPO / "inventories" / "local"))
    served = frozenset((o["apiVersion"], o["kind"]) for o in rendered.objects()
                       if o["apiVersion"] != "monitoring.coreos.com/v1")
    plans = plan(rendered, ClusterFacts(served=served, nodes=frozenset({"h100-1"}), remote_charts=False))
    p = plans["platform"]
    assert not p.releases
    skipped = {s.what: s.reason for s in p.skipped}
    assert {w for w in skipped if w.startswith("release ")} == {
        f"release {r.name} ({r.chart} {r.version})" for r in rendered.releases}
    assert "CRD is not installed" in skipped["PrometheusRule gpucluster-gpu-alerts"]
    assert [n["metadata"]["name"] for n in p.node_patches] == ["h100-1"]
    assert "not registered" in skipped["labels/taints of node h200-1"]


def test_local_chart_folder_is_used_and_checked():
    rel = Release("probe", "gpucluster-probe", str(CHARTS), "0.1.0", "default", {})
    assert chart_source(rel).local_path == CHARTS / "gpucluster-probe"
    with pytest.raises(InputError, match=r"Chart\.yaml says version '0\.1\.0'"):
        chart_source(replace(rel, version="9.9.9"))
    with pytest.raises(InputError, match="does not exist"):
        chart_source(replace(rel, chart="nope"))


def test_local_chart_release_passes_values_and_no_repository():
    def local_volcano(p):
        src = p.releases["volcano"][0]
        rel = replace(src.release, repository=str(CHARTS), chart="gpucluster-probe", version="0.1.0",
                      values=copy.deepcopy(src.release.values))
        p.releases["volcano"] = [chart_source(rel)]

    resources, _ = run("platform", "lab", mutate=local_volcano)
    (rel,) = [r for r in of_type(resources, "helm.sh/v3:Release") if r.inputs["name"] == "volcano"]
    assert rel.inputs["chart"] == str(CHARTS / "gpucluster-probe")
    assert "repositoryOpts" not in rel.inputs
    rendered = {r.name: r for r in render(load_spec(REPO / "inventories" / "lab")).releases}
    assert rel.inputs["values"] == rendered["volcano"].values


# -- the flow's user-facing errors, offline ---------------------------------------------------------


def test_up_with_a_missing_inventory_names_the_phase_and_exits_2(tmp_path):
    from click.testing import CliRunner

    from gpucluster.cli import main

    res = CliRunner().invoke(main, ["up", "-i", str(tmp_path / "nope"), "--state-dir", str(tmp_path)])
    # main() raises; the console entrypoint prints the message and exits with exit_code.
    assert getattr(res.exception, "exit_code", None) == 2
    assert "phase 'validate' failed" in str(res.exception) and "cluster.yaml" in str(res.exception)


def test_engine_without_binaries_says_how_to_build_them(tmp_path, monkeypatch):
    from gpucluster.errors import ToolMissing
    from gpucluster.pulumi.engine import Engine

    monkeypatch.setenv("GPUCLUSTER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no pulumi of the user's either
    with pytest.raises(ToolMissing, match="gpucluster tools install pulumi"):
        Engine(tmp_path / "state", "lab").setup()


def test_down_with_no_local_world_running_only_drops_stale_state(tmp_path):
    from gpucluster import ownership
    from gpucluster.flow import STACK_STATE, run_down

    state = ownership.claim(tmp_path / "stacks", STACK_STATE)  # a stack state folder gpucluster made
    (state / "backend").mkdir()
    report = run_down(REPO / "inventories" / "local", state_dir=state, world_dir=tmp_path / "world", quiet=True)
    assert not (state / "backend").exists() and not report.stacks  # the folder stays: it holds the lock
    assert "nothing to destroy" in report.notes[0]


def test_the_kubeconfig_context_reaches_the_one_provider():
    rec = Recorder()
    pulumi.runtime.set_mocks(rec, project="gpucluster-platform", stack="test", preview=False)
    p = plan(render(load_spec(REPO / "inventories" / "lab")))["platform"]

    @pulumi.runtime.test
    def program():
        comps = programs.platform(p, "/path/to/kubeconfig", "lab-admin@lab")
        return pulumi.Output.all(*[c.urn for c in comps.values()])

    program()
    (prov,) = [r for r in rec.resources if r.typ == "pulumi:providers:kubernetes"]
    assert prov.inputs["kubeconfig"] == "/path/to/kubeconfig" and prov.inputs["context"] == "lab-admin@lab"


def test_objects_of_a_release_left_out_for_its_chart_go_with_it():
    """Without chart repositories, a kind only a skipped release would bring is left out with that release
    (cause ``chart``, not a failure), and a kind no release brings stays a missing CRD (exit 1)."""
    rendered = render(load_spec(REPO / "inventories" / "lab"))
    core = frozenset((o["apiVersion"], o["kind"]) for o in rendered.objects()
                     if "." not in o["apiVersion"].split("/")[0] or o["apiVersion"].startswith(
                         ("scheduling.k8s.io", "rbac.authorization.k8s.io", "resource.k8s.io")))
    plans = plan(rendered, ClusterFacts(served=core, remote_charts=False))
    skipped = {s.what: s for p in plans.values() for s in p.skipped}
    queues = [w for w in skipped if w.startswith("Queue ")]
    assert queues and all(skipped[w].cause == "chart" and "release volcano" in skipped[w].reason for w in queues)
    assert skipped["NicClusterPolicy nic-cluster-policy"].cause == "chart"
    assert "release network-operator" in skipped["NicClusterPolicy nic-cluster-policy"].reason
    # nv-ipam's IPPool comes from the operator's reconcile, not a chart of the spec: still a missing CRD
    assert skipped["IPPool ib-rail-0"].cause == "unserved"
    assert skipped["PrometheusRule gpucluster-gpu-alerts"].cause == "unserved"
    # where the charts can be fetched, the same kinds are admitted on the release's behalf
    plans = plan(rendered, ClusterFacts(served=core))
    kinds = {o["kind"] for p in plans.values() for o in p.objects()}
    assert {"Queue", "NicClusterPolicy"} <= kinds
