"""The component registry: one row per component is enough to render, bundle, pin and register it.

A hypothetical ``fabric-manager`` component (one registry row, one render module) must appear in the
render, the GitOps bundle and its chart lock, the platform stack's plan and the registered Pulumi
graph, with nothing else touched.
"""

from __future__ import annotations

import types
from pathlib import Path

import pulumi
import pytest

from gpucluster import bundle, components
from gpucluster import render as render_core
from gpucluster.pulumi import programs
from gpucluster.pulumi.plan import plan
from gpucluster.render import render
from gpucluster.render.common import obj
from gpucluster.render.releases import CHART_MODULES
from gpucluster.spec.model import ChartRef

REPO = Path(__file__).resolve().parents[2]

ROW = components.Component("fabric-manager", components.PLATFORM, "FabricManager",
                           components.Chart("fabric-manager", "1.0.0", "https://example.invalid/charts"))


def _module() -> types.ModuleType:
    """What ``src/gpucluster/render/fabric_manager.py`` would hold."""
    mod = types.ModuleType("gpucluster.render.fabric_manager")

    def chart(spec: object) -> ChartRef:
        pin = components.get("fabric-manager").chart
        assert pin is not None
        return ChartRef(repository=pin.repository, version=pin.version, chart=pin.name)

    mod.objects = lambda spec: [obj("v1", "ConfigMap", "fabric-manager-settings", "fabric-manager",
                                    data={"partitions": "all"})]
    mod.enabled = lambda spec: True
    mod.namespace = lambda spec: "fabric-manager"
    mod.chart = chart
    mod.values = lambda spec: {"partitioning": True}
    mod.after = lambda spec: []
    mod.BEFORE_OTHER_RELEASES = False
    mod.CHART_KINDS = ()
    mod.AFTER_KINDS = {}
    return mod


@pytest.fixture
def with_fabric_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _module()
    monkeypatch.setattr(components, "COMPONENTS", (*components.COMPONENTS, ROW))
    # the module's line in the render package's typed mappings (gpucluster.render.CHART_MODULES,
    # which gpucluster.render.MODULES includes)
    monkeypatch.setitem(CHART_MODULES, "fabric-manager", mod)
    monkeypatch.setitem(render_core.MODULES, "fabric-manager", mod)


def test_one_row_and_one_module_render_bundle_and_lock_a_component(with_fabric_manager, lab_spec,
                                                                     tmp_path: Path) -> None:
    rendered = render(lab_spec)
    assert [o["metadata"]["name"] for o in rendered.components["fabric-manager"]] == ["fabric-manager-settings"]
    (rel,) = [r for r in rendered.releases if r.name == "fabric-manager"]
    assert (rel.chart, rel.version, rel.namespace, rel.values) == (
        "fabric-manager", "1.0.0", "fabric-manager", {"partitioning": True})
    # its namespace comes with the platform's namespaces, as every release's does
    assert "fabric-manager" in {o["metadata"]["name"] for o in rendered.components["namespaces"]}
    files = bundle.files(rendered)
    assert "fabric-manager/configmap-fabric-manager-fabric-manager-settings.yaml" in files
    assert "helm/fabric-manager.values.yaml" in files
    assert "name: fabric-manager" in files["charts.lock.yaml"]


def test_one_row_and_one_module_register_a_pulumi_component(with_fabric_manager, lab_spec) -> None:
    plans = plan(render(lab_spec))
    assert [o["metadata"]["name"] for o in plans["platform"].components["fabric-manager"]] == [
        "fabric-manager-settings"]
    assert [s.release.name for s in plans["platform"].releases["fabric-manager"]] == ["fabric-manager"]

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs):
            return [f"{args.name}_id", args.inputs]

        def call(self, args: pulumi.runtime.MockCallArgs):
            return {}

    pulumi.runtime.set_mocks(Mocks(), project="gpucluster-platform", stack="test", preview=False)
    urns: list[str] = []

    @pulumi.runtime.test
    def program():
        comps = programs.platform(plans["platform"], None)
        fm = comps["fabric-manager"]
        return pulumi.Output.all(fm.urn, *[r.urn for r in (*fm.resources.values(), *fm.releases.values())]).apply(
            urns.extend)

    program()
    assert urns[0].endswith("gpucluster:platform:FabricManager::fabric-manager")
    assert any(u.endswith("kubernetes:helm.sh/v3:Release::release/fabric-manager") for u in urns)


def test_every_row_has_one_render_module_and_only_rows_with_a_chart_a_release() -> None:
    # mypy holds each listed module to its protocol; this holds the lists to the registry.
    rows = [c.name for c in components.COMPONENTS]
    assert sorted(render_core.MODULES) == sorted(rows)
    assert sorted(CHART_MODULES) == sorted(c.name for c in components.with_charts())
    assert all(render_core.MODULES[n] is m for n, m in CHART_MODULES.items())


def test_component_names_are_unique_and_kebab_case() -> None:
    names = [c.name for c in components.COMPONENTS]
    assert len(names) == len(set(names))
    assert all(n == n.lower() and " " not in n and "_" not in n for n in names)
