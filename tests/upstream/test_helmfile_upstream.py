"""`render --deployer helmfile` against helmfile's own code (tool helmfile-check, helmfile v1.8.0's pkg/state).

helmfile-check parses the file as `helmfile` does (strict YAML into its HelmState: an unknown key or
a wrong type is an error), rewrites each `needs` entry into a release ID as helmfile does before
every command, and plans the releases over `needs` (a need naming no release is an error). The
rendered file must load, and the batches helmfile would install must follow the lock's `after`;
a misspelt key, and a need written without the other release's namespace, must be refused.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from gpucluster import bundle, deployers
from gpucluster.deployers.common import waves
from gpucluster.render import render
from gpucluster.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
SPECS = [REPO / "inventories" / "lab", REPO / "tests" / "data" / "dra"]


def check(tool: Path, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tool), str(path)], capture_output=True, text=True, timeout=120, check=False)


def helmfile(inventory: Path) -> tuple[dict, list]:
    spec = load_spec(inventory)
    rendered = render(spec)
    text = deployers.files("helmfile", spec, rendered, bundle.files(rendered))["helmfile.yaml"]
    return yaml.safe_load(text), rendered.releases


@pytest.mark.parametrize("inventory", SPECS, ids=lambda p: p.name)
def test_helmfile_loads_the_rendered_file_and_plans_the_locks_order(helmfile_check, tmp_path, inventory):
    doc, releases = helmfile(inventory)
    path = tmp_path / "helmfile.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    done = check(helmfile_check, path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["releases"] == len(releases)
    # helmfile's batches are exactly the waves of the lock's `after`
    wave = waves(releases)
    expected = [sorted(f"{r.namespace}/{r.name}" for r in releases if wave[r.name] == w)
                for w in range(max(wave.values()) + 1)]
    assert plan["groups"] == expected


@pytest.mark.parametrize(("break_it", "refusal"), [
    # a misspelt release key: helmfile decodes strictly
    (lambda d: d["releases"][1].update(valuez=d["releases"][1].pop("values")), "field valuez not found"),
    # a need without the other release's namespace means one in the needing release's own namespace
    (lambda d: d["releases"][1].update(needs=["pod-network"]), 'undefined release "gpu-operator/pod-network"'),
])
def test_helmfile_refuses_a_broken_file_its_intact_twin_loads(helmfile_check, tmp_path, break_it, refusal):
    doc, _ = helmfile(SPECS[0])
    intact = tmp_path / "intact.yaml"
    intact.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert check(helmfile_check, intact).returncode == 0
    break_it(doc)
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(doc, sort_keys=False))
    done = check(helmfile_check, broken)
    assert done.returncode == 1 and refusal in done.stderr, done.stderr
