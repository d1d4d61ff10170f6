"""Multi-node NVLink (GB200 NVL72): the spec's rules, the DRA driver's ComputeDomains, the simulated fabric,
and the ``nvlink-clique`` verify rows.

Spec: tests/data/nvlink (rack-1: g-1, g-2; rack-2: g-3, g-4; 4 GB200 per host on gb200-nvl72, a DRA pool;
h-1: a DGX H100 outside every multi-node NVLink domain). tests/upstream/test_gfd_clique_upstream.py runs
GPU Feature Discovery over the fabric NVML reports; tests/integration/test_nvlink_live.py runs the flow.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from testkit import find, host, problems

from gpucluster import catalog
from gpucluster.render import dra_driver
from gpucluster.simulator.silicon import silicon_of
from gpucluster.spec import load_spec
from gpucluster.verify.snapshot import Snapshot
from gpucluster.verify.topology import nvlink_checks

DATA = Path(__file__).resolve().parents[1] / "data" / "nvlink"
RAW = yaml.safe_load((DATA / "cluster.yaml").read_text())
SPEC = load_spec(DATA)
GB200 = ("g-1", "g-2", "g-3", "g-4")


@pytest.fixture
def raw() -> dict:
    return copy.deepcopy(RAW)


# -- the catalog -------------------------------------------------------------------------------------------
def test_gb200_and_its_nvl72_platform_carry_the_cited_facts_and_claim_no_bus_ids() -> None:
    m = catalog.get("GB200")
    assert (m.product_name, m.memory_mib, m.compute_capability) == ("NVIDIA GB200", 189471, "10.0")
    assert m.mig is not None and m.mig.balanced == {"1g.23gb": 2, "2g.47gb": 1, "3g.93gb": 1}
    p = catalog.platform("gb200-nvl72")
    assert p is not None and p.multi_node_nvlink and p.models == ("GB200",)
    assert p.nvlink_domain is not None and (p.nvlink_domain.hosts, p.nvlink_domain.gpus) == (18, 72)
    assert p.nvlink_domain.hosts * len(p.gpus) == p.nvlink_domain.gpus
    assert [g.numa_node for g in p.gpus] == [0, 0, 1, 1]
    # bus IDs differ between a cloud instance and a bare-metal tray: none is claimed, so none is verified
    assert all(g.pci_bus_id is None and g.pcie_root is None for g in p.gpus)
    dgx = catalog.platform("dgx-h100")
    assert dgx is not None and not dgx.multi_node_nvlink  # NVLink inside the box only


# -- the spec's rules ----------------------------------------------------------------------------------------
def test_the_nvlink_spec_is_valid(raw, write_spec) -> None:
    assert SPEC.topology.nvlink_tier == "nvlink" and not SPEC.warnings


def test_a_gb200_pool_without_an_nvlink_tier_is_refused(raw, write_spec) -> None:
    del raw["topology"]["nvlinkTier"]
    p = find(problems(write_spec, raw), "nodePools[0].gpu.platform")
    assert "does not say which tier is the NVLink domain" in p.message and "nvlinkTier: nvlink" in p.hint


def test_an_nvlink_tier_that_is_no_tier_is_refused_with_a_suggestion(raw, write_spec) -> None:
    raw["topology"]["nvlinkTier"] = "nvlnk"
    p = find(problems(write_spec, raw), "topology.nvlinkTier")
    assert "'nvlnk' is not a tier" in p.message and "nvlink" in p.hint


def test_a_gb200_pool_off_dra_is_refused(raw, write_spec) -> None:
    raw["nodePools"][0]["dra"] = False
    p = find(problems(write_spec, raw), "nodePools[0].dra")
    assert "ComputeDomains" in p.message and "dra: true" in p.hint


def test_a_driver_older_than_the_compute_domain_plugin_accepts_is_refused(raw, write_spec) -> None:
    raw.setdefault("gpuOperator", {})["driver"] = {"version": "570.148.08"}
    p = find(problems(write_spec, raw), "gpuOperator.driver.version")
    assert "570.158.01 or newer" in p.message and "570.148.08" in p.message
    raw["gpuOperator"]["driver"] = {"version": "570.158.01"}
    assert load_spec(write_spec(raw)).gpu_operator.driver.version == "570.158.01"  # the minimum itself passes


def test_an_nvlink_domain_mixing_a_host_outside_the_fabric_is_refused(raw, write_spec) -> None:
    host(raw, "h-1")["topology"]["nvlink"] = "rack-1"
    p = find(problems(write_spec, raw), "hosts[5].topology.nvlink")
    assert "NVLink domain 'rack-1' mixes hosts" in p.message and "h-1" in p.message


def test_an_nvlink_domain_larger_than_one_rack_is_refused(raw, write_spec) -> None:
    names = [f"g-{i}" for i in range(5, 25)]
    raw["hosts"] += [{"name": n, "address": "127.0.0.1", "topology": {"nvlink": "rack-1", "leaf": "leaf-a"}}
                     for n in names]
    raw["nodePools"][0]["hosts"] += names
    p = find(problems(write_spec, raw), "hosts[22].topology.nvlink")  # g-21: the 19th host of rack-1
    assert "NVLink domain 'rack-1' has 22 hosts" in p.message and "at most 18 nodes" in p.message
    assert "at most 18" in p.hint


# -- what it renders -----------------------------------------------------------------------------------------
def test_compute_domains_run_only_where_a_dra_pool_shares_nvlink(raw, write_spec) -> None:
    assert dra_driver.values(SPEC)["resources"] == {"gpus": {"enabled": True}, "computeDomains": {"enabled": True}}
    raw["nodePools"] = [raw["nodePools"][1] | {"dra": True, "extendedResource": True}]  # only the DGX H100, DRA
    raw["hosts"] = [h for h in raw["hosts"] if not h["name"].startswith("g-")]
    raw["topology"] = {"tiers": ["leaf"]}
    for h in raw["hosts"]:
        h.get("topology", {}).pop("nvlink", None)
    del raw["tenants"][0]["quota"]["deviceClasses"]["compute-domain-default-channel.nvidia.com"]
    raw["dra"]["deviceClasses"][0]["selector"] = {"productNameContains": "H100"}
    plain = load_spec(write_spec(raw))
    assert dra_driver.values(plain)["resources"]["computeDomains"] == {"enabled": False}


# -- the simulated fabric ------------------------------------------------------------------------------------
def test_the_simulator_registers_each_rack_in_its_own_fabric_and_nothing_else() -> None:
    si = silicon_of(SPEC)
    fabrics = {h: si[h].fabric for h in GB200}
    assert all(f is not None for f in fabrics.values())
    assert fabrics["g-1"] == fabrics["g-2"] != fabrics["g-3"] == fabrics["g-4"]
    assert si["h-1"].fabric is None and si["cp-1"].fabric is None  # DGX H100: NVML says NOT_SUPPORTED


# -- verify: nvlink-clique -----------------------------------------------------------------------------------
CLIQUE_1 = "2b7c0a52-0c64-5f44-9d6f-7bb1c4a3a001.0"
CLIQUE_2 = "2b7c0a52-0c64-5f44-9d6f-7bb1c4a3a002.0"


def live_nodes(cliques: dict[str, str | None]) -> list[dict]:
    out = []
    for name in (*GB200, "h-1"):
        labels = {"nvidia.com/gpu.product": "NVIDIA-GB200"}
        if cliques.get(name):
            labels["nvidia.com/gpu.clique"] = str(cliques[name])
        out.append({"metadata": {"name": name, "labels": labels}})
    return out


def rows(cliques: dict[str, str | None]) -> dict[str, tuple[str, str]]:
    return {r.subject: (r.verdict.value, str(r.actual))
            for r in nvlink_checks(SPEC, Snapshot(nodes=live_nodes(cliques)))}


HEALTHY = {"g-1": CLIQUE_1, "g-2": CLIQUE_1, "g-3": CLIQUE_2, "g-4": CLIQUE_2}


def test_each_rack_in_one_clique_passes_for_exactly_the_fabric_nodes() -> None:
    got = rows(HEALTHY)
    assert set(got) == set(GB200)  # h-1 has no multi-node NVLink domain: no row
    assert {v for v, _ in got.values()} == {"pass"}


def test_a_node_without_a_clique_fails_alone() -> None:
    got = rows(HEALTHY | {"g-2": None})
    assert got["g-2"][0] == "fail" and "no nvidia.com/gpu.clique" in got["g-2"][1]
    assert {h: v for h, (v, _) in got.items() if h != "g-2"} == dict.fromkeys(("g-1", "g-3", "g-4"), "pass")


def test_a_rack_split_across_two_cliques_fails_on_its_nodes() -> None:
    got = rows(HEALTHY | {"g-2": CLIQUE_2 + "x"})
    assert got["g-1"][0] == got["g-2"][0] == "fail" and "other nodes of rack-1 report" in got["g-1"][1]
    assert got["g-3"][0] == got["g-4"][0] == "pass"


def test_two_racks_in_one_clique_fail_on_the_second() -> None:
    got = rows({h: CLIQUE_1 for h in GB200})
    assert got["g-1"][0] == got["g-2"][0] == "pass"
    assert got["g-3"][0] == got["g-4"][0] == "fail" and "the clique of NVLink domain rack-1 too" in got["g-3"][1]


def test_a_node_gfd_has_not_labelled_is_not_measured_not_passed() -> None:
    nodes = live_nodes(HEALTHY)
    del nodes[0]["metadata"]["labels"]["nvidia.com/gpu.product"]
    got = {r.subject: r.verdict.value for r in nvlink_checks(SPEC, Snapshot(nodes=nodes))}
    assert got["g-1"] == "not-measured" and got["g-2"] == "pass"


# -- tenants: who may run ComputeDomains -------------------------------------------------------------------
def test_only_a_tenant_with_imex_channels_may_create_compute_domains_and_holds_as_many() -> None:
    from gpucluster.render import tenants
    from gpucluster.verify.tenancy import expected_access

    research, inference = SPEC.tenants
    cd_rule = {"apiGroups": ["resource.nvidia.com"], "resources": ["computedomains"], "verbs": tenants.WRITE}
    for t, granted in ((research, True), (inference, False)):
        roles = [o for o in tenants.rbac(t) if o["kind"] == "Role"]
        assert {o["metadata"]["name"] for o in roles} == {"tenant-user", "tenant-admin"}
        assert all((cd_rule in o["rules"]) is granted for o in roles), t.name
        hard = tenants.quota_hard(SPEC, t)
        assert hard["count/computedomains.resource.nvidia.com"] == ("4" if granted else "0")
        assert hard["compute-domain-default-channel.nvidia.com.deviceclass.resource.k8s.io/devices"] == (
            "4" if granted else "0")
    # verify asks the authorizer exactly that, from the spec (not from the rendered Role)
    asked = {(q.group, q.namespace): allowed for q, allowed in expected_access(SPEC).items()
             if q.resource == "computedomains"}
    assert asked == {("research-users", "research"): True, ("inference-users", "inference"): False}


def test_without_compute_domains_the_channel_class_is_unknown_and_nothing_is_granted(raw, write_spec) -> None:
    from gpucluster.render import tenants

    raw["nodePools"][0]["dra"] = False
    raw["nodePools"][0]["gpu"] = {"model": "H100-SXM5-80GB", "count": 8, "platform": "dgx-h100"}
    del raw["topology"]["nvlinkTier"]
    p = find(problems(write_spec, raw), "tenants[0].quota.deviceClasses.compute-domain-default-channel.nvidia.com")
    assert "unknown DeviceClass" in p.message
    del raw["tenants"][0]["quota"]["deviceClasses"]["compute-domain-default-channel.nvidia.com"]
    raw["dra"] = {"deviceClasses": [{"name": "gb200", "selector": {"productNameContains": "H100"}}]}
    plain = load_spec(write_spec(raw))
    assert not any("computedomains" in k for t in plain.tenants for k in tenants.quota_hard(plain, t))
