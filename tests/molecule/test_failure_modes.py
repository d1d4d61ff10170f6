"""Verification that catches wrong outcomes, and failures that stop before changing anything.

- Flip one role variable at converge time and the scenario's testinfra verify must fail, naming the
  check that caught it (host_prep: nouveau not blacklisted; container_runtime: cgroupfs instead of
  the systemd cgroup driver).
- `gpucluster up` on bare site hosts whose spec asks for a host-managed driver, on hosts without
  headers for their running kernel, must stop in the host layer's preflight, naming the host, the
  kernel and the driver version, before any package is installed and before any stack runs.
"""

from __future__ import annotations

import platform
import shutil
import subprocess

import pytest
import yaml
from molecule_helpers import REPO, after_scenario_run, molecule, platform_names, scenario_env, tail

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


def test_header_mismatch_fails_before_installing(molecule_env, scenario_runs, request, tmp_path):
    env = scenario_env("site", molecule_env, request)
    after_scenario_run(scenario_runs, "site")
    kernel = platform.release()  # the containers run on this kernel
    # The site inventory with the spec asking for a host-managed driver (the hosts have no headers).
    inventory = tmp_path / "inventory"
    shutil.copytree(REPO / "molecule" / "site" / "inventory", inventory)
    spec = yaml.safe_load((inventory / "cluster.yaml").read_text())
    spec["gpuOperator"]["driver"] = {"managedBy": "host"}
    (inventory / "cluster.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    from gpucluster.spec import load_spec

    version = load_spec(inventory).gpu_operator.driver.version
    try:
        molecule(env, "site", "destroy")
        created = molecule(env, "site", "create")  # Molecule's create sequence: create, then prepare
        assert created.returncode == 0, tail(created)
        up = subprocess.run(["gpucluster", "up", "-i", str(inventory), "--state-dir", str(tmp_path / "state"),
                             "--no-chart-repositories", "-o", "json"],
                            env=env, capture_output=True, text=True, timeout=1200, check=False)
        out = up.stdout + up.stderr
        assert up.returncode == 1, tail(up)
        assert "phase 'host layer' failed" in out, tail(up)
        assert f"the running kernel is {kernel}" in out, tail(up)
        assert f"Cannot build NVIDIA driver {version}" in out, tail(up)
        assert "Kernel headers present: none" in out, tail(up)
        # The stacks never ran: no stack state, no kubeconfig fetched.
        assert not (tmp_path / "state" / "backend").exists() and not (tmp_path / "state" / "admin.conf").exists()
        # Nothing was installed or configured on any host: not the driver, not even containerd, and
        # host_prep's first file is absent too (the preflight play runs before every other play).
        for name in platform_names("site"):
            for probe in (["dpkg", "-s", "containerd"], ["dpkg", "-s", "nvidia-driver"],
                          ["test", "-e", "/etc/modules-load.d/gpucluster.conf"],
                          ["test", "-e", "/etc/apt/sources.list.d/gpucluster-nvidia.list"]):
                done = subprocess.run(["podman", "exec", name, *probe], env=env, capture_output=True, check=False)
                assert done.returncode != 0, f"{name}: {' '.join(probe)} shows a change before the header check"
    finally:
        molecule(env, "site", "destroy")
