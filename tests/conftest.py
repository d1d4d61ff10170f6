"""Shared fixtures: paths, a minimal valid spec to mutate, and a helper to write specs to disk."""

from __future__ import annotations

import copy
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

# Per-tier wall time and the slowest tests of every run (reports/ci-times.json, printed at the end).
from ci_timing import (  # noqa: F401  (pytest finds hooks by name in a conftest)
    pytest_configure,
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)

REPO = Path(__file__).resolve().parents[1]
LOCAL = REPO / "inventories" / "local"
LAB = REPO / "inventories" / "lab"

BASE_SPEC = {
    "metadata": {"name": "t"},
    "hosts": [
        {"name": "cp", "address": "10.0.0.1", "roles": ["control-plane"]},
        {"name": "g1", "address": "10.0.0.2"},
        {"name": "g2", "address": "10.0.0.3"},
    ],
    "nodePools": [
        {"name": "h100", "hosts": ["g1"], "gpu": {"model": "H100-SXM5-80GB", "count": 8}},
        {"name": "l4", "hosts": ["g2"], "gpu": {"model": "L4", "count": 4},
         "sharing": {"mode": "time-slicing", "replicas": 4}},
    ],
    "tenants": [{"name": "team-a", "quota": {"gpus": 8}}],
}


#: Fixtures that run a Go-built tool: a test using one is marked ``toolchain``.
TOOL_FIXTURES = {"oracle", "lw", "kube", "molecule_env", "nvml_stub", "device_plugin_binary", "dra_cel",
                 "helmfile_check", "containerd", "nvidia_ctk", "helm"}
#: Test folders that need the toolchain as a whole.
TOOL_FOLDERS = ("integration", "molecule")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs the toolchain ``toolchain``, so ``-m 'not toolchain'`` is the fast
    tier that runs on a machine without it (and never skips for a missing tool); and every test of
    tests/unit ``unit``, the marker scripts/test.sh splits the suite's two processes by."""
    for item in items:
        folder = Path(str(item.fspath)).relative_to(REPO).parts[1:2]
        if set(getattr(item, "fixturenames", ())) & TOOL_FIXTURES or (folder and folder[0] in TOOL_FOLDERS):
            item.add_marker(pytest.mark.toolchain)
        if folder and folder[0] == "unit":
            item.add_marker(pytest.mark.unit)


def require_tool(name: str) -> Path:
    """The built tool ``name``; skip (or fail with GPUCLUSTER_REQUIRE_TOOLS=1) when it is not built."""
    from gpucluster.toolchain import locate

    found = locate(name)
    if found is None:
        reason = f"toolchain not built ({name}): run `gpucluster tools install {name}`"
        if os.environ.get("GPUCLUSTER_REQUIRE_TOOLS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


@pytest.fixture(scope="session")
def oracle():
    """A client of the built nvidia-oracle (NVIDIA's GFD / device-plugin code over a mock NVML)."""
    from gpucluster.simulator.oracle import Oracle

    return Oracle(require_tool("nvidia-oracle"))


@pytest.fixture(scope="session")
def dra_cel() -> Path:
    """The built dra-cel tool: Kubernetes' DRA selector evaluation and ParseQuantity over JSON."""
    return require_tool("dra-cel")


@pytest.fixture(scope="session")
def helmfile_check() -> Path:
    """The built helmfile-check tool: helmfile's own loader and release plan over a helmfile.yaml."""
    return require_tool("helmfile-check")


@pytest.fixture(scope="session")
def nvidia_ctk() -> Path:
    """nvidia-ctk from scripts/nvidia-container-toolkit-build.sh (built on first use, as Molecule does)."""
    if os.environ.get("GPUCLUSTER_REQUIRE_TOOLS") != "1" and not (REPO / ".git").exists():
        pytest.skip("not a repository checkout: scripts/nvidia-container-toolkit-build.sh is not here")
    out = subprocess.run([REPO / "scripts" / "nvidia-container-toolkit-build.sh"], capture_output=True,
                         text=True, check=False, timeout=1800)
    if out.returncode != 0:
        reason = f"nvidia-container-toolkit-build.sh failed: {out.stderr.strip()[-500:]}"
        if os.environ.get("GPUCLUSTER_REQUIRE_TOOLS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return Path(out.stdout.strip()) / "nvidia-ctk"


@pytest.fixture(scope="module", params=["containerd-1.7", "containerd-2.0", "containerd-2"])
def containerd(request: pytest.FixtureRequest) -> Path:
    """A containerd binary of one release the host layer supports beyond Debian's 1.6.

    Optional even where the toolchain is required: scripts/test.sh does not build them (three more
    containerd builds on a cold cache; the cold toolchain build is near CI's limit). Skipped, with the
    command that builds them, when absent.
    """
    from gpucluster.toolchain import locate

    found = locate(request.param)
    if found is None:
        pytest.skip(f"optional tool {request.param} not built (scripts/test.sh leaves it out): run "
                    "`gpucluster tools install containerd-1.7 containerd-2.0 containerd-2`")
    return found


@pytest.fixture(scope="session")
def helm() -> Path:
    """The built helm CLI (Helm v3.22.0, unmodified): `helm template` of charts whose source a Go module holds."""
    return require_tool("helm")


@pytest.fixture(scope="session")
def nvml_stub() -> Path:
    """The built NVML stub library (libnvidia-ml.so.1 over go-nvml's mock GPUs)."""
    return require_tool("nvml-stub")


@pytest.fixture(scope="session")
def device_plugin_binary() -> Path:
    """NVIDIA's device plugin binary, built from its Go module at the pinned release."""
    return require_tool("nvidia-device-plugin")


@pytest.fixture
def base() -> dict:
    return copy.deepcopy(BASE_SPEC)


@pytest.fixture
def write_spec(tmp_path):
    """Write a spec (dict or raw text) as tmp/<n>/cluster.yaml and return the folder."""
    counter = {"n": 0}

    def _write(data: dict | str | bytes) -> Path:
        counter["n"] += 1
        folder = tmp_path / f"inv{counter['n']}"
        folder.mkdir()
        path = folder / "cluster.yaml"
        if isinstance(data, bytes):
            path.write_bytes(data)
        elif isinstance(data, str):
            path.write_text(data)
        else:
            path.write_text(yaml.safe_dump(data, sort_keys=False))
        return folder

    return _write


@dataclass
class CliResult:
    """What a ``gpucluster`` run printed and how it ended."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@pytest.fixture
def cli() -> Callable[..., CliResult]:
    """Run ``gpucluster ARGS`` in-process through its real entrypoint (the one error handler)."""
    from click.testing import CliRunner

    from gpucluster.cli import entrypoint

    def run(*args: str) -> CliResult:
        runner = CliRunner()
        with runner.isolation() as (out, err, _):
            code = entrypoint([str(a) for a in args])
        return CliResult(code, out.getvalue().decode(), err.getvalue().decode())

    return run


@pytest.fixture(scope="session")
def local_spec():
    """The embedded default's spec, loaded once (do not mutate: tests that change it copy it)."""
    from gpucluster.spec import load_spec

    return load_spec(LOCAL)


@pytest.fixture(scope="session")
def lab_spec():
    """The lab example's spec, loaded once (do not mutate)."""
    from gpucluster.spec import load_spec

    return load_spec(LAB)


@pytest.fixture
def local_inventory() -> Path:
    return LOCAL


@pytest.fixture
def lab_inventory() -> Path:
    return LAB
