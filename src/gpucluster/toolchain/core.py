"""Resolving tools: the cache first, then a matching binary on PATH, else a build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import click

from gpucluster.errors import ToolError, ToolMissing
from gpucluster.toolchain import cache, gobuild
from gpucluster.toolchain.versions import DEFAULT_TOOLS, TOOLS, Tool


def _tool(name: str) -> Tool:
    try:
        return TOOLS[name]
    except KeyError:
        raise ToolError(f"unknown tool {name!r}; known tools: {', '.join(TOOLS)}") from None


def on_path(tool: Tool) -> Path | None:
    """A binary named like ``tool`` on PATH whose reported version matches exactly, if any."""
    if not tool.version_args or not tool.version_text:
        return None
    found = shutil.which(tool.binary)
    if not found:
        return None
    try:
        proc = subprocess.run(
            [found, *tool.version_args], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    output = proc.stdout + proc.stderr
    if not output.endswith("\n"):
        output += "\n"
    return Path(found) if proc.returncode == 0 and tool.version_text in output else None


def locate(name: str) -> Path | None:
    """The usable path of tool ``name`` (cache, then PATH), or None. Never builds."""
    tool = _tool(name)
    return cache.cached_path(tool) or on_path(tool)


def path_of(name: str) -> Path:
    """The usable path of tool ``name``; raises :class:`ToolMissing` saying how to get it."""
    found = locate(name)
    if found is None:
        tool = _tool(name)
        raise ToolMissing(
            f"{name} {tool.version} is not built yet: run `gpucluster tools install {name}` "
            f"(builds it from Go modules into {cache.version_dir(tool)})"
        )
    return found


def _with_needs(names: Iterable[str]) -> list[Tool]:
    """The tools named plus what they need to build, in registry order."""
    wanted: set[str] = set()
    stack = list(names)
    while stack:
        tool = _tool(stack.pop())
        if tool.name not in wanted:
            wanted.add(tool.name)
            stack.extend(tool.needs)
    return [t for t in TOOLS.values() if t.name in wanted]


def _echo(message: str) -> None:
    click.echo(message, err=True)


def ensure(names: list[str] | None = None, *, progress: bool = True) -> dict[str, Path]:
    """Make the named tools (default: all non-optional ones) usable; return name → path.

    Cached tools and exact-version binaries on PATH are used as they are; the rest are built from
    the wrapper modules under ``tools/``, one ``go build`` per wrapper module.
    """
    requested = list(names) if names else list(DEFAULT_TOOLS)
    say = _echo if progress else None
    result: dict[str, Path] = {}
    pending: list[Tool] = []
    for tool in _with_needs(requested):
        found = locate(tool.name)
        if found is not None:
            result[tool.name] = found
            if say:
                say(f"✓ {tool.name} {tool.version}: {found}")
        else:
            pending.append(tool)
    if pending:
        gobuild.find_go()  # fail before anything starts when Go is missing
        for tool in pending:
            if tool.kind == "c" or tool.cgo:
                gobuild.find_c_compiler(tool.name)
    # One build per wrapper module and kind: a C program of the k8s module is not part of its go build.
    groups: dict[tuple[str, str], list[Tool]] = {}
    for tool in pending:
        groups.setdefault((tool.module, tool.kind), []).append(tool)
    for (module, _), tools in groups.items():
        result.update(_build(module, tools, result, say))
    return {name: result[name] for name in requested}


def _build(
    module: str, tools: list[Tool], done: dict[str, Path], say: gobuild.Progress | None
) -> dict[str, Path]:
    """Build one wrapper module's pending tools into the cache."""
    version = tools[0].version
    if len({t.version for t in tools}) == 1:
        label = f"{', '.join(t.name for t in tools)} {version}"
    else:  # one module, tools of their own versions (nvidia-oracle and NVIDIA's device plugin)
        label = ", ".join(f"{t.name} {t.version}" for t in tools)
    if say:
        say(f"→ building {label} (from tools/{module}) …")
    start = time.monotonic()
    _, go_version = gobuild.find_go()
    log = cache.logs_dir() / f"{module}-{version}-{os.getpid()}.log"
    built: dict[str, Path] = {}
    with cache.staging(module) as tmp:
        if tools[0].kind == "crds":
            out = tmp / "crds"
            out.mkdir()
            gobuild.generate_crds(done["controller-gen"], tools[0], out, log, say)
        elif tools[0].kind == "c":
            for tool in tools:
                gobuild.build_c(tool, tmp, log)
        elif tools[0].kind == "c-shared":
            for tool in tools:
                gobuild.build_c_shared(tool, tmp, log, say)
        else:
            gobuild.build_go(tools, tmp, log, say)
        elapsed = time.monotonic() - start
        info = {"seconds": round(elapsed, 1), "go": go_version, "platform": sys.platform}
        for tool in tools:
            produced = tmp / ("crds" if tool.kind == "crds" else tool.binary)
            built[tool.name] = cache.install(tool, produced, info)
    log.unlink(missing_ok=True)
    if say:
        say(f"✓ built {label} in {elapsed:.1f} s")
    return built
