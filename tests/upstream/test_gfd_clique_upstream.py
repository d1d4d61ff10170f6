"""GFD's ``nvidia.com/gpu.clique`` over a GB200 NVL72 node's NVLink fabric, as NVIDIA's code writes it.

nvidia-oracle runs k8s-device-plugin v0.19.0's own labelers (internal/lm/imex.go: ``<clusterUUID>.<cliqueID>``,
left out when the node's fabric-attached GPUs disagree) over the mock NVML, whose GPUs now answer
nvmlDeviceGetGpuFabricInfo with the fabric a request gives them; go-nvlib's IsFabricAttached decides which
GPUs count (state COMPLETED, a non-zero cluster UUID, status SUCCESS; NOT_SUPPORTED: no fabric). The fabric
is the one a real GB200 compute tray reported, taken from NVIDIA's capture (constants below, with their
lines): nothing here computes the label.

Skipped without the built nvidia-oracle (and nvml-stub for the C-interface case); failing instead under
GPUCLUSTER_REQUIRE_TOOLS=1.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpucluster.simulator import nvml
from gpucluster.simulator.oracle import GpuRequest, NodeAnswer, NodeRequest, Oracle

#: NVIDIA/k8s-test-infra 3b2b865d91b1844baa9feeca2820d2fab65414c7,
#: tests/e2e/go/assertions/nvidiasmi/testdata/hardware/qx-gb200.xml (nvidia-smi -q -x of a real 4x GB200 node):
#: line 5 <driver_version>580.173.02; line 7 <attached_gpus>4; each GPU's <fabric> block, lines 299-302
#: (GPU 00000000:29:00.0), 878-881 (3F), 1457-1460 (9C), 2036-2039 (B2), all four alike:
#: <state>Completed</state> <status>Success</status> <cliqueId>2</cliqueId>
#: <clusterUuid>00000001-0000-0000-0000-000000000001</clusterUuid>.
CAPTURE_DRIVER = "580.173.02"
CAPTURE_GPUS = 4
CAPTURE_STATE = "completed"  # "Completed": NVML_GPU_FABRIC_STATE_COMPLETED (status Success: NVML_SUCCESS)
CAPTURE_CLIQUE_ID = 2
CAPTURE_CLUSTER_UUID = "00000001-0000-0000-0000-000000000001"

CLIQUE = "nvidia.com/gpu.clique"


def _answer(oracle: Oracle, *gpus: GpuRequest, nvml_library: str = "") -> NodeAnswer:
    answer = oracle.node(NodeRequest(gpus=gpus, driver_version=CAPTURE_DRIVER,
                                     cuda_driver_version=nvml.cuda_driver_version(CAPTURE_DRIVER),
                                     nvml_library=nvml_library))
    assert answer.errors == {}
    assert answer.labels["nvidia.com/gpu.count"] == str(sum(g.count for g in gpus))
    return answer


def _captured_node() -> GpuRequest:
    gpu = nvml.gpu_request("GB200", CAPTURE_GPUS, fabric=(CAPTURE_CLUSTER_UUID, CAPTURE_CLIQUE_ID))
    return dataclasses.replace(gpu, fabric_state=CAPTURE_STATE)


def test_gfd_labels_the_captured_gb200_fabric_as_its_clique(oracle: Oracle) -> None:
    answer = _answer(oracle, _captured_node())
    assert answer.labels[CLIQUE] == "00000001-0000-0000-0000-000000000001.2"
    assert answer.labels["nvidia.com/gpu.product"] == "NVIDIA-GB200"


@pytest.mark.parametrize(("fabric", "state"), [
    pytest.param(None, "", id="no-fabric-info"),  # NVML answers NOT_SUPPORTED
    pytest.param((CAPTURE_CLUSTER_UUID, CAPTURE_CLIQUE_ID), "in-progress", id="state-in-progress"),
    pytest.param((CAPTURE_CLUSTER_UUID, CAPTURE_CLIQUE_ID), "not-started", id="state-not-started"),
    pytest.param(("00000000-0000-0000-0000-000000000000", CAPTURE_CLIQUE_ID), "", id="zero-cluster-uuid"),
])
def test_gpus_not_attached_to_a_fabric_get_no_clique(oracle: Oracle, fabric: tuple[str, int] | None,
                                                     state: str) -> None:
    gpu = dataclasses.replace(nvml.gpu_request("GB200", CAPTURE_GPUS, fabric=fabric), fabric_state=state)
    assert CLIQUE not in _answer(oracle, gpu).labels


def test_gpus_of_one_node_in_different_cliques_get_no_clique(oracle: Oracle) -> None:
    """GFD's non-unique case: it leaves the label out and says why (klog warning)."""
    first = nvml.gpu_request("GB200", 2, fabric=(CAPTURE_CLUSTER_UUID, CAPTURE_CLIQUE_ID))
    second = nvml.gpu_request("GB200", 2, fabric=(CAPTURE_CLUSTER_UUID, CAPTURE_CLIQUE_ID + 1))
    answer = _answer(oracle, first, second)
    assert CLIQUE not in answer.labels
    assert any("Clique IDs are non-unique" in w for w in answer.warnings), answer.warnings


def test_the_fabric_adds_exactly_the_clique_label(oracle: Oracle) -> None:
    with_fabric = _answer(oracle, _captured_node()).labels
    without = _answer(oracle, nvml.gpu_request("GB200", CAPTURE_GPUS)).labels
    assert set(with_fabric.items()) ^ set(without.items()) == {(CLIQUE, "00000001-0000-0000-0000-000000000001.2")}


def test_the_nvml_stub_carries_the_fabric_through_nvmls_c_interface(oracle: Oracle, nvml_stub: Path) -> None:
    """The stub library (nvmlDeviceGetGpuFabricInfo over the same mock) gives GFD the same labels."""
    direct = _answer(oracle, _captured_node()).labels
    via_stub = _answer(oracle, _captured_node(), nvml_library=str(nvml_stub)).labels
    assert via_stub == direct and via_stub[CLIQUE] == "00000001-0000-0000-0000-000000000001.2"
