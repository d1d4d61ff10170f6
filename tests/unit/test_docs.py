"""Docs stay in step with the code: the spec reference is generated and must match the model."""

from __future__ import annotations

from pathlib import Path

from gpucluster.spec.reference import markdown

REPO = Path(__file__).resolve().parents[2]


def test_spec_reference_is_current():
    on_disk = (REPO / "docs" / "spec-reference.md").read_text()
    assert on_disk == markdown(), \
        "docs/spec-reference.md is stale: run `gpucluster spec-reference --out-dir docs`"


def test_reference_names_every_top_level_key():
    text = markdown()
    for key in ("nodePools", "gpuOperator", "dra", "scheduling", "networking", "tenants", "monitoring", "cost"):
        assert f"| `{key}` |" in text


def test_readme_has_exactly_two_setup_commands():
    readme = (REPO / "README.md").read_text()
    block = readme.split("<!-- setup-commands -->")[1].split("<!-- /setup-commands -->")[0]
    commands = [line for line in block.splitlines() if line.strip() and not line.startswith(("```", "#"))]
    assert commands == ["scripts/run.sh", "scripts/test.sh"]
    ci = (REPO / ".ci" / "run").read_text()
    assert "scripts/test.sh" in ci
