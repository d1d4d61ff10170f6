"""What Volcano's chart makes of our values (gpucluster.render.volcano_chart) against the chart itself.

Two proofs. The cited facts (tests/upstream/facts/volcano.yaml) say which template line turns which value
into which flag or webhook configuration, what the webhook manager does with the configurations, and
which DRA gates Volcano's scheduler reads and how its libraries default them; the first tests hold the
mapping and the gates gpucluster passes to them. Then Helm decides: the real chart of both versions
(v1.14.1 from the module the local world builds its daemons from, v1.15.1 from the module pinned in
tools/volcano-chart, the version real clusters install) is rendered with ``helm template`` (tool ``helm``,
Helm v3.22.0 built unmodified) for our values and for values that flip every branch the mapping follows,
and every daemon's arguments, every webhook configuration, the admission ClusterRole's Namespace rule and
the scheduler's configuration must equal the mapping's.
"""

from __future__ import annotations

import copy
import functools
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from upstream_facts import fact, source

from gpucluster.render import volcano, volcano_chart
from gpucluster.spec import features, load_spec
from gpucluster.spec.validate.kubernetes import api_runtime_config

REPO = Path(__file__).resolve().parents[2]
SPECS = {"local": REPO / "inventories" / "local", "lab": REPO / "inventories" / "lab",
         "dra": REPO / "tests" / "data" / "dra"}
#: The wrapper module that pins each chart's source (tools/<module>/go.sum verifies it).
CHART_MODULES = {"1.14.1": "volcano", "1.15.1": "volcano-chart"}
RELEASE = volcano_chart.Release("volcano", "volcano-system")
CRD = re.compile(r"^kind: CustomResourceDefinition\s*$", re.M)
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# -- the cited facts ---------------------------------------------------------------------------------
def test_chart_default_admissions_lack_podgroup_mutate_and_our_values_add_it() -> None:
    for fid in ("values-custom-enabled-admissions", "values-custom-enabled-admissions-v1-14-1"):
        assert fact("volcano", fid) == volcano_chart.ENABLED_ADMISSIONS.split(","), source("volcano", fid)
    assert "/podgroups/mutate" not in volcano_chart.ENABLED_ADMISSIONS.split(",")
    vals = volcano.values(load_spec(SPECS["local"]))
    flag = fact("volcano", "chart-admission-enabled-admission-arg")["flag"]
    for version in volcano_chart.VERSIONS:
        args = volcano_chart.admission_args(vals, RELEASE, version)
        assert f"{flag}={vals['custom']['enabled_admissions']}" in args
        guarded = fact("volcano", "chart-webhooks-guarded-by-regexmatch")
        confs = {c["metadata"]["name"]: c for c in volcano_chart.webhook_configurations(vals, RELEASE, version)}
        hook = confs[guarded["configuration"]]["webhooks"][0]
        assert hook["name"] == guarded["webhook"] and hook["failurePolicy"] == guarded["failurePolicy"]
        assert hook["rules"][0]["operations"] == guarded["operations"]
        assert volcano_chart.admission_reads_namespaces(vals, version)


def test_configuration_names_are_what_the_webhook_manager_looks_up() -> None:
    prefix = fact("volcano", "webhook-manager-configuration-name-prefix")
    for w in volcano_chart.WEBHOOKS:
        assert w.configuration == prefix + w.path.replace("/", "-"), source("volcano",
                                                                             "webhook-manager-configuration-name-prefix")


def test_volcanos_libraries_default_the_gates_as_gpucluster_reads_them() -> None:
    """features.FEATURES' stages at Volcano's library minors, and the minors themselves, as cited."""
    assert fact("volcano", "scheduler-kubernetes-library-version-v1-14-1") == "v1.34.1"
    assert fact("volcano", "scheduler-kubernetes-library-version") == "v1.35.3"
    assert features.VOLCANO_LIBRARY_MINORS == (34, 35)
    by_gate = {f.gate: f for f in features.FEATURES.values()}
    stage = {("alpha", False): features.Stage.ALPHA, ("beta", True): features.Stage.BETA_ON}
    cited = {"DRAPartitionableDevices": "dra-partitionable-devices", "DRADeviceTaints": "dra-device-taints",
             "DRAExtendedResource": "dra-extended-resource", "DRAPrioritizedList": "dra-prioritized-list",
             "DRAResourceClaimDeviceStatus": "dra-resource-claim-device-status"}
    for minor in features.VOLCANO_LIBRARY_MINORS:
        for gate, fid in cited.items():
            got = fact("volcano", f"gate-1-{minor}-{fid}")
            assert got["gate"] == gate, fid
            assert by_gate[gate].stage(minor) is stage[(got["stage"], got["default"])], \
                source("volcano", f"gate-1-{minor}-{fid}")


def test_the_gates_volcano_reads_are_the_ones_we_may_pass() -> None:
    read = {fact("volcano", f"scheduler-reads-dra-{n}") for n in
            ("partitionable-devices", "device-taints", "extended-resource")}
    read_local = {fact("volcano", f"scheduler-reads-dra-{n}-v1-14-1") for n in
                  ("partitionable-devices", "device-taints", "extended-resource")}
    assert read == read_local
    assert read <= {features.FEATURES[n].gate for n in features.VOLCANO_READS}
    # every spec feature gpucluster uses that is off in Volcano's libraries gets its gate
    dyn = load_spec(SPECS["dra"])
    assert set(features.volcano_gates(["partitionable-devices", "device-taints", "extended-resource",
                                       "prioritized-list", "claim-device-status", "device-taint-rules"])) == read
    gates = volcano.feature_gates(dyn).split(",")
    assert gates[0] == "DynamicResourceAllocation=true" and {g.split("=")[0] for g in gates[1:]} == read


def test_device_taints_make_the_api_server_serve_volcanos_taint_rules() -> None:
    watched = fact("volcano", "scheduler-watches-taint-rules-at-v1alpha3")
    assert watched == fact("volcano", "scheduler-watches-taint-rules-at-v1alpha3-v1-14-1")
    served = fact("volcano", "kubernetes-v1alpha3-devicetaintrules-served-when-enabled")
    assert served["flag"] == f"--runtime-config={features.VOLCANO_TAINT_RULES_API}=true"
    spec = load_spec(SPECS["local"])
    assert watched["gate"] + "=true" in volcano.feature_gates(spec).split(",")
    assert f"{features.VOLCANO_TAINT_RULES_API}=true" in api_runtime_config(spec)


# -- Helm renders the real chart ---------------------------------------------------------------------
@functools.cache
def _chart_dir(version: str) -> Path:
    from gpucluster.toolchain.gobuild import module_source

    return module_source(CHART_MODULES[version], "volcano.sh/volcano") / "installer" / "helm" / "chart" / "volcano"


def helm_template(helm: Path, version: str, values: dict[str, Any], tmp: Path) -> list[dict[str, Any]]:
    """``helm template`` of chart ``version`` with ``values``: the rendered objects."""
    (tmp / "values.yaml").write_text(yaml.safe_dump(values))
    env = {**os.environ, **{k: str(tmp / k.lower()) for k in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME",
                                                              "HELM_DATA_HOME")}}
    done = subprocess.run([str(helm), "template", RELEASE.name, str(_chart_dir(version)), "--namespace",
                           RELEASE.namespace, "-f", str(tmp / "values.yaml"), "--kube-version", "1.37.2"],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    # The chart's templates carry its CRDs (about 1 MB of the output); nothing here reads them, and
    # parsing them would be most of the test's time.
    docs = [d for d in re.split(r"^---$", done.stdout, flags=re.M) if not CRD.search(d)]
    return [d for d in (yaml.load(doc, Loader=LOADER) for doc in docs) if d]


def _args(objs: list[dict[str, Any]], deployment: str) -> list[str]:
    found = [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == deployment]
    return [str(a) for a in found[0]["spec"]["template"]["spec"]["containers"][0]["args"]] if found else []


#: Values that flip every branch the mapping follows (scheduler name, leader election, numbers,
#: an admission list whose paths are found by a search, an admission off, per-version keys).
VARIANTS: dict[str, dict[str, Any]] = {
    "chart-defaults": {},
    "scheduler-name-and-leader-election": {"custom": {
        "scheduler_name": "vc", "leader_elect_enable": True, "scheduler_metrics_enable": False,
        "scheduler_pprof_enable": True, "controller_metrics_enable": False, "scheduler_kube_api_qps": 0,
        "controller_worker_threads": 7, "scheduler_plugins_dir": "/plugins", "ignored_provisioners": "a,b",
        "scheduler_sharding_mode": "hard", "admission_log_level": 2}},
    "admissions-found-by-search": {"custom": {
        "enabled_admissions": "/pods/mutate,/jobflows/validate,/pods/validate,/cronjobs/validate",
        "webhooks_namespace_selector_expressions": [{"key": "team", "operator": "Exists"}]},
        "basic": {"admission_port": 9443}},
    "admission-off": {"custom": {"admission_enable": False, "controller_enable": False}},
    "v1.15-keys": {"custom": {"controller_enabled_controllers": "job-controller", "sharding_configmap_enable": False,
                              "scheduler_percentage_nodes_to_find": 0, "admission_feature_gates": "X=true"}},
}


def _cases() -> list[tuple[str, str]]:
    return [(v, name) for v in volcano_chart.VERSIONS for name in [*SPECS, *VARIANTS]]


def _values(name: str) -> dict[str, Any]:
    return volcano.values(load_spec(SPECS[name])) if name in SPECS else copy.deepcopy(VARIANTS[name])


@pytest.mark.parametrize(("version", "case"), _cases())
def test_the_mapping_is_what_helm_renders(helm: Path, tmp_path: Path, version: str, case: str) -> None:
    values = _values(case)
    objs = helm_template(helm, version, values, tmp_path)
    assert _args(objs, "volcano-scheduler") == volcano_chart.scheduler_args(values, RELEASE, version)
    assert _args(objs, "volcano-controllers") == volcano_chart.controller_args(values, RELEASE, version)
    assert _args(objs, "volcano-admission") == volcano_chart.admission_args(values, RELEASE, version)
    hooks = sorted((o for o in objs if o["kind"].endswith("WebhookConfiguration")),
                   key=lambda o: o["metadata"]["name"])
    assert hooks == sorted(volcano_chart.webhook_configurations(values, RELEASE, version),
                           key=lambda o: o["metadata"]["name"])
    roles = [o for o in objs if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "volcano-admission"]
    reads = any("namespaces" in r.get("resources", []) for role in roles for r in role["rules"])
    assert reads == volcano_chart.admission_reads_namespaces(values, version)
    conf = [o["data"]["volcano-scheduler.conf"] for o in objs
            if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "volcano-scheduler-configmap"]
    if volcano_chart.scheduler_conf(values) is not None:
        assert conf == [volcano_chart.scheduler_conf(values)]


def test_a_list_without_podgroup_mutate_registers_no_podgroup_webhook(helm: Path, tmp_path: Path) -> None:
    """The chart's default list: no PodGroup mutation, and the webhook may not read Namespaces."""
    for version in volcano_chart.VERSIONS:
        objs = helm_template(helm, version, {}, tmp_path)
        names = {o["metadata"]["name"] for o in objs if o["kind"] == "MutatingWebhookConfiguration"}
        assert "volcano-admission-service-podgroups-mutate" not in names
        assert "volcano-admission-service-queues-mutate" in names
