"""Volcano render: chart values keys, scheduler conf, Queues, PriorityClasses, and the local-world args."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpucluster.addons import volcano as local_volcano
from gpucluster.render import render, tenants, volcano, volcano_chart
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def local() -> ClusterSpec:
    return load_spec(REPO / "inventories" / "local")


@pytest.fixture(scope="module")
def test_spec() -> ClusterSpec:
    return load_spec(REPO / "tests" / "data" / "volcano")


def _plugins(conf: dict) -> list[str]:
    return [p["name"] for tier in conf["tiers"] for p in tier["plugins"]]


def test_chart_values_use_the_charts_keys(local: ClusterSpec) -> None:
    vals = volcano.values(local)
    # the chart puts custom.scheduler_config_override verbatim into volcano-scheduler.conf,
    # custom.scheduler_feature_gates into --feature-gates and custom.enabled_admissions into the webhook
    # manager's --enabled-admission and its webhook configurations; nothing else is overridden
    assert set(vals) == {"custom"}
    assert set(vals["custom"]) == {"scheduler_config_override", "scheduler_feature_gates", "enabled_admissions"}
    # the local inventory has DRA pools (quarantine, extended resource) and no dynamic-MIG pool
    assert vals["custom"]["scheduler_feature_gates"] == \
        "DynamicResourceAllocation=true,DRADeviceTaints=true,DRAExtendedResource=true"
    conf = yaml.safe_load(vals["custom"]["scheduler_config_override"])
    assert conf == volcano.scheduler_conf(local)
    rel = next(r for r in render(local).releases if r.name == "volcano")
    assert rel.values == vals


def test_scheduler_conf_plugins_and_actions(local: ClusterSpec) -> None:
    conf = volcano.scheduler_conf(local)
    acts = [a.strip() for a in conf["actions"].split(",")]
    assert acts[:2] == ["enqueue", "allocate"] and acts[-1] == "backfill"
    assert {"preempt", "reclaim"} <= set(acts)
    names = _plugins(conf)
    for needed in ("gang", "priority", "conformance", "drf", "predicates", "proportion", "nodeorder", "binpack"):
        assert needed in names
    assert "capacity" not in names  # never together with proportion
    assert len(names) == len(set(names))
    # priority orders jobs before gang looks at them
    assert names.index("priority") < names.index("gang")


def test_actions_follow_the_spec(local: ClusterSpec) -> None:
    off = local.model_copy(deep=True)
    off.scheduling.volcano.preempt = False
    off.scheduling.volcano.reclaim = False
    assert volcano.scheduler_conf(off)["actions"] == "enqueue, allocate, backfill"


def test_no_dra_pools_no_dra_in_the_scheduler(local: ClusterSpec) -> None:
    nodra = local.model_copy(deep=True)
    for p in nodra.node_pools:
        p.dra = False
    assert volcano.feature_gates(nodra) == ""
    assert "scheduler_feature_gates" not in volcano.values(nodra)["custom"]
    pred = next(p for t in volcano.scheduler_conf(nodra)["tiers"] for p in t["plugins"] if p["name"] == "predicates")
    assert "arguments" not in pred
    pred = next(p for t in volcano.scheduler_conf(local)["tiers"] for p in t["plugins"] if p["name"] == "predicates")
    assert pred["arguments"] == {"predicate.DynamicResourceAllocationEnable": True}


def test_queue_per_tenant_with_capability_and_guarantee(test_spec: ClusterSpec, local: ClusterSpec) -> None:
    queues = {o["metadata"]["name"]: o for o in volcano.objects(test_spec) if o["kind"] == "Queue"}
    assert set(queues) == {t.name for t in test_spec.tenants}
    assert queues["capped"]["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert queues["capped"]["spec"]["capability"] == {"nvidia.com/gpu": "8"}
    assert queues["team-a"]["spec"]["weight"] == 60 and queues["team-b"]["spec"]["weight"] == 40
    assert all(q["spec"]["reclaimable"] is True for q in queues.values())
    ml = next(o for o in volcano.objects(local) if o["kind"] == "Queue" and o["metadata"]["name"] == "ml-research")
    assert ml["spec"]["guarantee"] == {"resource": {"nvidia.com/gpu": "4"}}
    assert ml["spec"]["capability"]["cpu"] == "256" and ml["spec"]["capability"]["memory"] == "2Ti"


def test_capability_defaults_to_quota_and_quota_names_it(local: ClusterSpec) -> None:
    t = local.tenants[0].model_copy(deep=True)
    t.queue.capability_gpus = None
    assert volcano.queue_capability(t) == t.quota.gpus
    assert volcano.queue(t)["spec"]["capability"]["nvidia.com/gpu"] == str(t.quota.gpus)
    quota = next(o for o in tenants.objects(local) if o["kind"] == "ResourceQuota"
                 and o["metadata"]["namespace"] == local.tenants[0].ns)
    assert quota["metadata"]["annotations"]["gpucluster.dev/queue-capability-gpus"] == "16"


def test_priority_classes_online_preempts_training_never(local: ClusterSpec) -> None:
    pcs = {o["metadata"]["name"]: o for o in volcano.objects(local) if o["kind"] == "PriorityClass"}
    assert set(pcs) == {"online-inference", "training", "batch-inference", "notebooks"}
    assert pcs["online-inference"]["preemptionPolicy"] == "PreemptLowerPriority"
    # training and batch never preempt: training cannot evict training in a loop, batch cannot
    # evict training at all (and is lower anyway)
    assert pcs["training"]["preemptionPolicy"] == "Never" and pcs["batch-inference"]["preemptionPolicy"] == "Never"
    assert pcs["online-inference"]["value"] > pcs["training"]["value"] > pcs["batch-inference"]["value"] \
        > pcs["notebooks"]["value"]
    assert not any(p["globalDefault"] for p in pcs.values())


def test_volcano_disabled_keeps_priorities_only(local: ClusterSpec) -> None:
    off = local.model_copy(deep=True)
    off.scheduling.volcano.enabled = False
    kinds = {o["kind"] for o in volcano.objects(off)}
    assert kinds == {"PriorityClass"}
    assert all(r.name != "volcano" for r in render(off).releases)


def test_enabled_admissions_add_podgroup_mutate_to_the_charts_list(local: ClusterSpec) -> None:
    """Tenant routing needs Volcano's PodGroup mutating webhook, which the chart's default list lacks."""
    got = volcano.values(local)["custom"]["enabled_admissions"].split(",")
    chart = volcano_chart.ENABLED_ADMISSIONS.split(",")
    assert "/podgroups/mutate" not in chart
    assert got == [*chart, "/podgroups/mutate"]
    confs = volcano_chart.webhook_configurations(volcano.values(local), volcano_chart.Release("volcano", "v"),
                                                 "1.15.1")
    assert "volcano-admission-service-podgroups-mutate" in {c["metadata"]["name"] for c in confs}


def test_dynamic_mig_pools_turn_volcanos_partitionable_devices_gate_on(test_spec: ClusterSpec) -> None:
    gates = volcano.feature_gates(test_spec).split(",")
    assert gates[0] == "DynamicResourceAllocation=true"
    assert "DRAPartitionableDevices=true" not in gates  # tests/data/volcano has no dynamic-MIG pool
    dyn = load_spec(REPO / "tests" / "data" / "dra")
    assert any(p.uses_dra and p.sharing.mode.value == "dynamic-mig" for p in dyn.gpu_pools)
    assert "DRAPartitionableDevices=true" in volcano.feature_gates(dyn).split(",")
    # beta and on in Volcano's libraries already: not passed
    assert not any(g.startswith("DRAPrioritizedList") for g in volcano.feature_gates(dyn).split(","))


def test_device_taints_need_volcanos_view_of_taint_rules_served(local: ClusterSpec) -> None:
    from gpucluster.spec.validate.kubernetes import api_runtime_config

    assert "DRADeviceTaints=true" in volcano.feature_gates(local)
    assert "resource.k8s.io/v1alpha3/devicetaintrules=true" in api_runtime_config(local)
    off = local.model_copy(deep=True)
    off.scheduling.volcano.enabled = False
    assert not any("v1alpha3" in r for r in api_runtime_config(off))


def test_local_world_args_are_the_charts_with_local_places(tmp_path: Path, local: ClusterSpec) -> None:
    args = local_volcano.chart_args(local)
    rel = local_volcano.release(local)
    assert args[local_volcano.SCHEDULER] == volcano_chart.scheduler_args(volcano.values(local), rel, "1.14.1")
    sched = local_volcano.localize(local_volcano.SCHEDULER, args[local_volcano.SCHEDULER],
                                   {"--scheduler-conf": "/x/scheduler.conf", "--healthz-address": "127.0.0.1:1",
                                    "--listen-address": "127.0.0.1:2"})
    assert "--scheduler-conf=/x/scheduler.conf" in sched and sched[-1] == "2>&1"
    assert not any(a.startswith("--scheduler-conf=/volcano.scheduler") for a in sched)
    assert "--leader-elect=false" in sched
    assert "--feature-gates=DynamicResourceAllocation=true,DRADeviceTaints=true,DRAExtendedResource=true" in sched
    with pytest.raises(ValueError, match="not local settings"):
        local_volcano.localize(local_volcano.SCHEDULER, args[local_volcano.SCHEDULER], {"--feature-gates": "x"})
    # the chart's configurations, each calling the loopback port instead of the Service
    hooks = local_volcano.webhook_configurations(local, volcano.values(local), 4443)
    paths = volcano.values(local)["custom"]["enabled_admissions"].split(",")
    assert all(set(h["clientConfig"]) == {"url"} for c in hooks for h in c["webhooks"])
    assert sorted(h["clientConfig"]["url"] for c in hooks for h in c["webhooks"]) == sorted(
        f"https://127.0.0.1:4443{p}" for p in paths)


def test_crd_packages_cover_the_required_crds() -> None:
    groups = {name.split(".", 1)[1] for name in local_volcano.REQUIRED_CRDS}
    pkgs = "\n".join(local_volcano.CRD_PACKAGES)
    for group in groups:  # e.g. topology.volcano.sh -> .../topology/v1alpha1
        assert f"/apis/{group.split('.')[0]}/" in pkgs, group
    wrapper = (REPO / "tools" / "volcano-crds" / "apis.go").read_text()
    assert all(f'"{p}"' in wrapper for p in local_volcano.CRD_PACKAGES)
