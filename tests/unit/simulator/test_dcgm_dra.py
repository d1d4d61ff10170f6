"""The simulated DCGM exporter's DRA attribution (KUBERNETES_ENABLE_DRA), pure: the kubelet's DynamicResources
of each container, the exporter's ResourceSlice lookup, and the series copies it serves.

Upstream: dcgm-exporter 4.5.1-4.8.0 internal/pkg/transformation/{dra.go,kubernetes.go}, collector/types.go;
k8s.io/kubernetes v1.37.2 pkg/kubelet/cm/dra/manager.go (GetContainerClaimInfos) and
pkg/kubelet/cm/container_manager_linux.go (GetDynamicResources); facts in tests/upstream/facts/dcgm-exporter.yaml.
"""

from __future__ import annotations

from typing import Any

from gpucluster.promtext import parse
from gpucluster.render import monitoring
from gpucluster.simulator.dcgm import NodeExporter
from gpucluster.simulator.podresources import dra_holders, slice_devices

NODE = "h100-1"


def _s(value: str) -> dict[str, str]:
    return {"string": value}


def v1beta1_slice(pool: str, devices: list[tuple[str, dict[str, Any]]], driver: str = "gpu.nvidia.com") -> dict:
    """A ResourceSlice as resource.k8s.io/v1beta1 serves it: attributes under ``basic``."""
    return {"spec": {"driver": driver, "pool": {"name": pool}, "nodeName": pool,
                     "devices": [{"name": n, "basic": {"attributes": a}} for n, a in devices]}}


SLICES = [
    v1beta1_slice(NODE, [
        ("gpu-0", {"type": _s("gpu"), "uuid": _s("GPU-0")}),
        ("gpu-1", {"type": _s("gpu"), "uuid": _s("GPU-1")}),
        ("gpu-2-mig-1g10gb-0", {"type": _s("mig"), "uuid": _s("MIG-2a"), "parentUUID": _s("GPU-2"),
                                "profile": _s("1g.10gb")}),
        ("gpu-3-mig-orphan", {"type": _s("mig"), "uuid": _s("MIG-3a")}),  # no parentUUID: skipped
        ("gpu-4", {"type": _s("vfio"), "uuid": _s("GPU-4")}),  # an unknown type: skipped
    ]),
    v1beta1_slice(NODE, [("gpu-0", {"type": _s("gpu"), "uuid": _s("OTHER")})], driver="example.com"),
]


def pod(name: str, *, claims: dict[str, str], containers: dict[str, list[str]], phase: str = "Running",
        node: str = NODE, extended: dict | None = None, generated: dict[str, str] | None = None) -> dict:
    """``claims``: pod claim name -> ResourceClaim name ("" = from a template, see ``generated``)."""
    return {
        "metadata": {"name": name, "namespace": "ml-research", "uid": f"uid-{name}"},
        "spec": {"nodeName": node,
                 "resourceClaims": [{"name": k, **({"resourceClaimName": v} if v else
                                                   {"resourceClaimTemplateName": "tmpl"})}
                                    for k, v in claims.items()],
                 "containers": [{"name": c, "resources": {"claims": [{"name": n} for n in used]}}
                                for c, used in containers.items()]},
        "status": {"phase": phase,
                   "resourceClaimStatuses": [{"name": k, "resourceClaimName": v}
                                             for k, v in (generated or {}).items()],
                   **({"extendedResourceClaimStatus": extended} if extended else {})},
    }


def claim(name: str, *results: tuple[str, str, str]) -> dict:
    return {"metadata": {"name": name, "namespace": "ml-research"},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": d, "pool": p, "device": dev} for d, p, dev in results]}}}}


def test_the_exporter_reads_gpus_by_uuid_and_mig_devices_by_their_parent_from_its_driver_only() -> None:
    devices = slice_devices(SLICES)
    assert devices == {
        (NODE, "gpu-0"): ("GPU-0", {}),
        (NODE, "gpu-1"): ("GPU-1", {}),
        (NODE, "gpu-2-mig-1g10gb-0"): ("GPU-2", {"dra_mig_profile": "1g.10gb", "dra_mig_device_uuid": "MIG-2a"}),
    }


def test_each_container_naming_a_claim_holds_its_devices_and_no_other_container_does() -> None:
    pods = [pod("train-0", claims={"gpus": "train-0-gpus"}, containers={"main": ["gpus"], "sidecar": []})]
    claims = [claim("train-0-gpus", ("gpu.nvidia.com", NODE, "gpu-0"), ("gpu.nvidia.com", NODE, "gpu-1"))]
    held = dra_holders(NODE, pods, claims, slice_devices(SLICES))
    assert sorted(held) == ["GPU-0", "GPU-1"]
    assert held["GPU-0"] == [{
        "pod": "train-0", "namespace": "ml-research", "container": "main",
        "dra_claim_name": "train-0-gpus", "dra_claim_namespace": "ml-research", "dra_driver_name": "gpu.nvidia.com",
        "dra_pool_name": NODE, "dra_device_name": "gpu-0"}]


def test_template_claims_extended_resource_claims_and_shared_claims_are_followed() -> None:
    pods = [
        pod("a", claims={"g": ""}, generated={"g": "a-g-xyz"}, containers={"main": ["g"]}),
        # a plain nvidia.com/gpu request served by DRA: the scheduler's claim, mapped to the container
        pod("b", claims={}, containers={"main": [], "other": []},
            extended={"resourceClaimName": "b-extended-resources-abc",
                      "requestMappings": [{"containerName": "main", "resourceName": "nvidia.com/gpu",
                                           "requestName": "container-0-request-0"}]}),
        pod("c1", claims={"shared": "shared-gpu"}, containers={"main": ["shared"]}),
        pod("c2", claims={"shared": "shared-gpu"}, containers={"main": ["shared"]}),
    ]
    claims = [claim("a-g-xyz", ("gpu.nvidia.com", NODE, "gpu-0")),
              claim("b-extended-resources-abc", ("gpu.nvidia.com", NODE, "gpu-1")),
              claim("shared-gpu", ("gpu.nvidia.com", NODE, "gpu-2-mig-1g10gb-0"))]
    held = dra_holders(NODE, pods, claims, slice_devices(SLICES))
    assert [(h["pod"], h["container"], h["dra_claim_name"]) for h in held["GPU-0"]] == [("a", "main", "a-g-xyz")]
    assert [(h["pod"], h["container"]) for h in held["GPU-1"]] == [("b", "main")]
    assert [(h["pod"], h["dra_mig_profile"], h["dra_mig_device_uuid"]) for h in held["GPU-2"]] == [
        ("c1", "1g.10gb", "MIG-2a"), ("c2", "1g.10gb", "MIG-2a")]


def test_pods_not_running_here_other_drivers_and_unpublished_devices_hold_nothing() -> None:
    pods = [pod("pending", claims={"g": "g1"}, containers={"main": ["g"]}, phase="Pending"),
            pod("elsewhere", claims={"g": "g2"}, containers={"main": ["g"]}, node="h100-2"),
            pod("nic", claims={"g": "g3"}, containers={"main": ["g"]}),
            pod("gone-device", claims={"g": "g4"}, containers={"main": ["g"]}),
            pod("unallocated", claims={"g": "g5"}, containers={"main": ["g"]})]
    claims = [claim("g1", ("gpu.nvidia.com", NODE, "gpu-0")), claim("g2", ("gpu.nvidia.com", NODE, "gpu-0")),
              claim("g3", ("example.com", NODE, "gpu-0")), claim("g4", ("gpu.nvidia.com", NODE, "gpu-9")),
              {"metadata": {"name": "g5", "namespace": "ml-research"}, "status": {}}]
    assert dra_holders(NODE, pods, claims, slice_devices(SLICES)) == {}


def exporter() -> NodeExporter:
    gpus = [{"index": 0, "uuid": "GPU-0", "model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559},
            {"index": 1, "uuid": "GPU-1", "model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559},
            {"index": 2, "uuid": "GPU-2", "model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559,
             "instances": [{"gi": 1, "profile": "1g.10gb", "memory_mib": 9984}]}]
    return NodeExporter(NODE, gpus)


def test_a_gpu_held_through_claims_is_served_once_per_holder_with_its_claims_labels() -> None:
    e = exporter()
    pods = [pod("c1", claims={"s": "shared-gpu"}, containers={"main": ["s"]}),
            pod("c2", claims={"s": "shared-gpu"}, containers={"main": ["s"]})]
    e.attribute_dra(dra_holders(NODE, pods, [claim("shared-gpu", ("gpu.nvidia.com", NODE, "gpu-0"))],
                                slice_devices(SLICES)))
    e.set(0, gr_engine_active=0.25)
    act = [s for s in parse(e.exposition()) if s.name == monitoring.ACTIVITY]
    held = sorted((s.labels["pod"], s.value) for s in act if s.labels["gpu"] == "0")
    assert held == [("c1", 0.25), ("c2", 0.25)]
    one = next(s for s in act if s.labels.get("pod") == "c1")
    assert {k: v for k, v in one.labels.items() if k.startswith("dra_") or k in ("namespace", "container")} == {
        "namespace": "ml-research", "container": "main", "dra_claim_name": "shared-gpu",
        "dra_claim_namespace": "ml-research", "dra_driver_name": "gpu.nvidia.com", "dra_pool_name": NODE,
        "dra_device_name": "gpu-0"}
    assert "pod_uid" not in one.labels  # only the device-plugin path sets it
    assert [s.labels.get("pod") for s in act if s.labels["gpu"] == "1"] == [None]  # nobody holds GPU 1
    e.attribute_dra({})  # the pods ended
    assert not [s for s in parse(e.exposition()) if s.labels.get("pod")]


def test_a_dra_mig_device_never_reaches_its_instance_series() -> None:
    # The exporter looks MIG series up by "<gpu>-<instance>", its DRA map by parent UUID (types.go:80-83).
    e = exporter()
    pods = [pod("m", claims={"g": "mig"}, containers={"main": ["g"]})]
    e.attribute_dra(dra_holders(NODE, pods, [claim("mig", ("gpu.nvidia.com", NODE, "gpu-2-mig-1g10gb-0"))],
                                slice_devices(SLICES)))
    samples = parse(e.exposition())
    assert [s for s in samples if s.labels["gpu"] == "2"]  # the instance is served...
    assert not [s for s in samples if s.labels.get("pod")]  # ...with no pod
