"""Deployer bundles (`render --deployer`): structure, order from the lock, determinism, refusals.

The schemas of the deployers themselves (Flux's and Argo CD's CRDs on a real API server, helmfile's
own loader) are checked in tests/integration/test_deployers_live.py.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from gpucluster import bundle, deployers
from gpucluster.deployers.common import GitSource, waves
from gpucluster.render import render
from gpucluster.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "inventories" / "lab"
DRA = REPO / "tests" / "data" / "dra"
GIT_URL = "https://git.example.com/platform/clusters.git"
GIT = {"flux": ["--git-path", "deploy/lab"], "argocd": ["--git-path", "deploy/lab", "--git-url", GIT_URL],
       "helmfile": [], "kustomize": []}


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def docs(root: Path, pattern: str) -> dict[str, dict]:
    """``kind/name`` → object for every YAML file under ``root`` matching ``pattern``."""
    out = {}
    for path in sorted(root.glob(pattern)):
        doc = yaml.safe_load(path.read_text())
        out[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return out


@pytest.fixture
def rendered(cli, tmp_path):
    """Render an inventory with a deployer into tmp_path/<deployer>; returns (out, lock)."""

    def run(deployer: str, inventory: Path = LAB, *extra: str) -> tuple[Path, dict]:
        out = tmp_path / deployer
        result = cli("render", "-i", inventory, "--out-dir", out, "--deployer", deployer, *GIT[deployer], *extra)
        assert result.exit_code == 0, result.output
        return out, yaml.safe_load((out / "charts.lock.yaml").read_text())

    return run


def test_flux_installs_every_locked_chart_with_its_values_in_the_locks_order(rendered):
    out, lock = rendered("flux")
    flux = out / "flux"
    releases = docs(flux, "releases/*/helmrelease-*.yaml")
    repos = {d["metadata"]["name"]: d["spec"] for d in docs(flux, "helmrepository-*.yaml").values()}
    assert len(releases) == len(lock["releases"]) == 4
    for entry in lock["releases"]:
        hr = releases[f"HelmRelease/gpucluster-{entry['name']}"]["spec"]
        chart = hr["chart"]["spec"]
        assert (chart["chart"], chart["version"]) == (entry["chart"], entry["version"])
        assert repos[chart["sourceRef"]["name"]]["url"] == entry["repository"]
        assert (hr["releaseName"], hr["targetNamespace"], hr["storageNamespace"]) == (entry["name"],) + (
            entry["namespace"],) * 2
        assert [d["name"] for d in hr.get("dependsOn", [])] == [f"gpucluster-{a}" for a in entry.get("after", [])]
        # the values reach the release through the generated ConfigMap, byte for byte the lock's file
        folder = flux / "releases" / entry["name"]
        values = (folder / "values.yaml").read_bytes()
        assert values == (out / entry["values"]).read_bytes()
        assert hashlib.sha256(values).hexdigest() == entry["valuesSha256"]
        gen = yaml.safe_load((folder / "kustomization.yaml").read_text())
        assert gen["configMapGenerator"] == [{"name": hr["valuesFrom"][0]["name"], "namespace": "flux-system",
                                              "files": ["values.yaml"]}]
        ref = yaml.safe_load((folder / gen["configurations"][0]).read_text())["nameReference"][0]
        assert ref["kind"] == "ConfigMap" and ref["fieldSpecs"] == [{"path": "spec/valuesFrom/name",
                                                                     "kind": "HelmRelease"}]
    assert len(repos) == len({r["repository"] for r in lock["releases"]}) == 3


def test_flux_kustomizations_wait_for_namespaces_releases_and_the_crds_each_folder_needs(rendered):
    out, lock = rendered("flux")
    ks = {name.split("/", 1)[1]: d["spec"] for name, d in docs(out / "flux", "kustomization-*.yaml").items()}
    deps = {name: [d["name"] for d in spec.get("dependsOn", [])] for name, spec in ks.items()}
    assert deps["gpucluster-namespaces"] == []
    for entry in lock["releases"]:
        name = f"gpucluster-release-{entry['name']}"
        assert deps[name] == ["gpucluster-namespaces", *(f"gpucluster-release-{a}" for a in entry.get("after", []))]
        assert ks[name]["path"] == f"./deploy/lab/flux/releases/{entry['name']}" and ks[name]["wait"] is True
    # Volcano's Queues need the volcano release's CRDs; the NicClusterPolicy the network operator's,
    # and its attachment lives in the tenant namespace `training`, which the tenants folder creates.
    assert deps["gpucluster-volcano"] == ["gpucluster-namespaces", "gpucluster-release-volcano"]
    assert deps["gpucluster-network-operator"] == ["gpucluster-namespaces", "gpucluster-tenants",
                                                   "gpucluster-release-network-operator"]
    assert deps["gpucluster-gpu-operator"] == ["gpucluster-namespaces"]  # ConfigMaps: before the operator reads them
    for folder in ("namespaces", "gpu-operator", "volcano", "tenants", "monitoring"):
        assert ks[f"gpucluster-{folder}"]["path"] == f"./deploy/lab/{folder}"
        assert (out / folder / "kustomization.yaml").is_file()
    listed = yaml.safe_load((out / "flux" / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(p.name for p in (out / "flux").glob("*-*.yaml"))
    entry = yaml.safe_load((out / "flux" / "entry.yaml").read_text())
    assert (entry["kind"], entry["spec"]["path"], entry["spec"]["sourceRef"]) == (
        "Kustomization", "./deploy/lab/flux", {"kind": "GitRepository", "name": "flux-system"})


@pytest.mark.parametrize("deployer", ["flux", "argocd"])
def test_a_folder_whose_crds_the_operator_makes_later_is_applied_in_two_steps(rendered, deployer):
    # nv-ipam's IPPool CRD appears only once the network operator reconciles the NicClusterPolicy
    # (AFTER_KINDS): one apply of the whole folder would be refused and never get that far.
    out, _ = rendered(deployer)
    overlays = out / deployer / "overlays"
    first = yaml.safe_load((overlays / "network-operator" / "kustomization.yaml").read_text())
    late = yaml.safe_load((overlays / "network-operator-late" / "kustomization.yaml").read_text())
    assert first["resources"] == late["resources"] == ["../../../network-operator"]
    dropped = {(yaml.safe_load(p["patch"])["kind"], yaml.safe_load(p["patch"])["$patch"]) for p in first["patches"]}
    kept_out = {yaml.safe_load(p["patch"])["kind"] for p in late["patches"]}
    assert dropped == {("IPPool", "delete")}
    assert kept_out == {"NicClusterPolicy", "NetworkAttachmentDefinition"}  # the late step is the IPPools alone
    assert sorted(p.name for p in overlays.iterdir()) == ["network-operator", "network-operator-late"]
    if deployer == "flux":
        ks = {d["metadata"]["name"]: d["spec"] for d in docs(out / "flux", "kustomization-*.yaml").values()}
        assert ks["gpucluster-network-operator"]["path"] == "./deploy/lab/flux/overlays/network-operator"
        assert ks["gpucluster-network-operator-late"]["path"] == "./deploy/lab/flux/overlays/network-operator-late"
        assert {"name": "gpucluster-network-operator"} in ks["gpucluster-network-operator-late"]["dependsOn"]
    else:
        apps = {d["metadata"]["name"]: d for d in docs(out / "argocd", "application-*.yaml").values()}
        first_app, late_app = apps["gpucluster-network-operator"], apps["gpucluster-network-operator-late"]
        wave = {a: int(apps[a]["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]) for a in apps}
        assert wave["gpucluster-network-operator-late"] > wave["gpucluster-network-operator"]
        assert late_app["spec"]["source"]["path"] == "deploy/lab/argocd/overlays/network-operator-late"
        # it fails until the operator made the CRD: it retries without limit, the others five times
        assert late_app["spec"]["syncPolicy"]["retry"]["limit"] == -1
        assert first_app["spec"]["syncPolicy"]["retry"]["limit"] == 5


def test_argocd_waves_follow_the_lock_and_values_come_from_the_bundle(rendered):
    out, lock = rendered("argocd")
    apps = {name.split("/", 1)[1]: d for name, d in docs(out / "argocd", "application-*.yaml").items()}
    wave = {name: int(a["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]) for name, a in apps.items()}
    assert wave["gpucluster-namespaces"] == 0 and min(wave.values()) == 0
    files = tree(out)
    for entry in lock["releases"]:
        app = apps[f"gpucluster-release-{entry['name']}"]["spec"]
        chart, values = app["sources"]
        assert (chart["repoURL"], chart["chart"], chart["targetRevision"]) == (
            entry["repository"], entry["chart"], entry["version"])
        assert chart["helm"]["releaseName"] == entry["name"]
        assert app["destination"] == {"server": "https://kubernetes.default.svc", "namespace": entry["namespace"]}
        assert values == {"repoURL": GIT_URL, "targetRevision": "HEAD", "ref": "values"}
        # $values is the repository root: the path names the bundle's own values file
        (path,) = chart["helm"]["valueFiles"]
        assert path == f"$values/deploy/lab/{entry['values']}" and entry["values"] in files
        for after in entry.get("after", []):
            assert wave[f"gpucluster-release-{entry['name']}"] > wave[f"gpucluster-release-{after}"] > 0
    assert wave["gpucluster-volcano"] > wave["gpucluster-release-volcano"]
    assert wave["gpucluster-network-operator"] > max(wave["gpucluster-release-network-operator"],
                                                     wave["gpucluster-tenants"])
    assert wave["gpucluster-gpu-operator"] < wave["gpucluster-release-gpu-operator"]
    assert apps["gpucluster-tenants"]["spec"]["source"] == {"repoURL": GIT_URL, "targetRevision": "HEAD",
                                                            "path": "deploy/lab/tenants"}
    entry_app = yaml.safe_load((out / "argocd" / "entry.yaml").read_text())
    assert entry_app["spec"]["source"]["path"] == "deploy/lab/argocd"


def test_helmfile_releases_need_their_after_by_namespace_and_use_the_bundles_values(rendered):
    out, lock = rendered("helmfile")
    doc = yaml.safe_load((out / "helmfile.yaml").read_text())
    repos = {r["name"]: r["url"] for r in doc["repositories"]}
    ns = {r["name"]: r["namespace"] for r in lock["releases"]}
    assert [r["name"] for r in doc["releases"]] == [r["name"] for r in lock["releases"]]
    for release, entry in zip(doc["releases"], lock["releases"], strict=True):
        repo, chart = release["chart"].split("/")
        assert (repos[repo], chart, release["version"]) == (entry["repository"], entry["chart"], entry["version"])
        assert release["values"] == [entry["values"]] and (out / entry["values"]).is_file()
        # helmfile reads a need without a namespace as one in the needing release's own namespace
        assert release.get("needs", []) == [f"{ns[a]}/{a}" for a in entry.get("after", [])]
    assert doc["helmDefaults"]["createNamespace"] is False and doc["helmDefaults"]["wait"] is True


def test_waves_are_the_depth_of_after():
    rels = render(load_spec(DRA)).releases + render(load_spec(LAB)).releases[2:]
    assert waves(rels) == {"pod-network": 0, "gpu-operator": 1, "dra-driver": 1, "volcano": 1,
                           "network-operator": 2}


@pytest.mark.parametrize("deployer", ["flux", "argocd", "helmfile"])
def test_deployer_bundles_are_byte_identical_secret_free_and_leave_the_plain_bundle_alone(rendered, cli, tmp_path,
                                                                                        deployer):
    out, _ = rendered(deployer)
    again = tmp_path / "again"
    assert cli("render", "-i", LAB, "--out-dir", again, "--deployer", deployer, *GIT[deployer]).exit_code == 0
    assert tree(out) == tree(again)
    plain = tmp_path / "plain"
    assert cli("render", "-i", LAB, "--out-dir", plain).exit_code == 0
    added = {p: c for p, c in tree(out).items() if p not in tree(plain)}
    # every other file, the kustomizations `kubectl apply -k OUT` reads included, is unchanged
    assert {p: c for p, c in tree(out).items() if p not in added and p != bundle.MARKER} == {
        p: c for p, c in tree(plain).items() if p != bundle.MARKER}
    assert added and all(p.startswith(f"{deployer}/") or p == "helmfile.yaml" for p in added)
    manifest = json.loads((out / bundle.MARKER).read_text())["files"]
    assert {p: hashlib.sha256(c).hexdigest() for p, c in added.items()}.items() <= manifest.items()
    for text in added.values():
        for doc in yaml.safe_load_all(text):
            assert not (isinstance(doc, dict) and doc.get("kind") == "Secret")


def test_switching_deployers_removes_the_previous_deployers_files(rendered, cli):
    out, _ = rendered("flux")
    assert cli("render", "-i", LAB, "--out-dir", out, "--deployer", "argocd", *GIT["argocd"]).exit_code == 0
    assert not (out / "flux").exists() and (out / "argocd" / "entry.yaml").is_file()


def test_the_git_path_is_found_from_the_repository_that_holds_the_bundle(cli, tmp_path):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    out = tmp_path / "repo" / "clusters" / "lab"
    assert cli("render", "-i", LAB, "--out-dir", out, "--deployer", "flux", "--flux-source", "platform").exit_code == 0
    entry = yaml.safe_load((out / "flux" / "entry.yaml").read_text())
    assert entry["spec"]["path"] == "./clusters/lab/flux"
    assert entry["spec"]["sourceRef"] == {"kind": "GitRepository", "name": "platform"}
    # at the repository root itself, paths start at the root
    out = tmp_path / "repo"
    assert cli("render", "-i", LAB, "--out-dir", out, "--deployer", "flux", "--force").exit_code == 0
    assert yaml.safe_load((out / "flux" / "entry.yaml").read_text())["spec"]["path"] == "./flux"


def _lab_with(tmp_path: Path, **charts: dict) -> Path:
    """The lab spec with some components' chart references replaced (key: spec section path, dots)."""
    data = yaml.safe_load((LAB / "cluster.yaml").read_text())
    for key, chart in charts.items():
        node = data
        for part in key.split("."):
            node = node.setdefault(part, {})
        node["chart"] = chart
    folder = tmp_path / "inv"
    folder.mkdir(exist_ok=True)
    (folder / "cluster.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return folder


VOLCANO = "scheduling.volcano"


def test_oci_registries_are_spelled_as_each_deployer_reads_them(rendered, tmp_path):
    inv = _lab_with(tmp_path, **{VOLCANO: {"repository": "oci://registry.site.internal/charts", "chart": "volcano",
                                           "version": "1.15.1"}})
    out, _ = rendered("flux", inv)
    repo = docs(out / "flux", "helmrepository-*.yaml")["HelmRepository/gpucluster-registry-site-internal-charts"]
    assert repo["spec"] == {"interval": "1h", "url": "oci://registry.site.internal/charts", "type": "oci"}
    out, _ = rendered("argocd", inv)
    app = yaml.safe_load((out / "argocd" / "application-argocd-gpucluster-release-volcano.yaml").read_text())
    assert app["spec"]["sources"][0]["repoURL"] == "registry.site.internal/charts"  # no oci:// for Argo CD
    out, _ = rendered("helmfile", inv)
    doc = yaml.safe_load((out / "helmfile.yaml").read_text())
    assert {"name": "gpucluster-registry-site-internal-charts", "url": "registry.site.internal/charts",
            "oci": True} in doc["repositories"]


@pytest.mark.parametrize("deployer", ["flux", "argocd"])
def test_a_local_chart_folder_is_refused_where_the_deployer_cannot_read_it(cli, tmp_path, deployer):
    inv = _lab_with(tmp_path, **{VOLCANO: {"repository": "/srv/charts", "chart": "volcano", "version": "1.15.1"}})
    result = cli("render", "-i", inv, "--out-dir", tmp_path / "out", "--deployer", deployer, *GIT[deployer])
    assert result.exit_code == 2
    assert "scheduling.volcano.chart.repository ('/srv/charts', release volcano)" in result.output
    assert "local chart folder" in result.output and "--deployer helmfile" in result.output
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_helmfile_reads_an_absolute_local_chart_folder_and_refuses_a_relative_one(rendered, cli, tmp_path):
    inv = _lab_with(tmp_path, **{VOLCANO: {"repository": "/srv/charts", "chart": "volcano", "version": "1.15.1"}})
    out, _ = rendered("helmfile", inv)
    volcano = next(r for r in yaml.safe_load((out / "helmfile.yaml").read_text())["releases"]
                   if r["name"] == "volcano")
    assert volcano["chart"] == "/srv/charts/volcano"
    inv = _lab_with(tmp_path, **{VOLCANO: {"repository": "charts", "chart": "volcano", "version": "1.15.1"}})
    result = cli("render", "-i", inv, "--out-dir", tmp_path / "rel", "--deployer", "helmfile")
    assert result.exit_code == 2 and "relative local path" in result.output


@pytest.mark.parametrize(("args", "message"), [
    # Argo CD Applications must name the repository
    (["--deployer", "argocd", "--git-path", "x"], "give --git-url URL"),
    # a token in the URL would put a secret into Git
    (["--deployer", "argocd", "--git-path", "x", "--git-url", "https://bot:s3cret@git.example.com/r.git"],
     "must hold no secrets"),
    (["--deployer", "flux", "--git-path", "../elsewhere"], "without '..'"),
    (["--deployer", "flux", "--git-path", "x", "--flux-source", "Flux_System"], "is not a Flux GitRepository name"),
    # outside a Git repository the bundle's place in it is unknown
    (["--deployer", "flux"], "is not inside a Git repository"),
    # flags of another deployer are a usage error, not silently ignored
    (["--deployer", "flux", "--git-path", "x", "--git-url", GIT_URL], "--git-url does not apply to --deployer flux"),
    (["--deployer", "helmfile", "--git-path", "x"], "--git-path does not apply to --deployer helmfile"),
])
def test_git_location_mistakes_exit_2_and_write_nothing(cli, tmp_path, args, message):
    out = tmp_path / "out"
    result = cli("render", "-i", LAB, "--out-dir", out, *args)
    assert result.exit_code == 2 and message in result.output, result.output
    assert not out.exists()


def test_kustomize_is_the_default_and_adds_nothing(cli, tmp_path):
    spec = load_spec(LAB)
    rendered_spec = render(spec)
    assert deployers.files("kustomize", spec, rendered_spec, bundle.files(rendered_spec)) == {}
    assert cli("render", "-i", LAB, "--out-dir", tmp_path / "a").exit_code == 0
    assert cli("render", "-i", LAB, "--out-dir", tmp_path / "b", "--deployer", "kustomize").exit_code == 0
    assert tree(tmp_path / "a") == tree(tmp_path / "b")


def test_the_dra_driver_release_orders_the_deviceclasses_after_it(tmp_path):
    spec = load_spec(DRA)
    rendered_spec = render(spec)
    files = deployers.files("flux", spec, rendered_spec, bundle.files(rendered_spec), GitSource(path=""))
    ks = yaml.safe_load(files["flux/kustomization-flux-system-gpucluster-dra-driver.yaml"])
    assert ks["spec"]["path"] == "./dra-driver"
    assert {"name": "gpucluster-release-dra-driver"} in ks["spec"]["dependsOn"]
