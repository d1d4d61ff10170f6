"""The simulated DRA kubelet plugin against the DRA driver's facts (dra-driver-nvidia-gpu 0.4.1).

The simulator's ResourceSlice devices (simulator/agents/dra_plugin.py) must carry exactly the names,
attributes, capacities and value formats tests/upstream/facts/dra-driver.yaml records, and the
worked examples there (a 1g.10gb device of GPU 0 named gpu-0-mig-1g10gb-19-0, 9856 MiB of NVML memory
as 10334765056 bytes, driver 580.95.05 as 580.95.5) must come out the same.
"""

from __future__ import annotations

import re

import pytest
from upstream_facts import fact, source

from gpucluster.simulator import nvml
from gpucluster.simulator.agents import dra_plugin
from gpucluster.simulator.objects import slice_spec

DRIVER = "580.95.05"


def devices(model: str, layout: tuple[tuple[str, ...], ...]) -> list[dict]:
    """What the simulated plugin publishes; H100 nodes on the DGX H100 platform (its cited PCIe layout)."""
    return dra_plugin.published("c", "node-1", nvml.model(model), layout, driver_version=DRIVER,
                                cuda_driver_version=nvml.cuda_driver_version(DRIVER), missing=set(),
                                platform="dgx-h100" if model == "H100-SXM5-80GB" else None)


def test_driver_name_and_pool() -> None:
    assert dra_plugin.DRIVER == fact("dra-driver", "driver-name-gpu"), source("dra-driver", "driver-name-gpu")
    spec = slice_spec("node-1", devices("H100-SXM5-80GB", ((),)), 1)
    assert spec["driver"] == fact("dra-driver", "driver-name-gpu")
    assert spec["pool"]["name"] == "node-1"  # fact pool-name: one pool per node, named after it
    assert fact("dra-driver", "slices-per-node-static") == spec["pool"]["resourceSliceCount"] == 1


def test_whole_gpu_attributes_and_capacity_are_upstreams() -> None:
    [dev] = devices("H100-SXM5-80GB", ((),))
    assert re.fullmatch(r"gpu-\d+", dev["name"])  # fact gpu-device-name
    optional = {"addressingMode"}  # only when NVML reports one; the simulated NVML does not
    assert set(dev["attributes"]) == set(fact("dra-driver", "gpu-attributes")) - optional
    kinds = {k: next(iter(v)) for k, v in dev["attributes"].items()}
    assert kinds == {k: t for k, t in fact("dra-driver", "gpu-attributes").items() if k not in optional}
    assert set(dev["capacity"]) == {"memory"}
    assert int(dev["capacity"]["memory"]["value"]) == nvml.model("H100-SXM5-80GB").memory_mib * 2**20
    attrs = {k: next(iter(v.values())) for k, v in dev["attributes"].items()}
    assert attrs["brand"] == fact("dra-driver", "brand-value-nvidia")
    assert attrs["architecture"] == fact("dra-driver", "architecture-values")["Hopper"]
    assert attrs["driverVersion"] == "580.95.5"  # fact driverVersion-format's own example
    assert attrs["cudaDriverVersion"] == "13.0.0"  # fact cudaDriverVersion-format: 13000 -> 13.0.0
    assert attrs["cudaComputeCapability"] == "9.0.0"
    assert re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]", attrs["resource.kubernetes.io/pciBusID"])
    assert re.fullmatch(r"pci[0-9a-f]{4}:[0-9a-f]{2}", attrs["resource.kubernetes.io/pcieRoot"])


def test_static_mig_devices_are_upstreams() -> None:
    got = devices("A100-80GB", (("1g.10gb",) * 7, ("1g.10gb+me", "3g.40gb")))
    names = [d["name"] for d in got]
    assert "gpu-0" not in names and "gpu-1" not in names  # fact mig-static-parent-not-published
    pattern = re.compile(fact("dra-driver", "mig-device-name-regex"))
    assert all(pattern.fullmatch(n) for n in names)
    assert fact("dra-driver", "mig-device-name-example-1g10gb-gpu0") in names
    # fact mig-device-name-profile-sanitise: 1g.10gb+me -> 1g10gb-me
    assert any(n.startswith("gpu-1-mig-1g10gb-me-20-") for n in names)
    mig = got[0]
    # addressingMode only when NVML reports one; pcieRoot only where sysfs resolves it (fact
    # pcieRoot-omitted-when-unresolved): the simulator resolves it only on a cited platform layout (DGX H100)
    optional = {"addressingMode", "resource.kubernetes.io/pcieRoot"}
    assert set(mig["attributes"]) == set(fact("dra-driver", "mig-attributes")) - optional
    [h100_mig] = devices("H100-SXM5-80GB", (("7g.80gb",),))
    assert set(h100_mig["attributes"]) == set(fact("dra-driver", "mig-attributes")) - {"addressingMode"}
    assert h100_mig["attributes"]["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:15"}  # its parent's
    assert set(mig["capacity"]) - {k for k in mig["capacity"] if k.startswith("memorySlice")} == set(
        fact("dra-driver", "mig-capacity"))
    example = fact("dra-driver", "mig-memory-example-a100-80gb-1g10gb")
    assert int(mig["capacity"]["memory"]["value"]) == example["capacity-bytes"]
    slices = sorted(k for k in mig["capacity"] if k.startswith("memorySlice"))
    start = int(mig["name"].rsplit("-", 1)[1])
    assert slices == [f"memorySlice{start}"]  # fact mig-capacity-memory-slices: one per slice of the placement


def test_unknown_profile_ids_are_only_for_models_without_a_capture() -> None:
    for name, model in nvml.models().items():
        if model.mig is None:
            continue
        if "mig.infoIds" in model.unsourced:
            assert name == "A30"
        else:
            assert set(model.mig.info_ids) == {p.name for p in model.mig.profiles}, name


@pytest.mark.parametrize("model", ["A100-40GB", "A100-80GB", "H100-SXM5-80GB"])
def test_one_slice_profiles_carry_id_19_as_upstreams_examples_show(model: str) -> None:
    # partitions.go:142 gpu-2-mig-1g24gb-19-0, dcgm-exporter's capture 1g.10gb -> 19, and
    # device_state.go gpu-1-mig-2g47gb-14-0: the 1- and 2-slice ids real NVML reports.
    table = nvml.model(model).mig
    assert table
    one = next(p.name for p in table.profiles if p.name.startswith("1g.") and "+" not in p.name)
    two = next(p.name for p in table.profiles if p.name.startswith("2g."))
    assert (table.info_ids[one], table.info_ids[two]) == (19, 14)


# -- DynamicMIG (partitionable devices) ------------------------------------------------------------------

def dynamic(model: str, layout: tuple[tuple[str, ...], ...], minor: int = 37) -> list[dict]:
    return dra_plugin.slices("c", "node-1", nvml.model(model), layout, driver_version=DRIVER,
                             cuda_driver_version=nvml.cuda_driver_version(DRIVER), missing=set(),
                             dynamic_mig=True, server_minor=minor,
                             platform="dgx-h100" if model == "H100-SXM5-80GB" else None)


def test_the_gate_is_the_charts_feature_gate() -> None:
    assert dra_plugin.DYNAMIC_MIG in fact("dra-driver", "driver-feature-gates")
    assert fact("dra-driver", "dynamic-mig-chart-value") == f"featureGates.{dra_plugin.DYNAMIC_MIG}=true"


def test_the_health_monitors_taints_are_upstreams() -> None:
    """Keys, values and effects of the simulated health monitor (facts health-*), event by event."""
    taint = fact("dra-driver", "health-xid-taint")
    assert dra_plugin.HEALTH_GATE in fact("dra-driver", "driver-feature-gates")
    assert dra_plugin.XID_TAINT == taint["key"] and dra_plugin.XID_TAINT in \
        fact("dra-driver", "device-taints-on-health-events")["keys"]
    assert dra_plugin.NON_FATAL_XIDS == set(fact("dra-driver", "health-skipped-xids"))
    started = dra_plugin.Started(((), ("1g.10gb",)), "t")
    notes: list[str] = []
    after = dra_plugin.health_events(started, {0: 79}, notes)
    assert after.taints == {"gpu-0": ({"key": taint["key"], "value": "79", "effect": taint["effect"]},)}
    after = dra_plugin.health_events(after, {0: 13, 1: 79}, notes)  # same key: replaced; a MIG GPU: no match
    assert after.taints == {"gpu-0": ({"key": taint["key"], "value": "13", "effect": taint["effect-if-skipped"]},)}
    assert notes and "matches no published device" in notes[0]


def test_split_slices_from_the_threshold_on_counters_first() -> None:
    threshold = int(fact("dra-driver", "split-slices-threshold").split(".")[1])
    assert dra_plugin.SPLIT_FROM_MINOR == threshold
    split = dynamic("H100-SXM5-80GB", ((), ()), minor=threshold)
    assert [sorted(s) for s in split] == [["sharedCounters"], ["devices"], ["devices"]]  # G+1, counters first
    combined = dynamic("H100-SXM5-80GB", ((), ()), minor=threshold - 1)
    assert [sorted(s) for s in combined] == [["devices", "sharedCounters"]] * 2  # G, each with its counters


def test_counter_sets_and_what_devices_consume_are_upstreams() -> None:
    [counters, gpu0] = dynamic("H100-SXM5-80GB", ((),))
    [cs] = counters["sharedCounters"]
    assert cs["name"] == fact("dra-driver", "dynamic-mig-counter-set-name").replace("<minor>", "0")
    allowed = fact("dra-driver", "dynamic-mig-counters")
    plain = {c for c in allowed if "<" not in c}
    slices = sorted(int(k.rsplit("-", 1)[1]) for k in cs["counters"] if k.startswith("memory-slice-"))
    assert set(cs["counters"]) - {f"memory-slice-{i}" for i in slices} == plain
    assert slices == list(range(8))  # the largest placement covers every memory slice
    devices = gpu0["devices"]
    assert [d["name"] for d in devices] == sorted(d["name"] for d in devices)  # fact dynamic-mig-device-order
    whole = next(d for d in devices if d["name"] == "gpu-0")
    # fact dynamic-mig-consumes-counters: the whole GPU consumes every counter of its set
    assert whole["consumesCounters"] == [{"counterSet": cs["name"], "counters": cs["counters"]}]
    # fact dynamic-mig-whole-gpu-capacity: the largest profile's memory, not the board's total
    largest = max(p.memory_mib for p in nvml.model("H100-SXM5-80GB").mig.profiles) * 2**20
    assert int(whole["capacity"]["memory"]["value"]) == largest != nvml.model("H100-SXM5-80GB").memory_mib * 2**20
    pattern = re.compile(fact("dra-driver", "mig-device-name-regex"))
    for d in devices:
        if d["name"] == "gpu-0":
            continue
        m = pattern.fullmatch(d["name"])
        assert m, d["name"]
        [use] = d["consumesCounters"]
        start = int(m.group(4))
        size = nvml.model("H100-SXM5-80GB").mig.placements[d["attributes"]["profile"]["string"]][1]
        assert sorted(k for k in use["counters"] if k.startswith("memory-slice-")) == sorted(
            f"memory-slice-{i}" for i in range(start, start + size))
        assert set(d["capacity"]) == set(fact("dra-driver", "dynamic-mig-device-capacity"))
        assert set(d["attributes"]) == set(fact("dra-driver", "dynamic-mig-device-attributes-no-uuid"))


def test_every_placement_of_every_profile_once() -> None:
    model = nvml.model("H100-SXM5-80GB")
    [_, gpu0] = dynamic("H100-SXM5-80GB", ((),))
    names = [d["name"] for d in gpu0["devices"] if d["name"] != "gpu-0"]
    assert len(names) == sum(len(model.mig.placements[p.name][0]) for p in model.mig.profiles)
    assert len(gpu0["devices"]) <= fact("kubernetes", "resourceslice-max-devices-with-counters")


def test_ampere_is_partitioned_only_with_mig_mode_on_and_then_without_its_whole_gpu() -> None:
    # fact mig-mode-toggle-without-reset: Hopper and newer only; fact dynamic-mig-whole-gpu-when
    assert "hopper" in dra_plugin.MIG_TOGGLE and "ampere" not in dra_plugin.MIG_TOGGLE
    off = dynamic("A100-80GB", ((),))
    assert [d["name"] for s in off for d in s.get("devices") or []] == ["gpu-0"]
    assert not any(s.get("sharedCounters") for s in off)
    on = dynamic("A100-80GB", (("1g.10gb",),))
    names = [d["name"] for s in on for d in s.get("devices") or []]
    assert "gpu-0" not in names and names and all(n.startswith("gpu-0-mig-") for n in names)
    assert on[0]["sharedCounters"][0]["name"] == "gpu-0-counter-set"


def test_the_shared_dra_names_are_the_facts() -> None:
    # gpucluster.upstream: the names the render side, validation and verification all use.
    from gpucluster import upstream

    assert upstream.DRA_DRIVER == fact("dra-driver", "driver-name-gpu")
    assert upstream.DRA_BRAND == fact("dra-driver", "brand-value-nvidia")
    assert upstream.counter_set_name(3) == fact("dra-driver", "dynamic-mig-counter-set-name").replace("<minor>", "3")
    assert set(upstream.MIG_TOGGLE_ARCHITECTURES) == {fact("dra-driver", "architecture-values")[a]
                                                      for a in ("Hopper", "Blackwell")}


def test_the_simulated_plugin_is_placed_by_the_charts_default_affinity() -> None:
    # where the release's values leave kubeletPlugin.affinity unset, the simulator places the plugin as the
    # chart's template does
    assert dra_plugin.CHART_AFFINITY == fact("dra-driver", "kubelet-plugin-default-affinity")
    terms = dra_plugin.CHART_AFFINITY["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    for term in terms:
        [expr] = term["matchExpressions"]
        assert dra_plugin.scheduled({}, {expr["key"]: expr["values"][0]})
    assert not dra_plugin.scheduled({}, {"nvidia.com/gpu.present": "false"})


def test_topology_attributes_are_the_pinned_drivers() -> None:
    """pcieRoot on GPUs and (the parent's) on MIG devices, no numaNode before 0.5.0, and the claim constraint
    spelled as resource.k8s.io/v1 spells it (facts numaNode-not-published, device-constraint-fields)."""
    from gpucluster import upstream
    from gpucluster.render import dra_driver
    from gpucluster.spec.model import ClaimTemplate

    numa = fact("dra-driver", "numaNode-not-published")
    assert upstream.DRA_UNPUBLISHED_ATTRIBUTES["numaNode"] == (numa["name"], numa["published-from"]), \
        source("dra-driver", "numaNode-not-published")
    for dev in devices("H100-SXM5-80GB", ((), ("3g.40gb",))):
        assert numa["name"] not in dev["attributes"]
        assert "resource.kubernetes.io/pcieRoot" in dev["attributes"]  # fact gpu-pcieRoot-published
    fields = fact("dra-driver", "device-constraint-fields")
    t = ClaimTemplate(name="t", device_class="gpu.nvidia.com", count=2, match_attribute="pcieRoot")
    devs = dra_driver.claim_template(t, "ns")["spec"]["spec"]["devices"]
    assert fields["constraints"] == "spec.devices.constraints" and "constraints" in devs
    assert set(devs["constraints"][0]) == {"requests", "matchAttribute"}
    assert devs["constraints"][0]["matchAttribute"] == upstream.DRA_TOPOLOGY_ATTRIBUTES["pcieRoot"]
