"""simulator/data/nvml.yaml (what NVML reports, from upstream sources) against the GPU catalog.

The GPU simulator feeds nvml.yaml to NVIDIA's own code (nvidia-oracle); the render core and the
expectations use the catalog (data/gpus.yaml). Every difference between the two fails unless
JUSTIFIED names it with its source, and the fields no upstream source gives are pinned in UNSOURCED,
so neither list can grow without someone reading this file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from gpucluster import catalog
from gpucluster.simulator import nvml

NVML_YAML = Path(nvml.__file__).parent / "data" / "nvml.yaml"
ROOT = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load(NVML_YAML.read_text())

#: (model, field) -> why the catalog and upstream differ, with the source. Nothing else may differ.
#: (Empty since the real A30 capture, gpucluster/data/captures.yaml gpu-operator-442-a30, settled the A30's
#: product name: the catalog's "NVIDIA A30", not go-nvml's mock "NVIDIA A30-PCIE-24GB".)
JUSTIFIED: dict[tuple[str, str], str] = {}

#: model -> fields no upstream source gives (nvml.yaml holds the catalog's value and says why, and no
#: real-board capture in gpucluster/data/captures.yaml gives it either).
UNSOURCED: dict[str, set[str]] = {
    "H100-NVL-94GB": {"architecture", "computeCapability", "migCapable", "mig"},
    "GH200": {"productName", "memoryMiB", "architecture", "computeCapability", "migCapable", "mig"},
    "L4": {"productName", "architecture", "computeCapability", "migCapable"},
    "B200": {"mig"},
    "GB200": {"mig"},
    "H100-SXM5-80GB": {"mig.placements"},
    "A30": {"mig.infoIds"},
}


def _arch(text: str) -> str:
    """Catalog 'Ada Lovelace' / nvml.yaml 'ada-lovelace' -> one spelling."""
    return re.sub(r"[\s_-]+", "-", text.strip().lower())


def differences() -> list[str]:
    """Every (model, field) where nvml.yaml and the catalog disagree, as text."""
    out: list[str] = []
    cat = catalog.catalog()
    facts = nvml.models()
    for name in sorted(set(cat) ^ set(facts)):
        out.append(f"{name}: only in {'the catalog' if name in cat else 'nvml.yaml'}")
    for name in sorted(set(cat) & set(facts)):
        c, f = cat[name], facts[name]
        pairs = {
            "productName": (c.product_name, f.product_name),
            "memoryMiB": (c.memory_mib, f.memory_mib),
            "computeCapability": (c.compute_capability, f.compute_capability),
            "architecture": (_arch(c.architecture), _arch(f.architecture)),
            "migCapable": (c.mig is not None, f.mig_capable),
        }
        for key, (cv, fv) in pairs.items():
            if cv != fv:
                out.append(f"{name}.{key}: catalog {cv!r}, upstream {fv!r}")
        if c.mig is None or f.mig is None:
            continue
        cprof = c.mig.profiles
        fprof = {p.name: p for p in f.mig.profiles}
        if set(cprof) != set(fprof):
            out.append(f"{name}.mig.profiles: catalog {sorted(cprof)}, upstream {sorted(fprof)}")
        for pname in sorted(set(cprof) & set(fprof)):
            cp, fp = cprof[pname], fprof[pname]
            if cp.max != fp.instances:
                out.append(f"{name}.mig.{pname}.instances: catalog {cp.max}, upstream {fp.instances}")
            if cp.memory_mib != fp.memory_mib:
                out.append(f"{name}.mig.{pname}.memoryMiB: catalog {cp.memory_mib}, upstream {fp.memory_mib}")
            if pname in f.mig.placements:
                starts, size = f.mig.placements[pname]
                if (tuple(cp.starts), cp.memory) != (starts, size):
                    out.append(f"{name}.mig.{pname}.placements: catalog starts {list(cp.starts)} size "
                               f"{cp.memory}, upstream starts {list(starts)} size {size}")
    return out


def test_catalog_and_upstream_nvml_facts_agree_or_the_difference_is_justified() -> None:
    found = differences()
    unjustified = [d for d in found if tuple(d.split(":")[0].split(".", 1)) not in JUSTIFIED]
    assert unjustified == [], "\n".join(unjustified)


def test_every_justification_is_still_needed() -> None:
    keys = {tuple(d.split(":")[0].split(".", 1)) for d in differences()}
    assert set(JUSTIFIED) <= keys, f"no longer different, drop from JUSTIFIED: {set(JUSTIFIED) - keys}"


def test_unsourced_fields_are_exactly_the_pinned_ones() -> None:
    found = {name: set(m.unsourced) for name, m in nvml.models().items() if m.unsourced}
    assert found == UNSOURCED


def test_unsourced_values_are_the_catalogs_not_invented() -> None:
    cat = catalog.catalog()
    for name, fields in UNSOURCED.items():
        c, f = cat[name], nvml.model(name)
        own = {"productName": (c.product_name, f.product_name), "memoryMiB": (c.memory_mib, f.memory_mib),
               "computeCapability": (c.compute_capability, f.compute_capability),
               "architecture": (_arch(c.architecture), _arch(f.architecture)),
               "migCapable": (c.mig is not None, f.mig_capable)}
        for key in fields & set(own):
            assert own[key][0] == own[key][1], f"{name}.{key}"
        if "mig" in fields:
            assert f.mig is None, name


def _sources(node: object) -> list[dict]:
    if isinstance(node, dict):
        found = [node["source"]] if isinstance(node.get("source"), dict) else []
        if isinstance(node.get("placementsSource"), dict) and "repo" in node["placementsSource"]:
            found.append(node["placementsSource"])
        return found + [s for k, v in node.items() if k not in ("source", "placementsSource") for s in _sources(v)]
    if isinstance(node, list):
        return [s for v in node for s in _sources(v)]
    return []


def test_every_source_names_a_declared_repository_path_and_line() -> None:
    declared = RAW["sources"]
    for spec in declared.values():
        if "local" in spec:  # a capture this project took, kept whole in this repository
            assert spec["local"].startswith("tests/data/captures/") and (ROOT / spec["local"]).is_file()
            continue
        assert spec["repository"].startswith("NVIDIA/") and ("tag" in spec or len(spec.get("commit", "")) == 40)
    sources = _sources(RAW["models"])
    assert len(sources) > 40
    for src in sources:
        assert src["repo"] in declared, src
        path = src.get("path") or declared[src["repo"]].get("path") or declared[src["repo"]].get("local")
        assert path and isinstance(src["line"], int) and src["line"] > 0, src


@pytest.mark.parametrize("name", sorted(n for n, m in RAW["models"].items() if "profiles" in (m.get("mig") or {})))
def test_every_mig_profile_cites_its_line_in_the_table_source(name: str) -> None:
    for p in RAW["models"][name]["mig"]["profiles"]:
        assert isinstance(p["line"], int) and p["line"] > RAW["models"][name]["mig"]["source"]["line"], p["name"]


def _local_line(repo: str, line: int) -> str:
    return (ROOT / RAW["sources"][repo]["local"]).read_text().splitlines()[line - 1]


def test_values_from_a_capture_taken_here_are_on_the_lines_they_cite() -> None:
    """nvml.yaml's H200 comes from the board this project captured: each cited line shows the value."""
    m = RAW["models"]["H200-141GB"]
    assert _local_line("h200-smi", m["productName"]["source"]["line"]) == "\t\t<product_name>NVIDIA H200</product_name>"
    assert _local_line("h200-smi", m["memoryMiB"]["source"]["line"]).strip() == \
        f"<total>{m['memoryMiB']['value']} MiB</total>"
    assert _local_line("h200-smi", m["architecture"]["source"]["line"]).strip().lower() == \
        f"<product_architecture>{m['architecture']['value']}</product_architecture>"
    assert _local_line("h200-smi", m["pciDeviceId"]["source"]["line"]).strip() == \
        f"<pci_device_id>{m['pciDeviceId']['value'][2:].upper()}10DE</pci_device_id>"
    assert _local_line("h200-nvml", m["computeCapability"]["source"]["line"]).strip() == \
        f'"cudaComputeCapability": "{m["computeCapability"]["value"]}",'
    assert _local_line("h200-nvml", m["migCapable"]["source"]["line"]).strip() == '"migCapable": true,'


def test_the_h200_mig_table_is_the_boards_own_nvml_answer() -> None:
    """Every profile of the H200 table against GetGpuInstanceProfileInfo / possible placements as captured,
    and its names against the names go-nvlib v0.11.0 gave those profiles on the board (GFD's and the DRA
    driver's naming), so the oracle's naming check cannot be the only guard."""
    answer = json.loads((ROOT / RAW["sources"]["h200-nvml"]["local"]).read_text())["devices"][0]
    nvml_profiles = {p["profile"]: p for p in answer["gpuInstanceProfiles"] if "id" in p}
    table = RAW["models"]["H200-141GB"]["mig"]
    assert {p["giProfileId"] for p in table["profiles"]} == set(nvml_profiles)
    for p in table["profiles"]:
        got = nvml_profiles[p["giProfileId"]]
        assert {"memoryMiB": got["memorySizeMB"], "instances": got["instanceCount"],
                "multiprocessors": got["multiprocessorCount"], "copyEngines": got["copyEngineCount"],
                "decoders": got["decoderCount"], "encoders": got["encoderCount"], "jpegs": got["jpegCount"],
                "ofas": got["ofaCount"], "starts": [x["start"] for x in got["placements"]],
                "size": got["placements"][0]["size"]} == {k: p[k] for k in (
                    "memoryMiB", "instances", "multiprocessors", "copyEngines", "decoders", "encoders", "jpegs",
                    "ofas", "starts", "size")}, p["name"]
        assert {x["size"] for x in got["placements"]} == {p["size"]}
        assert table["infoIds"]["ids"][p["name"]] == got["id"]
        assert _local_line("h200-nvml", p["line"]).strip() == f'"id": {got["id"]},'
    # go-nvlib names every whole-GPU-instance profile (G == C) as the table does; "+me" is the media
    # extension (profile 7), which go-nvlib names by its NVML profile id, not by size
    gi_names = {n for n in answer["migProfileNames"] if "c." not in n}
    assert gi_names == {p["name"] for p in table["profiles"]}
    assert table["deviceMemoryMiB"]["value"] * 1024 * 1024 == answer["memoryInfo"]["total"]
