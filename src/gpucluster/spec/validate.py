"""Cross-field validation: rules that need more than one field, each with a path and a hint.

:func:`validate` never stops at the first problem: it returns all of them, errors and warnings, so
a user fixes a spec in one pass. Nothing anywhere is changed before this passes.
"""

from __future__ import annotations

import difflib
import ipaddress
from collections import Counter
from collections.abc import Iterable

from gpucluster import catalog, versions
from gpucluster.catalog import GpuModel
from gpucluster.devices import DRA_CHART_DEVICE_CLASSES, DRA_EXTENDED_CLASS, MIG_TOGGLE_ARCHITECTURES
from gpucluster.errors import Problem
from gpucluster.spec import capacity, dra_fit, features, networks
from gpucluster.spec import mig as miglib
from gpucluster.spec.model import ClusterSpec, NodePool, SecondaryNetwork, SharingMode

#: Host OSes NVIDIA builds driver container images for, among those the spec accepts
#: (NVIDIA/gpu-driver-container at the v26.3.0 release: ubuntu22.04, ubuntu24.04, rhel8/9/10, rocky9, ...;
#: no Debian). Upstream fact: tests/upstream/facts/gpu-operator.yaml driver-container-ci-dists.
DRIVER_IMAGE_OSES = ("ubuntu22.04", "ubuntu24.04", "rhel9")
#: Oldest NVIDIA driver branch the DRA driver serves GPUs with (dra-driver-nvidia-gpu 0.4.1,
#: README; tests/upstream/facts/dra-driver.yaml min-nvidia-driver).
MIN_DRA_DRIVER_BRANCH = 565
#: Namespaces Kubernetes itself creates and uses.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: Namespaces of the pod networks tests/upstream/facts/cni.yaml weighs: flannel's chart and Calico's
#: operator chart (facts flannel-chart-install-namespace, calico-chart-namespace).
POD_NETWORK_NAMESPACES = ("kube-flannel", "tigera-operator")
#: Extended resource names the quota spells in its own fields.
IMPLICIT_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"


class _Collector:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def error(self, path: str, message: str, hint: str = "") -> None:
        self.problems.append(Problem(path, message, hint))

    def warn(self, path: str, message: str, hint: str = "") -> None:
        self.problems.append(Problem(path, message, hint, severity="warning"))

    def duplicates(self, section: str, names: Iterable[str], what: str = "name") -> None:
        seen: dict[str, int] = {}
        for i, name in enumerate(names):
            if name in seen:
                self.error(f"{section}[{i}].{what}", f"duplicate {what} {name!r} (also {section}[{seen[name]}])",
                           f"every {what} in {section} must be unique")
            else:
                seen[name] = i


def _close(word: str, options: Iterable[str]) -> str:
    options = list(options)
    match = difflib.get_close_matches(word, options, n=1)
    if match:
        return f"did you mean {match[0]!r}?"
    return f"one of: {', '.join(sorted(options))}" if options else ""


def validate(spec: ClusterSpec) -> list[Problem]:
    c = _Collector()
    pools_ok = _hosts_and_pools(spec, c)
    _kubernetes(spec, c)
    _operators(spec, c)
    _dra(spec, c)
    _scheduling(spec, c)
    _networking(spec, c)
    _tenants(spec, c, capacity_known=pools_ok)
    _cost(spec, c)
    _monitoring(spec, c)
    if pools_ok and not any(p.severity == "error" and p.path.startswith(("dra.", "tenants")) for p in c.problems):
        c.problems += dra_fit.problems(spec)
    return c.problems


def _hosts_and_pools(spec: ClusterSpec, c: _Collector) -> bool:
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
        for j, host in enumerate(pool.hosts):
            if host not in host_names:
                c.error(f"{base}.hosts[{j}]", f"unknown host {host!r}", _close(host, host_names))
            elif host in owner and owner[host] != pool.name:
                c.error(f"{base}.hosts[{j}]", f"host {host!r} is already in pool {owner[host]!r}",
                        "a host belongs to exactly one pool")
            owner.setdefault(host, pool.name)
        sharing = pool.sharing
        if pool.gpu is None:
            if sharing.mode is not SharingMode.exclusive or pool.dra:
                c.error(f"{base}.sharing.mode", "GPU sharing or DRA set on a pool without `gpu`",
                        "add gpu: {model: ..., count: ...} or remove the sharing settings")
            continue
        model = cat.get(pool.gpu.model)
        if model is None:
            c.error(f"{base}.gpu.model", f"unknown GPU model {pool.gpu.model!r}", _close(pool.gpu.model, cat))
            continue
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
        if sharing.mode in (SharingMode.time_slicing, SharingMode.mps):
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


def _dynamic_mig_pool(c: _Collector, base: str, pool: NodePool, model: GpuModel) -> None:
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


def _mig_pool(spec: ClusterSpec, c: _Collector, base: str, pool: NodePool, model: GpuModel) -> None:
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


def _kubernetes(spec: ClusterSpec, c: _Collector) -> None:
    k = spec.kubernetes
    major, minor = k.minor
    supported = ", ".join(f"1.{m}" for m in features.SUPPORTED_MINORS)
    if major != 1 or minor not in features.SUPPORTED_MINORS:
        c.error("kubernetes.version", f"Kubernetes {k.version} is not supported (supported: {supported})",
                f"use {versions.KUBERNETES}")
        return
    for gate, value in k.feature_gates.items():
        if value is False and gate in features.LOCKED_ON.get(minor, ()):
            c.error(f"kubernetes.featureGates.{gate}", f"{gate} is locked on in Kubernetes 1.{minor}: every "
                    "component refuses to start with it set to false", "remove the override")
    for name, why in features.unservable(minor, used_features(spec)).items():
        c.error("kubernetes.version", f"the spec uses {name}: {why}", f"use Kubernetes {versions.KUBERNETES}")
    nets = {"kubernetes.podSubnet": k.pod_subnet, "kubernetes.serviceSubnet": k.service_subnet}
    for i, n in enumerate(spec.networking.secondary_networks):
        nets[f"networking.secondaryNetworks[{i}].cidr"] = n.cidr
    parsed = {}
    for path, cidr in nets.items():
        try:
            parsed[path] = ipaddress.ip_network(cidr, strict=True)
        except ValueError as err:
            c.error(path, f"invalid CIDR {cidr!r}: {err}", "write it like 10.244.0.0/16 (host bits zero)")
    items = list(parsed.items())
    for i, (pa, na) in enumerate(items):
        for pb, nb in items[i + 1:]:
            if na.version == nb.version and na.overlaps(nb):
                c.error(pb, f"{nb} overlaps {pa} ({na})", "give every network its own address range")


def component_feature_gates(spec: ClusterSpec) -> dict[str, bool]:
    """The feature gates every component (API server, controller manager, scheduler, kubelet) runs with:
    those the spec's DRA features need on its Kubernetes version, then the spec's own
    ``kubernetes.featureGates`` over them (an explicit setting wins)."""
    derived = features.gates(spec.kubernetes.minor[1], used_features(spec))
    return dict(sorted({**derived, **spec.kubernetes.feature_gates}.items()))


def api_runtime_config(spec: ClusterSpec) -> list[str]:
    """The API versions the API server must serve for the spec's DRA features (``--runtime-config``)."""
    return features.runtime_config(spec.kubernetes.minor[1], used_features(spec))


def used_features(spec: ClusterSpec) -> list[str]:
    """The DRA features (:data:`gpucluster.spec.features.FEATURES`) the spec's objects rely on."""
    out: list[str] = []
    if spec.dra.enabled and any(p.uses_dra for p in spec.node_pools):
        out.append("claim-device-status")  # verify and cost read which devices a claim holds
        # The class dra-nvidia-gpu (extendedResourceName) is rendered whenever the DRA chart is.
        out.append("extended-resource")
        # `gpucluster quarantine` taints one GPU with a DeviceTaintRule instead of cordoning its node.
        out += ["device-taints", "device-taint-rules"]
    if any(p.uses_dra and p.sharing.mode is SharingMode.dynamic_mig for p in spec.gpu_pools):
        out.append("partitionable-devices")
    if spec.dra.enabled and any(t.first_available for t in spec.dra.claim_templates):
        out.append("prioritized-list")
    return out


def _operators(spec: ClusterSpec, c: _Collector) -> None:
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
    if spec.dra.enabled and any(p.dra for p in spec.node_pools) and not gop.enabled and not host_driver:
        c.warn("gpuOperator.enabled", "DRA pools without the GPU Operator need a host-managed driver",
               "set gpuOperator.driver.managedBy: host")


def _operator_driver_oses(spec: ClusterSpec, c: _Collector) -> None:
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


def _driver_for_dra(spec: ClusterSpec, c: _Collector) -> None:
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


def _dra(spec: ClusterSpec, c: _Collector) -> None:
    d = spec.dra
    c.duplicates("dra.deviceClasses", (dc.name for dc in d.device_classes))
    c.duplicates("dra.claimTemplates", (t.name for t in d.claim_templates))
    classes = {dc.name for dc in d.device_classes} | set(DRA_CHART_DEVICE_CLASSES)
    profiles = {p for m in catalog.catalog().values() if m.mig for p in m.mig.profiles}
    for i, dc in enumerate(d.device_classes):
        s = dc.selector
        if s.mig_profile is not None:
            if dc.type != "mig":
                c.error(f"dra.deviceClasses[{i}].selector.migProfile", "migProfile needs type: mig")
            elif s.mig_profile not in profiles:
                c.error(f"dra.deviceClasses[{i}].selector.migProfile", f"unknown MIG profile {s.mig_profile!r}",
                        _close(s.mig_profile, profiles))
        if s.architecture is not None:
            archs = {m.architecture for m in catalog.catalog().values()}
            if s.architecture not in archs:
                c.error(f"dra.deviceClasses[{i}].selector.architecture", f"unknown architecture {s.architecture!r}",
                        _close(s.architecture, archs))
    if any(p.uses_dra for p in spec.gpu_pools):
        classes.add(DRA_EXTENDED_CLASS)
    for i, t in enumerate(d.claim_templates):
        for j, alt in enumerate(t.alternatives):
            where = f"firstAvailable[{j}].deviceClass" if t.first_available else "deviceClass"
            if alt.device_class not in classes:
                c.error(f"dra.claimTemplates[{i}].{where}", f"unknown DeviceClass {alt.device_class!r}",
                        _close(alt.device_class, classes))
    if (d.device_classes or d.claim_templates) and not d.enabled:
        c.warn("dra.enabled", "DeviceClasses or claim templates are set but DRA is disabled; they are not rendered")
    _one_dynamic_mig_gate(spec, c)
    _extended_pools(spec, c)


def _one_dynamic_mig_gate(spec: ClusterSpec, c: _Collector) -> None:
    """DynamicMIG is one gate of the whole DRA driver release: every MIG-capable DRA pool follows it."""
    dynamic = [p.name for p in spec.gpu_pools if p.uses_dra and p.sharing.mode is SharingMode.dynamic_mig]
    if not dynamic:
        return
    cat = catalog.catalog()
    for i, pool in enumerate(spec.node_pools):
        model = cat.get(pool.gpu.model) if pool.gpu else None
        if not pool.uses_dra or model is None or not model.mig_capable or pool.sharing.mode is SharingMode.dynamic_mig:
            continue
        deleted = " and its static MIG devices deleted" if pool.sharing.mode is SharingMode.mig else ""
        c.error(f"nodePools[{i}].sharing.mode", f"the DRA driver's DynamicMIG gate is one setting for the whole "
                f"release, and pool(s) {', '.join(dynamic)} turn it on: this pool's {model.key} GPUs would be "
                f"published as partitions too{deleted}",
                "set sharing.mode: dynamic-mig on this pool too, or serve it with the device plugin (dra: false)")


def _extended_pools(spec: ClusterSpec, c: _Collector) -> None:
    """The extended-resource class selects by product name: a pool without the opt-in must not share one."""
    cat = catalog.catalog()
    opted = {cat[p.gpu.model].product_name: p.name for p in spec.gpu_pools
             if p.uses_dra and p.extended_resource and p.gpu and p.gpu.model in cat}
    for i, pool in enumerate(spec.node_pools):
        if not (pool.gpu and pool.gpu.model in cat and dra_fit.pool_publishes_whole_gpus(pool)):
            continue
        name = cat[pool.gpu.model].product_name
        if not pool.extended_resource and name in opted:
            c.error(f"nodePools[{i}].extendedResource", f"pool {opted[name]!r} serves plain nvidia.com/gpu from its "
                    f"{name} GPUs, and a DeviceClass selects devices by their attributes, never by node: this "
                    f"pool's {name} GPUs would serve such pods too", "set extendedResource: true here as well, "
                    "or on neither pool")


def _scheduling(spec: ClusterSpec, c: _Collector) -> None:
    c.duplicates("scheduling.priorityClasses", (p.name for p in spec.scheduling.priority_classes))
    values = Counter(p.value for p in spec.scheduling.priority_classes)
    for i, p in enumerate(spec.scheduling.priority_classes):
        if values[p.value] > 1:
            c.warn(f"scheduling.priorityClasses[{i}].value", f"value {p.value} is shared with another class",
                   "classes with equal values do not order against each other")


def _networking(spec: ClusterSpec, c: _Collector) -> None:
    _pod_network(spec, c)
    nets = spec.networking.secondary_networks
    c.duplicates("networking.secondaryNetworks", (n.name for n in nets))
    namespaces = {t.ns for t in spec.tenants}
    rdma_nics = {nic: p.name for p in spec.node_pools if p.rdma for nic in p.rdma.interfaces}
    for i, n in enumerate(nets):
        base = f"networking.secondaryNetworks[{i}]"
        for j, ns in enumerate(n.namespaces):
            if ns not in namespaces:
                c.error(f"{base}.namespaces[{j}]", f"no tenant has namespace {ns!r}", _close(ns, namespaces))
        if n.type == "host-device":
            # Multus hands host-device the RDMA plugin's device ID ("0".."rdmaHcaMax-1") as pciBusID,
            # and host-device moves the whole netdev into one pod: neither fits a shared HCA.
            if n.resource_name:
                c.error(f"{base}.resourceName", f"host-device network {n.name!r} cannot use the shared RDMA "
                        f"resource rdma/{n.resource_name}: Multus would pass its device ID as a PCI address",
                        "use type: macvlan (RoCE) or ipoib (InfiniBand) for shared RDMA NICs, or drop resourceName")
            elif n.master in rdma_nics:
                c.error(f"{base}.master", f"host-device network {n.name!r} would move {n.master}, an RDMA NIC "
                        f"shared by pool {rdma_nics[n.master]!r}, into a single pod",
                        "use type: macvlan or ipoib on shared RDMA NICs")
        _ip_pool(spec, c, base, n)
    nop, gop = spec.networking.network_operator, spec.gpu_operator
    has_work = any(p.rdma for p in spec.node_pools) or bool(nets)  # else no network-operator release
    if nop.enabled and has_work and not nop.nfd and not (gop.enabled and gop.nfd):
        c.warn("networking.networkOperator.nfd", "no NFD is installed by either operator, but the network "
               "operator's chart creates a NodeFeatureRule (it labels the Mellanox NICs its DaemonSets select)",
               "run an external NFD >= v0.13.2 with the NodeFeature API, or set gpuOperator.nfd: true")


def _pod_network(spec: ClusterSpec, c: _Collector) -> None:
    _policy_enforcement(spec, c)
    if spec.networking.pod_network.plugin != "flannel":
        return
    try:
        subnet = ipaddress.ip_network(spec.kubernetes.pod_subnet, strict=True)
    except ValueError:
        return  # reported by _kubernetes
    if subnet.version != 4:
        c.error("kubernetes.podSubnet", f"flannel's podCidr is IPv4, but podSubnet is {subnet}",
                "use an IPv4 podSubnet, or networking.podNetwork.plugin: none with a CNI of your own")


def _policy_enforcement(spec: ClusterSpec, c: _Collector) -> None:
    """Tenants are isolated by NetworkPolicies: something must enforce them, or every tenant reaches every other."""
    net = spec.networking.pod_network
    if not spec.tenants:
        return
    path = "networking.podNetwork.networkPolicyEnforcement"
    tenants = f"{len(spec.tenants)} tenant(s) ({', '.join(t.name for t in spec.tenants)})"
    if net.network_policy_enforcement == "none":
        c.error(path, f"none: nothing enforces the NetworkPolicies that isolate the {tenants}, so every tenant "
                "could reach every other tenant's pods", "use pod-network (flannel's kube-network-policies "
                "add-on), or bring-your-own if the cluster runs an enforcer of its own")
    elif net.plugin == "none" and net.network_policy_enforcement == "pod-network":
        c.error(path, f"pod-network, but plugin: none installs no pod network, so nothing gpucluster installs "
                f"enforces the NetworkPolicies that isolate the {tenants}",
                "if the cluster's own CNI (or a separate enforcer) enforces NetworkPolicy, say so with "
                "networkPolicyEnforcement: bring-your-own; otherwise use plugin: flannel")


def _ip_pool(spec: ClusterSpec, c: _Collector, base: str, net: SecondaryNetwork) -> None:
    """nv-ipam's own IPPool checks, plus: every host that carries the network gets a block."""
    try:
        subnet = ipaddress.ip_network(net.cidr, strict=True)
    except ValueError:
        return  # reported by _kubernetes
    ok = True

    def inside(path: str, value: str) -> bool:
        try:
            addr = ipaddress.ip_address(value)
        except ValueError:
            c.error(path, f"{value!r} is not an IP address", f"an address inside {subnet}")
            return False
        if addr not in subnet:
            c.error(path, f"{addr} is not inside the network's cidr {subnet}", f"an address inside {subnet}")
            return False
        return True

    if net.gateway is not None:
        ok = inside(f"{base}.gateway", net.gateway) and ok
    for j, ex in enumerate(net.exclusions):
        lo_ok = inside(f"{base}.exclusions[{j}].startIP", ex.start_ip)
        hi_ok = inside(f"{base}.exclusions[{j}].endIP", ex.end_ip)
        if lo_ok and hi_ok and int(ipaddress.ip_address(ex.end_ip)) < int(ipaddress.ip_address(ex.start_ip)):
            c.error(f"{base}.exclusions[{j}]", f"endIP {ex.end_ip} is before startIP {ex.start_ip}",
                    "swap them")
            hi_ok = False
        ok = ok and lo_ok and hi_ok
    if not ok:
        return
    usable = networks.usable_addresses(net.cidr)
    block = networks.block_size(spec, net)
    path = f"{base}.perNodeBlockSize"
    if block > usable:
        c.error(path, f"network {net.name!r}: {block} addresses per node exceed the {usable} that {subnet} "
                "holds", "lower perNodeBlockSize or widen cidr")
        return
    hosts = networks.carrier_hosts(spec, net)
    blocks = networks.free_blocks(net, block)
    if blocks < len(hosts):
        pools = [p.name for p in networks.carrier_pools(spec, net)]
        who = f"pools {', '.join(pools)}" if pools else "the cluster (no pool lists it in rdma.interfaces)"
        c.error(path, f"network {net.name!r}: {subnet} holds {blocks} blocks of {block} addresses, but "
                f"{len(hosts)} hosts of {who} carry {net.master} and each needs one",
                f"set perNodeBlockSize to at most {max(1, usable // max(1, len(hosts)))}, widen cidr or "
                "shrink exclusions")
        return
    pods = networks.pods_per_node(spec, net)
    if block < pods:
        what = f"rdma/{net.resource_name} (rdmaHcaMax)" if net.resource_name else "a node (maxPods)"
        c.warn(path, f"network {net.name!r}: {block} addresses per node, but up to {pods} pods can hold "
               f"{what}; pods beyond {block} on a node get no address", "widen cidr or lower the pods per node")


def reserved_namespaces(spec: ClusterSpec) -> dict[str, str]:
    """Namespaces a tenant must not take, each with what it belongs to.

    A tenant's objects there would put operator pods under the tenant's quota, default-deny network
    policy and admission policy, and hand the tenant's groups rights in the operator's namespace.
    """
    out = {ns: "a Kubernetes system namespace" for ns in SYSTEM_NAMESPACES}
    out |= {ns: "a pod network's namespace" for ns in POD_NETWORK_NAMESPACES}
    out[spec.gpu_operator.namespace] = "the GPU Operator's namespace (gpuOperator.namespace)"
    out[spec.dra.namespace] = "the DRA driver's namespace (dra.namespace)"
    out[spec.scheduling.volcano.namespace] = "Volcano's namespace (scheduling.volcano.namespace)"
    out[spec.networking.network_operator.namespace] = ("the network operator's namespace "
                                                       "(networking.networkOperator.namespace)")
    out[spec.monitoring.namespace] = "the monitoring namespace (monitoring.namespace)"
    return out


def _tenants(spec: ClusterSpec, c: _Collector, capacity_known: bool) -> None:
    c.duplicates("tenants", (t.name for t in spec.tenants))
    c.duplicates("tenants", (t.ns for t in spec.tenants), what="namespace")
    priorities = {p.name for p in spec.scheduling.priority_classes}
    classes = {dc.name for dc in spec.dra.device_classes} | set(DRA_CHART_DEVICE_CLASSES)
    if any(p.uses_dra for p in spec.gpu_pools):
        classes.add(DRA_EXTENDED_CLASS)
    templates = {t.name: t for t in spec.dra.claim_templates}
    reserved = reserved_namespaces(spec)
    for i, t in enumerate(spec.tenants):
        base = f"tenants[{i}]"
        if t.ns in reserved:
            c.error(f"{base}.namespace", f"tenant namespace {t.ns!r} is {reserved[t.ns]}",
                    f"give the tenant a namespace of its own, e.g. namespace: {t.name}-workloads")
        if t.pod_security == "privileged":
            c.warn(f"{base}.podSecurity", "privileged pods reach every GPU of the node they run on, outside "
                   "the tenant's quota", "use restricted (the default) or baseline")
        for j, p in enumerate(t.priority_classes):
            if p not in priorities:
                c.error(f"{base}.priorityClasses[{j}]", f"unknown PriorityClass {p!r}", _close(p, priorities))
        for name in t.quota.device_classes:
            if name not in classes:
                c.error(f"{base}.quota.deviceClasses.{name}", f"unknown DeviceClass {name!r}", _close(name, classes))
        _extended(c, f"{base}.quota.extended", t.quota.extended)
        for j, name in enumerate(t.claim_templates):
            if name not in templates:
                c.error(f"{base}.claimTemplates[{j}]", f"unknown claim template {name!r}", _close(name, templates))
                continue
            for alt in templates[name].alternatives:
                cls, count = alt.device_class, alt.count
                allowed = t.quota.device_classes.get(cls)
                if allowed is None and cls == DRA_EXTENDED_CLASS and t.quota.gpus:
                    allowed = t.quota.gpus  # allowed up to quota.gpus (render/tenants.py device_quota)
                if allowed is None:
                    c.error(f"{base}.claimTemplates[{j}]", f"claim template {name!r} claims DeviceClass {cls!r}, "
                            f"which tenant {t.name!r} may not claim", f"add quota.deviceClasses.{cls}: <devices>, or "
                            "drop the template")
                elif count > allowed:
                    c.error(f"{base}.claimTemplates[{j}]", f"claim template {name!r} claims {count} {cls!r} devices, "
                            f"above the tenant's quota of {allowed}", f"raise quota.deviceClasses.{cls} to {count}")
        for j, cidr in enumerate(t.egress_cidrs):
            try:
                ipaddress.ip_network(cidr, strict=True)
            except ValueError as err:
                c.error(f"{base}.egressCidrs[{j}]", f"invalid CIDR {cidr!r}: {err}",
                        "write it like 10.20.0.0/16 (host bits zero)")
        cap = t.queue.capability_gpus
        if cap is not None and t.quota.gpus and cap > t.quota.gpus:
            c.warn(f"{base}.queue.capabilityGpus", f"queue capability {cap} is above the namespace GPU quota "
                   f"{t.quota.gpus}", "the quota rejects pods before the queue could use it")
        if t.queue.guarantee_gpus > (cap if cap is not None else t.quota.gpus):
            c.error(f"{base}.queue.guaranteeGpus", "guarantee exceeds the queue capability",
                    "a queue cannot be guaranteed more than it may use")
    if not capacity_known:
        return
    gpus = capacity.cluster_gpu_capacity(spec)
    total = sum(t.quota.gpus for t in spec.tenants)
    if total > gpus:
        detail = ", ".join(f"{t.name}={t.quota.gpus}" for t in spec.tenants if t.quota.gpus)
        c.error("tenants", f"tenant GPU quotas add up to {total} ({detail}) but the cluster serves "
                f"{gpus} nvidia.com/gpu (device plugin and extendedResource DRA pools)",
                "lower the quotas or add GPU capacity")
    caps = sum(t.queue.capability_gpus if t.queue.capability_gpus is not None else t.quota.gpus
               for t in spec.tenants)
    if caps > gpus:
        c.warn("tenants", f"queue capabilities add up to {caps} GPUs, above the cluster's {gpus}",
               "fine for borrowing, but queues cannot all reach their capability at once")


def _extended(c: _Collector, path: str, extended: dict[str, int]) -> None:
    """quota.extended keys are resource names as pods request them; the GPU and DRA ones have own fields."""
    for name in extended:
        where = f"{path}.{name}"
        if name.startswith(("requests.", "limits.")):
            c.error(where, f"{name!r} is a quota key, not a resource name",
                    f"write the resource as pods request it: {name.split('.', 1)[1]}")
        elif name == "nvidia.com/gpu":
            c.error(where, "nvidia.com/gpu has its own field", "use quota.gpus")
        elif name.startswith(IMPLICIT_CLASS_PREFIX):
            c.error(where, f"{name!r} is a DeviceClass's extended resource",
                    f"use quota.deviceClasses.{name.removeprefix(IMPLICIT_CLASS_PREFIX)}")
        elif "/" not in name:
            c.error(where, f"{name!r} is not an extended resource name (domain/name)",
                    "e.g. nvidia.com/mig-1g.10gb or rdma/rdma_shared_device_a; cpu and memory have own fields")


def _cost(spec: ClusterSpec, c: _Collector) -> None:
    cat = catalog.catalog()
    for model, rate in spec.cost.rates.items():
        if model not in cat:
            c.error(f"cost.rates.{model}", f"unknown GPU model {model!r}", _close(model, cat))
        if rate < 0:
            c.error(f"cost.rates.{model}", "rate must not be negative")


def _monitoring(spec: ClusterSpec, c: _Collector) -> None:
    """What DCGM monitoring cannot do for this spec at the pinned versions (warnings only)."""
    exporter = spec.gpu_operator.dcgm_exporter
    if not (spec.monitoring.enabled and spec.gpu_operator.enabled and exporter.enabled and spec.dra.enabled):
        return
    dra = [(i, p.name) for i, p in enumerate(spec.node_pools) if p.uses_dra]
    if dra:
        c.warn(f"nodePools[{dra[0][0]}].dra",
               f"DCGM metrics of DRA pools ({', '.join(name for _, name in dra)}) carry no pod or namespace: "
               f"the DCGM exporter {versions.DCGM_EXPORTER} attributes ResourceClaim devices only with "
               f"KUBERNETES_ENABLE_DRA, by watching {versions.DCGM_EXPORTER_DRA_API} ResourceSlices, which "
               f"Kubernetes {versions.KUBERNETES} does not serve by default; gpucluster enables neither, so "
               "per-namespace cost and the low-utilization alerts do not count these GPUs",
               "use the device plugin (dra: false) for pools whose GPU time you bill "
               "(docs/observability.md, \"DRA pools\")")
