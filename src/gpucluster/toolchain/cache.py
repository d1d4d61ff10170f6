"""Per-user cache of built tools: ``<root>/tools/<name>/<version>/<binary>``.

A version folder only ever appears complete: builds write into a temporary sibling folder,
drop a ``.complete`` marker into it last, and rename it into place.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpucluster.toolchain.versions import Tool

MARKER = ".complete"


def cache_root() -> Path:
    """``$GPUCLUSTER_CACHE``, else ``$XDG_CACHE_HOME/gpucluster``, else ``~/.cache/gpucluster``."""
    explicit = os.environ.get("GPUCLUSTER_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "gpucluster"


def version_dir(tool: Tool) -> Path:
    """The folder holding one tool version (complete only when the marker is there)."""
    return cache_root() / "tools" / tool.name / tool.version


def cached_path(tool: Tool) -> Path | None:
    """The cached binary (or artifact folder) of ``tool``, or None when it is not fully built."""
    vdir = version_dir(tool)
    target = vdir / tool.binary
    if (vdir / MARKER).is_file() and target.exists():
        return target
    return None


def logs_dir() -> Path:
    """Where build logs go (kept after a failure so the user can read them)."""
    path = cache_root() / "tools" / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def staging(prefix: str) -> Iterator[Path]:
    """A temporary folder inside the cache (same filesystem, so renames are atomic)."""
    base = cache_root() / "tools"
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{prefix}-", dir=base))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def install(tool: Tool, produced: Path, info: dict[str, object]) -> Path:
    """Move ``produced`` (a built file or folder) into the cache for ``tool`` atomically.

    ``info`` (build seconds, Go version, …) is stored in the marker. Returns the final path.
    """
    vdir = version_dir(tool)
    vdir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{tool.version}-", dir=vdir.parent))
    try:
        os.replace(produced, tmp / tool.binary)
        marker = {"name": tool.name, "version": tool.version, "built_at": time.time(), **info}
        (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        if vdir.exists():  # an incomplete leftover (no marker) or a concurrent build's result
            shutil.rmtree(vdir, ignore_errors=True)
        os.replace(tmp, vdir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return vdir / tool.binary


def marker_info(tool: Tool) -> dict[str, object]:
    """The marker's content for a cached tool ({} when it is not cached or unreadable)."""
    try:
        data = json.loads((version_dir(tool) / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
