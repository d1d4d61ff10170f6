"""The tiers of the suite: where the tools are supposed to be installed, a missing one fails, never skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("require", ["1", ""])
def test_molecule_tier_fails_without_podman_where_tools_are_required(tmp_path, require):
    # A PATH with this Python's folder only: no podman, runc or debootstrap can be found.
    env = dict(os.environ, PATH=str(Path(sys.executable).parent), GPUCLUSTER_REQUIRE_TOOLS=require)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs",
                           "tests/molecule/test_scenarios.py::test_molecule_scenario[host_prep]"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert "Molecule tests need podman, runc, debootstrap" in out, out[-3000:]
    if require:
        assert proc.returncode == 1 and " error" in out.splitlines()[-1], out[-3000:]
    else:
        assert proc.returncode == 0 and "1 skipped" in out.splitlines()[-1], out[-3000:]
