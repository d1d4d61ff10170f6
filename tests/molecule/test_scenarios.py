"""`molecule test` for every role and for the three-host site scenario.

Each run is destroy → syntax → create → prepare → converge → idempotence (must report 0 changes) →
verify (testinfra over podman) → destroy, as configured in molecule/base.yml.
"""

from __future__ import annotations

import re

import pytest
from molecule_helpers import ROLES, molecule, scenario_env, tail

pytestmark = [pytest.mark.molecule, pytest.mark.slow]


@pytest.mark.parametrize("scenario", [*ROLES, "site"])
def test_molecule_scenario(scenario, molecule_env, request):
    env = scenario_env(scenario, molecule_env, request)
    proc = molecule(env, scenario, "test")
    assert proc.returncode == 0, f"molecule test -s {scenario} failed:\n{tail(proc)}"
    out = proc.stdout + proc.stderr
    # Molecule's idempotence step must have run and passed (it fails on any changed task).
    assert re.search(r"> idempotence: Executed: Successful", out), tail(proc)
