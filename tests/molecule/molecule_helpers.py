"""Helpers shared by the Molecule tests (named so it cannot shadow the `molecule` package)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROLES = ("host_prep", "container_runtime", "nvidia_container_toolkit", "nvidia_driver",
         "kubernetes_node", "mig_host", "rdma_host")
# Scenarios that need artifacts beyond the image.
NEEDS_NCT = {"container_runtime", "nvidia_container_toolkit", "site"}
NEEDS_K8S = {"kubernetes_node", "site"}
NEEDS_IMAGES = {"site"}
NEEDS_STANDIN = {"site"}  # the GPU stand-in (molecule/site/prepare.yml)
#: Scenario → (the extra variables a failure-mode test converges with, the verify test that must catch it)
#: (tests/molecule/test_failure_modes.py). Each changes what the role writes, so converging it over hosts
#: the scenario already converged changes them.
FLIPS = {
    "host_prep": ({"host_prep_sysctls": {"net.bridge.bridge-nf-call-iptables": 1,
                                         "net.bridge.bridge-nf-call-ip6tables": 1, "net.ipv4.ip_forward": 0}},
                  "test_sysctl_applied_and_persisted"),
    "container_runtime": ({"container_runtime_systemd_cgroup": False}, "test_systemd_cgroup"),
}

#: The test that removes a worker from the site scenario's cluster (tests/molecule/test_node_remove.py):
#: the scenario's hosts are left converged for it.
NODE_REMOVAL_TEST = "test_a_removed_worker_is_drained_reset_and_deleted_and_the_cluster_verifies_without_it"
#: The test that snapshots and restores the site cluster's etcd (the same file, run before the removal).
ETCD_RESTORE_TEST = "test_an_etcd_snapshot_restores_both_control_planes_to_the_moment_it_was_taken"
#: The test that renews the site cluster's kubeadm certificates with playbooks/renew-certs.yml (the same file).
CERT_RENEWAL_TEST = "test_renewed_certificates_are_what_both_control_planes_serve_and_the_new_kubeconfig_works"
#: Tests that run on the site scenario's hosts after its own run, in this order; the last one destroys them.
SITE_DAY2_TESTS = (ETCD_RESTORE_TEST, CERT_RENEWAL_TEST, NODE_REMOVAL_TEST)


def apt_cache_dirs() -> list[str]:
    """The apt folders (relative to $GPUCLUSTER_APT_CACHE) that the scenarios' molecule.yml mount."""
    files = [REPO / "molecule" / "site" / "molecule.yml", *REPO.glob("roles/*/molecule/*/molecule.yml")]
    found = {m for f in files for m in re.findall(r"\$\{GPUCLUSTER_APT_CACHE\}/([^:\s]+):", f.read_text())}
    return sorted(found)


def scenario_env(name: str, molecule_env: dict[str, str], request: pytest.FixtureRequest) -> dict[str, str]:
    """The environment for one scenario, with only the artifacts it needs built."""
    env = dict(molecule_env)
    # Molecule keeps a scenario's state (created? prepared?) in a folder named after the project folder's
    # *name* (roles/<role>, the same in every checkout): kept inside this checkout instead, so another
    # checkout's run, or its leftovers, is never taken for ours.
    env["MOLECULE_EPHEMERAL_DIRECTORY"] = str(state_dir(name))
    if name in NEEDS_NCT:
        env["GPUCLUSTER_NCT_DIR"] = request.getfixturevalue("nct_dir")
    if name in NEEDS_K8S:
        env["GPUCLUSTER_K8S_BIN_DIR"] = request.getfixturevalue("k8s_bin_dir")
        # The SHA-256 of each binary, as an operator pins them (kubernetes_node_local_sha256).
        env["GPUCLUSTER_K8S_BIN_SHA256"] = json.dumps({
            n: hashlib.sha256(Path(env["GPUCLUSTER_K8S_BIN_DIR"], n).read_bytes()).hexdigest()
            for n in ("kubeadm", "kubelet", "kubectl")})
    if name in NEEDS_IMAGES:
        env["GPUCLUSTER_TEST_IMAGES"] = request.getfixturevalue("test_images")
    if name == "site":
        env["GPUCLUSTER_MOLECULE_SITE_IMAGE"] = request.getfixturevalue("site_image")
    if name in NEEDS_STANDIN:
        env["GPUCLUSTER_GPU_STANDIN_DIR"] = request.getfixturevalue("gpu_standin_dir")
    return env


def state_dir(scenario: str) -> Path:
    """Where Molecule keeps ``scenario``'s state in this checkout (.molecule/ is ignored by git)."""
    return REPO / ".molecule" / scenario


def left_created(scenario: str) -> bool:
    """Whether an earlier run in this checkout ended without destroying ``scenario``'s hosts (interrupted)."""
    import yaml

    state = state_dir(scenario) / "state.yml"
    if not state.is_file():
        return False
    return bool((yaml.safe_load(state.read_text()) or {}).get("created"))


def scenario_file(scenario: str) -> Path:
    """The molecule.yml of a scenario (a role name, or ``site``)."""
    if scenario == "site":
        return REPO / "molecule" / "site" / "molecule.yml"
    return REPO / "roles" / scenario / "molecule" / "default" / "molecule.yml"


def platform_names(scenario: str) -> list[str]:
    """The container names a scenario creates (its platforms)."""
    import yaml

    return [p["name"] for p in yaml.safe_load(scenario_file(scenario).read_text())["platforms"]]


def keep_journals(env: dict[str, str], scenario: str, logs: Path) -> list[Path]:
    """Save the kubelet, containerd, GPU stand-in and control-plane endpoint (keepalived, haproxy) journals of
    every host of ``scenario`` under ``logs`` (after a failure)."""
    kept = []
    for host in platform_names(scenario):
        proc = subprocess.run(["podman", "exec", host, "journalctl", "--no-pager", "-u", "kubelet", "-u", "containerd",
                               "-u", "gpucluster-gpu-standin", "-u", "keepalived", "-u", "haproxy"],
                              env=env, capture_output=True, text=True, timeout=120, check=False)
        path = logs / f"{scenario}-{host}.journal.log"
        path.write_text(proc.stdout + proc.stderr)
        kept.append(path)
    return kept


def molecule(env: dict[str, str], scenario: str, *args: str, timeout: int = 1200) -> subprocess.CompletedProcess:
    """Run `molecule -c molecule/base.yml <args> -s <scenario>` in the scenario's project folder."""
    cwd = REPO if scenario == "site" else REPO / "roles" / scenario
    name = "site" if scenario == "site" else "default"
    command, *rest = args
    cmd = ["molecule", "-c", str(REPO / "molecule" / "base.yml"), command, "-s", name, *rest]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def tail(proc: subprocess.CompletedProcess, chars: int = 6000) -> str:
    return (proc.stdout + proc.stderr)[-chars:]


def after_scenario_run(runs: dict, scenario: str) -> None:
    """Wait until the side-by-side `molecule test` of ``scenario`` (conftest's ``scenario_runs``) is over.

    A failure-mode test reuses that scenario's containers, so it runs after it, while the other
    scenarios go on. The run's own verdict is test_scenarios.py's business, not this test's.
    """
    if scenario in runs:
        try:
            runs[scenario].result()
        except Exception:  # reported by the scenario's own test
            pass
