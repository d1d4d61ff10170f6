"""expected.py: what verification expects per host, per sharing mode."""

from __future__ import annotations

import pytest
from testkit import pool

from gpucluster import devices, expected, upstream


def test_l4_time_sliced_host_expects_16_gpus(local):
    states = expected.host_states(local)
    assert states["l4-1"].resources == {"nvidia.com/gpu": 16}
    assert states["l4-1"].labels["nvidia.com/gpu.product"] == "NVIDIA-L4-SHARED"
    assert states["l4-1"].labels["nvidia.com/gpu.replicas"] == "4"
    assert states["l4-1"].labels["nvidia.com/device-plugin.config"] == "l4-infer"


def test_expected_state_per_sharing_mode(local):
    s = expected.host_states(local)
    assert s["h200-1"].resources == {"nvidia.com/gpu": 8}
    assert s["a100-1"].resources == {"nvidia.com/mig-1g.10gb": 56}
    assert s["a100-1"].labels["nvidia.com/mig.config.state"] == "success"
    # DRA pool: no device-plugin resources, 8 devices, device plugin switched off by label
    assert "nvidia.com/gpu" not in s["h100-1"].resources
    assert s["h100-1"].resources == {"rdma/rdma_shared_device_a": 63}
    assert [d.name for d in s["h100-1"].devices] == [f"gpu-{i}" for i in range(8)]
    assert s["h100-1"].labels["nvidia.com/gpu.deploy.device-plugin"] == "false"
    assert s["h100-1"].devices[0].memory_bytes == 81559 * 2**20
    assert s["cp-1"].taints == [] and "node-role.kubernetes.io/control-plane" in s["cp-1"].labels
    assert s["h200-1"].taints == ["nvidia.com/gpu=present:NoSchedule"]


def test_mig_single_strategy(local):
    spec = local.model_copy(deep=True)
    spec.gpu_operator.mig_strategy = "single"
    s = expected.host_states(spec)["a100-1"]
    assert s.resources == {"nvidia.com/gpu": 56}
    assert s.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"
    assert s.labels["nvidia.com/gpu.memory"] == "9856"  # what NVML reports for one 1g.10gb instance


def test_rename_by_default_uses_shared_resource(local):
    spec = local.model_copy(deep=True)
    pool(spec, "l4-infer").sharing.rename_by_default = True
    s = expected.host_states(spec)["l4-1"]
    assert s.resources == {"nvidia.com/gpu.shared": 16}
    assert s.labels["nvidia.com/gpu.product"] == "NVIDIA-L4"


def test_dra_devices_for_mig_pool(local):
    from gpucluster import catalog

    devs = devices.dra_devices(catalog.get("A100-80GB"), 2, {"1g.10gb": 7})
    assert len(devs) == 14 and {d.type for d in devs} == {"mig"}  # the parent GPUs are not published
    assert {d.name for d in devs} == {"gpu-0-mig-1g10gb", "gpu-1-mig-1g10gb"}  # + -<profile id>-<start>
    assert devs[0].profile == "1g.10gb" and devs[0].starts == (0, 1, 2, 3, 4, 5, 6) and devs[0].slices == 1
    assert devs[0].memory_bytes == 9856 * 2**20
    assert upstream.mig_name_part("1g.10gb+me") == "1g10gb-me"


def test_rdma_hosts_expect_the_nic_labels_and_every_resource_name(lab):
    from gpucluster import labels as L
    from gpucluster.spec.model import Rdma

    pool(lab, "l40s-infer").rdma = Rdma(interfaces=["ens1f0np0"], link_type="ether", resource_name="roce")
    s = expected.host_states(lab)
    # the RDMA plugin's DaemonSet only lands where NFD and the operator put these labels
    assert s["gpu-h100-01"].labels[L.MELLANOX_NIC] == "true"
    assert s["gpu-h100-01"].labels[L.MOFED_WAIT] == "false"
    assert L.MELLANOX_NIC not in s["cpu-01"].labels
    # every resource of the plugin's config registers on every node it runs on, empty where no NIC matches
    assert s["gpu-h100-01"].resources["rdma/rdma_shared_device_a"] == 63
    assert s["gpu-h100-01"].resources["rdma/roce"] == 0
    assert s["gpu-l40s-01"].resources["rdma/roce"] == 63
    assert s["gpu-l40s-01"].resources["rdma/rdma_shared_device_a"] == 0
    # no network operator, no plugin: nothing expected
    lab.networking.network_operator.enabled = False
    s = expected.host_states(lab)
    assert not [k for k in s["gpu-h100-01"].resources if k.startswith("rdma/")]
    assert L.MOFED_WAIT not in s["gpu-h100-01"].labels


@pytest.mark.parametrize(("mode", "replicas", "shared"), [
    ("time-slicing", 4, True),
    ("mps", 2, True),
    ("time-slicing", 1, False),  # one replica: the plugin hands the GPU out whole
    ("time-slicing", None, False),
    ("exclusive", 4, False),
    ("mig", None, False),
])
def test_one_rule_says_whether_a_gpu_is_shared(mode, replicas, shared):
    assert upstream.shares_gpus(mode, replicas) is shared


def test_a_pool_shares_its_gpus_only_through_the_device_plugin(local):
    l4 = pool(local, "l4-infer")
    assert l4.sharing.mode.value == "time-slicing" and l4.shares_gpus
    l4.device_plugin, l4.dra = False, True  # the same settings on a DRA pool share nothing
    assert not l4.shares_gpus
