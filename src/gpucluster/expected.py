"""The expected state of every host, computed from the spec in one place.

Verification compares the live cluster with this. Labels we set come from the render core
(:func:`gpucluster.render.nodes.node_config`, so verify checks that the cluster carries what we
rendered); what NVIDIA's agents publish comes from :mod:`gpucluster.devices`, fed with each pool's
sharing settings straight from the spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpucluster import catalog, devices
from gpucluster import labels as L
from gpucluster.devices import Device
from gpucluster.render.nodes import management_labels
from gpucluster.spec.capacity import sharing
from gpucluster.spec.model import ClusterSpec, NodePool, SharingMode


@dataclass
class HostState:
    name: str
    pool: str | None
    gpu_model: str | None
    gpu_count: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[str] = field(default_factory=list)
    resources: dict[str, int] = field(default_factory=dict)  # extended resources: capacity == allocatable
    devices: list[Device] = field(default_factory=list)
    #: DynamicMIG: counter set name → the counters checked (memory, memory-slice-<i>).
    counter_sets: dict[str, dict[str, int]] = field(default_factory=dict)


def rdma_resources(spec: ClusterSpec, pool: NodePool) -> dict[str, int]:
    """What the RDMA shared device plugin serves on a host of ``pool``: every resource name of the spec,
    ``rdmaHcaMax`` where one of the host's NICs is among that resource's interfaces and of one of its
    link types (pools sharing a name share one resource), else 0 (an empty resource still registers)."""
    assert pool.rdma is not None
    names: dict[str, tuple[set[str], set[str]]] = {}
    for p in spec.node_pools:
        if p.rdma:
            ifnames, links = names.setdefault(p.rdma.resource_name, (set(), set()))
            ifnames.update(p.rdma.interfaces)
            links.add(p.rdma.link_type)
    out = {}
    for name, (ifnames, links) in names.items():
        served = pool.rdma.link_type in links and bool(ifnames & set(pool.rdma.interfaces))
        out[f"rdma/{name}"] = spec.networking.rdma_hca_max if served else 0
    return out


def host_states(spec: ClusterSpec) -> dict[str, HostState]:
    """Expected labels, taints, extended resources and DRA devices for every host of the spec."""
    out: dict[str, HostState] = {}
    pools = spec.pools_by_host()
    per_pool: dict[str, tuple[dict, dict, dict]] = {}  # pool → (gfd labels, management labels, resources)
    control_planes = {h.name for h in spec.control_planes}
    for host in spec.hosts:
        pool = pools.get(host.name)
        state = HostState(name=host.name, pool=pool.name if pool else None, gpu_model=None, gpu_count=0)
        out[host.name] = state
        if host.name in control_planes:
            state.labels[L.CONTROL_PLANE] = ""
        # the host's fabric domain per tier (docs/topology.md), as the spec states it
        state.labels.update({f"{L.TOPOLOGY_PREFIX}{tier}": domain for tier, domain in host.topology.items()})
        if pool is None:
            continue
        state.labels[L.POOL] = pool.name
        state.labels.update(pool.labels)
        state.taints = [str(t) for t in pool.effective_taints]
        if pool.rdma and spec.networking.network_operator.enabled:
            # NFD labels NVIDIA NICs; the operator clears the OFED wait (no OFED driver is deployed);
            # the RDMA shared device plugin's DaemonSet selects on both.
            state.labels[L.MELLANOX_NIC] = "true"
            state.labels[L.MOFED_WAIT] = "false"
            state.resources.update(rdma_resources(spec, pool))
        if not pool.gpu:
            continue
        model = catalog.get(pool.gpu.model)
        state.gpu_model, state.gpu_count = pool.gpu.model, pool.gpu.count
        shares = sharing(spec, pool)
        if pool.name not in per_pool:  # identical for every host of the pool
            per_pool[pool.name] = (
                devices.gfd_labels(model, pool.gpu.count, shares),
                management_labels(pool),
                devices.advertised_resources(pool.gpu.count, shares) if pool.uses_device_plugin else {},
            )
        gfd, management, resources = per_pool[pool.name]
        state.labels.update(gfd)
        state.labels.update(management)
        state.resources.update(resources)
        if pool.uses_dra:
            dynamic = shares.mode == "dynamic-mig" and model.mig is not None
            state.devices = devices.dra_devices(model, pool.gpu.count, shares.mig, dynamic=dynamic,
                                                platform=pool.gpu.platform)
            if dynamic:
                state.counter_sets = devices.dra_counter_sets(model, pool.gpu.count)
    return out


#: The DaemonSets the charts create (name -> what selects the nodes), from the facts of each release:
#: gpu-operator v26.3.0 assets/state-*/0*_daemonset.yaml (fact daemonsets), dra-driver-nvidia-gpu
#: 0.4.1 templates/kubeletplugin.yaml:20 with the chart's name, network-operator 26.4.1
#: manifests/state-rdma-shared-device-plugin/0060_rdma-shared-dev-plugin-ds.yaml:17.
DRA_KUBELET_PLUGIN = "dra-driver-nvidia-gpu-kubelet-plugin"
RDMA_DEVICE_PLUGIN = "rdma-shared-dp-ds"


def _mig_manager_runs(pool: NodePool) -> bool:
    """The operator's MIG manager lands on MIG-capable GPUs, unless the host layer owns MIG there."""
    assert pool.gpu
    host_managed = pool.sharing.mig is not None and pool.sharing.mig.managed_by == "host"
    return catalog.get(pool.gpu.model).mig_capable and not host_managed


def daemonsets(spec: ClusterSpec) -> dict[tuple[str, str], list[str]]:
    """(namespace, DaemonSet) -> the hosts it must run on, for every operand the spec enables."""
    out: dict[tuple[str, str], list[str]] = {}
    pools = spec.pools_by_host()
    gpu_hosts = [h.name for h in spec.hosts if (p := pools.get(h.name)) is not None and p.gpu]
    g = spec.gpu_operator
    if g.enabled and gpu_hosts:
        ns = g.namespace

        def add(name: str, hosts: list[str]) -> None:
            if hosts:
                out[(ns, name)] = hosts

        add("gpu-feature-discovery", gpu_hosts)
        add("nvidia-operator-validator", gpu_hosts)
        if g.driver.managed_by == "operator":
            add("nvidia-driver-daemonset", gpu_hosts)
        if g.toolkit:
            add("nvidia-container-toolkit-daemonset", gpu_hosts)
        if g.dcgm_exporter.enabled:
            add("nvidia-dcgm-exporter", gpu_hosts)
        add("nvidia-device-plugin-daemonset", [h for h in gpu_hosts if pools[h].uses_device_plugin])
        if any(p.sharing.mode is SharingMode.mig for p in spec.gpu_pools):
            add("nvidia-mig-manager", [h for h in gpu_hosts if _mig_manager_runs(pools[h])])
    dra = [h for h in gpu_hosts if pools[h].uses_dra]
    if spec.dra.enabled and dra:
        out[(spec.dra.namespace, DRA_KUBELET_PLUGIN)] = dra
    net = spec.networking.network_operator
    rdma = [h.name for h in spec.hosts if (p := pools.get(h.name)) is not None and p.rdma]
    if net.enabled and rdma:
        out[(net.namespace, RDMA_DEVICE_PLUGIN)] = rdma
    return out
