"""simulator/data/nvml.yaml (what NVML reports, from upstream sources) against the GPU catalog.

The GPU simulator feeds nvml.yaml to NVIDIA's own code (nvidia-oracle); the render core and the
expectations use the catalog (data/gpus.yaml). Every difference between the two fails unless
JUSTIFIED names it with its source, and the fields no upstream source gives are pinned in UNSOURCED,
so neither list can grow without someone reading this file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gpucluster import catalog
from gpucluster.simulator import nvml

NVML_YAML = Path(nvml.__file__).parent / "data" / "nvml.yaml"
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
    "H200-141GB": {"memoryMiB", "mig"},
    "B200": {"mig"},
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
        assert spec["repository"].startswith("NVIDIA/") and ("tag" in spec or len(spec.get("commit", "")) == 40)
    sources = _sources(RAW["models"])
    assert len(sources) > 40
    for src in sources:
        assert src["repo"] in declared, src
        path = src.get("path") or declared[src["repo"]].get("path")
        assert path and isinstance(src["line"], int) and src["line"] > 0, src


@pytest.mark.parametrize("name", sorted(n for n, m in RAW["models"].items() if "profiles" in (m.get("mig") or {})))
def test_every_mig_profile_cites_its_line_in_the_table_source(name: str) -> None:
    for p in RAW["models"][name]["mig"]["profiles"]:
        assert isinstance(p["line"], int) and p["line"] > RAW["models"][name]["mig"]["source"]["line"], p["name"]
