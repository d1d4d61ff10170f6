"""host_prep outcome on the converged container, checked through `podman exec` (fast)."""

import pytest

testinfra_hosts = ["podman://gpuc-host-prep"]


def test_modules_persisted(host):
    conf = host.file("/etc/modules-load.d/gpucluster.conf")
    assert conf.exists and conf.mode == 0o644
    lines = [line for line in conf.content_string.splitlines() if line and not line.startswith("#")]
    assert lines == ["overlay", "br_netfilter"]


def test_module_functions_available(host):
    # Checked by what the modules provide, so it holds for loaded and built-in modules alike.
    assert "overlay" in host.file("/proc/filesystems").content_string
    assert host.file("/proc/sys/net/bridge/bridge-nf-call-iptables").exists


@pytest.mark.parametrize(
    "key",
    ["net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables", "net.ipv4.ip_forward"],
)
def test_sysctl_applied_and_persisted(host, key):
    assert host.sysctl(key) == 1
    assert f"{key}=1" in host.file("/etc/sysctl.d/90-gpucluster-kubernetes.conf").content_string


def test_swap_off_and_masked(host):
    swaps = host.file("/proc/swaps").content_string.strip().splitlines()
    assert len(swaps) == 1, f"swap still active: {swaps[1:]}"
    assert host.run("systemctl is-enabled swap.target").stdout.strip() == "masked"


def test_nouveau_blacklisted(host):
    content = host.file("/etc/modprobe.d/gpucluster-blacklist-nouveau.conf").content_string
    assert "blacklist nouveau" in content
    assert "options nouveau modeset=0" in content
    # modprobe itself must see the blacklist (the file is read, not just present).
    assert "blacklist nouveau" in host.check_output("modprobe --showconfig | grep nouveau")


def test_timesync(host):
    assert host.package("systemd-timesyncd").is_installed
    assert host.service("systemd-timesyncd").is_enabled
    conf = host.file("/etc/systemd/timesyncd.conf.d/gpucluster.conf").content_string
    assert "NTP=ntp-a.example.invalid ntp-b.example.invalid" in conf
