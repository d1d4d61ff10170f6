"""render/volcano.py: queues, priority classes, scheduler configuration, chart values."""

from __future__ import annotations

from testkit import by_kind

from gpucluster.render import volcano


def test_volcano_objects_and_conf(local):
    objs = volcano.objects(local)
    q = by_kind(objs, "Queue", "ml-research")[0]
    assert q["spec"]["weight"] == 60 and q["spec"]["capability"]["nvidia.com/gpu"] == "16"
    assert q["spec"]["guarantee"] == {"resource": {"nvidia.com/gpu": "4"}}
    pcs = {o["metadata"]["name"]: o for o in by_kind(objs, "PriorityClass")}
    assert pcs["online-inference"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert pcs["training"]["preemptionPolicy"] == "Never"
    assert pcs["online-inference"]["value"] > pcs["training"]["value"] > pcs["batch-inference"]["value"]
    conf = volcano.scheduler_conf(local)
    assert conf["actions"] == "enqueue, allocate, preempt, reclaim, backfill"
    plugins = [p["name"] for tier in conf["tiers"] for p in tier["plugins"]]
    assert "proportion" in plugins and "capacity" not in plugins and "gang" in plugins
    pred = next(p for t in conf["tiers"] for p in t["plugins"] if p["name"] == "predicates")
    assert pred["arguments"]["predicate.DynamicResourceAllocationEnable"] is True


def test_a_guarantee_comes_with_a_deserved_share(lab):
    # volcano facts queue-webhook-guarantee-requires-deserved: Volcano 1.15 admission rejects it otherwise.
    for q in (o for o in volcano.objects(lab) if o["kind"] == "Queue"):
        if "guarantee" in q["spec"]:
            assert q["spec"]["deserved"] == q["spec"]["guarantee"]["resource"], q["metadata"]["name"]
