"""The GitOps bundle: rendered objects on disk, ready for ``kubectl apply -k``, Argo CD or Flux.

Layout::

    OUT/kustomization.yaml            resources: one folder per component
    OUT/<component>/kustomization.yaml
    OUT/<component>/<kind>-<namespace>-<name>.yaml
    OUT/helm/<release>.values.yaml    Helm values per pinned release
    OUT/charts.lock.yaml              release -> chart, repository, version, values digest, and the
                                      releases to install first (``after``: Flux dependsOn, Argo waves)
    OUT/nodes/node-config.yaml        labels/taints per host (data for kubelet and the stacks)
    OUT/flux/, OUT/argocd/, OUT/helmfile.yaml   with ``render --deployer``: what that deployer needs
                                      to install the releases in the lock's order (gpucluster.deployers)

Output is byte-identical for the same spec: keys keep a fixed order, files are sorted, and nothing
time- or host-dependent is written. The bundle never holds secrets.

``OUT/.gpucluster-bundle`` is the manifest of the files the last render wrote (path and sha256). A
render replaces and removes only those: a file of the user's in the folder is never deleted or
overwritten, with or without ``--force``. Bundles live in Git repositories, so the manifest is checked
as untrusted input before anything changes: a JSON object ``{"format": 1, "files": {PATH: SHA256}}``
whose every PATH is a plain relative path inside ``OUT`` (no ``..``, not absolute, not through a
symbolic link). Anything else, an empty or non-JSON marker included, stops the render with an error
naming the marker (exit 2), and nothing is written or removed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import NoReturn

import yaml

from gpucluster import atomic
from gpucluster.errors import InputError
from gpucluster.render import Rendered
from gpucluster.render.common import Obj

MARKER = ".gpucluster-bundle"


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Block style, and multi-line strings (configs, CEL) as literal blocks for readable diffs."""


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str)


def dump(data: object) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120,
                     allow_unicode=True)


def file_name(o: Obj) -> str:
    m = o["metadata"]
    parts = [o["kind"].lower(), m.get("namespace", ""), m["name"]]
    return "-".join(p for p in parts if p).replace(".", "-") + ".yaml"


def files(rendered: Rendered) -> dict[str, str]:
    """Relative path → content for the whole bundle."""
    out: dict[str, str] = {}
    comps = [c for c, objs in rendered.components.items() if objs]
    for comp in comps:
        names = []
        for o in rendered.components[comp]:
            name = file_name(o)
            if f"{comp}/{name}" in out:
                raise ValueError(f"two objects render to {comp}/{name}")
            out[f"{comp}/{name}"] = dump(o)
            names.append(name)
        out[f"{comp}/kustomization.yaml"] = dump(_kustomization(sorted(names)))
    out["kustomization.yaml"] = dump(_kustomization(comps))
    lock = []
    for rel in rendered.releases:
        values = dump(rel.values)
        out[f"helm/{rel.name}.values.yaml"] = values
        lock.append({"name": rel.name, "namespace": rel.namespace, "chart": rel.chart,
                     "repository": rel.repository, "version": rel.version,
                     "values": f"helm/{rel.name}.values.yaml",
                     "valuesSha256": hashlib.sha256(values.encode()).hexdigest(),
                     **({"after": list(rel.after)} if rel.after else {})})
    out["charts.lock.yaml"] = dump({"apiVersion": "gpucluster.dev/v1alpha1", "kind": "ChartLock", "releases": lock})
    out["nodes/node-config.yaml"] = dump(rendered.node_config)
    return dict(sorted(out.items()))


def _kustomization(resources: list[str]) -> dict:
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": resources}


MANIFEST_FORMAT = 1


def _manifest(out: Path) -> dict[str, str] | None:
    """Files the previous render wrote (path -> sha256), or None when ``out`` holds no bundle.

    Raises :class:`InputError` naming the marker for anything but a well-formed manifest (see the
    module docstring); nothing has been changed then.
    """
    marker = out / MARKER
    if not os.path.lexists(marker):
        return None
    if marker.is_symlink() or not marker.is_file():
        _bad_manifest(marker, "it is not a regular file")
    try:
        doc = json.loads(marker.read_text(errors="replace"))
    except (OSError, ValueError) as err:
        _bad_manifest(marker, f"it is not JSON ({err})")
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT or not isinstance(files, dict):
        _bad_manifest(marker, f'it is not {{"format": {MANIFEST_FORMAT}, "files": {{PATH: SHA256, ...}}}}')
    for rel, digest in files.items():
        if not isinstance(digest, str):
            _bad_manifest(marker, f"the entry {rel!r} has {digest!r} where a sha256 string belongs")
        why = _unsafe(out, rel)
        if why:
            _bad_manifest(marker, f"the entry {rel!r} {why}")
    return dict(files)


def _bad_manifest(marker: Path, why: str) -> NoReturn:
    raise InputError(
        f"{marker}: not a valid gpucluster bundle manifest: {why}. It lists the files an earlier `gpucluster "
        f"render` wrote, and only those may be replaced or removed, so nothing was written or removed. Restore "
        f"it from version control (e.g. `git checkout -- {marker.name}` in that folder), or render into an "
        f"empty folder and move your own files there yourself.")


def _unsafe(out: Path, rel: str) -> str:
    """Why ``rel`` may not be written or removed in ``out`` ("" when it may)."""
    if "\0" in rel or "\\" in rel:
        return "holds a NUL or a backslash"
    path = PurePosixPath(rel)
    if not rel or path.is_absolute():
        return "is not a relative path"
    if str(path) != rel or any(part in ("..", ".") for part in path.parts):
        return "is not a plain path inside the folder (no '..', '.' or empty parts)"
    inside = out
    for part in path.parts:
        inside = inside / part
        if inside.is_symlink():
            return f"goes through the symbolic link {inside} (to {inside.resolve()})"
    return ""


def write(rendered: Rendered, out: Path, *, force: bool = False,
          extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Write the bundle to ``out``, touching only files whose content changed.

    ``extra`` adds files (relative path → content) to the bundle, such as a deployer's
    (:mod:`gpucluster.deployers`); they are written, listed in the manifest and removed like the rest.

    A previous bundle there is updated in place (each file replaced atomically, files it wrote and the
    new one does not have removed). A folder holding other files is refused unless ``force``; even
    then, files the bundle did not write are never removed, and one standing where the bundle would
    write refuses the whole render before anything changes. Returns path → "created" | "updated" |
    "unchanged" | "removed".
    """
    content = files(rendered)
    clash = sorted(set(content) & set(extra or {}))
    if clash:
        raise ValueError(f"extra bundle files would replace rendered ones: {', '.join(clash)}")
    content = dict(sorted({**content, **(extra or {})}.items()))
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder")
    previous = _manifest(out) if out.exists() else None
    if out.exists() and previous is None and any(out.iterdir()) and not force:
        raise InputError(f"{out}: folder is not empty and holds no gpucluster bundle; "
                         "choose an empty folder or pass --force (files already there are kept)")
    ours = previous or {}
    through = {rel: why for rel in content if (why := _unsafe(out, rel))}
    if through:
        rel, why = next(iter(through.items()))
        raise InputError(f"{out}: the bundle file {rel} {why}; a render writes only plain files and folders "
                         "inside its output folder: remove or replace that link (nothing was written)")
    foreign = sorted(rel for rel in content if (out / rel).exists() and rel not in ours)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise InputError(f"{out}: {shown} would be overwritten but the bundle did not write them; move them "
                         "away (nothing was written)")
    changes = _diff(out, content, ours)
    out.mkdir(parents=True, exist_ok=True)
    for rel, what in changes.items():
        path = out / rel
        if what in ("created", "updated"):
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic.write(path, content[rel])
        elif what == "removed":
            path.unlink(missing_ok=True)
    manifest = {"format": MANIFEST_FORMAT,
                "note": "written by `gpucluster render`: the files listed here are replaced or removed on "
                        "every render; other files in this folder are left alone",
                "files": {rel: hashlib.sha256(text.encode()).hexdigest() for rel, text in content.items()}}
    atomic.write(out / MARKER, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    for rel in (r for r, w in changes.items() if w == "removed"):
        folder = (out / rel).parent
        while folder != out and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent
    return changes


def _diff(out: Path, content: dict[str, str], ours: dict[str, str]) -> dict[str, str]:
    changes = {}
    for rel, text in content.items():
        path = out / rel
        old = path.read_text(errors="replace") if path.is_file() else None
        changes[rel] = "unchanged" if old == text else ("updated" if old is not None else "created")
    for rel in ours.keys() - content.keys():
        if (out / rel).is_file():
            changes[rel] = "removed"
    return dict(sorted(changes.items()))
