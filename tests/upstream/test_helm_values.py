"""Every Helm value we set exists in the pinned chart (or is read by its templates).

A key the chart does not know is silently ignored by Helm: the setting we think we made never
happens. Our values for every release of both shipped inventories are flattened to dotted keys and
looked up in the chart's ``values-keys`` fact (every key path of its values.yaml at the pinned tag).
Under a key whose upstream default has no sub-keys (a nodeSelector, an env list) any content is ours.
"""

from __future__ import annotations

from typing import Any

import pytest
from upstream_facts import chart_fact_files, fact, facts

from gpucluster import inventory
from gpucluster.render import releases

#: Release (= component) name -> fact file of its chart.
CHART_FACTS = chart_fact_files()


def flatten(values: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for k, v in values.items():
        key = f"{prefix}.{k}" if prefix else k
        out += flatten(v, key) if isinstance(v, dict) and v else [key]
    return out


def unknown_keys(component: str, values: dict[str, Any]) -> list[str]:
    known: dict[str, int] = fact(component, "values-keys")
    extra = set(facts(component)["facts"].get("values-keys-read-by-templates", {}).get("value", []))
    parents = {k.rsplit(".", 1)[0] for k in known if "." in k}
    bad = []
    for key in flatten(values):
        if key in known or key in extra:
            continue
        prefixes = [key.rsplit(".", i)[0] for i in range(1, key.count(".") + 1)]
        # free-form content under an upstream key that has no sub-keys of its own (maps, lists)
        if any(p in known and p not in parents for p in prefixes):
            continue
        bad.append(key)
    return bad


def test_the_check_catches_a_key_the_chart_does_not_have() -> None:
    assert unknown_keys("gpu-operator", {"dcgmExporter": {"serviceMonitor": {"enabeld": False}}}) == [
        "dcgmExporter.serviceMonitor.enabeld"]
    assert unknown_keys("dra-driver", {"kubeletPlugin": {"nodeSelector": {"any/label": "x"}}}) == []


@pytest.mark.parametrize("env", ["local", "lab"])
def test_every_value_we_set_exists_in_the_pinned_chart(env: str) -> None:
    spec = inventory.load(inventory.REPO_ROOT / "inventories" / env)
    rels = releases(spec)
    assert rels
    for rel in rels:
        assert rel.name in CHART_FACTS, f"release {rel.name} has no chart facts: add them to tests/upstream/facts"
        assert unknown_keys(CHART_FACTS[rel.name], rel.values) == [], rel.name
