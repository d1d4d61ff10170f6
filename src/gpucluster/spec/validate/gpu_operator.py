"""``gpuOperator``: its driver (images per OS, the branch DRA needs), one NFD, MPS, CDI."""

from __future__ import annotations

from gpucluster.spec.model import ClusterSpec, SharingMode
from gpucluster.spec.validate.common import Collector

#: Host OSes NVIDIA builds driver container images for, among those the spec accepts
#: (NVIDIA/gpu-driver-container at the v26.3.0 release: ubuntu22.04, ubuntu24.04, rhel8/9/10, rocky9, ...;
#: no Debian). Upstream fact: tests/upstream/facts/gpu-operator.yaml driver-container-ci-dists.
DRIVER_IMAGE_OSES = ("ubuntu22.04", "ubuntu24.04", "rhel9")


#: Oldest NVIDIA driver branch the DRA driver serves GPUs with (dra-driver-nvidia-gpu 0.4.1,
#: README; tests/upstream/facts/dra-driver.yaml min-nvidia-driver).
MIN_DRA_DRIVER_BRANCH = 565


def check(spec: ClusterSpec, c: Collector) -> None:
    gop, nop = spec.gpu_operator, spec.networking.network_operator
    if gop.enabled and gop.nfd and nop.enabled and nop.nfd:
        c.error("networking.networkOperator.nfd", "NFD is enabled in both the GPU Operator and the network operator",
                "only one NFD may run per cluster; set networking.networkOperator.nfd: false")
    host_driver = gop.driver.managed_by == "host"
    if gop.enabled and not host_driver:
        _operator_driver_oses(spec, c)
    _driver_for_dra(spec, c)
    mps = [p.name for p in spec.gpu_pools if p.sharing.mode is SharingMode.mps and p.uses_device_plugin]
    if gop.enabled and mps and gop.mig_strategy == "mixed":
        # The operator passes its MIG strategy to every device plugin (env MIG_STRATEGY overrides the
        # config file) and the plugin refuses MPS with the mixed strategy: it does not start on those nodes.
        c.error("gpuOperator.migStrategy", f"MPS pools ({', '.join(mps)}) cannot run with migStrategy: mixed: "
                "the NVIDIA device plugin refuses to start (\"using --mig-strategy=mixed is not supported with MPS\")",
                "set gpuOperator.migStrategy: single, or share those pools with time-slicing")
    if gop.enabled and gop.toolkit and not gop.cdi and spec.tenants:
        # Without CDI the operator makes the NVIDIA runtime containerd's default, and the toolkit accepts
        # NVIDIA_VISIBLE_DEVICES from unprivileged containers by default (accept-nvidia-visible-devices-
        # envvar-when-unprivileged = true, nvidia-container-toolkit v1.19.0 api/config/v1/config.go:106).
        c.warn("gpuOperator.cdi", "with CDI off the NVIDIA runtime is the default runtime: a tenant pod on a GPU "
               "node gets every GPU its image's NVIDIA_VISIBLE_DEVICES names, outside its quota",
               "keep gpuOperator.cdi: true (GPUs then reach containers only through the device plugin or DRA)")
    if not gop.enabled:
        for i, pool in enumerate(spec.node_pools):
            if pool.sharing.mode is SharingMode.mig and pool.sharing.mig and pool.sharing.mig.managed_by == "operator":
                c.error(f"nodePools[{i}].sharing.mig.managedBy", f"pool {pool.name!r} leaves its MIG layout to the "
                        "GPU Operator's MIG manager, and the GPU Operator is off: nothing would apply it",
                        "set sharing.mig.managedBy: host (the host layer's mig-parted applies it), or turn "
                        "gpuOperator.enabled on")
    if spec.dra.enabled and any(p.dra for p in spec.node_pools) and not gop.enabled and not host_driver:
        c.warn("gpuOperator.enabled", "DRA pools without the GPU Operator need a host-managed driver",
               "set gpuOperator.driver.managedBy: host")


def _operator_driver_oses(spec: ClusterSpec, c: Collector) -> None:
    """The operator's driver container exists only for some OSes, and it picks one OS for the whole cluster."""
    gpu_hosts = {h for p in spec.gpu_pools for h in p.hosts}
    oses: dict[str, list[str]] = {}
    for i, host in enumerate(spec.hosts):
        if host.name not in gpu_hosts:
            continue
        oses.setdefault(host.os, []).append(host.name)
        if host.os not in DRIVER_IMAGE_OSES:
            c.error(f"hosts[{i}].os", f"NVIDIA builds no driver container image for {host.os} (GPU host "
                    f"{host.name!r}), so the GPU Operator cannot install its driver",
                    f"set gpuOperator.driver.managedBy: host, or run the GPU hosts on one of "
                    f"{', '.join(DRIVER_IMAGE_OSES)}")
    if len(oses) > 1:
        detail = "; ".join(f"{os}: {', '.join(names)}" for os, names in sorted(oses.items()))
        c.error("hosts", f"GPU hosts run different OSes ({detail}); the GPU Operator takes one driver image for "
                "the whole cluster from the first GPU node it finds",
                "run every GPU host on one OS, or set gpuOperator.driver.managedBy: host")


def _driver_for_dra(spec: ClusterSpec, c: Collector) -> None:
    if not any(p.uses_dra for p in spec.gpu_pools):
        return
    version = spec.gpu_operator.driver.version
    try:
        branch = int(version.split(".")[0])
    except ValueError:
        return  # the model checks the version's shape
    if branch < MIN_DRA_DRIVER_BRANCH:
        hint = ("Debian 12's non-free archive carries only the 535 branch: run DRA pools on a supported OS with "
                "the operator-managed driver" if spec.gpu_operator.driver.managed_by == "host" else
                f"pin a driver >= {MIN_DRA_DRIVER_BRANCH}")
        c.error("gpuOperator.driver.version", f"the NVIDIA DRA driver needs driver branch >= "
                f"{MIN_DRA_DRIVER_BRANCH} for GPUs; {version} is older", hint)
