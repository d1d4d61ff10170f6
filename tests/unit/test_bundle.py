"""The GitOps bundle: layout, determinism, kustomization coverage, no secrets, safe overwrite."""

from __future__ import annotations

import json

import pytest
import yaml

from gpucluster import bundle
from gpucluster.cli import entrypoint
from gpucluster.errors import InputError
from gpucluster.render import render
from gpucluster.spec import load_spec


def tree(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_render_twice_is_byte_identical(tmp_path, local_inventory, capsys):
    assert entrypoint(["render", "-i", str(local_inventory), "--out-dir", str(tmp_path / "a")]) == 0
    assert entrypoint(["render", "-i", str(local_inventory), "--out-dir", str(tmp_path / "b")]) == 0
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    assert entrypoint(["render", "-i", str(local_inventory), "--out-dir", str(tmp_path / "a")]) == 0
    assert "(no changes)" in capsys.readouterr().out


def test_kustomizations_cover_every_file(tmp_path, local_inventory):
    out = tmp_path / "b"
    bundle.write(render(load_spec(local_inventory)), out)
    root = yaml.safe_load((out / "kustomization.yaml").read_text())
    listed = set()
    for comp in root["resources"]:
        k = yaml.safe_load((out / comp / "kustomization.yaml").read_text())
        for f in k["resources"]:
            doc = yaml.safe_load((out / comp / f).read_text())
            assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"]
            listed.add(f"{comp}/{f}")
    manifests = {p for p in tree(out) if p.endswith(".yaml") and not p.endswith("kustomization.yaml")
                 and not p.startswith(("helm/", "nodes/")) and p != "charts.lock.yaml"}
    assert manifests == listed


def test_lock_file_names_every_release(tmp_path, lab_inventory):
    import hashlib

    out = tmp_path / "b"
    bundle.write(render(load_spec(lab_inventory)), out)
    lock = yaml.safe_load((out / "charts.lock.yaml").read_text())
    names = {r["name"] for r in lock["releases"]}
    assert names == {"pod-network", "gpu-operator", "volcano", "network-operator"}  # lab has no DRA pools
    # The install order travels with the bundle (Flux dependsOn / Argo CD sync waves).
    after = {r["name"]: r.get("after", []) for r in lock["releases"]}
    assert after == {"pod-network": [], "gpu-operator": ["pod-network"], "volcano": ["pod-network"],
                     "network-operator": ["pod-network", "gpu-operator"]}
    for r in lock["releases"]:
        assert r["repository"] and r["version"] and r["chart"]
        values = (out / r["values"]).read_bytes()
        assert hashlib.sha256(values).hexdigest() == r["valuesSha256"]


def test_no_secrets_in_bundle(tmp_path, local_inventory):
    out = tmp_path / "b"
    bundle.write(render(load_spec(local_inventory)), out)
    for path, data in tree(out).items():
        assert b"kind: Secret" not in data, path
        assert b"BEGIN " not in data and b"password" not in data.lower(), path


def test_refuses_unrelated_folder(tmp_path, local_inventory):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="holds no gpucluster bundle"):
        bundle.write(render(load_spec(local_inventory)), tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_removed_objects_are_reported(tmp_path, local_inventory):
    spec = load_spec(local_inventory)
    out = tmp_path / "b"
    bundle.write(render(spec), out)
    smaller = spec.model_copy(deep=True)
    smaller.tenants = smaller.tenants[:1]
    changes = bundle.write(render(smaller), out)
    assert changes["tenants/namespace-inference.yaml"] == "removed"
    assert not (out / "tenants" / "namespace-inference.yaml").exists()


def test_invalid_spec_writes_nothing(tmp_path, write_spec, base):
    base["nodePools"][0]["gpu"]["model"] = "nope"
    out = tmp_path / "out"
    assert entrypoint(["render", "-i", str(write_spec(base)), "--out-dir", str(out)]) == 2
    assert not out.exists()


def test_force_writes_alongside_and_never_deletes_a_users_file(tmp_path, local_inventory, lab_inventory):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "tenants").mkdir()
    (tmp_path / "tenants" / "extra-policy.yaml").write_text("kind: mine")
    bundle.write(render(load_spec(local_inventory)), tmp_path, force=True)
    # a different spec: the local tenants' files go, the user's files stay, without --force now
    changes = bundle.write(render(load_spec(lab_inventory)), tmp_path)
    assert changes["tenants/namespace-inference.yaml"] == "removed"
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert (tmp_path / "tenants" / "extra-policy.yaml").read_text() == "kind: mine"
    assert "notes.txt" not in changes and "tenants/extra-policy.yaml" not in changes


def test_a_users_file_where_the_bundle_writes_refuses_before_writing(tmp_path, local_inventory):
    (tmp_path / "kustomization.yaml").write_text("resources: [mine.yaml]")
    with pytest.raises(InputError, match=r"kustomization\.yaml would be overwritten but the bundle did not write"):
        bundle.write(render(load_spec(local_inventory)), tmp_path, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kustomization.yaml"]  # nothing half-written


# -- the manifest is untrusted input (bundles live in Git): a bad one changes nothing -------------------


@pytest.fixture
def rendered(local_inventory):
    return render(load_spec(local_inventory))


@pytest.fixture
def bundle_dir(tmp_path, rendered):
    """A rendered bundle, a file of the user's in it, and a file of the user's next to it."""
    out = tmp_path / "out"
    bundle.write(rendered, out)
    (out / "notes.txt").write_text("mine")
    (tmp_path / "victim.txt").write_text("outside")
    return out


def _with(out, entries):
    """The bundle's own manifest plus ``entries``: every real file stays listed, so only the entry is wrong."""
    doc = json.loads((out / bundle.MARKER).read_text())
    return json.dumps({**doc, "files": {**doc["files"], **entries}})


@pytest.mark.parametrize(("marker", "why"), [
    (lambda out: "", "not JSON"),                                # empty: once vouched for every file
    (lambda out: "written by gpucluster render\n", "not JSON"),  # plain text, as before manifests existed
    (lambda out: '{"format": 1, "files": ["a.yaml"]}', "is not {"),  # files must map path -> sha256
    (lambda out: '{"format": 2, "files": {}}', "is not {"),      # a format we do not know
    (lambda out: _with(out, {"kustomization.yaml": 5}), "where a sha256 string belongs"),
    (lambda out: _with(out, {"../victim.txt": ""}), "not a plain path inside"),  # the file next to the folder
    (lambda out: _with(out, {"tenants/../../victim.txt": ""}), "not a plain path inside"),
    (lambda out: _with(out, {"./notes.txt": ""}), "not a plain path inside"),
    (lambda out: _with(out, {"": ""}), "not a relative path"),
    (lambda out: _with(out, {str(out.parent / "victim.txt"): ""}), "not a relative path"),  # absolute
], ids=["empty", "plain-text", "files-a-list", "format-2", "digest-not-a-string", "dot-dot", "dot-dot-inside",
        "dot", "empty-path", "absolute"])
def test_a_bad_manifest_names_the_marker_and_changes_nothing(bundle_dir, rendered, marker, why):
    (bundle_dir / bundle.MARKER).write_text(marker(bundle_dir))
    before = tree(bundle_dir.parent)
    with pytest.raises(InputError, match=rf"{bundle.MARKER}: not a valid gpucluster bundle manifest: .*{why}") as err:
        bundle.write(rendered, bundle_dir)
    assert "nothing was written or removed" in str(err.value) and "git checkout" in str(err.value)
    assert tree(bundle_dir.parent) == before  # notes.txt and ../victim.txt included


def test_a_manifest_entry_through_a_symlink_out_of_the_folder_is_refused(tmp_path, bundle_dir, rendered):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "victim.txt").write_text("outside")
    (bundle_dir / "link").symlink_to(elsewhere)
    (bundle_dir / bundle.MARKER).write_text(_with(bundle_dir, {"link/victim.txt": ""}))
    with pytest.raises(InputError, match=rf"'link/victim.txt' goes through the symbolic link {bundle_dir}/link"):
        bundle.write(rendered, bundle_dir)
    assert (elsewhere / "victim.txt").read_text() == "outside"


def test_a_bundle_folder_replaced_by_a_symlink_is_never_written_through(tmp_path, bundle_dir, rendered):
    import shutil

    elsewhere = tmp_path / "elsewhere"
    shutil.move(bundle_dir / "tenants", elsewhere)
    (bundle_dir / "tenants").symlink_to(elsewhere)
    before = tree(elsewhere)
    with pytest.raises(InputError, match=r"tenants/.* goes through the symbolic link .*nothing was written"):
        bundle.write(rendered, bundle_dir)
    assert tree(elsewhere) == before


def test_the_cli_exits_2_naming_the_marker(bundle_dir, local_inventory, capsys):
    (bundle_dir / bundle.MARKER).write_text("")
    assert entrypoint(["render", "-i", str(local_inventory), "--out-dir", str(bundle_dir)]) == 2
    assert f"{bundle_dir / bundle.MARKER}: not a valid gpucluster bundle manifest" in capsys.readouterr().err
    assert (bundle_dir / "notes.txt").read_text() == "mine"
