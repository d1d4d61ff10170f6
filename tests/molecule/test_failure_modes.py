"""Verification that catches wrong outcomes, and failures that stop before changing anything.

- Flip one role variable at converge time and the scenario's testinfra verify must fail, naming the
  check that caught it (host_prep: nouveau not blacklisted; container_runtime: cgroupfs instead of
  the systemd cgroup driver).
- The site playbook with a host-managed driver on hosts without headers for their running kernel
  must fail in preflight, naming the kernel and driver versions, before any package is installed.
"""

from __future__ import annotations

import platform
import subprocess

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


def test_header_mismatch_fails_before_installing(molecule_env, scenario_runs, request):
    env = scenario_env("site", molecule_env, request)
    after_scenario_run(scenario_runs, "site")
    kernel = platform.release()  # the containers run on this kernel
    try:
        molecule(env, "site", "destroy")
        created = molecule(env, "site", "create")
        assert created.returncode == 0, tail(created)
        converge = molecule(env, "site", "converge", "--", "-e", "nvidia_driver_managed_by=host")
        out = converge.stdout + converge.stderr
        assert converge.returncode != 0, tail(converge)
        assert f"the running kernel is {kernel}" in out, tail(converge)
        assert "Cannot build NVIDIA driver 535" in out, tail(converge)
        assert "Kernel headers present: none" in out, tail(converge)
        # Nothing was installed or configured on any host: not the driver, not even containerd, and
        # host_prep's first file is absent too (the preflight play runs before every other play).
        for name in ("gpuc-site-cp", "gpuc-site-h100", "gpuc-site-a100"):
            for probe in (["dpkg", "-s", "containerd"], ["dpkg", "-s", "nvidia-driver"],
                          ["test", "-e", "/etc/modules-load.d/gpucluster.conf"],
                          ["test", "-e", "/etc/apt/sources.list.d/gpucluster-nvidia.list"]):
                done = subprocess.run(["podman", "exec", name, *probe], env=env, capture_output=True, check=False)
                assert done.returncode != 0, f"{name}: {' '.join(probe)} shows a change before the header check"
    finally:
        molecule(env, "site", "destroy")
