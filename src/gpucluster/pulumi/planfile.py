"""``gpucluster plan``'s artefacts: what ``up`` would change, object by object, as Markdown and JSON.

Made from the engine's own preview (``pulumi preview``'s step events: the operation, and the provider's
detailed diff of each changed input path: ``StepEventMetadata.detailed_diff`` in the Python SDK's
``pulumi/automation/events.py``, pulumi 3.272.0 as installed, driving the v3.274.1 CLI), with the old and
new value of each path read from the step's old and new inputs. A Secret's values are never written (its
paths are). The files carry a mark, so that ``plan`` rewrites its own files in ``--out-dir`` and refuses
to overwrite anyone else's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpucluster import atomic
from gpucluster.errors import InputError

#: The first line of plan.md and the key of plan.json that say gpucluster wrote them.
MD_MARK = "<!-- written by gpucluster plan -->"
JSON_MARK = "gpuclusterPlan"
MASK = "(masked)"
#: What a step's operation is called in the artefacts.
OPS = {"create": "create", "update": "update", "delete": "delete", "replace": "replace",
       "create-replacement": "replace", "delete-replaced": "replace", "import": "import"}


def document(environment: str, stacks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """plan.json: per stack, its counts and each object's operation and changed fields."""
    out = []
    for s in stacks:
        steps = [_masked(st) for st in s.get("steps", []) if st["op"] not in ("delete-replaced",)]
        out.append({"stack": s["stack"], "created": s["created"], "updated": s["updated"], "deleted": s["deleted"],
                    "same": s["same"], "objects": [{"op": OPS.get(st["op"], st["op"]), "object": st["name"],
                                                    "type": st["type"], "fields": st["fields"]} for st in steps]})
    changes = sum(s["created"] + s["updated"] + s["deleted"] for s in out)
    return {JSON_MARK: 1, "environment": environment, "changes": changes, "stacks": out}


def _masked(step: Mapping[str, Any]) -> dict[str, Any]:
    if not str(step.get("type", "")).endswith(":Secret"):
        return dict(step)
    return {**step, "fields": [{**f, "old": MASK, "new": MASK} for f in step.get("fields", [])]}


def markdown(doc: Mapping[str, Any]) -> str:
    """plan.md: a summary line, then one table per stack with changes."""
    lines = [MD_MARK, f"# gpucluster plan: {doc['environment']}", ""]
    if not doc["changes"]:
        lines.append("No changes: the cluster already matches the spec.")
    for s in doc["stacks"]:
        lines.append(f"**{s['stack']}**: {s['created']} to create, {s['updated']} to update, {s['deleted']} to "
                     f"delete, {s['same']} unchanged")
    for s in doc["stacks"]:
        if not s["objects"]:
            continue
        lines += ["", f"## {s['stack']}", "", "| operation | object | changed fields |", "|---|---|---|"]
        for o in s["objects"]:
            fields = "<br>".join(f"`{_cell(f['path'])}`: {_cell(_value(f['old']))} → {_cell(_value(f['new']))}"
                                 for f in o["fields"]) or "—"
            lines.append(f"| {o['op']} | `{_cell(o['object'])}` | {fields} |")
    return "\n".join(lines) + "\n"


def _value(v: Any) -> str:
    return "(absent)" if v is None else json.dumps(v, sort_keys=True)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write(out_dir: Path, doc: Mapping[str, Any]) -> list[Path]:
    """Write plan.md and plan.json into ``out_dir``; a file of that name gpucluster did not write is refused
    (exit 2) before either is written."""
    out_dir = Path(out_dir)
    files = {out_dir / "plan.md": markdown(doc), out_dir / "plan.json": json.dumps(doc, indent=2) + "\n"}
    theirs = [p for p in files if p.exists() and not _ours(p)]
    if theirs:
        raise InputError(f"{', '.join(map(str, theirs))} exist{'s' if len(theirs) == 1 else ''} and "
                         f"{'was' if len(theirs) == 1 else 'were'} not written by `gpucluster plan`: nothing was "
                         "written. Pass another --out-dir, or move them away.")
    out_dir.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        atomic.write(path, text)
    return list(files)


def _ours(path: Path) -> bool:
    try:
        if path.is_symlink() or not path.is_file():
            return False
        if path.suffix == ".md":
            with path.open() as fh:
                return fh.readline().rstrip("\n") == MD_MARK
        return JSON_MARK in json.loads(path.read_text())
    except (OSError, ValueError, TypeError):
        return False


__all__ = ["document", "markdown", "write"]
