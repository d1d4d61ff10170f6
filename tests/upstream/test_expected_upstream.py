"""Verification's expectations (gpucluster.expected) against NVIDIA's own GFD and device-plugin code.

``gpucluster verify`` compares live nodes with :func:`gpucluster.expected.host_states`, which is
computed from the spec and the GPU catalog. The GPU simulator, on the other side, gets its labels
and resources from nvidia-oracle (k8s-device-plugin at the release the GPU Operator deploys, over a
mock NVML built from simulator/data/nvml.yaml). The two sides share no code; this test shows they
agree, pool by pool, for both inventories and for sharing variants the inventories do not cover:
every GFD label verify expects is the value upstream publishes, and a device-plugin node is expected
to advertise exactly what upstream advertises.

Skipped without the built tool; failing instead under GPUCLUSTER_REQUIRE_TOOLS=1.
"""

from __future__ import annotations

import pytest
from test_device_plugin_upstream import MPS_ROOT, configmap, node_request

from gpucluster import expected
from gpucluster import labels as L
from gpucluster.simulator import nvml
from gpucluster.simulator.oracle import Oracle
from gpucluster.spec import mig as miglib
from gpucluster.spec.model import ClusterSpec, SharingMode

#: Labels verify expects that GFD does not publish (the GPU Operator sets gpu.present from NFD's
#: PCI labels, fact gpu-present-label; the MIG manager sets mig.config.state).
NOT_GFD = {L.GPU_PRESENT, L.MIG_CONFIG_STATE}


def _variants(spec: ClusterSpec) -> list[tuple[str, ClusterSpec]]:
    """The spec plus copies with the other MIG strategy and renamed shared GPUs."""
    out = [("as written", spec)]
    other = spec.model_copy(deep=True)
    other.gpu_operator.mig_strategy = "single" if spec.gpu_operator.mig_strategy == "mixed" else "mixed"
    out.append((f"mig.strategy {other.gpu_operator.mig_strategy}", other))
    renamed = spec.model_copy(deep=True)
    for pool in renamed.gpu_pools:
        if pool.sharing.replicas and pool.sharing.replicas > 1:
            pool.sharing.rename_by_default = True
    out.append(("renameByDefault", renamed))
    return out


@pytest.mark.parametrize("inventory", ("local", "lab"))
def test_expected_labels_and_resources_are_what_upstream_publishes(
    oracle: Oracle, local_spec: ClusterSpec, lab_spec: ClusterSpec, inventory: str
) -> None:
    base = {"local": local_spec, "lab": lab_spec}[inventory]
    compared = 0
    for variant, spec in _variants(base):
        states = expected.host_states(spec)
        configs = configmap(spec)
        for pool in spec.gpu_pools:
            mig = pool.sharing.mode is SharingMode.mig
            if variant.startswith("mig.strategy") and (
                    pool.sharing.mode is SharingMode.mps
                    or (mig and len([n for n in miglib.pool_layout(pool).values() if n]) > 1)):
                # Validation refuses these (MPS needs single; single needs one profile per layout),
                # each because upstream refuses it: test_spec_validation and the MPS test above.
                continue
            host = next(h for h, p in spec.pools_by_host().items() if p.name == pool.name)
            want = states[host]
            request = node_request(spec, pool, configs)
            request = type(request)(**{**request.__dict__, "plugin_args": (MPS_ROOT,)})
            answer = oracle.node(request)
            where = f"{inventory} ({variant}) pool {pool.name}"
            assert answer.errors == {}, where
            gfd = {k: v for k, v in want.labels.items() if L.is_gfd_label(k) and k not in NOT_GFD}
            got = {k: answer.labels.get(k, "(missing)") for k in gfd}
            assert pool.gpu
            facts = nvml.model(pool.gpu.model)
            if mig and facts.mig and facts.mig.device_memory_mib != facts.memory_mib and L.GPU_MEMORY in got:
                # The mock's MIG table is written for a nominal total (nvml.yaml, e.g. H100 81920 MiB);
                # real NVML reports the board's total with MIG on too, which is what verify expects.
                assert got[L.GPU_MEMORY] == str(facts.mig.device_memory_mib), where
                got[L.GPU_MEMORY] = str(facts.memory_mib)
            assert got == gfd, where
            if pool.uses_device_plugin:
                plugin = {k: v for k, v in want.resources.items() if k.startswith("nvidia.com/")}
                assert plugin == dict(answer.resources), where
            compared += 1
    assert compared >= 6
