"""rdma_host outcome: userspace, persisted modules, memlock for sessions and containerd, hugepages."""

import pytest

testinfra_hosts = ["podman://gpuc-rdma-host"]


@pytest.mark.parametrize("pkg", ["rdma-core", "ibverbs-utils", "infiniband-diags"])
def test_packages(host, pkg):
    assert host.package(pkg).is_installed


def test_ib_modules_persisted(host):
    conf = host.file("/etc/modules-load.d/gpucluster-rdma.conf").content_string
    mods = [line for line in conf.splitlines() if line and not line.startswith("#")]
    assert mods == ["ib_umad", "ib_uverbs", "ib_ipoib", "rdma_ucm", "mlx5_ib"]


def test_memlock_for_sessions(host):
    limits = host.file("/etc/security/limits.d/90-gpucluster-rdma.conf").content_string
    assert "* hard memlock unlimited" in limits
    # PAM applies limits.d to a new login session.
    assert host.check_output("su -s /bin/sh -c 'ulimit -l' root -l") == "unlimited"


def test_memlock_for_containerd(host):
    # systemd parses the drop-in: the property is what containerd would start with.
    out = host.check_output("systemctl show -p DropInPaths containerd.service")
    assert "/etc/systemd/system/containerd.service.d/90-gpucluster-memlock.conf" in out


def test_hugepages_persisted(host):
    assert "vm.nr_hugepages=1024" in host.file("/etc/sysctl.d/90-gpucluster-hugepages.conf").content_string
