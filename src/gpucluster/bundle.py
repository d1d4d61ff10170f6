"""The GitOps bundle: rendered objects on disk, ready for ``kubectl apply -k``, Argo CD or Flux.

Layout::

    OUT/kustomization.yaml            resources: one folder per component
    OUT/<component>/kustomization.yaml
    OUT/<component>/<kind>-<namespace>-<name>.yaml
    OUT/helm/<release>.values.yaml    Helm values per pinned release
    OUT/charts.lock.yaml              release -> chart, repository, version, values digest, and the
                                      releases to install first (``after``: Flux dependsOn, Argo waves)
    OUT/nodes/node-config.yaml        labels/taints per host (data for kubelet and the stacks)

Output is byte-identical for the same spec: keys keep a fixed order, files are sorted, and nothing
time- or host-dependent is written. The bundle never holds secrets.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import yaml

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


def write(rendered: Rendered, out: Path, *, force: bool = False) -> dict[str, str]:
    """Write the bundle to ``out``, touching only files whose content changed.

    A previous bundle there is updated in place (each file replaced atomically, stale files
    removed); an unrelated non-empty folder is refused unless ``force``. Returns
    path → "created" | "updated" | "unchanged" | "removed".
    """
    content = files(rendered)
    if out.exists():
        if not out.is_dir():
            raise InputError(f"{out}: exists and is not a folder")
        if any(out.iterdir()) and not (out / MARKER).exists() and not force:
            raise InputError(f"{out}: folder is not empty and holds no gpucluster bundle; "
                             "choose an empty folder or pass --force")
    changes = _diff(out, content)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by `gpucluster render`; files here are replaced on every render\n")
    for rel, what in changes.items():
        path = out / rel
        if what in ("created", "updated"):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(content[rel])
            os.replace(tmp, path)
        elif what == "removed":
            path.unlink()
    for folder in sorted((p for p in out.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(folder.iterdir()):
            folder.rmdir()
    return changes


def _diff(out: Path, content: dict[str, str]) -> dict[str, str]:
    old: dict[str, str] = {}
    if out.exists():
        for p in out.rglob("*"):
            if p.is_file() and p.name != MARKER:
                old[str(p.relative_to(out))] = p.read_text(errors="replace")
    changes = {}
    for rel, text in content.items():
        changes[rel] = "unchanged" if old.get(rel) == text else ("updated" if rel in old else "created")
    for rel in old.keys() - content.keys():
        changes[rel] = "removed"
    return dict(sorted(changes.items()))
