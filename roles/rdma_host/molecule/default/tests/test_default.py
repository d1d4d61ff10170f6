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
    assert "* hard memlock unlimited" in limits and "* soft memlock unlimited" in limits


def test_memlock_for_containerd(host):
    # containerd is not installed in this scenario (the site scenario checks the live LimitMEMLOCK);
    # here the drop-in must exist with the setting systemd reads.
    dropin = host.file("/etc/systemd/system/containerd.service.d/90-gpucluster-memlock.conf").content_string
    assert "[Service]" in dropin and "LimitMEMLOCK=infinity" in dropin


def test_hugepages_persisted(host):
    assert "vm.nr_hugepages=1024" in host.file("/etc/sysctl.d/90-gpucluster-hugepages.conf").content_string
