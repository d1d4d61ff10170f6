"""``nodePools`` and the hosts they list: GPU models, sharing modes, MIG layouts, DRA or device plugin."""

from __future__ import annotations

from gpucluster import catalog
from gpucluster.catalog import GpuModel
from gpucluster.spec import mig as miglib
from gpucluster.spec import resource_managers as rmlib
from gpucluster.spec.model import ClusterSpec, NodePool, SharingMode
from gpucluster.spec.validate.common import Collector, close, model_hint
from gpucluster.upstream import MIG_TOGGLE_ARCHITECTURES, SHARED_MODES


def check(spec: ClusterSpec, c: Collector) -> bool:
    errors_before = len(c.problems)
    c.duplicates("hosts", (h.name for h in spec.hosts))
    c.duplicates("nodePools", (p.name for p in spec.node_pools))
    if not any(r.value == "control-plane" for h in spec.hosts for r in h.roles):
        c.error("hosts", "no host has the control-plane role", "add `roles: [control-plane]` to one host")
    host_names = {h.name for h in spec.hosts}
    owner: dict[str, str] = {}
    cat = catalog.catalog()
    for i, pool in enumerate(spec.node_pools):
        base = f"nodePools[{i}]"
        listed: dict[str, int] = {}
        for j, host in enumerate(pool.hosts):
            if host in listed:
                c.error(f"{base}.hosts[{j}]", f"host {host!r} is listed twice in pool {pool.name!r} (also hosts"
                        f"[{listed[host]}]): its GPUs would be counted twice towards the pool's capacity",
                        "list every host of a pool once")
                continue
            listed[host] = j
            if host not in host_names:
                c.error(f"{base}.hosts[{j}]", f"unknown host {host!r}", close(host, host_names))
            elif host in owner and owner[host] != pool.name:
                c.error(f"{base}.hosts[{j}]", f"host {host!r} is already in pool {owner[host]!r}",
                        "a host belongs to exactly one pool")
            owner.setdefault(host, pool.name)
        sharing = pool.sharing
        _resource_managers(f"{base}.resourceManagers", pool, c)
        if pool.gpu is None:
            if sharing.mode is not SharingMode.exclusive or pool.dra:
                c.error(f"{base}.sharing.mode", "GPU sharing or DRA set on a pool without `gpu`",
                        "add gpu: {model: ..., count: ...} or remove the sharing settings")
            continue
        model = cat.get(pool.gpu.model)
        if model is None:
            c.error(f"{base}.gpu.model", f"unknown GPU model {pool.gpu.model!r}", model_hint(pool.gpu.model, cat))
            continue
        _platform(f"{base}.gpu", pool, c)
        if pool.dra and pool.device_plugin:
            c.error(f"{base}.devicePlugin", "pool is served by both the DRA driver and the device plugin",
                    "the same GPUs would be advertised twice; set devicePlugin: false or dra: false")
        if pool.dra and not spec.dra.enabled:
            c.error(f"{base}.dra", "pool asks for DRA but dra.enabled is false", "set dra.enabled: true")
        if pool.extended_resource and not pool.dra:
            c.error(f"{base}.extendedResource", "extendedResource serves plain nvidia.com/gpu through DRA, but the "
                    "pool is not served by the DRA driver", "set dra: true, or drop extendedResource (device-plugin "
                    "pools advertise nvidia.com/gpu anyway)")
        elif pool.extended_resource and sharing.mode is SharingMode.mig:
            c.error(f"{base}.extendedResource", "a static MIG pool publishes MIG devices only, no whole GPU that "
                    "could serve nvidia.com/gpu", "drop extendedResource, or use dynamic-mig (whole GPUs and "
                    "partitions)")
        if sharing.mode is SharingMode.dynamic_mig:
            _dynamic_mig_pool(c, base, pool, model)
        if sharing.mode.value in SHARED_MODES:  # the modes that take replicas
            if sharing.replicas is None or sharing.replicas < 2:
                c.error(f"{base}.sharing.replicas",
                        f"{sharing.mode.value} needs replicas >= 2 (got {sharing.replicas})",
                        "replicas is how many workloads share one GPU; use exclusive for 1")
            if pool.dra:
                c.error(f"{base}.sharing.mode", f"{sharing.mode.value} is configured for the device plugin, "
                        "not for DRA pools", "share DRA GPUs through claims, or serve the pool with the device plugin")
        elif sharing.replicas is not None:
            c.error(f"{base}.sharing.replicas",
                    f"replicas is only used with time-slicing or mps, not {sharing.mode.value}",
                    "remove replicas")
        if sharing.mode is SharingMode.mig:
            _mig_pool(spec, c, base, pool, model)
        elif sharing.mig is not None:
            c.error(f"{base}.sharing.mig", "mig settings on a pool whose sharing mode is not mig",
                    "set sharing.mode: mig or remove sharing.mig")
        if pool.rdma and not spec.networking.network_operator.enabled:
            c.warn(f"{base}.rdma", "RDMA interfaces set but the network operator is disabled",
                   "pods cannot request rdma/* resources without the RDMA shared device plugin")
    return len(c.problems) == errors_before


def _resource_managers(path: str, pool: NodePool, c: Collector) -> None:
    """The kubelet's manager policies are complete (what the kubelet refuses to start without) and say what
    they cannot do on this pool (k8s.io/kubernetes v1.37.2 pkg/kubelet/cm: the Topology Manager's hint
    providers are the device, CPU and Memory managers, container_manager_linux.go:315,344,359; no DRA one)."""
    rm = pool.resource_managers
    if rm is None:
        return
    if rm.cpu_manager_policy == "static" and rm.reserved_system_cpus is None:
        c.error(f"{path}.reservedSystemCPUs", "cpuManagerPolicy static needs CPUs reserved for the system: the "
                "kubelet refuses to start without a CPU reservation",
                "set reservedSystemCPUs, e.g. 0,56 (one core on each socket of a two-socket host)")
    if rm.memory_manager_policy == "Static":
        if rm.reserved_memory_per_numa_node is None:
            c.error(f"{path}.reservedMemoryPerNumaNode", "memoryManagerPolicy Static needs memory reserved on "
                    "each NUMA node: the kubelet refuses to start without it",
                    "set reservedMemoryPerNumaNode, e.g. 2Gi")
        elif rmlib.system_reserved_memory(pool) <= 0:
            nodes = len(rmlib.numa_nodes(pool))
            c.error(f"{path}.reservedMemoryPerNumaNode", f"{rm.reserved_memory_per_numa_node} on each of {nodes} "
                    "NUMA node(s) does not exceed the kubelet's hard eviction threshold (memory.available 100Mi), "
                    "which the Memory Manager counts as reserved", "reserve more, e.g. 2Gi")
    elif rm.reserved_memory_per_numa_node is not None:
        c.error(f"{path}.reservedMemoryPerNumaNode", "reservedMemoryPerNumaNode is only used by memoryManagerPolicy "
                "Static", "set memoryManagerPolicy: Static, or remove reservedMemoryPerNumaNode")
    if rm.topology_manager_policy == "none":
        return
    if pool.uses_dra and not pool.uses_device_plugin:
        c.warn(f"{path}.topologyManagerPolicy", f"topologyManagerPolicy {rm.topology_manager_policy} aligns CPUs "
               "and memory only on a DRA pool: the kubelet's DRA manager gives the Topology Manager no hints, so "
               "claimed GPUs can land on another NUMA node", "ask for GPUs under one PCIe root in the claim "
               "template (matchAttribute: pcieRoot); keep the policy for the CPUs")
    most = rmlib.gpus_per_numa_node(pool)
    if rm.topology_manager_policy == "single-numa-node" and pool.uses_device_plugin and most and pool.gpu:
        if most < pool.gpu.count:
            c.warn(f"{path}.topologyManagerPolicy", f"single-numa-node rejects every pod asking for more than "
                   f"{most} GPUs on {pool.gpu.platform} (at most {most} of its {pool.gpu.count} GPUs share a NUMA "
                   "node): the kubelet fails them with TopologyAffinityError", "use restricted, which gives such a "
                   "pod the fewest NUMA nodes that hold its GPUs")


def _dynamic_mig_pool(c: Collector, base: str, pool: NodePool, model: GpuModel) -> None:
    path = f"{base}.sharing.mode"
    if not pool.dra:
        c.error(path, "dynamic-mig is the DRA driver's DynamicMIG: the pool must be served by DRA",
                "set dra: true, or use sharing.mode: mig with a layout for the device plugin")
    if not model.mig_capable:
        migs = [k for k, m in catalog.catalog().items() if m.mig_capable]
        c.error(path, f"{model.key} does not support MIG", f"use a MIG-capable model ({', '.join(migs)})")
    elif model.architecture not in MIG_TOGGLE_ARCHITECTURES:
        c.error(path, f"{model.key} ({model.architecture}) cannot switch MIG mode without a GPU reset: the DRA "
                "driver then publishes partitions only once MIG mode is already enabled, and never the whole GPU",
                f"use sharing.mode: mig with a layout (static MIG), or a {' or '.join(MIG_TOGGLE_ARCHITECTURES)} GPU")


def _mig_pool(spec: ClusterSpec, c: Collector, base: str, pool: NodePool, model: GpuModel) -> None:
    if not model.mig_capable:
        migs = [k for k, m in catalog.catalog().items() if m.mig_capable]
        c.error(f"{base}.sharing.mode", f"{model.key} does not support MIG",
                f"use time-slicing, or a MIG-capable model ({', '.join(migs)})")
        return
    mig = pool.sharing.mig
    if mig is None or (mig.layout is None and mig.profiles is None):
        c.error(f"{base}.sharing.mig", "MIG pools need a layout",
                'set mig.layout: all-1g.10gb or mig.profiles: {"1g.10gb": 7}')
        return
    if mig.layout is not None and mig.profiles is not None:
        c.error(f"{base}.sharing.mig", "set either layout or profiles, not both")
        return
    where = f"{base}.sharing.mig.layout" if mig.layout is not None else f"{base}.sharing.mig.profiles"
    try:
        layout = miglib.pool_layout(pool)
        miglib.check_fits(model, layout)
    except miglib.LayoutError as err:
        c.error(where, str(err), err.hint)
        return
    if spec.gpu_operator.mig_strategy == "single" and len([p for p, n in layout.items() if n]) > 1:
        c.error(where, "gpuOperator.migStrategy is single, but this layout mixes profiles",
                "use one profile per GPU, or set gpuOperator.migStrategy: mixed")


def _platform(path: str, pool: NodePool, c: Collector) -> None:
    """``gpu.platform`` names a platform of the catalog that holds the pool's model, and that many GPUs."""
    key = pool.gpu.platform if pool.gpu else None
    if key is None or pool.gpu is None:
        return
    plat = catalog.platform(key)
    if plat is None:
        c.error(f"{path}.platform", f"unknown platform {key!r}",
                close(key, catalog.platforms()) or "`gpucluster catalog` lists the platforms with a cited layout; "
                "leave platform out for a board it does not list")
    elif pool.gpu.model not in plat.models:
        c.error(f"{path}.platform", f"platform {key!r} ({plat.description}) holds {', '.join(plat.models)}, not "
                f"{pool.gpu.model}", "leave platform out, or fix gpu.model")
    elif pool.gpu.count > len(plat.gpus):
        c.error(f"{path}.platform", f"platform {key!r} holds {len(plat.gpus)} GPUs, not {pool.gpu.count}",
                f"set gpu.count to at most {len(plat.gpus)}, or leave platform out")
