"""Backups of the stack state: both stacks' checkpoints in one file, and back.

``gpucluster backup stacks`` writes what ``pulumi stack export`` prints for each stack into one JSON
document (mode 0600). The export is made without ``--show-secrets``: a value the engine holds as a secret
stays encrypted under the stacks' passphrase (PULUMI_CONFIG_PASSPHRASE, else the ``passphrase`` file of the
state folder), so the file carries no secret in clear, and restoring it needs that same passphrase.

``gpucluster restore stacks`` reads such a file as untrusted input (:func:`read`): it must be one of ours,
of the environment being restored, and every resource in it must belong to that environment's stacks;
then each stack's deployment goes back through ``pulumi stack import``. A state that already holds
resources is replaced only when the user says so (``--yes``): the restore is for a state that was lost or
broken, and the next ``up`` compares the restored state with the cluster as usual.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpucluster.errors import InputError

KIND = "gpucluster.dev/stack-backup"
VERSION = 1
STACKS = ("platform", "tenants")
#: A backup larger than this is not read (a real one of a large cluster is a few MiB).
MAX_BYTES = 256 * 1024 * 1024


def take(engine: Any, environment: str) -> dict[str, Any]:
    """Both stacks' exports, as one document. InputError when neither stack has state."""
    if not any(engine.state_resources(n, pending=False) for n in STACKS):
        raise InputError(f"no stack state of {environment} in {engine.dir}: nothing was applied from there, so there "
                         "is nothing to back up. Pass the --state-dir `gpucluster up` used.")
    return {
        "kind": KIND,
        "version": VERSION,
        "environment": environment,
        "takenAt": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "stacks": {n: engine.export_state(n) for n in STACKS},
    }


def write(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` (mode 0600), never over an existing file: a file there is not ours to replace."""
    from gpucluster import atomic

    if not path.parent.is_dir():
        raise InputError(f"{path.parent} is not a folder: create it first, or name a file in a folder that exists")
    exists = InputError(f"{path} exists: a backup is never written over a file; name a new one")
    if path.exists() or path.is_symlink():
        raise exists
    tmp = atomic.reserve(path)  # ours alone: the only file this function removes
    try:
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        atomic.publish_new(tmp, path, exists)
    finally:
        tmp.unlink(missing_ok=True)


def read(path: Path, environment: str) -> dict[str, Any]:
    """The backup at ``path``, checked to be one of ours for ``environment``; InputError naming the problem."""
    where = str(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise InputError(f"{where}: larger than {MAX_BYTES >> 20} MiB, not a stack backup of gpucluster")
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{where}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{where}: cannot be read ({err})") from None
    except ValueError as err:
        raise InputError(f"{where}: not JSON ({err}); a stack backup is the file `gpucluster backup stacks` wrote") \
            from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise InputError(f"{where}: not a stack backup of gpucluster (kind {KIND!r} expected)")
    if doc.get("version") != VERSION:
        raise InputError(f"{where}: backup format version {doc.get('version')!r}; this gpucluster reads {VERSION}")
    if doc.get("environment") != environment:
        raise InputError(f"{where}: a backup of the stacks of {doc.get('environment')!r}, not of {environment!r}: "
                         "restore it with the inventory it was taken from")
    if not isinstance(doc.get("takenAt"), str):
        raise InputError(f"{where}: takenAt: expected the time the backup was taken")
    stacks = doc.get("stacks")
    if not isinstance(stacks, dict) or sorted(stacks) != sorted(STACKS):
        raise InputError(f"{where}: stacks: expected exactly {', '.join(STACKS)}")
    for name in STACKS:
        _check_stack(where, name, environment, stacks[name])
    return doc


def _check_stack(where: str, name: str, environment: str, export: Any) -> None:
    """Each stack's export has the shape ``pulumi stack export`` prints, and every URN in it is of that stack:
    ``urn:pulumi:<environment>::gpucluster-<name>::...``."""
    at = f"{where}: stacks.{name}"
    if not isinstance(export, dict) or not isinstance(export.get("version"), int) \
            or not isinstance(export.get("deployment"), dict):
        raise InputError(f"{at}: expected {{version: <int>, deployment: {{...}}}} as `pulumi stack export` prints")
    deployment = export["deployment"]
    resources = deployment.get("resources")
    if resources is None:  # a stack with no resource: the export leaves the key out
        resources = []
    if not isinstance(resources, list):
        raise InputError(f"{at}.deployment.resources: expected a list")
    prefix = f"urn:pulumi:{environment}::gpucluster-{name}::"
    for i, resource in enumerate(resources):
        urn = resource.get("urn") if isinstance(resource, dict) else None
        if not isinstance(urn, str) or not urn.startswith(prefix):
            raise InputError(f"{at}.deployment.resources[{i}]: URN {urn!r} is not of the {name} stack of "
                             f"{environment} (expected {prefix}...)")


def restore(engine: Any, doc: dict[str, Any], *, replace: bool) -> dict[str, int]:
    """Import each stack's deployment; returns the resources per stack. A state that holds resources is
    replaced only with ``replace`` (InputError otherwise, before any stack is touched)."""
    held = {n: len(engine.state_resources(n, pending=False)) for n in STACKS}
    if any(held.values()) and not replace:
        raise InputError(f"the stack state in {engine.dir} holds {held['platform']} platform and {held['tenants']} "
                         "tenants resources: restoring replaces it. Pass --yes to replace it, or --state-dir to "
                         "restore into another folder")
    counts = {}
    for name in STACKS:
        export = doc["stacks"][name]
        engine.import_state(name, export)
        counts[name] = len(export["deployment"].get("resources") or [])
    return counts
