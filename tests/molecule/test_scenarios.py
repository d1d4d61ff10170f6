"""`molecule test` for every role and for the four-host site scenario.

The scenarios run side by side (the `scenario_runs` fixture in conftest.py). Each run is destroy →
syntax → create → prepare → converge → idempotence (must report 0 changes) → verify (testinfra over
podman) → destroy, as configured in molecule/base.yml.
"""

from __future__ import annotations

import re

import pytest
from molecule_helpers import ROLES, tail

pytestmark = [pytest.mark.molecule, pytest.mark.slow]


@pytest.mark.parametrize("scenario", [*ROLES, "site"])
def test_molecule_scenario(scenario, scenario_runs):
    proc, seconds = scenario_runs[scenario].result()
    print(f"molecule test -s {scenario}: rc {proc.returncode} in {seconds:.0f} s")
    assert proc.returncode == 0, f"molecule test -s {scenario} failed:\n{tail(proc)}"
    out = proc.stdout + proc.stderr
    # Molecule's idempotence step must have run and passed (it fails on any changed task).
    assert re.search(r"> idempotence: Executed: Successful", out), tail(proc)
