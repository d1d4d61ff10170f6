"""Host checks against a scripted host: what each command answers decides the verdict.

The default host is a converged GPU host in a container: no NVIDIA PCI device, so the driver checks
are not measured (with the reason); the faults below are what each check exists to catch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from pinned_rows import pin

from gpucluster.spec import load_spec
from gpucluster.verify.hosts import host_checks
from gpucluster.verify.model import Verdict


@dataclass
class Out:
    rc: int
    stdout: str = ""


CONTAINERD_V2 = """
version = 2
[plugins."io.containerd.grpc.v1.cri"]
  enable_cdi = false
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
"""
# What containerd says when a comment mentions the runtime but nothing registers it.
CONTAINERD_COMMENT_ONLY = """
version = 2
# runtime nvidia-container-runtime goes here
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
"""
CONTAINERD_V3_NATIVE_CDI = """
version = 3
[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = true
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
"""
def rdma_ports(ports: dict[str, tuple[str, str]]) -> Out:
    """What the RDMA check's one command prints: per interface, its port's state and link layer files."""
    lines = []
    for i, (ifname, (state, layer)) in enumerate(ports.items()):
        base = f"/sys/class/net/{ifname}/device/infiniband/mlx5_{i}/ports/1"
        lines += [f"{base}/state:{state}", f"{base}/link_layer:{layer}"]
    return Out(0 if lines else 2, "\n".join(lines) + "\n" if lines else "")


LAB_IB = ("ibp24s0", "ibp64s0", "ibp79s0", "ibp94s0")  # inventories/lab's h100-train interfaces
GPU_ON_THE_BUS = {"/sys/bus/pci/devices": Out(0, "0x8086\n0x10de\n0x10de\n0x15b3\n"),
                  "test -e /dev/nvidia0": Out(0), "'^nvidia'": Out(0)}


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
            "containerd config dump": Out(0, CONTAINERD_V2),
            "nvidia-container-runtime/config.toml": Out(0),
            "/sys/bus/pci/devices": Out(0, "0x8086\n0x8086\n0x1af4\n"),
            "test -e /dev/nvidia0": Out(1),
            "'^nvidia'": Out(1),
            "nvidia-smi --query-gpu": Out(0, "NVIDIA H200\n" * 8),
            "command -v kubelet": Out(0, "/usr/bin/kubelet"),
            "is-active kubelet": Out(0, "active"),
            "/device/infiniband": rdma_ports({i: ("4: ACTIVE", "InfiniBand") for i in LAB_IB}),
        }
        self.answers.update(overrides)

        self.commands: list[str] = []

    def run(self, cmd: str) -> Out:
        self.commands.append(cmd)
        for key, out in self.answers.items():
            if key in cmd:
                return out
        raise AssertionError(f"unexpected command {cmd!r}")


@pytest.fixture(scope="module")
def spec(request):
    from pathlib import Path

    return load_spec(Path(__file__).resolve().parents[2] / "inventories" / "local")


def checked(spec, host, fake: FakeHost) -> list:
    """The host's rows, pinned with the exact commands the checks ran (tests/unit/pinned_rows.py)."""
    rows = list(host_checks(spec, host, fake))
    pin(rows, fake.commands)
    return rows


def verdicts(spec, host: FakeHost, name: str = "h200-1") -> dict[tuple[str, str], Verdict]:
    rows = checked(spec, spec.host(name), host)  # every row as it reads, and the exact commands the checks ran
    return {(r.check, r.subject): r.verdict for r in rows}


def test_converged_gpu_host_passes_and_skips_device_checks_with_reason(spec):
    results = list(checked(spec, spec.host("h200-1"), FakeHost()))
    assert not [r for r in results if r.verdict is Verdict.failed]
    smi = next(r for r in results if r.check == "host-nvidia-smi")
    assert smi.verdict is Verdict.skipped and "no NVIDIA PCI device" in smi.reason


def test_a_host_with_its_gpus_passes_every_check(spec):
    v = verdicts(spec, FakeHost(**GPU_ON_THE_BUS))
    assert set(v.values()) == {Verdict.passed}
    assert ("host-nvidia-smi", "h200-1") in v


#: What a real H200 host answered to the device checks' own commands (tests/data/captures/h200-580.159.04:
#: one H200 passed through to a virtual machine, driver 580.159.04, taken with tools/gpu-capture/capture.sh
#: host), keyed by the command as the checks run it.
REAL_H200_HOST = {r["command"]: Out(r["rc"], r["stdout"]) for r in json.loads(
    (Path(__file__).resolve().parents[2] / "tests" / "data" / "captures" / "h200-580.159.04" / "host-commands.json")
    .read_text())}


def test_a_real_h200_hosts_own_answers_pass_the_device_checks(tmp_path):
    """The captured host had one H200: a pool of one H200 on it passes host-nvidia-smi and host-nvidia-module
    with nvidia-smi's real output, and every device command the checks ran is one the capture answered (a
    changed command fails here until it is captured again)."""
    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "inventories" / "local" / "cluster.yaml").read_text())
    pool = next(p for p in raw["nodePools"] if p["hosts"] == ["h200-1"])
    pool["gpu"]["count"] = 1
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(raw))
    one_gpu = load_spec(tmp_path)
    device = {"/sys/bus/pci/devices": "cat /sys/bus/pci/devices/*/vendor 2>/dev/null",
              "test -e /dev/nvidia0": "test -e /dev/nvidia0", "'^nvidia'": "grep -qw '^nvidia' /proc/modules",
              "'^nouveau'": "grep -qw '^nouveau' /proc/modules",
              "nvidia-smi --query-gpu": "nvidia-smi --query-gpu=name --format=csv,noheader"}
    fake = FakeHost(**{key: REAL_H200_HOST[cmd] for key, cmd in device.items()})
    rows = {(r.check, r.subject): r for r in host_checks(one_gpu, one_gpu.host("h200-1"), fake)}
    smi, module = rows[("host-nvidia-smi", "h200-1")], rows[("host-nvidia-module", "h200-1")]
    assert (smi.verdict, smi.actual) == (Verdict.passed, "1x NVIDIA H200")
    assert (module.verdict, rows[("host-nouveau", "h200-1")].verdict) == (Verdict.passed, Verdict.passed)
    ran = [c for c in fake.commands if any(k in c for k in device)]
    assert sorted(set(ran)) == sorted(device.values())


def test_containerd_2_with_native_cdi_passes(spec):
    v = verdicts(spec, FakeHost(**{"containerd config dump": Out(0, CONTAINERD_V3_NATIVE_CDI),
                                   "nvidia-container-runtime/config.toml": Out(1)}))
    assert v[("host-containerd", "h200-1")] is Verdict.passed


@pytest.mark.parametrize("override, failing", [
    ({"/proc/swaps": Out(0, "/swapfile file 1048572 0 -2")}, ("host-swap", "h200-1")),
    ({"net.ipv4.ip_forward": Out(0, "net.ipv4.ip_forward = 0")}, ("host-sysctl", "h200-1/net.ipv4.ip_forward")),
    ({"modules-load.d": Out(0, "overlay\n")}, ("host-modules", "h200-1/br_netfilter")),
    ({"'^nouveau'": Out(0)}, ("host-nouveau", "h200-1")),
    ({"containerd config dump": Out(0, CONTAINERD_COMMENT_ONLY)}, ("host-containerd", "h200-1")),  # a comment
    ({"containerd config dump": Out(1, "containerd: not found")}, ("host-containerd", "h200-1")),
    ({"containerd config dump": Out(0, "[plugins\nbroken")}, ("host-containerd", "h200-1")),
    ({"nvidia-container-runtime/config.toml": Out(1)}, ("host-containerd", "h200-1")),  # no CDI at all
    ({"is-active kubelet": Out(3, "inactive")}, ("host-kubelet", "h200-1")),
    ({"command -v kubelet": Out(1)}, ("host-kubelet", "h200-1")),  # a spec host without a kubelet
    # an NVIDIA GPU on the bus but no driver: the broken host the driver checks exist for
    ({**GPU_ON_THE_BUS, "test -e /dev/nvidia0": Out(1)}, ("host-nvidia-smi", "h200-1")),
    ({**GPU_ON_THE_BUS, "'^nvidia'": Out(1)}, ("host-nvidia-module", "h200-1")),
    ({**GPU_ON_THE_BUS, "nvidia-smi --query-gpu": Out(0, "NVIDIA H200\n" * 7)}, ("host-nvidia-smi", "h200-1")),
])
def test_each_fault_fails_its_check(spec, override, failing):
    v = verdicts(spec, FakeHost(**override))
    assert {k for k, x in v.items() if x is Verdict.failed} == {failing}


def test_cpu_host_gets_no_gpu_checks(spec):
    checks = {c for c, _ in verdicts(spec, FakeHost(), "cp-1")}
    assert "host-containerd" not in checks and "host-nvidia-smi" not in checks and "host-swap" in checks


@pytest.mark.parametrize("override, check, subject", [
    ({"/proc/swaps": Out(1)}, "host-swap", "h200-1"),
    ({"/proc/sys/net/ipv4/ip_forward": Out(1)}, "host-sysctl", "h200-1/net.ipv4.ip_forward"),
    ({"/sys/bus/pci/devices": Out(1)}, "host-nvidia-smi", "h200-1"),
])
def test_what_cannot_be_read_is_not_measured(spec, override, check, subject):
    v = verdicts(spec, FakeHost(**override))
    assert v[(check, subject)] is Verdict.skipped
    assert Verdict.failed not in v.values()


def test_rdma_ports_are_compared_with_the_spec(lab):
    host = next(h for h, p in lab.pools_by_host().items() if p.rdma and p.rdma.link_type == "infiniband")
    ifaces = lab.pool_of(host).rdma.interfaces
    good = {r.subject: r.verdict for r in checked(lab, lab.host(host), FakeHost(**GPU_ON_THE_BUS))
            if r.check == "host-rdma"}
    assert good == {f"{host}/{i}": Verdict.passed for i in ifaces}
    assert tuple(ifaces) == LAB_IB

    def verdicts_with(ports: dict[str, tuple[str, str]]) -> dict[str, Verdict]:
        fake = FakeHost(**GPU_ON_THE_BUS, **{"/device/infiniband": rdma_ports(ports)})
        return {r.subject: r.verdict for r in checked(lab, lab.host(host), fake) if r.check == "host-rdma"}

    up = {i: ("4: ACTIVE", "InfiniBand") for i in ifaces}
    # one faulty interface fails alone: its port down, RoCE where the spec says InfiniBand, no RDMA device
    for fault in ({ifaces[1]: ("1: DOWN", "InfiniBand")}, {ifaces[1]: ("4: ACTIVE", "Ethernet")}):
        assert verdicts_with({**up, **fault}) == {**good, f"{host}/{ifaces[1]}": Verdict.failed}
    assert verdicts_with({i: p for i, p in up.items() if i != ifaces[1]}) == \
        {**good, f"{host}/{ifaces[1]}": Verdict.failed}
    gone = FakeHost(**GPU_ON_THE_BUS, **{"/device/infiniband": Out(2)})
    assert {r.verdict for r in checked(lab, lab.host(host), gone) if r.check == "host-rdma"} == {Verdict.failed}
    no_nic = FakeHost(**{"/sys/bus/pci/devices": Out(0, "0x8086\n")})
    assert {r.verdict for r in checked(lab, lab.host(host), no_nic) if r.check == "host-rdma"} == {Verdict.skipped}


def test_no_spec_value_reaches_a_remote_command(lab):
    # ssh hands each command to the host's login shell: the commands are constants, the spec's interface
    # names are picked from what the one RDMA command prints.
    host = next(h for h, p in lab.pools_by_host().items() if p.rdma)
    fake = FakeHost(**GPU_ON_THE_BUS)
    list(checked(lab, lab.host(host), fake))
    names = {host, *lab.pool_of(host).rdma.interfaces, lab.host(host).address}
    assert any("/device/infiniband" in cmd for cmd in fake.commands)
    assert not [(cmd, n) for cmd in fake.commands for n in names if n in cmd]
