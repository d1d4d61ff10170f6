"""Verification that catches wrong outcomes, and failures that stop before changing anything.

- Converge one role variable changed on the hosts its scenario just converged and verified, and the
  scenario's testinfra verify must fail, naming the check that caught it (host_prep: IP forwarding off
  in the role's sysctls; container_runtime: cgroupfs instead of the systemd cgroup driver). The hosts are
  the ones ``molecule test`` left (conftest's ``scenario_runs`` keeps them for this test), so the one
  difference between a passing and a failing verify is the variable; run alone, the test converges the
  scenario as it is first.

That `gpucluster up` stops in the host layer's checks before changing a host (a host-managed driver
on hosts without headers for their kernel) is proven on the site scenario's own hosts, in its verify
step (molecule/site/tests/test_preflight.py).
"""

from __future__ import annotations

import json

import pytest
from molecule_helpers import FLIPS, after_scenario_run, left_created, molecule, scenario_env, tail

pytestmark = [pytest.mark.molecule, pytest.mark.slow]


@pytest.mark.parametrize(("scenario", "flip", "caught_by"), [(s, *f) for s, f in FLIPS.items()], ids=list(FLIPS))
def test_verify_fails_when_a_variable_is_flipped(scenario, flip, caught_by, molecule_env, scenario_runs, request):
    env = scenario_env(scenario, molecule_env, request)
    after_scenario_run(scenario_runs, scenario)
    try:
        if not left_created(scenario):  # run alone, or the scenario's own run failed: converge it as it is
            first = molecule(env, scenario, "converge")
            assert first.returncode == 0, tail(first)
        converge = molecule(env, scenario, "converge", "--", "-e", json.dumps(flip))
        assert converge.returncode == 0, tail(converge)
        verify = molecule(env, scenario, "verify")
        out = verify.stdout + verify.stderr
        assert verify.returncode != 0, f"verify passed although {flip}:\n{tail(verify)}"
        assert "FAILED" in out and caught_by in out, tail(verify)
    finally:
        molecule(env, scenario, "destroy")
