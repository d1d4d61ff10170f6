"""Air-gapped container images: OCI image archives written from local static binaries.

An air-gapped site (and this project's build machines) cannot pull ``registry.k8s.io``. kubeadm's
control plane runs from images, so the host layer side-loads them: every node imports image archives
with ``ctr -n k8s.io images import`` before kubeadm's preflight, init and join. The archives come from
the operator (mirrored upstream images) or are written here from binaries already on the controller:
one ``FROM scratch`` layer holding the static binary, the way upstream lays out each image (the
Kubernetes components and etcd under ``/usr/local/bin``, pause at ``/pause`` run as 65535).

Which images are needed is kubeadm's answer, not ours: ``kubeadm config images list --config FILE``
on the rendered configuration. :func:`build` refuses a reference whose tag does not name the version
the binary reports, so an image never carries a name that lies about its content.

The archives are deterministic (fixed timestamps, owners and order): the same binary gives the same
bytes, so copying them to hosts again changes nothing. Beside each archive :func:`build` keeps what it
was made from (``.<archive>.inputs``: the reference, the recipe, and the binary's and the archive's file
identity: device, inode, size, modification and change times). A re-run whose inputs and archive are
both unchanged writes nothing and reads neither binary (the host layer asks once per host on every
run); a replaced or edited binary or archive, or another reference, makes it again and checks the
version anew.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import tarfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpucluster import atomic
from gpucluster.errors import InputError, ToolError

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
#: containerd's import names an image after this annotation of its index entry (the full reference).
CONTAINERD_NAME = "io.containerd.image.name"
OCI_REF_NAME = "org.opencontainers.image.ref.name"
DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Recipe:
    """How one image is made from one binary, and how that binary tells its version.

    ``version_of`` turns the binary's version output into the version the image tag must name
    (compared without a leading ``v``; an image revision suffix such as etcd's ``-0`` is ignored).
    """

    name: str
    binary: str
    path: str
    version_args: tuple[str, ...]
    version_of: Callable[[str], str | None]
    entrypoint: tuple[str, ...] = ()
    user: str = ""
    #: For a Go program that prints no version: the module whose version Go recorded in the binary's
    #: build information is the version (``version_args`` and ``version_of`` are then unused).
    go_module: str = ""


def _match(pattern: str) -> Callable[[str], str | None]:
    def version_of(text: str) -> str | None:
        found = re.search(pattern, text)
        return found.group(1) if found else None

    return version_of


def _kube(name: str) -> Recipe:
    return Recipe(name, name, f"/usr/local/bin/{name}", ("--version",), _match(r"Kubernetes v(\S+)"))


#: The images that can be written from a local binary, by image name (the last part of the
#: repository): kubeadm's control plane and sandbox, and a smoke-test image. kube-proxy and CoreDNS
#: are not here: kube-proxy's image needs the iptables/nft user tools and CoreDNS needs kube-proxy's
#: Service routing; supply their archives or disable the addons.
RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        _kube("kube-apiserver"),
        _kube("kube-controller-manager"),
        _kube("kube-scheduler"),
        Recipe("etcd", "etcd", "/usr/local/bin/etcd", ("--version",), _match(r"etcd Version: v?(\S+)")),
        # build/pause/Dockerfile upstream: the binary at /pause, run as 65535:65535.
        Recipe("pause", "pause", "/pause", ("-v",), _match(r"pause\.c v?([0-9][^-\s]*)"),
               entrypoint=("/pause",), user="65535:65535"),
        # Not kubeadm's: a small shell-and-tools image (a static busybox, e.g. Debian's busybox-static)
        # to smoke-test pods and pod-to-pod traffic on a cluster that cannot pull anything.
        Recipe("busybox", "busybox", "/bin/busybox", ("--help",), _match(r"BusyBox v(\S+)")),
        # Not kubeadm's either: the NetworkPolicy enforcer of the flannel chart's netpol add-on, laid out as
        # upstream's image (its Dockerfile: the one static binary at /bin/netpol), for the Molecule site
        # scenario's isolation proof. The program has no --version.
        Recipe("kube-network-policies", "kube-network-policies", "/bin/netpol", (), lambda _: None,
               entrypoint=("/bin/netpol",), go_module="sigs.k8s.io/kube-network-policies"),
    )
}


@dataclass(frozen=True)
class Reference:
    """An image reference split the way this module needs it."""

    ref: str
    repository: str
    name: str
    tag: str


def parse_reference(ref: str) -> Reference:
    """``registry/path/name:tag`` → its parts; a reference without a tag (or with a digest) is refused."""
    if "@" in ref:
        raise InputError(f"image {ref!r}: digests cannot be written locally; name it by tag")
    repository, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag or not repository:
        raise InputError(f"image {ref!r} has no tag (want REPOSITORY/NAME:TAG, as `kubeadm config images list` "
                         "prints)")
    return Reference(ref, repository, repository.rsplit("/", 1)[-1], tag)


def archive_name(ref: str) -> str:
    """The archive file name for ``ref``: ``<name>_<tag>.tar`` (no path separators, stable)."""
    parts = parse_reference(ref)
    return f"{parts.name}_{parts.tag}.tar"


def _json(doc: object) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _descriptor(media_type: str, blob: bytes, **extra: object) -> dict[str, object]:
    return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(blob).hexdigest(), "size": len(blob),
            **extra}


def _tarinfo(name: str, *, size: int = 0, mode: int = 0o755, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.type = size, mode, kind
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    return info


def _layer(binary: Path, path: str, *, with_tmp: bool) -> bytes:
    """One uncompressed layer: the parent folders, the binary at ``path``, and optionally ``/tmp``."""
    out = io.BytesIO()
    data = binary.read_bytes()
    parents = [p for p in Path(path.lstrip("/")).parents if str(p) != "."]
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for folder in sorted({str(p) for p in parents}, key=lambda s: (s.count("/"), s)):
            tar.addfile(_tarinfo(folder + "/", kind=tarfile.DIRTYPE))
        if with_tmp:
            tar.addfile(_tarinfo("tmp/", mode=0o1777, kind=tarfile.DIRTYPE))
        tar.addfile(_tarinfo(path.lstrip("/"), size=len(data)), io.BytesIO(data))
    return out.getvalue()


def image_archive(ref: str, binary: Path, path: str, *, entrypoint: Sequence[str] = (), user: str = "",
                  with_tmp: bool = True) -> bytes:
    """An OCI image-layout tar holding one single-layer linux/amd64 image named ``ref``."""
    parsed = parse_reference(ref)
    layer = _layer(binary, path, with_tmp=with_tmp)
    runtime: dict[str, object] = {"Env": [DEFAULT_PATH]}
    if entrypoint:
        runtime["Entrypoint"] = list(entrypoint)
    if user:
        runtime["User"] = user
    config = _json({
        "architecture": "amd64", "os": "linux", "config": runtime,
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]},
        "history": [{"created_by": f"gpucluster: {binary.name} at {path}"}],
    })
    manifest = _json({"schemaVersion": 2, "mediaType": MEDIA_MANIFEST,
                      "config": _descriptor(MEDIA_CONFIG, config), "layers": [_descriptor(MEDIA_LAYER, layer)]})
    index = _json({"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": [
        _descriptor(MEDIA_MANIFEST, manifest, platform={"architecture": "amd64", "os": "linux"},
                    annotations={CONTAINERD_NAME: ref, OCI_REF_NAME: parsed.tag})]})
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        files = [("oci-layout", _json({"imageLayoutVersion": "1.0.0"})), ("index.json", index)]
        files += [(f"blobs/sha256/{hashlib.sha256(b).hexdigest()}", b) for b in (config, manifest, layer)]
        for folder in ("blobs/", "blobs/sha256/"):
            tar.addfile(_tarinfo(folder, kind=tarfile.DIRTYPE))
        for name, blob in files:
            tar.addfile(_tarinfo(name, size=len(blob), mode=0o644), io.BytesIO(blob))
    return out.getvalue()


def write_if_changed(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` atomically (mode 0644) unless it already holds exactly that; True when written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic.write_if_changed(path, data, mode=0o644)


#: Go's build information record (debug/buildinfo): this magic, pointer size, flags, then (Go >= 1.18,
#: flag 2) the Go version and the module list as varint-length strings.
_BUILDINFO_MAGIC = b"\xff Go buildinf:"
_BUILDINFO_HEADER = 32


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data):
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise ValueError("truncated varint")


def go_module_version(binary: Path, module: str) -> str | None:
    """The version of ``module`` that Go recorded in ``binary`` (``go version -m`` shows the same), or None.

    The main module or a dependency (a wrapper module building an upstream main package records the
    upstream module as a dependency); a ``=>`` replacement's version wins, as Go's own reader reports it.
    """
    data = binary.read_bytes()
    at = data.find(_BUILDINFO_MAGIC)
    if at < 0 or len(data) < at + _BUILDINFO_HEADER or not data[at + 15] & 0x2:
        return None  # no build information, or a layout from before Go 1.18
    pos = at + _BUILDINFO_HEADER
    try:
        strings = []
        for _ in range(2):  # the Go version, then the module list
            size, pos = _uvarint(data, pos)
            strings.append(data[pos:pos + size].decode("utf-8", "replace"))
            pos += size
    except ValueError:
        return None
    modinfo = strings[1]
    if len(modinfo) >= 33 and modinfo[-17] == "\n":  # 16-byte sentinels around the text
        modinfo = modinfo[16:-16]
    found = None
    for line in modinfo.splitlines():
        fields = line.split("\t")
        if len(fields) >= 3 and fields[0] in ("mod", "dep") and fields[1] == module:
            found = fields[2]
        elif fields[0] == "=>" and found is not None and len(fields) >= 3:
            found = fields[2]
        elif fields[0] in ("mod", "dep") and found is not None:
            break
    return found


def binary_version(recipe: Recipe, binary: Path) -> str:
    """The version ``binary`` reports, as its recipe reads it; ToolError when it cannot be read."""
    if recipe.go_module:
        if not binary.is_file():
            raise ToolError(f"{binary} does not exist")
        found = go_module_version(binary, recipe.go_module)
        if not found:
            raise ToolError(f"{binary} records no version of Go module {recipe.go_module} (`go version -m` "
                            "shows what it records): it must be built from that module")
        return found
    try:
        proc = subprocess.run([str(binary), *recipe.version_args], capture_output=True, text=True, timeout=60,
                              check=False)
    except OSError as err:
        raise ToolError(f"{binary} does not run ({err}); it must be a static linux/amd64 binary") from err
    version = recipe.version_of(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not version:
        raise ToolError(f"`{binary} {' '.join(recipe.version_args)}` reported no version "
                        f"(exit {proc.returncode}): {(proc.stdout + proc.stderr).strip()[:200]}")
    return version


def tag_version(tag: str) -> str:
    """The release a tag names: ``v1.37.2`` → ``1.37.2``, ``3.6.16-0`` → ``3.6.16`` (image revision dropped)."""
    return re.sub(r"-\d+$", "", tag.lstrip("v"))


@dataclass(frozen=True)
class Built:
    """One archive :func:`build` wrote (or found identical)."""

    ref: str
    path: Path
    binary: Path
    changed: bool


def build(refs: Sequence[str], out_dir: Path, binary_for: Callable[[str], Path]) -> list[Built]:
    """Write an archive into ``out_dir`` for every reference, from the binary ``binary_for(name)`` gives.

    Checks every reference before writing anything: an image name without a recipe, or a tag that is
    not the binary's version, is an InputError naming the image and what to do.
    """
    plans: list[tuple[Reference, Recipe, Path, Path, dict[str, object] | None]] = []
    problems: list[str] = []
    for ref in refs:
        parsed = parse_reference(ref)
        recipe = RECIPES.get(parsed.name)
        if recipe is None:
            problems.append(f"{ref}: no local binary makes a {parsed.name!r} image (known: {', '.join(RECIPES)}); "
                            "supply its archive, or disable the addon that needs it")
            continue
        binary = binary_for(recipe.binary)
        target = out_dir / archive_name(parsed.ref)
        inputs = _inputs(parsed.ref, recipe, binary)
        if inputs is not None and _stamp_matches(target, inputs):
            plans.append((parsed, recipe, binary, target, None))  # made from these very inputs, untouched since
            continue
        version = binary_version(recipe, binary)
        if tag_version(parsed.tag) != tag_version(version):
            problems.append(f"{ref}: {binary} is version {version}, not the {parsed.tag} the tag names "
                            f"(set the image tag to match the binary, or use the binary of that version)")
            continue
        plans.append((parsed, recipe, binary, target, inputs))
    if problems:
        raise InputError("cannot write these images:\n  - " + "\n  - ".join(problems))
    built = []
    for parsed, recipe, binary, target, inputs in plans:
        if inputs is None:
            built.append(Built(parsed.ref, target, binary, False))
            continue
        data = image_archive(parsed.ref, binary, recipe.path, entrypoint=recipe.entrypoint, user=recipe.user,
                             with_tmp=recipe.name != "pause")
        changed = write_if_changed(target, data)
        atomic.write(_stamp_path(target), _json({"inputs": inputs, "archive": _identity(target)}), mode=0o644)
        built.append(Built(parsed.ref, target, binary, changed))
    return built


#: Part of every archive's recorded inputs: raise it when image_archive's bytes for the same inputs change,
#: so archives written before are made again.
ARCHIVE_FORMAT = 1


def _identity(path: Path) -> list[int]:
    """What changes whenever a file's content does: device, inode, size, mtime and ctime (as git's index does)."""
    st = path.stat()
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _stamp_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.inputs")


def _inputs(ref: str, recipe: Recipe, binary: Path) -> dict[str, object] | None:
    """What the archive for ``ref`` is made from; None when the binary cannot be read (the checks then say why)."""
    try:
        real = binary.resolve(strict=True)
        identity = _identity(real)
    except OSError:
        return None
    return {"format": ARCHIVE_FORMAT, "ref": ref, "path": recipe.path, "entrypoint": list(recipe.entrypoint),
            "user": recipe.user, "with_tmp": recipe.name != "pause", "binary": os.fspath(real), "identity": identity}


def _stamp_matches(target: Path, inputs: dict[str, object]) -> bool:
    """Whether ``target`` was written from ``inputs`` and is the very file written then."""
    try:
        stamp = json.loads(_stamp_path(target).read_bytes())
        return isinstance(stamp, dict) and stamp.get("inputs") == inputs and stamp.get("archive") == _identity(target)
    except (OSError, ValueError):
        return False
