"""The fact files themselves: every fact is cited, every source is pinned, and each file names the
version gpucluster pins today (a bump must re-read upstream)."""

from __future__ import annotations

import pytest
from upstream_facts import FACTS, chart_fact_files, facts

from gpucluster import components, versions

FILES = sorted(p.stem for p in FACTS.glob("*.yaml"))


#: Fact files of what no registry row pins: the agents the charts deploy, Kubernetes, the host layer.
AGENT_FILES = {"dcgm-exporter", "prometheus", "device-plugin", "host-config", "kubernetes"}


def test_there_is_a_fact_file_per_upstream_component() -> None:
    assert AGENT_FILES <= set(FILES)
    assert set(chart_fact_files()) == {c.name for c in components.with_charts()}, \
        "every registry row with a chart needs a fact file naming it (row: <component>), and only those"


@pytest.mark.parametrize("component", FILES)
def test_every_fact_is_cited_to_a_line_of_a_pinned_source(component: str) -> None:
    doc = facts(component)
    assert doc["component"] == component
    sources = doc["sources"]
    for sid, src in sources.items():
        assert "/" in src["repository"], sid
        assert src.get("tag") or src.get("commit"), f"{component}: source {sid} is not pinned to a tag or commit"
    bad = []
    for fid, f in doc["facts"].items():
        s = f.get("source") or {}
        # line 0 cites a whole listing (a folder, a package's file list) rather than one line
        line_ok = isinstance(s.get("line"), int) and s["line"] >= 0
        if "value" not in f or s.get("repo") not in sources or not s.get("path") or not line_ok:
            bad.append(fid)
    assert bad == [], f"{component}: facts without a value or a full citation: {bad}"


@pytest.mark.parametrize("row", [c.name for c in components.with_charts()])
def test_chart_facts_were_read_at_the_version_we_pin(row: str) -> None:
    pin = components.get(row).chart
    assert pin is not None
    component = chart_fact_files()[row]
    assert pin.version.lstrip("v") in str(facts(component)["pinned"]), (
        f"{component}.yaml was read for {facts(component)['pinned']!r} but we pin {pin.name} {pin.version}: "
        "re-read upstream at the new tag")


def test_host_config_facts_cover_the_kubernetes_we_pin() -> None:
    assert versions.KUBERNETES in str(facts("host-config")["pinned"])


@pytest.mark.parametrize("component", FILES)
def test_no_fact_id_is_given_twice(component: str) -> None:
    """YAML would keep only the second of two equal ids: a fact would silently vanish."""
    import yaml

    root = yaml.compose((FACTS / f"{component}.yaml").read_text())
    (facts_node,) = [v for k, v in root.value if k.value == "facts"]
    ids = [k.value for k, _ in facts_node.value]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
