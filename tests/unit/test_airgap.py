"""Image archives for air-gapped hosts (gpucluster.airgap, `gpucluster images build`).

The archive layout is checked here against the OCI image-layout spec's rules (digests name their
blobs, the config's diff_id is the layer's digest); that containerd imports them and kubeadm's control
plane runs from them is the Molecule site scenario's job (molecule/site/tests/test_cluster.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import stat
import tarfile
from pathlib import Path

import pytest

from gpucluster import airgap
from gpucluster.errors import InputError, ToolError


def fake_binary(path: Path, version_line: str) -> Path:
    """A stand-in binary: a script that prints ``version_line`` whatever it is asked."""
    path.write_text(f"#!/bin/sh\necho '{version_line}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def bins(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        fake_binary(folder / name, "Kubernetes v1.37.2")
    fake_binary(folder / "etcd", "etcd Version: 3.6.16\nGit SHA: x")
    fake_binary(folder / "pause", "pause.c v3.10.2-v1.37.2")
    return folder


def members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else b"") for m in tar.getmembers()}  # type: ignore[union-attr]


def blob(files: dict[str, bytes], digest: str) -> bytes:
    data = files[f"blobs/sha256/{digest.removeprefix('sha256:')}"]
    assert "sha256:" + hashlib.sha256(data).hexdigest() == digest, "a blob is not named by its digest"
    return data


def test_archive_is_an_oci_layout_containerd_names_by_its_reference(bins: Path) -> None:
    ref = "localhost/gpucluster/pause:3.10.2"
    files = members(airgap.image_archive(ref, bins / "pause", "/pause", entrypoint=["/pause"], user="65535:65535",
                                         with_tmp=False))
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"] == {airgap.CONTAINERD_NAME: ref, airgap.OCI_REF_NAME: "3.10.2"}
    assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
    manifest = json.loads(blob(files, entry["digest"]))
    config = json.loads(blob(files, manifest["config"]["digest"]))
    (layer_desc,) = manifest["layers"]
    layer = blob(files, layer_desc["digest"])
    assert config["rootfs"]["diff_ids"] == [layer_desc["digest"]]  # uncompressed: diff_id = layer digest
    assert config["config"]["Entrypoint"] == ["/pause"] and config["config"]["User"] == "65535:65535"
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        (binary,) = [m for m in tar.getmembers() if m.isfile()]
        assert binary.name == "pause" and binary.mode == 0o755 and (binary.uid, binary.mtime) == (0, 0)
        assert tar.extractfile(binary).read() == (bins / "pause").read_bytes()  # type: ignore[union-attr]


def test_kube_images_put_the_binary_on_the_path_with_a_tmp(bins: Path) -> None:
    files = members(airgap.image_archive("r/kube-scheduler:v1.37.2", bins / "kube-scheduler",
                                         "/usr/local/bin/kube-scheduler"))
    index = json.loads(files["index.json"])
    layer_digest = json.loads(blob(files, index["manifests"][0]["digest"]))["layers"][0]["digest"]
    with tarfile.open(fileobj=io.BytesIO(blob(files, layer_digest))) as tar:
        names = {m.name: m for m in tar.getmembers()}
    assert {"usr", "usr/local", "usr/local/bin", "tmp", "usr/local/bin/kube-scheduler"} == set(names)
    assert names["tmp"].isdir() and names["tmp"].mode == 0o1777


def test_same_binary_same_bytes(bins: Path) -> None:
    """Deterministic: a re-run of the host layer copies nothing new."""
    one = airgap.image_archive("r/etcd:3.6.16-0", bins / "etcd", "/usr/local/bin/etcd")
    assert one == airgap.image_archive("r/etcd:3.6.16-0", bins / "etcd", "/usr/local/bin/etcd")
    assert one != airgap.image_archive("r/etcd:3.6.16-1", bins / "etcd", "/usr/local/bin/etcd")


def test_build_writes_each_archive_once(bins: Path, tmp_path: Path) -> None:
    refs = ["localhost/gpucluster/kube-apiserver:v1.37.2", "localhost/gpucluster/etcd:3.6.16-0",
            "localhost/gpucluster/pause:3.10.2"]
    out = tmp_path / "out"
    first = airgap.build(refs, out, lambda name: bins / name)
    assert [b.path.name for b in first] == ["kube-apiserver_v1.37.2.tar", "etcd_3.6.16-0.tar", "pause_3.10.2.tar"]
    assert all(b.changed for b in first)
    stamps = {b.path: b.path.stat().st_mtime_ns for b in first}
    again = airgap.build(refs, out, lambda name: bins / name)
    assert not any(b.changed for b in again)
    assert {b.path: b.path.stat().st_mtime_ns for b in again} == stamps


def test_a_rerun_from_the_same_inputs_reads_no_binary(bins: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The host layer asks on every run and every host: unchanged inputs cost neither a version check nor an
    archive; a changed binary, a touched archive or another reference is made (and checked) again."""
    refs = ["localhost/gpucluster/kube-apiserver:v1.37.2", "localhost/gpucluster/pause:3.10.2"]
    out = tmp_path / "out"
    first = airgap.build(refs, out, lambda name: bins / name)
    made: list[str] = []
    real_archive, real_version = airgap.image_archive, airgap.binary_version
    monkeypatch.setattr(airgap, "image_archive", lambda ref, *a, **k: made.append(ref) or real_archive(ref, *a, **k))
    monkeypatch.setattr(airgap, "binary_version", lambda recipe, binary: made.append(f"version {binary.name}")
                        or real_version(recipe, binary))

    again = airgap.build(refs, out, lambda name: bins / name)
    assert made == [] and [b.changed for b in again] == [False, False]
    assert [b.path for b in again] == [b.path for b in first]

    # The binary is rebuilt at another version: refused, and its old archive stays as it was.
    before = (out / "kube-apiserver_v1.37.2.tar").read_bytes()
    fake_binary(bins / "kube-apiserver", "Kubernetes v1.38.0")
    with pytest.raises(InputError, match=r"is version 1\.38\.0, not the v1\.37\.2"):
        airgap.build(refs, out, lambda name: bins / name)
    assert made == ["version kube-apiserver"]
    assert (out / "kube-apiserver_v1.37.2.tar").read_bytes() == before

    # Rebuilt at the right version with other bytes: a new archive holding them.
    made.clear()
    (bins / "kube-apiserver").write_text("#!/bin/sh\necho 'Kubernetes v1.37.2'  # rebuilt\n")
    rebuilt = airgap.build(refs, out, lambda name: bins / name)
    assert made == ["version kube-apiserver", "localhost/gpucluster/kube-apiserver:v1.37.2"]
    assert [b.changed for b in rebuilt] == [True, False]
    assert b"# rebuilt" in (out / "kube-apiserver_v1.37.2.tar").read_bytes()

    # Someone edits an archive: it is written back from its binary.
    made.clear()
    pause = out / "pause_3.10.2.tar"
    good = pause.read_bytes()
    pause.write_bytes(good[:-1] + b"x")
    restored = airgap.build(refs, out, lambda name: bins / name)
    assert made == ["version pause", "localhost/gpucluster/pause:3.10.2"]
    assert [b.changed for b in restored] == [False, True] and pause.read_bytes() == good

    # Another reference for the same file name (another registry): made again, then settled.
    made.clear()
    other = ["registry.example/kube-apiserver:v1.37.2", "localhost/gpucluster/pause:3.10.2"]
    assert [b.changed for b in airgap.build(other, out, lambda name: bins / name)] == [True, False]
    made.clear()
    assert [b.changed for b in airgap.build(other, out, lambda name: bins / name)] == [False, False] and made == []


@pytest.mark.parametrize(("ref", "says"), [
    ("localhost/gpucluster/etcd:3.7.0-0", "is version 3.6.16, not the 3.7.0-0 the tag names"),
    ("localhost/gpucluster/kube-apiserver:v1.36.3", "is version 1.37.2, not the v1.36.3"),
    ("registry.k8s.io/coredns/coredns:v1.14.6", "no local binary makes a 'coredns' image"),
    ("registry.k8s.io/kube-proxy:v1.37.2", "no local binary makes a 'kube-proxy' image"),
])
def test_an_image_that_would_lie_about_its_content_is_refused(bins: Path, tmp_path: Path, ref: str, says: str) -> None:
    refs = ["localhost/gpucluster/pause:3.10.2", ref]
    with pytest.raises(InputError, match="cannot write these images") as err:
        airgap.build(refs, tmp_path / "out", lambda name: bins / name)
    assert says in str(err.value)
    assert not (tmp_path / "out").exists(), "nothing is written when one image is refused"


@pytest.mark.parametrize("ref", ["kube-apiserver", "localhost/x/etcd@sha256:" + "0" * 64, "localhost:5000/pause"])
def test_references_need_a_tag(ref: str) -> None:
    with pytest.raises(InputError):
        airgap.parse_reference(ref)


def test_registry_port_is_not_a_tag() -> None:
    parsed = airgap.parse_reference("localhost:5000/gpucluster/pause:3.10.2")
    assert (parsed.repository, parsed.name, parsed.tag) == ("localhost:5000/gpucluster/pause", "pause", "3.10.2")


def test_recipes_read_the_versions_their_binaries_print() -> None:
    recipes = airgap.RECIPES
    assert recipes["kube-scheduler"].version_of("Kubernetes v1.37.2\n") == "1.37.2"
    assert recipes["etcd"].version_of("etcd Version: 3.6.16\nGit SHA: abc\n") == "3.6.16"
    assert recipes["pause"].version_of("pause.c v3.10.2-v1.37.2\n") == "3.10.2"
    assert recipes["busybox"].version_of("BusyBox v1.35.0 (Debian 1:1.35.0-4) multi-call binary.") == "1.35.0"
    assert airgap.tag_version("v1.37.2") == airgap.tag_version("1.37.2") == "1.37.2"
    assert airgap.tag_version("3.6.16-0") == "3.6.16"


def go_binary(path: Path, modinfo: str) -> Path:
    """Bytes laid out as Go >= 1.18 records build information (debug/buildinfo): header, then two strings."""
    def string(text: str) -> bytes:
        data, size, out = text.encode(), len(text.encode()), b""
        while size >= 0x80:
            out, size = out + bytes([size & 0x7F | 0x80]), size >> 7
        return out + bytes([size]) + data

    sentinel = "0" * 16
    header = b"\xff Go buildinf:" + bytes([8, 0x2])
    header += b"\0" * (32 - len(header))
    path.write_bytes(b"\x7fELF" + b"\0" * 60 + header + string("go1.26.8") + string(sentinel + modinfo + sentinel))
    return path


KNP_MODINFO = ("path\tsigs.k8s.io/kube-network-policies/cmd/kube-network-policies/standard\n"
               "mod\tgpucluster.local/tools/kube-network-policies\t(devel)\t\n"
               "dep\tgithub.com/florianl/go-nfqueue\tv1.3.2\th1:x=\n"
               "dep\tsigs.k8s.io/kube-network-policies\tv1.1.1\th1:y=\n"
               "dep\tsigs.k8s.io/yaml\tv1.6.0\th1:z=\n"
               "build\tCGO_ENABLED=0\n")


def test_a_go_program_without_version_output_is_named_by_the_module_go_recorded(tmp_path: Path) -> None:
    knp = go_binary(tmp_path / "kube-network-policies", KNP_MODINFO)
    assert airgap.go_module_version(knp, "sigs.k8s.io/kube-network-policies") == "v1.1.1"
    assert airgap.go_module_version(knp, "gpucluster.local/tools/kube-network-policies") == "(devel)"
    assert airgap.go_module_version(knp, "sigs.k8s.io/kwok") is None
    # a replaced module reports its replacement's version, as `go version -m` does
    replaced = go_binary(tmp_path / "r", KNP_MODINFO.replace(
        "v1.1.1\th1:y=\n", "v1.1.1\t\n=>\tsigs.k8s.io/kube-network-policies\tv1.1.0\th1:w=\n"))
    assert airgap.go_module_version(replaced, "sigs.k8s.io/kube-network-policies") == "v1.1.0"
    assert airgap.go_module_version(fake_binary(tmp_path / "sh", "x"), "sigs.k8s.io/kube-network-policies") is None

    built = airgap.build(["localhost/gpucluster/kube-network-policies:v1.1.1"], tmp_path / "out", lambda _: knp)
    files = members(built[0].path.read_bytes())
    (entry,) = json.loads(files["index.json"])["manifests"]
    manifest = json.loads(blob(files, entry["digest"]))
    config = json.loads(blob(files, manifest["config"]["digest"]))
    assert config["config"]["Entrypoint"] == ["/bin/netpol"]  # where upstream's image has it
    layer = members(blob(files, manifest["layers"][0]["digest"]))
    assert layer["bin/netpol"] == knp.read_bytes()
    with pytest.raises(InputError, match=re.escape("is version v1.1.1, not the v1.0.0 the tag names")):
        airgap.build(["localhost/gpucluster/kube-network-policies:v1.0.0"], tmp_path / "out", lambda _: knp)
    with pytest.raises(ToolError, match=re.escape("records no version of Go module sigs.k8s.io/kube-network-policies")):
        airgap.build(["localhost/gpucluster/kube-network-policies:v1.1.1"], tmp_path / "out",
                     lambda _: tmp_path / "sh")


def test_cli_build_prints_what_it_wrote_and_fails_cleanly(bins: Path, tmp_path: Path, cli) -> None:
    out = tmp_path / "out"
    ok = cli("images", "build", "--bin-dir", str(bins), "--out-dir", str(out), "-o", "json",
             "localhost/gpucluster/kube-scheduler:v1.37.2")
    assert ok.exit_code == 0, ok.output
    (row,) = json.loads(ok.stdout)
    assert row["changed"] is True and Path(row["path"]).is_file()
    missing = cli("images", "build", "--bin-dir", str(tmp_path), "--out-dir", str(out), "r/etcd:3.6.16-0")
    assert missing.exit_code == 2 and "has no etcd binary" in missing.output and "Traceback" not in missing.output
