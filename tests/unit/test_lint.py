"""The repository's linters, as configured in pyproject.toml, .ansible-lint and .yamllint, are clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _lint(*cmd: str) -> subprocess.CompletedProcess:
    tool = BIN / cmd[0]
    if not tool.exists() and shutil.which(cmd[0]) is None:
        pytest.fail(f"{cmd[0]} is not installed: pip install -e '.[test]'")
    return subprocess.run([str(tool) if tool.exists() else cmd[0], *cmd[1:]], cwd=REPO, capture_output=True,
                          text=True, timeout=600, check=False)


def test_ruff():
    proc = _lint("ruff", "check", "--output-format", "concise", "src", "tests", "benchmarks", "plugins", "stacks")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_yamllint():
    proc = _lint("yamllint", "--strict", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_ansible_lint_production_profile():
    proc = _lint("ansible-lint", "--offline", "roles", "playbooks")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]


def test_mypy():
    """The package ships py.typed: its annotations must hold (settings and the debt list in pyproject.toml).

    mypy's incremental cache lives with the toolchain's, outside the clone: a module whose source hash
    and whose dependencies' interfaces are unchanged is not checked again (mypy's own rule, the one
    `mypy` from the shell applies with its default .mypy_cache), so a clean clone checks only what
    changed since the last run on this machine (44 s cold, a few seconds warm).
    """
    from gpucluster.toolchain.cache import cache_root

    proc = _lint("mypy", "--cache-dir", str(cache_root() / "mypy"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
