"""The Grafana dashboard: valid dashboard JSON, and every query reads series that exist.

"Exist" means: the exporter serves it with our CSV (monitoring.DCGM_FIELDS), the recording rules
produce it, kube-state-metrics documents it (monitoring.KSM_SERIES, listed in docs/observability.md)
or Prometheus writes it itself (ALERTS). The metric names are pulled out of the PromQL by the small
tokenizer below, written independently of the dashboard module.
"""

from __future__ import annotations

import json
import re

import pytest

from gpucluster.render import dashboard, monitoring
from gpucluster.spec import load_spec

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset",
            "bool", "inf", "nan"}
PROMETHEUS_BUILTIN = {"ALERTS", "ALERTS_FOR_STATE"}


def metric_names(expr: str) -> set[str]:
    """Series names referenced by a PromQL expression (functions, labels, keywords dropped)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings (label values, regexes)
    s = re.sub(r"\{[^}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)  # range / subquery durations
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)  # label lists
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", s):
        rest = s[m.end():].lstrip()
        word = m.group()
        if rest.startswith("(") or word.lower() in KEYWORDS:
            continue  # a function call or an operator keyword
        if re.fullmatch(r"\d+[smhdwy]", word) or s[max(0, m.start() - 1)].isdigit():
            continue
        names.add(word)
    return names


@pytest.fixture(scope="module")
def spec():
    from pathlib import Path

    return load_spec(Path(__file__).resolve().parents[3] / "inventories" / "local")


@pytest.fixture(scope="module")
def board(spec):
    cm = dashboard.configmap(spec)
    return json.loads(cm["data"][dashboard.DASHBOARD_KEY])


def test_tokenizer_finds_metrics_and_skips_the_rest():
    expr = ('sum by (namespace) (rate(foo_total{a="b:c", d=~"x|y"}[5m])) / on (namespace) group_left (q) '
            "bar:baz:ratio offset 5m > 0.9 and changes(qux[1h]) > 0")
    assert metric_names(expr) == {"foo_total", "bar:baz:ratio", "qux"}


def test_configmap_is_labelled_for_the_grafana_sidecar(spec):
    cm = dashboard.configmap(spec)
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == spec.monitoring.namespace
    assert list(cm["data"]) == [dashboard.DASHBOARD_KEY]


def test_dashboard_json_has_the_grafana_model_fields(board, spec):
    assert isinstance(board["uid"], str) and 0 < len(board["uid"]) <= 40
    assert re.fullmatch(r"[A-Za-z0-9_-]+", board["uid"])
    assert board["title"] and isinstance(board["schemaVersion"], int) and board["schemaVersion"] >= 36
    names = [v["name"] for v in board["templating"]["list"]]
    assert names == ["datasource", "node"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)) and len(ids) >= 8
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert set(grid) == {"x", "y", "w", "h"} and 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["type"] in {"timeseries", "table", "stat", "gauge"}
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))
        for t in panel["targets"]:
            assert t["expr"].strip() and t["datasource"]["type"] == "prometheus"


def test_panels_do_not_overlap(board):
    cells = set()
    for p in board["panels"]:
        g = p["gridPos"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, p["title"]
        cells |= mine


def test_the_asked_for_views_are_there(board):
    titles = " | ".join(p["title"].lower() for p in board["panels"])
    for wanted in ("utilization per node", "framebuffer used per node", "utilization per pod",
                   "framebuffer used per pod", "allocated vs quota per tenant", "pending gpu pods per queue",
                   "xid", "ecc"):
        assert wanted in titles


def test_every_query_reads_series_that_exist(board, spec):
    known = set(monitoring.exporter_metrics()) | set(monitoring.recorded_series(spec)) \
        | set(monitoring.KSM_SERIES) | PROMETHEUS_BUILTIN
    queries = [t["expr"] for p in board["panels"] for t in p["targets"]]
    # Template variables use Grafana's label_values(series, label): the first argument is the query.
    queries += [re.fullmatch(r"label_values\((.+), *\w+\)", v["definition"])[1]
                for v in board["templating"]["list"] if v.get("definition")]
    seen = set()
    for q in queries:
        names = metric_names(q)
        assert names, f"no series found in {q!r}"
        unknown = names - known
        assert not unknown, f"{q!r} reads {unknown}, which neither the exporter nor our rules produce"
        seen |= names
    # The panels show what the issue asks for: exporter series and our GPU-hour recordings.
    assert {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_XID_ERRORS",
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "namespace:gpucluster_gpus_allocated:count",
            "namespace:gpucluster_pending_gpu_pods:count", "kube_resourcequota"} <= seen


def test_uid_is_stable_per_cluster(spec):
    assert dashboard.dashboard(spec)["uid"] == dashboard.dashboard(spec.model_copy(deep=True))["uid"]
    assert dashboard.configmap(spec) == dashboard.configmap(spec)
