"""`gpucluster up` whose spec asks for a host-managed driver, on hosts without headers for their
running kernel, stops in the host layer's preflight play, naming the host, the kernel and the driver
version, before any play that changes a host and before any stack runs.

Proven on this scenario's hosts once they are converged (the verify step): the run must change no
task on any host, start no play after the checks, install no driver and write no NVIDIA package
source. (Before, the same failure was proven on bare hosts of their own, created for it after this
scenario had finished: ten minutes of CI for the same property.)
"""

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

import yaml

from gpucluster.spec import load_spec

INVENTORY = Path(__file__).resolve().parent.parent / "inventory"
SPEC = load_spec(INVENTORY)
#: The plays site.yml runs before any play that changes a host (playbooks/site.yml: validate, preflight).
CHECK_PLAYS = {"Validate the inventory", "Check every host before changing any", "Check hosts before changing them"}


def _probe(host: str, *argv: str) -> int:
    return subprocess.run(["podman", "exec", host, *argv], capture_output=True, check=False).returncode


def test_a_driver_the_hosts_cannot_build_stops_before_any_change(tmp_path):
    inventory = tmp_path / "inventory"
    shutil.copytree(INVENTORY, inventory)
    spec = yaml.safe_load((inventory / "cluster.yaml").read_text())
    spec["gpuOperator"]["driver"] = {"managedBy": "host"}
    (inventory / "cluster.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    version = load_spec(inventory).gpu_operator.driver.version
    kernel = platform.release()  # the containers run on this kernel
    state = tmp_path / "state"
    before = {h.name: _probe(h.name, "dpkg", "-s", "nvidia-driver") for h in SPEC.hosts}

    up = subprocess.run(["gpucluster", "up", "-i", str(inventory), "--state-dir", str(state),
                         "--no-chart-repositories", "-o", "json"],
                        capture_output=True, text=True, timeout=900, check=False, env=dict(os.environ))
    out = up.stdout + up.stderr
    assert up.returncode == 1, out[-4000:]
    assert "phase 'host layer' failed" in out, out[-4000:]
    assert f"the running kernel is {kernel}" in out, out[-4000:]
    assert f"Cannot build NVIDIA driver {version}" in out, out[-4000:]
    assert "Kernel headers present: none" in out, out[-4000:]
    # The stacks never ran: no stack state, no kubeconfig fetched.
    assert not (state / "backend").exists() and not (state / "admin.conf").exists()
    # No task changed anything on any host, and no play after the checks started (the host layer's
    # timed record of the run: every play and every task result).
    events = [json.loads(line) for line in (state / "host-layer.jsonl").read_text().splitlines()]
    plays = {e["name"] for e in events if e.get("event") == "play"}
    assert plays and plays <= CHECK_PLAYS, plays
    results = [e for e in events if e.get("event") == "result"]
    assert {e["host"] for e in results} >= {h.name for h in SPEC.hosts if SPEC.pool_of(h.name)}, results
    changed = [e for e in results if e["status"] == "changed"]
    assert not changed, f"tasks changed hosts: {changed}"
    # And, on the hosts themselves, no driver and no NVIDIA package source.
    for host in SPEC.hosts:
        assert _probe(host.name, "dpkg", "-s", "nvidia-driver") == before[host.name] != 0, host.name
        assert _probe(host.name, "test", "-e", "/etc/apt/sources.list.d/gpucluster-nvidia.list") != 0, host.name
