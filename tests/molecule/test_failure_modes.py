"""Verification that catches wrong outcomes, and failures that stop before changing anything.

- Flip one role variable at converge time and the scenario's testinfra verify must fail, naming the
  check that caught it (host_prep: nouveau not blacklisted; container_runtime: cgroupfs instead of
  the systemd cgroup driver).

That `gpucluster up` stops in the host layer's checks before changing a host (a host-managed driver
on hosts without headers for their kernel) is proven on the site scenario's own hosts, in its verify
step (molecule/site/tests/test_preflight.py).
"""

from __future__ import annotations

import pytest
from molecule_helpers import after_scenario_run, molecule, scenario_env, tail

pytestmark = [pytest.mark.molecule, pytest.mark.slow]


@pytest.mark.parametrize(
    ("scenario", "flip", "caught_by"),
    [
        ("host_prep", "host_prep_blacklist_nouveau=false", "test_nouveau_blacklisted"),
        ("container_runtime", "container_runtime_systemd_cgroup=false", "test_systemd_cgroup"),
    ],
)
def test_verify_fails_when_a_variable_is_flipped(scenario, flip, caught_by, molecule_env, scenario_runs, request):
    env = scenario_env(scenario, molecule_env, request)
    after_scenario_run(scenario_runs, scenario)
    try:
        molecule(env, scenario, "destroy")
        converge = molecule(env, scenario, "converge", "--", "-e", flip)
        assert converge.returncode == 0, tail(converge)
        verify = molecule(env, scenario, "verify")
        out = verify.stdout + verify.stderr
        assert verify.returncode != 0, f"verify passed although {flip}:\n{tail(verify)}"
        assert "FAILED" in out and caught_by in out, tail(verify)
    finally:
        molecule(env, scenario, "destroy")
