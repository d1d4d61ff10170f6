"""Host checks against a scripted host: what each command answers decides the verdict."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gpucluster.spec import load_spec
from gpucluster.verify.hosts import host_checks
from gpucluster.verify.model import Verdict


@dataclass
class Out:
    rc: int
    stdout: str = ""


class FakeHost:
    """Answers shell commands by the first matching substring (a converged GPU host by default)."""

    def __init__(self, **overrides: Out) -> None:
        self.answers = {
            "/proc/swaps": Out(0, ""),
            "/proc/sys/net/ipv4/ip_forward": Out(0, "1"),
            "/proc/sys/net/bridge": Out(0, "1"),
            "net.ipv4.ip_forward": Out(0, "net.ipv4.ip_forward = 1"),
            "net.bridge.bridge-nf-call-iptables": Out(0, "net.bridge.bridge-nf-call-iptables = 1"),
            "net.bridge.bridge-nf-call-ip6tables": Out(0, "net.bridge.bridge-nf-call-ip6tables = 1"),
            "modules-load.d": Out(0, "overlay\nbr_netfilter\n"),
            "'^nouveau'": Out(1),
            "grep -rqs 'nvidia-container-runtime'": Out(0),
            "enable_cdi": Out(1),
            "nvidia-container-runtime/config.toml": Out(0),
            "test -e /dev/nvidia0": Out(1),
            "command -v kubelet": Out(0, "/usr/bin/kubelet"),
            "is-active kubelet": Out(0, "active"),
        }
        self.answers.update(overrides)

    def run(self, cmd: str) -> Out:
        for key, out in self.answers.items():
            if key in cmd:
                return out
        raise AssertionError(f"unexpected command {cmd!r}")


@pytest.fixture(scope="module")
def spec(request):
    from pathlib import Path

    return load_spec(Path(__file__).resolve().parents[2] / "inventories" / "local")


def verdicts(spec, host: FakeHost, name: str = "h200-1") -> dict[tuple[str, str], Verdict]:
    return {(r.check, r.subject): r.verdict for r in host_checks(spec, spec.host(name), host)}


def test_converged_gpu_host_passes_and_skips_device_checks_with_reason(spec):
    results = list(host_checks(spec, spec.host("h200-1"), FakeHost()))
    assert not [r for r in results if r.verdict is Verdict.failed]
    smi = next(r for r in results if r.check == "host-nvidia-smi")
    assert smi.verdict is Verdict.skipped and "no NVIDIA device" in smi.reason


@pytest.mark.parametrize("override, failing", [
    ({"/proc/swaps": Out(0, "/swapfile file 1048572 0 -2")}, ("host-swap", "h200-1")),
    ({"net.ipv4.ip_forward": Out(0, "net.ipv4.ip_forward = 0")}, ("host-sysctl", "h200-1/net.ipv4.ip_forward")),
    ({"modules-load.d": Out(0, "overlay\n")}, ("host-modules", "h200-1/br_netfilter")),
    ({"'^nouveau'": Out(0)}, ("host-nouveau", "h200-1")),
    ({"grep -rqs 'nvidia-container-runtime'": Out(1)}, ("host-containerd", "h200-1")),
    ({"nvidia-container-runtime/config.toml": Out(1)}, ("host-containerd", "h200-1")),  # no CDI at all
    ({"is-active kubelet": Out(3, "inactive")}, ("host-kubelet", "h200-1")),
])
def test_each_fault_fails_its_check(spec, override, failing):
    v = verdicts(spec, FakeHost(**override))
    assert {k for k, x in v.items() if x is Verdict.failed} == {failing}


def test_native_cdi_is_enough(spec):
    v = verdicts(spec, FakeHost(**{"enable_cdi": Out(0), "nvidia-container-runtime/config.toml": Out(1)}))
    assert v[("host-containerd", "h200-1")] is Verdict.passed


def test_nvidia_smi_reports_model_and_count(spec):
    smi = Out(0, "\n".join(["NVIDIA H200"] * 7))
    v = list(host_checks(spec, spec.host("h200-1"), FakeHost(**{"test -e /dev/nvidia0": Out(0), "nvidia-smi": smi,
                                                                  "'^nvidia'": Out(0)})))
    row = next(r for r in v if r.check == "host-nvidia-smi")
    assert row.verdict is Verdict.failed and row.expected == "8x NVIDIA H200" and row.actual.startswith("7x")


def test_cpu_host_gets_no_gpu_checks(spec):
    checks = {c for c, _ in verdicts(spec, FakeHost(), "cp-1")}
    assert "host-containerd" not in checks and "host-nvidia-smi" not in checks and "host-swap" in checks
