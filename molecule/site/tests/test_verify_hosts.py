"""`gpucluster verify`'s host checks on the converged site hosts, and each check failing on its fault.

These are the product's checks (gpucluster.verify.hosts), run through testinfra's podman backend
against the systemd hosts the site playbook just converged. Faults are injected on one host and
undone at once, so the hosts stay as converged.
"""

import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import testinfra

from gpucluster.spec import load_spec
from gpucluster.verify.hosts import host_checks
from gpucluster.verify.model import Verdict

INVENTORY = Path(__file__).resolve().parent.parent / "inventory"
SPEC = load_spec(INVENTORY)
H100 = "gpuc-site-h100"
SYSCTL_FILE = "/etc/sysctl.d/90-gpucluster-kubernetes.conf"
CRI_DROPIN = "/etc/containerd/conf.d/10-gpucluster-cri.toml"


def run_checks(name: str) -> list:
    return list(host_checks(SPEC, SPEC.host(name), testinfra.get_host(f"podman://{name}")))


def failed(results: list) -> set[tuple[str, str]]:
    return {(r.check, r.subject) for r in results if r.verdict is Verdict.failed}


@pytest.mark.parametrize("name", [h.name for h in SPEC.hosts])
def test_host_checks_pass_on_converged_hosts(name):
    results = run_checks(name)
    assert failed(results) == set(), [r for r in results if r.verdict is Verdict.failed]
    passed = {r.check for r in results if r.verdict is Verdict.passed}
    assert {"host-swap", "host-sysctl", "host-modules"} <= passed
    pool = SPEC.pool_of(name)
    if pool and pool.gpu:
        # host-kubelet (GPU hosts only): kubeadm join started the kubelet.
        assert {"host-nouveau", "host-containerd", "host-kubelet"} <= passed
        smi = next(r for r in results if r.check == "host-nvidia-smi")
        assert smi.verdict is Verdict.skipped and "no NVIDIA PCI device" in smi.reason


def test_reverted_sysctl_fails_host_sysctl():
    host = testinfra.get_host(f"podman://{H100}")
    before = failed(run_checks(H100))
    host.run_expect([0], f"cp {SYSCTL_FILE} /root/sysctl.bak && "
                         f"sed -i 's/^net.ipv4.ip_forward *= *1/net.ipv4.ip_forward = 0/' {SYSCTL_FILE}")
    try:
        after = failed(run_checks(H100))
    finally:
        host.run_expect([0], f"mv /root/sysctl.bak {SYSCTL_FILE}")
    assert after - before == {("host-sysctl", f"{H100}/net.ipv4.ip_forward")}
    assert failed(run_checks(H100)) == before


def test_removed_nvidia_dropin_fails_host_containerd():
    host = testinfra.get_host(f"podman://{H100}")
    before = failed(run_checks(H100))
    host.run_expect([0], f"mv {CRI_DROPIN} /root/cri.bak")
    try:
        after = failed(run_checks(H100))
    finally:
        host.run_expect([0], f"mv /root/cri.bak {CRI_DROPIN}")
    assert after - before == {("host-containerd", H100)}
    assert failed(run_checks(H100)) == before


def test_plain_pytest_host_suite_on_the_site_hosts(tmp_path):
    """The same checks as a pytest-testinfra suite (`--hosts`): nothing fails.

    The driver and RDMA checks cannot be measured in containers without an NVIDIA or Mellanox device: those
    three checks, and only those, are allowed to be unmeasured."""
    junit = tmp_path / "hosts.xml"
    hosts = ",".join(f"podman://{h.name}" for h in SPEC.hosts)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs",
                           "gpucluster.verify.suite.test_hosts", f"--hosts={hosts}",
                           "--gpucluster-inventory", str(INVENTORY),
                           "--gpucluster-allow-not-measured", "host-nvidia-smi,host-nvidia-module,host-rdma",
                           f"--junitxml={junit}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    assert junit.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    cases = {c.get("name"): next((x.tag for x in c if x.tag in ("failure", "error", "skipped")), "passed")
             for c in ET.parse(junit).iter("testcase")}
    failed = sorted(name for name, verdict in cases.items() if verdict in ("failure", "error"))
    assert failed == [] and proc.returncode == 0, proc.stdout[-3000:]
    for h in SPEC.hosts:
        assert any(h.name in name and "host-sysctl" in name and verdict == "passed"
                   for name, verdict in cases.items()), cases
