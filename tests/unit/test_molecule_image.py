"""scripts/molecule-image.sh: one image per package list, keyed by it, and nothing but package names taken.

The images themselves are built and booted by the Molecule tier (the site scenario boots the one with
its roles' packages, tests/molecule/site_image.py); here only the naming and the input check, which need
no podman: ``--print-name`` answers before anything is built.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "molecule-image.sh"


def image(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60, check=False)


def test_each_package_list_has_its_own_name_and_the_base_keeps_its_own() -> None:
    base = image("--print-name")
    with_two = image("--packages", "containerd,runc", "--print-name")
    other = image("--packages", "containerd", "--print-name")
    names = [p.stdout.strip() for p in (base, with_two, other)]
    assert all(p.returncode == 0 for p in (base, with_two, other))
    assert all(n.startswith("localhost/gpucluster-debian12:") for n in names) and len(set(names)) == 3
    assert image("--print-name", "--packages", "containerd,runc").stdout.strip() == names[1]  # order of flags


@pytest.mark.parametrize("bad", ["containerd;touch /tmp/x", "containerd runc", "$(id)", "Containerd", ""])
def test_anything_but_package_names_is_refused_with_exit_2(bad: str) -> None:
    proc = image("--packages", bad, "--print-name")
    assert proc.returncode == 2, proc.stdout
    assert "--packages" in proc.stderr and proc.stdout == ""


def test_an_unknown_argument_is_exit_2_naming_it() -> None:
    proc = image("--pakages", "x")
    assert proc.returncode == 2 and "--pakages" in proc.stderr
