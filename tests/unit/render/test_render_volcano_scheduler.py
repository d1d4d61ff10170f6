"""Volcano render: chart values keys, scheduler conf, Queues, PriorityClasses, and the local-world args."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpucluster.addons import volcano as local_volcano
from gpucluster.render import render, tenants, volcano
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
    # the chart puts custom.scheduler_config_override verbatim into volcano-scheduler.conf and
    # custom.scheduler_feature_gates into --feature-gates; nothing else is overridden
    assert set(vals) == {"custom"}
    assert set(vals["custom"]) == {"scheduler_config_override", "scheduler_feature_gates"}
    assert vals["custom"]["scheduler_feature_gates"] == "DynamicResourceAllocation=true"
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


def test_local_world_args_are_loopback_without_leader_election(tmp_path: Path, local: ClusterSpec) -> None:
    class FakeWorld:  # only the attributes _args reads
        kubeconfig = tmp_path / "kubeconfig"
        dir = tmp_path

    ports = {"vc-scheduler": 1, "vc-controller-manager": 2, "vc-scheduler-metrics": 3,
             "vc-controller-manager-metrics": 4}
    conf = tmp_path / "volcano" / "scheduler.conf"
    sched = local_volcano._args("vc-scheduler", FakeWorld(), conf, ports, volcano.feature_gates(local))
    cm = local_volcano._args("vc-controller-manager", FakeWorld(), conf, ports, "")
    for args in (sched, cm):
        assert "--leader-elect=false" in args
        addrs = [a.split("=", 1)[1] for a in args if a.startswith(("--healthz-address", "--listen-address"))]
        assert len(addrs) == 2 and all(a.startswith("127.0.0.1:") for a in addrs)
    assert f"--scheduler-conf={conf}" in sched and "--feature-gates=DynamicResourceAllocation=true" in sched
    assert "--controllers=job-controller,pg-controller,queue-controller,gc-controller" in cm


def test_crd_packages_cover_the_required_crds() -> None:
    groups = {name.split(".", 1)[1] for name in local_volcano.REQUIRED_CRDS}
    pkgs = "\n".join(local_volcano.CRD_PACKAGES)
    for group in groups:  # e.g. topology.volcano.sh -> .../topology/v1alpha1
        assert f"/apis/{group.split('.')[0]}/" in pkgs, group
    wrapper = (REPO / "tools" / "volcano-crds" / "apis.go").read_text()
    assert all(f'"{p}"' in wrapper for p in local_volcano.CRD_PACKAGES)
