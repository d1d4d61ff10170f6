"""Topology-aware placement without a cluster: the cited DGX H100 PCIe/NUMA layout, what the simulated
DRA driver and DCGM exporter publish from it, verification's independent expectation, the claim template
constraint it renders, and what validation refuses (live: test_dra_live.py, section 8)."""

from __future__ import annotations

import re

import pytest
from testkit import find as at
from testkit import problems

from gpucluster import catalog, devices
from gpucluster.render import dra_driver
from gpucluster.simulator import dcgm, nvml
from gpucluster.simulator.agents import dra_plugin
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClaimAlternative, ClaimTemplate
from gpucluster.spec.validate import validate
from gpucluster.verify.cluster import device_problems

DRIVER = "580.95.05"
ROOT = "resource.kubernetes.io/pcieRoot"
BUS = "resource.kubernetes.io/pciBusID"
#: Every PCI bus DGX H100's own ConnectX/Intel NICs sit on: NVIDIA DGX H100/H200 User Guide, Table 5
#: "Network Port Mapping", https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html
DGX_H100_NIC_BUSES = {"dc", "9a", "ce", "c0", "4f", "40", "5e", "18", "aa", "29", "82", "0b"}


def h100() -> catalog.Platform:
    platform = catalog.platform("dgx-h100")
    assert platform is not None and platform.models == ("H100-SXM5-80GB",)
    return platform


def published(model: str, layout: tuple[tuple[str, ...], ...], *, dynamic: bool = False,
              platform: str | None = "dgx-h100") -> list[dict]:
    common = {"driver_version": DRIVER, "cuda_driver_version": nvml.cuda_driver_version(DRIVER), "missing": set(),
              "platform": platform}
    if dynamic:
        return [d for s in dra_plugin.slices("c", "n", nvml.model(model), layout, dynamic_mig=True, **common)
                for d in s.get("devices") or []]
    return dra_plugin.published("c", "n", nvml.model(model), layout, **common)


def attr(dev: dict, name: str) -> str | None:
    return (dev["attributes"].get(name) or {}).get("string")


# -- the cited layout ------------------------------------------------------------------------------------

def test_dgx_h100_every_gpu_has_its_own_root_shared_with_its_rail_nic_and_numa_follows_the_socket() -> None:
    p = h100()
    assert len(p.gpus) == 8
    roots = [g.pcie_root for g in p.gpus]
    assert len(set(roots)) == 8  # no two GPUs share a host bridge (topo -m: NODE between their rail NICs)
    assert [p.nic_roots[g.rail_nic] for g in p.gpus] == roots
    assert [g.rail_nic for g in p.gpus] == ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5",
                                            "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]  # Table 6
    assert [g.numa_node for g in p.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    for g in p.gpus:
        assert re.fullmatch(r"0000:[0-9a-f]{2}:00\.0", g.pci_bus_id)
        assert re.fullmatch(r"pci0000:[0-9a-f]{2}", g.pcie_root)
        # NVIDIA's DGX H100 mock: each rail is pci0000:R / R+1 / R+2 / NIC at R+3 / GPU at R+6
        assert int(g.pci_bus_id[5:7], 16) == int(g.pcie_root[-2:], 16) + 6
    assert not {g.pci_bus_id[5:7] for g in p.gpus} & DGX_H100_NIC_BUSES  # GPUs never on a NIC's address
    assert dict(p.sources).keys() == {"pciBusID", "numaNode", "railNic", "pcieRoot"}


def test_only_cited_platforms_have_a_layout_and_a_model_alone_implies_none() -> None:
    # DGX A100 and DGX H200: no full table could be cited; gb200-nvl72 claims NUMA nodes and its NVLink domain,
    # no bus IDs (tests/unit/test_nvlink.py)
    assert set(catalog.platforms()) == {"dgx-h100", "gb200-nvl72"}
    assert [g.pci_bus_id for g in catalog.platforms()["gb200-nvl72"].gpus] == [None] * 4
    # another vendor's HGX H100 board has other bus IDs: a pool names its platform, or none is assumed
    assert catalog.platform(None) is None and catalog.platform("hgx-h100") is None


# -- the simulator publishes it ----------------------------------------------------------------------------

def test_simulated_driver_publishes_the_cited_bus_ids_and_roots_and_mig_devices_take_their_parents() -> None:
    p = h100()
    whole = published("H100-SXM5-80GB", ((),) * 8)
    assert [(attr(d, BUS), attr(d, ROOT)) for d in whole] == [(g.pci_bus_id, g.pcie_root) for g in p.gpus]
    mig = published("H100-SXM5-80GB", (("3g.40gb", "3g.40gb"), ("1g.10gb",)))
    assert {(d["name"][:5], attr(d, ROOT)) for d in mig} == {("gpu-0", "pci0000:15"), ("gpu-1", "pci0000:3d")}
    dyn = published("H100-SXM5-80GB", ((), ()), dynamic=True)
    assert {attr(d, ROOT) for d in dyn if d["name"].startswith("gpu-1")} == {"pci0000:3d"}
    assert len([d for d in dyn if d["name"].startswith("gpu-0-mig-")]) > 1


def test_without_a_cited_layout_the_bus_id_is_generic_and_no_root_is_published() -> None:
    # the driver omits pcieRoot when sysfs cannot resolve it (fact pcieRoot-omitted-when-unresolved);
    # pciBusID it always has
    for d in published("L40S", ((),) * 4, platform=None):
        assert ROOT not in d["attributes"] and re.fullmatch(r"0000:[0-9a-f]{2}:00\.0", attr(d, BUS) or "")
    # H100s whose pool names no platform: the same (nothing is assumed from the model)
    no_platform = published("H100-SXM5-80GB", ((),) * 8, platform=None)
    assert all(ROOT not in d["attributes"] for d in no_platform)
    assert attr(no_platform[0], BUS) != h100().gpus[0].pci_bus_id
    # nine H100s fit no cited platform: generic too
    assert all(ROOT not in d["attributes"] for d in published("H100-SXM5-80GB", ((),) * 9))


def test_the_dcgm_exporter_labels_the_cited_bus_id(base, write_spec) -> None:
    base["nodePools"][0]["gpu"]["platform"] = "dgx-h100"
    spec = load_spec(write_spec(base))
    gpus = dcgm.devices_for(spec)["g1"]
    assert [g["pci_bus_id"] for g in gpus] == [g.pci_bus_id for g in h100().gpus]


# -- verification expects it on its own -----------------------------------------------------------------

def test_expectation_matches_the_simulator_and_a_wrong_root_is_reported() -> None:
    model = catalog.get("H100-SXM5-80GB")
    want = devices.dra_devices(model, 8, platform="dgx-h100")
    got = published("H100-SXM5-80GB", ((),) * 8)
    assert device_problems(want, got) == []
    got[3]["attributes"][ROOT] = {"string": "pci0000:15"}
    assert device_problems(want, got) == ["gpu-3.pcieRoot='pci0000:15' (want 'pci0000:5b')"]
    # no cited layout: nothing is predicted, so a real L40S node's roots are not judged
    assert {(d.pci_bus_id, d.pcie_root) for d in devices.dra_devices(catalog.get("L40S"), 4)} == {(None, None)}
    assert {(d.pci_bus_id, d.pcie_root) for d in devices.dra_devices(model, 8)} == {(None, None)}  # no platform


# -- render -------------------------------------------------------------------------------------------------

def test_a_template_with_match_attribute_renders_the_constraint_over_its_request() -> None:
    t = ClaimTemplate(name="pair", device_class="gpu.nvidia.com", count=2, match_attribute="pcieRoot")
    devs = dra_driver.claim_template(t, "ns")["spec"]["spec"]["devices"]
    assert devs["constraints"] == [{"requests": ["gpus"], "matchAttribute": ROOT}]
    alt = ClaimTemplate(name="alt", match_attribute="pcieRoot", first_available=[
        ClaimAlternative(device_class="a", count=2), ClaimAlternative(device_class="b")])
    # the main request's name covers every subrequest (resource/v1 DeviceConstraint.Requests)
    assert dra_driver.claim_template(alt, "ns")["spec"]["spec"]["devices"]["constraints"] == [
        {"requests": ["gpu"], "matchAttribute": ROOT}]
    plain = ClaimTemplate(name="plain", device_class="gpu.nvidia.com", count=2)
    assert "constraints" not in dra_driver.claim_template(plain, "ns")["spec"]["spec"]["devices"]


# -- validation -------------------------------------------------------------------------------------------

@pytest.fixture
def dra_base(base) -> dict:
    base["nodePools"][0]["dra"] = True
    base["nodePools"][0]["gpu"]["platform"] = "dgx-h100"  # 8 H100 on DGX H100's layout
    return base


def test_two_gpus_under_one_root_on_dgx_h100_are_refused_naming_the_path_and_fix(write_spec, dra_base, cli) -> None:
    dra_base["dra"] = {"claimTemplates": [{"name": "pair", "deviceClass": "gpu.nvidia.com", "count": 2,
                                           "matchAttribute": "pcieRoot"}]}
    p = at(problems(write_spec, dra_base), "dra.claimTemplates[0].matchAttribute")
    assert p.severity == "error"
    assert "2x 'gpu.nvidia.com' (at most 1 under one root, pool h100: NVIDIA DGX H100 layout: every GPU under " \
           "its own PCIe root)" in p.message
    assert "drop matchAttribute" in p.hint
    out = cli("validate", "-i", str(write_spec(dra_base)))
    assert out.exit_code == 2 and "dra.claimTemplates[0].matchAttribute" in out.stderr, out.output
    # one device under one root is fine
    dra_base["dra"]["claimTemplates"][0]["count"] = 1
    assert not [x for x in validate(load_spec(write_spec(dra_base))) if "claimTemplates" in x.path]


def test_mig_devices_of_one_gpu_share_its_root(write_spec, dra_base) -> None:
    dra_base["nodePools"][0]["sharing"] = {"mode": "mig", "mig": {"layout": "all-1g.10gb"}}
    dra_base["dra"] = {"claimTemplates": [
        {"name": "seven", "deviceClass": "mig.nvidia.com", "count": 7, "matchAttribute": "pcieRoot"},
        {"name": "eight", "deviceClass": "mig.nvidia.com", "count": 8, "matchAttribute": "pcieRoot"}]}
    found = [x for x in problems(write_spec, dra_base) if "claimTemplates" in x.path]
    assert [x.path for x in found] == ["dra.claimTemplates[1].matchAttribute"]
    assert "at most 7 under one root" in found[0].message


def test_numa_node_is_refused_under_the_pinned_driver(write_spec, dra_base) -> None:
    dra_base["dra"] = {"claimTemplates": [{"name": "numa", "deviceClass": "gpu.nvidia.com", "count": 4,
                                           "matchAttribute": "numaNode"}]}
    p = at(problems(write_spec, dra_base), "dra.claimTemplates[0].matchAttribute")
    assert "does not publish resource.kubernetes.io/numaNode (it does from 0.5.0)" in p.message
    assert "never be allocated" in p.message


def test_a_pool_without_a_cited_layout_is_not_judged_but_warned_about(write_spec, base) -> None:
    base["nodePools"] = [{"name": "l40s", "hosts": ["g1"], "gpu": {"model": "L40S", "count": 4}, "dra": True}]
    base["hosts"] = [h for h in base["hosts"] if h["name"] != "g2"]
    base["tenants"] = []
    base["dra"] = {"claimTemplates": [{"name": "pair", "deviceClass": "gpu.nvidia.com", "count": 2,
                                       "matchAttribute": "pcieRoot"}]}
    [w] = [x for x in validate(load_spec(write_spec(base))) if "claimTemplates" in x.path]
    assert w.severity == "warning" and "name no platform with a cited PCIe layout" in w.message
    assert "publishes no pcieRoot" in w.hint


@pytest.mark.parametrize("gpu, text", [
    ({"model": "H100-SXM5-80GB", "count": 8, "platform": "dgx-h10"}, "unknown platform 'dgx-h10'"),
    ({"model": "H200-141GB", "count": 8, "platform": "dgx-h100"}, "holds H100-SXM5-80GB, not H200-141GB"),
    ({"model": "H100-SXM5-80GB", "count": 9, "platform": "dgx-h100"}, "holds 8 GPUs, not 9"),
])
def test_a_platform_that_cannot_hold_the_pools_gpus_is_refused(write_spec, base, gpu, text) -> None:
    base["nodePools"][0]["gpu"] = gpu
    p = at(problems(write_spec, base), "nodePools[0].gpu.platform")
    assert text in p.message, p
