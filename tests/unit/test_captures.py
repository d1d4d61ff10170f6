"""Real hardware outranks mocks: gpucluster/data/captures.yaml against the catalog, the simulator and verify.

The file holds what real NVIDIA boards reported (GFD label sets, ``nvidia-smi``, ``nvidia-smi mig -lgip``)
with where each was published, and per catalog model the values read from them. These tests read every
such value back out of its capture, check that the catalog (the expectation side) and the simulator's NVML
facts (its own reader) both take it over their mock or nominal value and mark the rest, and show what that
changes: verify passes a node labelled as a real H100 labelled itself, and validation refuses a
DeviceClass that matches MIG devices only at their mock size.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from testkit import find as at
from testkit import problems

import gpucluster
from gpucluster import catalog, expected
from gpucluster.render.nodes import node_config
from gpucluster.simulator import nvml
from gpucluster.spec import load_spec
from gpucluster.verify import cluster
from gpucluster.verify.model import Verdict

DATA = Path(gpucluster.__file__).parent / "data" / "captures.yaml"
ROOT = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load(DATA.read_text())
CAPTURES, MODELS = RAW["captures"], RAW["models"]
NVML_FILE = yaml.safe_load((Path(nvml.__file__).parent / "data" / "nvml.yaml").read_text())
NVML_RAW, NVML_SOURCES = NVML_FILE["models"], NVML_FILE["sources"]

#: A captured MIG profile field -> its GFD label suffix and its `nvidia-smi mig -lgip` column.
PROFILE_FIELDS = {"memoryMiB": ("memory", None), "multiprocessors": ("multiprocessors", "sm"),
                  "copyEngines": ("engines.copy", "ce"), "decoders": ("engines.decoder", "dec"),
                  "encoders": ("engines.encoder", "enc"), "jpegs": ("engines.jpeg", "jpeg"),
                  "ofas": ("engines.ofa", "ofa"), "id": (None, "id"), "instances": (None, "instances")}


def lgip_mib(gib: str) -> int:
    """The multiple of 128 MiB that `nvidia-smi mig -lgip` prints as ``gib`` (MiB / 1024, two decimals)."""
    return 128 * round(float(gib) * 8)


def profile_rows() -> list[tuple[str, str, dict]]:
    return [(model, name, entry) for model, m in MODELS.items() for name, entry in (m.get("mig") or {}).items()]


# -- the data file -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("cid", sorted(CAPTURES))
def test_every_capture_names_where_it_was_published_and_what_it_shows(cid: str) -> None:
    c = CAPTURES[cid]
    src = c["source"]
    if "commit" in src:  # a file in a repository, at a commit
        assert re.fullmatch(r"[0-9a-f]{40}", src["commit"]) and src["path"] and "/" in src["repository"]
    elif set(src) == {"path"}:  # taken by this project: the raw files are in this repository
        assert src["path"].startswith("tests/data/captures/") and (ROOT / src["path"]).is_file()
        assert (ROOT / src["path"]).parent.joinpath("README.md").is_file()
    else:
        assert src["url"].startswith("https://")
        for kind, n in ((k, src[k]) for k in ("issue", "pull") if k in src):  # a thread: its URL says the same
            assert src["url"] == f"https://github.com/{src['repository']}/{'issues' if kind == 'issue' else 'pull'}/{n}"
    assert c["kind"] in {"gfd-labels", "mig-lgip", "nvidia-smi"} and c["what"]
    assert c["driver"] is None or re.fullmatch(r"\d{3}\.\d+(\.\d+)?", c["driver"])
    body = {"gfd-labels": "labels", "mig-lgip": "profiles", "nvidia-smi": "gpu"}[c["kind"]]
    assert c[body], f"{cid} shows nothing"
    if c["kind"] == "gfd-labels" and "nvidia.com/cuda.driver-version.full" in c["labels"]:
        assert c["driver"] == c["labels"]["nvidia.com/cuda.driver-version.full"]


def raw_lgip(text: str) -> list[dict]:
    """The rows of the ``nvidia-smi mig -lgip`` table in ``text`` (two printed lines per profile)."""
    table = text.split("### nvidia-smi mig -lgip\n", 1)[1].split("### rc=", 1)[0]
    first = re.findall(r"^\|\s+\d+\s+MIG (\S+)\s+(\d+)\s+\d+/(\d+)\s+([\d.]+)\s+\S+\s+(\d+)\s+(\d+)\s+(\d+)\s+\|$",
                       table, re.M)
    second = re.findall(r"^\|\s+(\d+)\s+(\d+)\s+(\d+)\s+\|$", table, re.M)
    assert first and len(first) == len(second), table
    return [{"name": n, "id": int(i), "instances": int(t), "memoryGiB": g, "sm": int(sm), "dec": int(dec),
             "enc": int(enc), "ce": int(ce), "jpeg": int(jpeg), "ofa": int(ofa)}
            for (n, i, t, g, sm, dec, enc), (ce, jpeg, ofa) in zip(first, second, strict=True)]


@pytest.mark.parametrize("cid", sorted(c for c, v in CAPTURES.items() if set(v["source"]) == {"path"}))
def test_a_capture_taken_here_is_transcribed_exactly_from_its_raw_files(cid: str) -> None:
    c = CAPTURES[cid]
    raw = (ROOT / c["source"]["path"]).read_text()
    if c["kind"] == "gfd-labels":  # GFD's output file: one key=value per line
        assert c["labels"] == dict(line.split("=", 1) for line in raw.splitlines() if line)
    else:
        assert c["kind"] == "mig-lgip" and c["profiles"] == raw_lgip(raw)
    log = (ROOT / c["source"]["path"]).parent.joinpath("capture-log.txt").read_text()
    assert f'"driverVersion": "{c["driver"]}"' in (ROOT / c["source"]["path"]).parent.joinpath(
        "gpu-capture.json").read_text() and "rc=0" in log


def test_nvml_exact_sizes_are_what_lgip_prints_on_the_board_taken_here() -> None:
    """The board's own GetGpuInstanceProfileInfo (exact MiB) against its -lgip table (GiB, two decimals)."""
    folder = ROOT / CAPTURES["gpucluster-h200-lgip"]["source"]["path"].rsplit("/", 1)[0]
    nvml_answer = json.loads((folder / "gpu-capture.json").read_text())["devices"][0]["gpuInstanceProfiles"]
    exact = {p["id"]: p["memorySizeMB"] for p in nvml_answer if "id" in p}
    rows = CAPTURES["gpucluster-h200-lgip"]["profiles"]
    assert {r["id"]: lgip_mib(r["memoryGiB"]) for r in rows} == exact
    assert len(exact) == 7


@pytest.mark.parametrize("gib", sorted({r["memoryGiB"] for c in CAPTURES.values() for r in c.get("profiles", [])}))
def test_an_lgip_size_is_one_128_mib_multiple(gib: str) -> None:
    mib = lgip_mib(gib)
    assert f"{mib / 1024:.2f}" == gib
    # within the two-decimal rounding no other multiple of 128 MiB prints the same
    assert [m for m in (mib - 128, mib + 128) if f"{m / 1024:.2f}" == gib] == []


def test_the_128_mib_reading_matches_exact_sizes_of_the_same_boards() -> None:
    # GFD's exact MiB and -lgip's GiB of the H100's 1g.10gb and 2g.20gb; a B200's nvidia-smi MIG device
    # totals (20992, 45312 MiB, NVIDIA/gpu-operator issue 2155) against -lgip's 20.50 and 44.25 (pull 1351).
    labels = CAPTURES["gpu-operator-docs-h100-mixed"]["labels"]
    lgip = {r["name"]: r for r in CAPTURES["barrow-h100-lgip"]["profiles"]}
    for p in ("1g.10gb", "2g.20gb"):
        assert lgip_mib(lgip[p]["memoryGiB"]) == int(labels[f"nvidia.com/mig-{p}.memory"])
    b200 = {r["name"]: r for r in CAPTURES["gpu-operator-1351-b200"]["profiles"]}
    assert (lgip_mib(b200["1g.23gb"]["memoryGiB"]), lgip_mib(b200["2g.45gb"]["memoryGiB"])) == (20992, 45312)


@pytest.mark.parametrize(("model", "profile", "entry"), profile_rows(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_model_value_is_read_back_out_of_its_capture(model: str, profile: str, entry: dict) -> None:
    c = CAPTURES[entry["capture"]]
    fields = {k: v for k, v in entry.items() if k != "capture"}
    assert fields, f"{model} {profile}: nothing taken from {entry['capture']}"
    if c["kind"] == "gfd-labels":
        got = {k: int(c["labels"][f"nvidia.com/mig-{profile}.{label}"])
               for k, (label, _) in PROFILE_FIELDS.items() if label and k in fields}
    else:
        row = next(r for r in c["profiles"] if r["name"] == profile)
        got = {k: row[col] for k, (_, col) in PROFILE_FIELDS.items() if col and k in fields}
        if "memoryMiB" in fields:
            got["memoryMiB"] = lgip_mib(row["memoryGiB"])
    assert got == fields


@pytest.mark.parametrize("model", sorted(m for m, v in MODELS.items() if set(v) - {"mig"}))
def test_every_whole_gpu_value_is_read_back_out_of_its_capture(model: str) -> None:
    for key in ("productName", "memoryMiB"):
        if key not in MODELS[model]:
            continue
        v, c = MODELS[model][key], CAPTURES[MODELS[model][key]["capture"]]
        if key in c.get("gpu", {}):  # nvidia-smi's own words (-q's Product Name, the memory total)
            assert c["gpu"][key] == v["value"]
        elif key == "memoryMiB":
            assert c["labels"]["nvidia.com/gpu.memory"] == str(v["value"])
            assert "-MIG-" not in c["labels"]["nvidia.com/gpu.product"]  # single strategy shows a MIG device's
        else:  # GFD's product label is the name with spaces as dashes
            assert c["labels"]["nvidia.com/gpu.product"] == v["value"].replace(" ", "-")


# -- both readers take the captured values -------------------------------------------------------------------

def test_the_catalog_takes_every_captured_value_and_names_the_capture() -> None:
    cat = catalog.catalog()
    for model, name, entry in profile_rows():
        p = cat[model].mig.profiles[name]
        assert (p.memory_mib, p.memory_source) == (entry["memoryMiB"], f"capture: {entry['capture']}"), (model, name)
    for model, m in MODELS.items():
        sources = dict(cat[model].sources)
        for key, attr in (("productName", "product_name"), ("memoryMiB", "memory_mib")):
            if key in m:
                assert getattr(cat[model], attr) == m[key]["value"] and sources[key] == f"capture: {m[key]['capture']}"


def test_an_uncaptured_profile_is_marked_as_coming_from_a_mock_or_its_nominal_size() -> None:
    gpus = yaml.safe_load((DATA.parent / "gpus.yaml").read_text())
    marked = {}
    for key, model in catalog.catalog().items():
        for p in (model.mig.profiles.values() if model.mig else []):
            if p.name in (MODELS.get(key, {}).get("mig") or {}):
                continue
            mock = gpus[key]["mig"]["profiles"][p.name].get("memoryMiB")
            assert (p.memory_source, p.memory_mib) == ((catalog.MOCK, mock) if mock else
                                                       (catalog.NOMINAL, p.memory_gib * 1024)), (key, p.name)
            marked[key] = p.memory_source
    # A100s and A30 keep go-nvml's mock tables; GH200, B200 and GB200 (and the NVL's larger profiles) nominal
    assert marked == {"A100-40GB": catalog.MOCK, "A100-80GB": catalog.MOCK, "A30": catalog.MOCK,
                      "H100-NVL-94GB": catalog.NOMINAL, "B200": catalog.NOMINAL, "GB200": catalog.NOMINAL,
                      "GH200": catalog.NOMINAL}


def test_the_simulator_reads_the_same_captures_itself() -> None:
    """nvml.py takes each captured value over go-nvml's mock: memory, multiprocessors, engines, id, count."""
    attrs = {"memoryMiB": "memory_mib", "multiprocessors": "multiprocessors", "copyEngines": "copy_engines",
             "decoders": "decoders", "encoders": "encoders", "jpegs": "jpegs", "ofas": "ofas",
             "instances": "instances"}
    checked = 0
    for model, name, entry in profile_rows():
        table = nvml.model(model).mig
        if table is None:  # no usable NVML table for it (nvml.yaml says why): nothing to override
            continue
        p = table.profile(name)
        assert {k: getattr(p, a) for k, a in attrs.items() if k in entry} == \
            {k: entry[k] for k in attrs if k in entry}, (model, name)
        if "id" in entry:
            assert table.info_ids[name] == entry["id"]
        assert (f"mig.{name}", entry["capture"]) in nvml.model(model).captured
        checked += 1
    # the H100's seven profiles and the H200's seven (its table is the board's own, captured here; B200 and
    # the NVL have no usable NVML table)
    assert checked == 14
    # every H100 profile is now the real board's, so go-nvlib names them against the real total
    assert nvml.model("H100-SXM5-80GB").mig.device_memory_mib == 81559


# -- the table of what changed (docs/upstream.md) ------------------------------------------------------------

def mock_vs_captured() -> list[str]:
    """One Markdown row per captured MIG profile: the mock (or nominal) value, the captured one, the source."""
    gpus = yaml.safe_load((DATA.parent / "gpus.yaml").read_text())
    rows = []
    for model, name, entry in profile_rows():
        mig = NVML_RAW.get(model, {}).get("mig") or {}
        # a table taken from a board captured here is no mock: compare with the nominal size
        local = "local" in NVML_SOURCES.get((mig.get("source") or {}).get("repo", ""), {})
        table = [] if local else mig.get("profiles") or []
        mock = next((p for p in table if p["name"] == name), None)
        before = (f"{mock['memoryMiB']} (go-nvml mock)" if mock else
                  f"{gpus[model]['mig']['profiles'][name]['memoryGiB'] * 1024} (nominal)")
        sm = str(mock["multiprocessors"]) if mock else "—"
        driver = CAPTURES[entry["capture"]]["driver"] or "not stated"
        rows.append(f"| {model} | {name} | {before} | {entry['memoryMiB']} | {sm} | "
                    f"{entry.get('multiprocessors', '—')} | `{entry['capture']}` (driver {driver}) |")
    return rows


def test_docs_upstream_lists_every_captured_value_against_its_mock() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "upstream.md").read_text()
    block = doc.split("<!-- captures-table -->")[1]
    assert [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| model")] \
        == mock_vs_captured()


# -- what it changes: verify and validation against real hardware ---------------------------------------------

H100_SPEC = {
    "metadata": {"name": "real"},
    "hosts": [{"name": "cp", "address": "10.0.0.1", "roles": ["control-plane"]},
              {"name": "h100-1", "address": "10.0.0.2"}],
    "nodePools": [{"name": "h100", "hosts": ["h100-1"], "gpu": {"model": "H100-SXM5-80GB", "count": 1},
                   "sharing": {"mode": "mig", "mig": {"layout": "all-balanced"}}}],
    "gpuOperator": {"migStrategy": "mixed"},
}


def node_labels_verdict(spec, agent_labels: dict[str, str]):
    """verify's node-labels row for host h100-1 carrying ``agent_labels`` and the labels gpucluster applies."""
    labels = agent_labels | node_config(spec)["h100-1"]["labels"]
    node = {"metadata": {"name": "h100-1", "labels": labels}, "spec": {},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    states = expected.host_states(spec)
    rows = [r for r in cluster.node_checks(spec, SimpleNamespace(nodes=[node]), {"h100-1": states["h100-1"]})
            if r.check == "node-labels"]
    assert len(rows) == 1
    return rows[0], states["h100-1"]


def test_verify_passes_a_node_labelled_as_a_real_h100_labelled_itself(write_spec) -> None:
    spec = load_spec(write_spec(H100_SPEC))
    real = CAPTURES["gpu-operator-docs-h100-mixed"]["labels"]  # GFD on a real H100, all-balanced, mixed
    row, want = node_labels_verdict(spec, real)
    assert row.verdict is Verdict.passed, row
    # the check covered the sizes that differ from the mock: 9984, 20096, 40320 MiB
    assert {k: want.labels[k] for k in want.labels if k.endswith(".memory")} == {
        "nvidia.com/gpu.memory": "81559", "nvidia.com/mig-1g.10gb.memory": "9984",
        "nvidia.com/mig-2g.20gb.memory": "20096", "nvidia.com/mig-3g.40gb.memory": "40320"}


def test_verify_refuses_the_mock_sizes_a_real_h100_never_reports(write_spec) -> None:
    spec = load_spec(write_spec(H100_SPEC))
    mock = {p["name"]: p["memoryMiB"] for p in NVML_RAW["H100-SXM5-80GB"]["mig"]["profiles"]}  # go-nvml's
    labels = dict(CAPTURES["gpu-operator-docs-h100-mixed"]["labels"])
    labels["nvidia.com/mig-1g.10gb.memory"] = str(mock["1g.10gb"])
    row, _ = node_labels_verdict(spec, labels)
    assert row.verdict is Verdict.failed and "nvidia.com/mig-1g.10gb.memory" in str(row.actual)


def test_a_class_asking_for_10gi_of_mig_memory_matches_nothing_on_real_h100s(write_spec, base) -> None:
    # 1g.10gb reports 9984 MiB on a real H100 (9.75Gi): a class for ">= 10Gi" MIG devices would match
    # every one at go-nvml's mock 10240 MiB and none on hardware; validation now says so.
    base["nodePools"][0].update({"dra": True, "sharing": {"mode": "mig", "mig": {"layout": "all-1g.10gb"}}})
    base["dra"] = {"deviceClasses": [{"name": "mig-10gi", "type": "mig", "selector": {"minMemory": "10Gi"}}]}
    p = at(problems(write_spec, base), "dra.deviceClasses[0]")
    assert "DeviceClass 'mig-10gi' matches none" in p.message
    base["dra"]["deviceClasses"][0]["selector"]["minMemory"] = "9984Mi"
    load_spec(write_spec(base))  # the captured size itself is fine
