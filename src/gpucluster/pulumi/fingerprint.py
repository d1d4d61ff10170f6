"""Whether a stack's inputs are byte-identical to those of its last successful update.

A converged ``up`` still starts the Pulumi CLI and the Kubernetes provider for each stack (the provider
also fetches the cluster's whole OpenAPI document when it is configured), only to report every resource
unchanged. It can be skipped, and reported as "unchanged (inputs identical to the last update)", when
everything that ``pulumi up`` (without ``--refresh``) compares is what it was when that stack's last
update succeeded. That ``up`` compares what the program registers with what the stack's state records,
through the provider configured for one cluster: the provider's ``Diff`` compares the new inputs with the
old live object *recorded in the state*, never the live cluster (pulumi-kubernetes v4.25.0
``provider/pkg/provider/provider.go`` ``Diff``, and ``helm_release.go`` ``Diff`` for releases). So the
fingerprint covers, byte for byte:

- the stack plan: every object, release (chart, version, repository, values, order), node patch, skipped
  entry and adopted object, plus the content of every local chart folder a release installs from;
- the provider's settings and the cluster: the kubeconfig path the program gives the provider and the
  content of every kubeconfig file the provider would read, the context, and the cluster's identity
  (the uid of its ``kube-system`` Namespace, which a rebuilt cluster at the same address does not share);
- the program and the engine: every source file of the ``gpucluster`` package, the Pulumi SDKs' versions,
  the interpreter, the CLI and provider binaries (path, size, modification time), and the engine's
  environment (``PULUMI_*``, ``KUBE*``, ``HELM_*`` variables and the settings the engine adds);
- the stack's state: its checkpoint file and stack settings file, as the last update left them.

A record is written only after an update that succeeded and removed before any other runs, so an
interrupted or failed update (which also changes the checkpoint) is never taken for a converged one.
Unknown parts (no provider binary of our own to identify) mean "run the engine". Any change in any of
these runs the stack (``tests/unit/test_stack_fingerprint.py`` changes each one).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gpucluster import atomic
from gpucluster.pulumi.plan import StackPlan

#: The record of a stack's last successful update, in its work folder (removed with the stack state).
RECORD = "gpucluster-last-update.json"
#: Environment variables that reach the engine, the provider or Helm, and so take part.
ENV_PREFIXES = ("PULUMI_", "KUBE", "HELM_")
#: What changes with every run and says nothing about the stack (the CLI's own settings stay in).
ENV_IGNORED = frozenset({"PATH"})
PACKAGE = Path(__file__).resolve().parents[1]


def _default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError(f"cannot fingerprint a {type(value).__name__}")


def digest(doc: Any) -> str:
    """sha256 of ``doc`` as canonical JSON (sorted keys; paths as strings, sets sorted)."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=_default)
    return hashlib.sha256(text.encode()).hexdigest()


def file_digest(path: Path) -> str | None:
    """sha256 of a file's bytes; None when it does not exist."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def tree_digest(root: Path, pattern: str = "*") -> str:
    """sha256 over every file under ``root`` matching ``pattern``: relative paths and contents, in order."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob(pattern) if p.is_file()):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def binary_identity(path: Path | None) -> dict[str, Any] | None:
    """Which executable this is, cheaply: resolved path, size and modification time (None: not found)."""
    if path is None:
        return None
    real = Path(path).resolve()
    st = real.stat()
    return {"path": str(real), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def plan_doc(plan: StackPlan) -> dict[str, Any]:
    """The stack plan as data, with the content of each local chart folder it installs from."""
    doc = dataclasses.asdict(plan)
    doc["charts"] = {str(src.local_path): tree_digest(src.local_path)
                     for srcs in plan.releases.values() for src in srcs if src.local_path is not None}
    return doc


def kubeconfig_files(kubeconfig: str | None, env: Mapping[str, str]) -> list[Path]:
    """The kubeconfig files the provider reads: the path it is given, else ``$KUBECONFIG``'s, else the default."""
    if kubeconfig:
        return [Path(kubeconfig).expanduser()]
    if env.get("KUBECONFIG"):
        return [Path(p).expanduser() for p in env["KUBECONFIG"].split(os.pathsep) if p]
    return [Path.home() / ".kube" / "config"]


def engine_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment variables that take part (see :data:`ENV_PREFIXES`), secrets only as digests."""
    out = {}
    for key, value in env.items():
        if key.startswith(ENV_PREFIXES) and key not in ENV_IGNORED:
            out[key] = hashlib.sha256(value.encode()).hexdigest() if "PASSPHRASE" in key else value
    return out


def sdk_versions() -> dict[str, str]:
    """Versions of the Pulumi SDKs the program runs on."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("pulumi", "pulumi_kubernetes"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = ""
    return out


def inputs(plan: StackPlan, *, kubeconfig: str | None, context: str | None, cluster_uid: str,
           binaries: Iterable[Path | None], env: Mapping[str, str], sources: Path | None = None) -> str | None:
    """The digest of everything but the stack's state (see the module docstring); None when a part is unknown
    (a binary that cannot be identified, a cluster without an identity), which means the engine must run.

    ``sources``: the program's source folder (default: the ``gpucluster`` package this runs from).
    """
    ids = [binary_identity(b) for b in binaries]
    if any(i is None for i in ids) or not cluster_uid:
        return None
    doc = {
        "plan": plan_doc(plan),
        "kubeconfig": kubeconfig,
        "kubeconfig_files": {str(p): file_digest(p) for p in kubeconfig_files(kubeconfig, env)},
        "context": context,
        "cluster": cluster_uid,
        "program": tree_digest(sources or PACKAGE, "*.py"),
        "sdk": sdk_versions(),
        "python": sys.version,
        "binaries": ids,
        "env": engine_env(env),
    }
    return digest(doc)


def state_digest(files: Iterable[Path]) -> str:
    """The digest of the stack's state files (checkpoint, stack settings) as they are now."""
    return digest({str(p): file_digest(p) for p in files})


def recorded(work: Path) -> dict[str, Any]:
    """The record of the last successful update in ``work`` ({} when there is none or it is unreadable)."""
    try:
        data = json.loads((work / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def unchanged(work: Path, inputs_digest: str | None, state: str) -> dict[str, Any] | None:
    """The record when ``inputs_digest`` and ``state`` are those it holds; None otherwise (run the engine)."""
    rec = recorded(work)
    if inputs_digest is None or rec.get("inputs") != inputs_digest or rec.get("state") != state:
        return None
    return rec


def forget(work: Path) -> None:
    """Remove the record (before an update runs: until it succeeds, nothing is known to be converged)."""
    (work / RECORD).unlink(missing_ok=True)


def remember(work: Path, inputs_digest: str | None, state: str, resources: int) -> None:
    """Record a successful update: its inputs, the state it left, and how many resources that state holds."""
    if inputs_digest is None:
        return
    work.mkdir(parents=True, exist_ok=True)
    atomic.write(work / RECORD, json.dumps({"inputs": inputs_digest, "state": state, "resources": resources}) + "\n")
