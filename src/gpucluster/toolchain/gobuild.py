"""Running Go: finding a usable ``go``, building wrapper modules, running controller-gen."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gpucluster.errors import GoMissing, ToolError
from gpucluster.toolchain.versions import MIN_GO, Tool, wrappers_root

Progress = Callable[[str], None]

_GO_HINT = (
    "Go ≥ {min} is needed to build the toolchain: apt-get install golang (Debian ≥ 13), "
    "or put a Go ≥ {min} toolchain's bin/ folder on PATH (or set GPUCLUSTER_GO to the go binary)"
)


#: Where Go lands when installed from the upstream tarball but not put on PATH.
FALLBACK_GO: tuple[str, ...] = ("/usr/local/go/bin/go",)


def find_go() -> tuple[Path, str]:
    """Return (go binary, version such as ``go1.26.8``); raise :class:`GoMissing` otherwise."""
    hint = _GO_HINT.format(min=".".join(map(str, MIN_GO)))
    candidates = [os.environ.get("GPUCLUSTER_GO"), shutil.which("go"), *FALLBACK_GO]
    go = next((Path(c) for c in candidates if c and Path(c).is_file() and os.access(c, os.X_OK)), None)
    if go is None:
        raise GoMissing(f"no `go` found. {hint}")
    try:
        out = subprocess.run(
            [str(go), "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        raise GoMissing(f"{go} does not run ({err}). {hint}") from err
    match = re.match(r"go(\d+)\.(\d+)", out)
    if not match or (int(match[1]), int(match[2])) < MIN_GO:
        raise GoMissing(f"{go} is {out or 'of unknown version'}. {hint}")
    return go, out


def go_env(go: Path, *, cgo: bool = False) -> dict[str, str]:
    """Environment for reproducible, static, module-mode builds that never switch toolchains.

    ``go``'s folder leads PATH so that tools calling ``go`` themselves (controller-gen) find it.
    ``-mod=readonly``: a build never rewrites a committed go.mod and fails on a checksum go.sum
    lacks instead of fetching it silently. ``cgo`` is for the one tool that needs it.
    """
    env = dict(os.environ)
    env["PATH"] = f"{go.parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(
        GOWORK="off",
        GOTOOLCHAIN="local",
        CGO_ENABLED="1" if cgo else "0",
        # -mod=readonly: the committed go.mod/go.sum of each wrapper module pin every dependency and its
        # hash; a build never resolves or records anything new (a missing sum fails the build).
        GOFLAGS="-mod=readonly -buildvcs=false",
    )
    return env


#: Why each tool needs a C compiler (for the message when none is found).
_WHY_CC = {
    "nvidia-oracle": "nvidia-oracle is built with cgo (go-nvml's NVML bindings)",
    "nvidia-device-plugin": "NVIDIA's device plugin is built with cgo (go-nvml's NVML bindings)",
    "nvml-stub": "the NVML stub is a C shared library (go build -buildmode=c-shared)",
    "pause": "pause is Kubernetes' pause.c, compiled static (it needs the static C library, libc6-dev)",
}


def find_c_compiler(tool: str = "nvidia-oracle") -> str:
    """The C compiler to use (``$CC``, else gcc or cc on PATH); raise :class:`GoMissing` if none."""
    wanted = os.environ.get("CC")
    for name in ([wanted] if wanted else ["gcc", "cc"]):
        found = shutil.which(name.split()[0])
        if found:
            return found
    raise GoMissing(
        f"no C compiler ({wanted or 'gcc or cc'}) found: {_WHY_CC.get(tool, tool + ' needs one')}. "
        "Install one (apt-get install gcc) or set CC"
    )


def _run_logged(
    cmd: Sequence[str], cwd: Path, log: Path, label: str, progress: Progress | None, *, cgo: bool = False
) -> None:
    """Run ``cmd`` with output to ``log``, reporting every minute; raise ToolError on failure."""
    go, _ = find_go()
    start = time.monotonic()
    with log.open("a") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, env=go_env(go, cgo=cgo), stdout=fh, stderr=subprocess.STDOUT)
        next_note = 60.0
        while proc.poll() is None:
            time.sleep(0.5)
            elapsed = time.monotonic() - start
            if progress and elapsed >= next_note:
                progress(f"  … still building {label} ({elapsed:.0f} s)")
                next_note += 60.0
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise ToolError(f"building {label} failed (exit {proc.returncode}); full log: {log}\n{tail}")


def _module_dir(module: str) -> Path:
    module_dir = wrappers_root() / module
    if not (module_dir / "go.mod").is_file():
        raise ToolError(f"wrapper module {module_dir}/go.mod is missing (set GPUCLUSTER_TOOLS_SRC?)")
    return module_dir


def build_go(tools: Sequence[Tool], out_dir: Path, log: Path, progress: Progress | None = None) -> None:
    """Build the main packages of ``tools`` (all from one wrapper module) into ``out_dir``.

    A tool with ``generate`` first runs that generator (``go run PKG -out DIR``, DIR inside
    ``out_dir``) and builds with the ``-overlay`` it writes, so generated files never land in the
    source tree.
    """
    modules = {t.module for t in tools}
    if len(modules) != 1:
        raise ValueError(f"build_go needs tools of one wrapper module, got {sorted(modules)}")
    go, _ = find_go()
    module_dir = _module_dir(modules.pop())
    cgo = any(t.cgo for t in tools)
    if cgo:
        find_c_compiler(next(t.name for t in tools if t.cgo))
    label = ", ".join(t.name for t in tools)
    ldflags = ["-s", "-w"]
    for tool in tools:
        ldflags += [f for f in tool.ldflags if f not in ldflags]
    cmd = [str(go), "build", "-trimpath", "-ldflags", " ".join(ldflags), "-o", f"{out_dir}/"]
    tags = sorted({tag for t in tools for tag in t.tags})
    if tags:
        cmd[2:2] = ["-tags", ",".join(tags)]
    generators = sorted({t.generate for t in tools if t.generate})
    if len(generators) > 1:
        raise ValueError(f"one wrapper module has one generator, got {generators}")
    if generators:
        generated = out_dir / ".generated"
        _run_logged([str(go), "run", generators[0], "-out", str(generated)], module_dir, log, label, progress)
        overlay = generated / "overlay.json"
        if not overlay.is_file():
            raise ToolError(f"{generators[0]} wrote no {overlay.name}; log: {log}")
        cmd[2:2] = ["-overlay", str(overlay)]
    cmd += [t.package for t in tools]
    _run_logged(cmd, module_dir, log, label, progress, cgo=cgo)
    for tool in tools:
        built = out_dir / default_binary_name(tool.package)
        if built.name != tool.binary:
            built.rename(out_dir / tool.binary)


def build_c_shared(tool: Tool, out_dir: Path, log: Path, progress: Progress | None = None) -> None:
    """Build ``tool.package`` as a C shared library ``out_dir/tool.binary`` (one package per build)."""
    go, _ = find_go()
    module_dir = _module_dir(tool.module)
    find_c_compiler(tool.name)
    ldflags = " ".join(["-s", "-w", *tool.ldflags])
    cmd = [str(go), "build", "-trimpath", "-buildmode=c-shared", "-ldflags", ldflags,
           "-o", str(out_dir / tool.binary), tool.package]
    _run_logged(cmd, module_dir, log, tool.name, progress, cgo=True)
    (out_dir / tool.binary).with_suffix(".h").unlink(missing_ok=True)  # the C header go build writes beside it


def module_source(module: str, path: str) -> Path:
    """The folder of Go module ``path`` at the version wrapper module ``module`` requires.

    ``go mod download`` verifies the download against the wrapper's committed go.sum (-mod=readonly),
    so the source is exactly what the pin names.
    """
    go, _ = find_go()
    try:
        proc = subprocess.run([str(go), "mod", "download", "-json", path], cwd=wrappers_root() / module,
                              env=go_env(go), capture_output=True, text=True, timeout=1800, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        raise ToolError(f"go mod download {path} (tools/{module}) did not run: {err}") from err
    try:
        folder = json.loads(proc.stdout).get("Dir", "") if proc.stdout.strip() else ""
    except ValueError:
        folder = ""
    if proc.returncode != 0 or not folder:
        raise ToolError(f"go mod download {path} in tools/{module} failed (exit {proc.returncode}): "
                        f"{(proc.stdout + proc.stderr).strip()[-500:]}")
    return Path(folder)


def build_c(tool: Tool, out_dir: Path, log: Path) -> None:
    """Compile a C program of an upstream Go module, static, as upstream's Makefile does.

    ``tool.package`` is ``MODULE:FILE`` (e.g. ``k8s.io/kubernetes:build/pause/linux/pause.c``); the
    program is built with ``-Os -Wall -Werror -static -DVERSION=<tool.version>`` and stripped.
    """
    module_path, _, file = tool.package.partition(":")
    source = module_source(tool.module, module_path) / file
    if not source.is_file():
        raise ToolError(f"{module_path} has no {file} at the pinned version (tools/{tool.module}/go.mod)")
    cc = find_c_compiler(tool.name)
    target = out_dir / tool.binary
    for cmd in ([cc, "-Os", "-Wall", "-Werror", "-static", f"-DVERSION={tool.version}", "-o", str(target),
                 str(source)], ["strip", str(target)]):
        with log.open("a") as fh:
            fh.write("$ " + " ".join(cmd) + "\n")
            fh.flush()
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=600, check=False)
        if proc.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise ToolError(f"building {tool.name} failed ({cmd[0]} exit {proc.returncode}); log: {log}\n{tail}")


def default_binary_name(package: str) -> str:
    """The file name ``go build -o DIR/`` gives a main package (``.../server/v3`` → ``server``)."""
    parts = package.split("/")
    if len(parts) > 1 and re.fullmatch(r"v[2-9]\d*|v[1-9]\d+", parts[-1]):
        return parts[-2]
    return parts[-1]


def generate_crds(controller_gen: Path, tool: Tool, out_dir: Path, log: Path, progress: Progress | None = None) -> None:
    """Run controller-gen over ``tool.crd_packages`` (resolved in its wrapper module) into ``out_dir``.

    Descriptions are dropped (``maxDescLen=0`` in the default options): validation is unchanged and
    the Prometheus-family CRDs shrink from megabytes to a size the local API server loads quickly.
    """
    if not tool.crd_packages:
        raise ToolError(f"{tool.name} names no API packages for controller-gen (crd_packages)")
    cmd = [str(controller_gen), tool.crd_options]
    cmd += [f"paths={pkg}" for pkg in tool.crd_packages]
    cmd += [f"output:crd:dir={out_dir}"]
    _run_logged(cmd, _module_dir(tool.module), log, f"{tool.name} CRDs", progress)
    if not any(out_dir.glob("*.yaml")):
        raise ToolError(f"controller-gen produced no CRDs for {tool.name}; log: {log}")
