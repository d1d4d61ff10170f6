"""The rendered GPU rules under the real promtool (built by `gpucluster tools install promtool`).

- `promtool check rules` on the rules rendered for inventories/local and inventories/lab;
- `promtool test rules` with series generated from tests/promtool/thresholds.yaml: every alert has
  a firing and a non-firing case, every recording rule an expected value;
- a threshold changed in the spec but not in thresholds.yaml makes `promtool test rules` fail;
- every dashboard query is valid PromQL.
"""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path

import promtool_rulegen as rulegen  # tests/promtool is on sys.path (pytest rootdir-less import)
import pytest
import yaml

from gpucluster import catalog
from gpucluster.render import dashboard, monitoring
from gpucluster.spec import load_spec
from gpucluster.spec.model import Alerts

HERE = Path(__file__).parent
REPO = HERE.parents[1]
PINNED = yaml.safe_load((HERE / "thresholds.yaml").read_text())
INVENTORIES = ("local", "lab")


@pytest.fixture(scope="session")
def promtool() -> Path:
    from gpucluster import toolchain
    from gpucluster.errors import ToolError

    try:
        return toolchain.path_of("promtool")
    except ToolError as err:
        pytest.fail(f"promtool is needed for these tests and is part of the toolchain setup: {err}")


def _run(promtool: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(promtool), *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          check=False)


def _write_case(folder: Path, spec, pinned: dict) -> tuple[Path, dict]:
    """rules.yaml rendered from ``spec`` + tests.yaml generated from ``pinned``; returns (tests, cases)."""
    folder.mkdir(parents=True, exist_ok=True)
    groups = monitoring.rule_groups(spec)
    (folder / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    alerts = {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}
    tenants = [{"namespace": t.ns, "tenant": t.name, "queue": t.name} for t in spec.tenants]
    tests, cases = rulegen.build(alerts, pinned, PINNED["constants"], tenants, mig_shares(spec))
    # fuzzy_compare: recorded averages may differ from the exact value by one float ulp.
    doc = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "fuzzy_compare": True, "tests": tests}
    (folder / "tests.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return folder / "tests.yaml", cases


def mig_shares(spec) -> dict[tuple[str, int], float]:
    """(DCGM modelName, compute slices) → share of the GPU, for the MIG-capable models of the spec's pools."""
    out = {}
    for pool in spec.gpu_pools:
        model = catalog.get(pool.gpu.model)
        if model.mig:
            for profile in model.mig.profiles.values():
                out[(model.product_name, profile.compute)] = profile.compute / model.mig.compute_slices
    return out


def _raw(env: str) -> dict:
    return yaml.safe_load((REPO / "inventories" / env / "cluster.yaml").read_text())


def _spec_from(raw: dict, tmp: Path):
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "cluster.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return load_spec(tmp)


@pytest.mark.parametrize("env", INVENTORIES)
def test_check_rules_passes(promtool, env, tmp_path):
    spec = load_spec(REPO / "inventories" / env)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": monitoring.rule_groups(spec)}))
    proc = _run(promtool, "check", "rules", "rules.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    n = sum(len(g["rules"]) for g in monitoring.rule_groups(spec))
    assert f"SUCCESS: {n} rules found" in proc.stdout


@pytest.mark.parametrize("env", INVENTORIES)
def test_rule_unit_tests_pass_and_cover_every_alert(promtool, env, tmp_path):
    spec = load_spec(REPO / "inventories" / env)
    tests, cases = _write_case(tmp_path, spec, PINNED[env])
    proc = _run(promtool, "test", "rules", tests.name, cwd=tmp_path)
    assert proc.returncode == 0, f"{tests}\n{proc.stdout}{proc.stderr}"
    assert "SUCCESS" in proc.stdout
    alerts = {r["alert"] for r in monitoring.alert_rules(spec)}
    assert set(cases) == alerts, f"alerts without tests: {alerts - set(cases)}"
    for name, counts in cases.items():
        assert counts["firing"] >= 1 and counts["quiet"] >= 1, (name, counts)
    tested = {e["expr"] for g in yaml.safe_load(tests.read_text())["tests"] for e in g.get("promql_expr_test", [])}
    assert set(monitoring.recorded_series(spec)) <= tested


@pytest.mark.parametrize("env", INVENTORIES)
def test_pinned_thresholds_match_the_spec(env):
    """The readable version of the guard below: say which value moved and where to update it."""
    spec = load_spec(REPO / "inventories" / env)
    a = spec.monitoring.alerts
    pinned = PINNED[env]["alerts"]
    actual = {"lowUtilizationPercent": a.low_utilization_percent, "lowUtilizationFor": a.low_utilization_for,
              "framebufferPercent": a.framebuffer_percent, "temperatureCelsius": a.temperature_celsius,
              "idleNamespaceGpus": a.idle_namespace_gpus}
    node_gpus = {h: p.gpu.count for p in spec.gpu_pools for h in p.hosts}
    hint = f"inventories/{env}/cluster.yaml and tests/promtool/thresholds.yaml ({env}) disagree"
    assert actual == pinned, hint
    assert node_gpus == PINNED[env]["nodeGpus"], hint
    shared = {h: p.sharing.replicas for p in monitoring.shared_pools(spec) for h in p.hosts}
    models = {catalog.get(p.gpu.model).product_name for p in monitoring.shared_pools(spec)}
    assert {"replicas": shared, "model": ",".join(sorted(models))} == PINNED[env]["sharedGpus"], hint
    assert spec.dcgm_dra_attribution is PINNED[env]["draAttribution"], hint
    constants = PINNED["constants"]
    assert (monitoring.FRAMEBUFFER_FOR, monitoring.TEMPERATURE_FOR, monitoring.GPU_COUNT_FOR,
            monitoring.IDLE_PERCENT) == (constants["framebufferFor"], constants["temperatureFor"],
                                         constants["gpuCountFor"], constants["idlePercent"])


def _bump_duration(d: str, minutes: int) -> str:
    return f"{rulegen.minutes(d) + minutes}m"


# (path in cluster.yaml, change, alert whose test must fail). Each threshold moves both ways.
MUTATIONS = [
    (("monitoring", "alerts", "lowUtilizationPercent"), lambda v: v + 0.01, "GPUAllocatedLowUtilization"),
    (("monitoring", "alerts", "lowUtilizationPercent"), lambda v: v - 0.01, "GPUAllocatedLowUtilization"),
    (("monitoring", "alerts", "lowUtilizationFor"), lambda v: _bump_duration(v, 1), "GPUAllocatedLowUtilization"),
    (("monitoring", "alerts", "lowUtilizationFor"), lambda v: _bump_duration(v, -1), "GPUAllocatedLowUtilization"),
    (("monitoring", "alerts", "framebufferPercent"), lambda v: v + 0.5, "GPUFramebufferHigh"),
    (("monitoring", "alerts", "framebufferPercent"), lambda v: v - 0.5, "GPUFramebufferHigh"),
    (("monitoring", "alerts", "temperatureCelsius"), lambda v: v + 0.5, "GPUTemperatureHigh"),
    (("monitoring", "alerts", "temperatureCelsius"), lambda v: v - 0.5, "GPUTemperatureHigh"),
    (("monitoring", "alerts", "idleNamespaceGpus"), lambda v: v + 1, "GPUsAllocatedIdleInNamespace"),
    # nodePools[3] is l4-infer (device plugin): one GPU fewer on a DRA pool would make the spec's claim
    # templates unsatisfiable, which validation refuses before promtool runs.
    (("nodePools", 3, "gpu", "count"), lambda v: v - 1, "GPUCountBelowSpec"),
    (("nodePools", 3, "gpu", "count"), lambda v: v + 1, "GPUCountBelowSpec"),
]


def _set(raw: dict, path: tuple, change) -> None:
    node = raw
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
    defaults = Alerts().model_dump(by_alias=True)  # keys the inventory leaves to the model's defaults
    node[path[-1]] = change(node.get(path[-1], defaults.get(path[-1])))


@pytest.mark.parametrize(("path", "change", "alert"), MUTATIONS,
                         ids=[f"{m[0][-1]}-{i}" for i, m in enumerate(MUTATIONS)])
def test_a_threshold_changed_only_in_the_spec_fails_the_rule_tests(promtool, tmp_path, path, change, alert):
    raw = copy.deepcopy(_raw("local"))
    _set(raw, path, change)
    spec = _spec_from(raw, tmp_path / "inv")
    tests, _ = _write_case(tmp_path / "case", spec, PINNED["local"])  # pinned table left unchanged
    proc = _run(promtool, "test", "rules", tests.name, cwd=tests.parent)
    assert proc.returncode != 0, f"changing {path} went unnoticed by promtool test rules"
    assert f"alertname: {alert}" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_dashboard_queries_are_valid_promql(promtool, tmp_path):
    spec = load_spec(REPO / "inventories" / "local")
    exprs = [t["expr"] for p in dashboard.dashboard(spec)["panels"] for t in p["targets"]]
    # Grafana variables are not PromQL; substitute what Grafana would.
    exprs = [re.sub(r"\$node\b", ".*", e).replace("$__rate_interval", "5m") for e in exprs]
    rules = [{"record": f"gpucluster:dashboard_query_{i}", "expr": e} for i, e in enumerate(exprs)]
    (tmp_path / "dash.yaml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    proc = _run(promtool, "check", "rules", "dash.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
