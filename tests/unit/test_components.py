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


# -- docs/architecture.md "Changing a component": the worked change, walked ------------------------------

DOC = REPO / "docs" / "architecture.md"

#: What the walk reports, run in a fresh interpreter against one copy of the package.
OUTPUTS = r"""
import json
from pathlib import Path

import pulumi
import yaml

from gpucluster import bundle, components
from gpucluster.pulumi import programs
from gpucluster.pulumi.plan import plan
from gpucluster.render import render
from gpucluster.spec import load_spec

spec = load_spec(Path(SPEC))  # SPEC: set by the caller
rendered = render(spec)
files = bundle.files(rendered)
plans = plan(rendered)
registered = {}


class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        if args.typ == "kubernetes:helm.sh/v3:Release":
            registered[args.name] = {"version": args.inputs.get("version"), "values": args.inputs.get("values")}
        return [f"{args.name}_id", args.inputs]

    def call(self, args):
        return {}


pulumi.runtime.set_mocks(Mocks(), project="gpucluster-platform", stack="walk", preview=False)


@pulumi.runtime.test
def program():
    comps = programs.platform(plans["platform"], None)
    return pulumi.Output.all(*[r.urn for c in comps.values() for r in (*c.resources.values(),
                                                                       *c.releases.values())])


program()
print(json.dumps({
    "rows": {c.name: [c.stack, c.kind, c.chart and [c.chart.name, c.chart.version, c.chart.repository],
                      [list(a) for a in c.aliases]] for c in components.COMPONENTS},
    "spec_default": spec.dra.chart.version,
    "releases": {r.name: [r.chart, r.version, r.repository, r.namespace, r.values, list(r.after)]
                 for r in rendered.releases},
    "objects": rendered.components,
    "lock": yaml.safe_load(files["charts.lock.yaml"]),
    "helm_values": {k: yaml.safe_load(v) for k, v in files.items() if k.startswith("helm/")},
    "planned": {c: [[s.release.version, s.release.values] for s in srcs]
                for c, srcs in plans["platform"].releases.items()},
    "registered": registered,
}, sort_keys=True, default=str))
"""


def documented_diff() -> dict[str, list[tuple[str, str]]]:
    """The ```diff block of "Changing a component": per file, its (removed line, added line) pairs."""
    text = DOC.read_text().split("## Changing a component", 1)[1].split("\n## ", 1)[0]
    block = text.split("```diff\n", 1)[1].split("```", 1)[0]
    files: dict[str, list[tuple[str, str]]] = {}
    removed: list[str] = []
    current = ""
    for line in block.splitlines():
        if line.startswith("+++ "):
            current = line[4:]
            files[current] = []
        elif line.startswith("--- "):
            continue
        elif line.startswith("-"):
            removed.append(line[1:])
        elif line.startswith("+"):
            files[current].append((removed.pop(0), line[1:]))
    assert not removed, f"docs/architecture.md's diff removes lines it does not replace: {removed}"
    return files


def outputs(src: Path | None, tmp_path: Path) -> dict:
    """The walk's outputs for the package at ``src`` (a fresh interpreter), or for this one (``None``)."""
    import contextlib
    import io
    import json
    import os
    import subprocess
    import sys

    spec = str(REPO / "inventories" / "local")
    if src is None:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(OUTPUTS, {"__name__": "walk", "SPEC": spec})
        return json.loads(out.getvalue())
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", f"SPEC = {spec!r}\n{OUTPUTS}"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_documented_change_reaches_every_output(tmp_path: Path) -> None:
    import shutil

    diff = documented_diff()
    # one registry row and one render module, and nothing else
    assert sorted(diff) == ["src/gpucluster/components.py", "src/gpucluster/render/dra_driver.py"], sorted(diff)
    copy = tmp_path / "src"
    shutil.copytree(REPO / "src" / "gpucluster", copy / "gpucluster",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for path, pairs in diff.items():
        target = copy / path.removeprefix("src/")
        text = target.read_text()
        for old, new in pairs:
            assert text.count(old + "\n") == 1, (
                f"docs/architecture.md's worked change no longer applies to {path}: {old.strip()!r} is not "
                "one line there (the pin or the value moved): write the example against today's row and module")
            text = text.replace(old + "\n", new + "\n")
        target.write_text(text)

    before, after = outputs(None, tmp_path), outputs(copy, tmp_path)
    old_pin, new_pin = before["rows"]["dra-driver"][2][1], after["rows"]["dra-driver"][2][1]
    assert old_pin != new_pin
    # exactly one row of the registry moved, and only its chart version
    changed_rows = {n for n in before["rows"] if before["rows"][n] != after["rows"][n]}
    assert changed_rows == {"dra-driver"}
    assert after["rows"]["dra-driver"][2][::2] == before["rows"]["dra-driver"][2][::2]
    # the spec's default chart follows the row
    assert (before["spec_default"], after["spec_default"]) == (old_pin, new_pin)
    # the release: its version and the changed value, nothing else of it or of any other release
    rel_b, rel_a = before["releases"].pop("dra-driver"), after["releases"].pop("dra-driver")
    assert rel_a[1] == new_pin and rel_b[1] == old_pin
    assert rel_b[4]["resources"]["computeDomains"] == {"enabled": False}
    assert rel_a[4]["resources"] == {"gpus": {"enabled": True}, "computeDomains": {"enabled": True}}
    rel_a[4]["resources"]["computeDomains"]["enabled"] = False
    assert (rel_a[:1] + rel_a[2:]) == (rel_b[:1] + rel_b[2:])
    assert after["releases"] == before["releases"]
    assert after["objects"] == before["objects"]
    # the bundle: the lock names the new version with a new values digest; the values file has the value
    lock_b = {r["name"]: r for r in before["lock"]["releases"]}
    lock_a = {r["name"]: r for r in after["lock"]["releases"]}
    assert lock_a["dra-driver"]["version"] == new_pin and lock_b["dra-driver"]["version"] == old_pin
    assert lock_a["dra-driver"]["valuesSha256"] != lock_b["dra-driver"]["valuesSha256"]
    assert {n: r for n, r in lock_a.items() if n != "dra-driver"} == {
        n: r for n, r in lock_b.items() if n != "dra-driver"}
    assert after["helm_values"]["helm/dra-driver.values.yaml"]["resources"]["computeDomains"] == {"enabled": True}
    # the platform stack plans the release, and its Pulumi component registers it, with both changes
    for side, pin in ((after, new_pin), (before, old_pin)):
        (planned,) = side["planned"]["dra-driver"]
        assert planned[0] == pin and side["registered"]["release/dra-driver"]["version"] == pin
        assert side["registered"]["release/dra-driver"]["values"] == planned[1]
    assert after["registered"]["release/dra-driver"]["values"]["resources"]["computeDomains"] == {"enabled": True}
    others = {n for n in before["registered"] if n != "release/dra-driver"}
    assert others and all(after["registered"][n] == before["registered"][n] for n in others)
