"""DRA: the NVIDIA DRA driver's release and Helm values, DeviceClasses selected by attributes, claim templates.

Selectors are CEL over what the driver publishes (:mod:`gpucluster.spec.selectors`, which validation
evaluates too). The GPU simulator reads this module's :func:`values`, as the kubelet plugins read their
FEATURE_GATES; the names shared with verification come from :mod:`gpucluster.upstream`, so nothing here
reaches the expectation side's device arithmetic.

**Plain ``nvidia.com/gpu`` through DRA.** The chart's own ``gpu.nvidia.com`` class names
``nvidia.com/gpu`` as its extended resource (fact deviceclass-gpu-extended-resource-name) and no values
key turns that off, so with the chart alone every DRA pool's whole GPUs serve plain GPU pods. The
scheduler maps an extended resource to ONE class, the newest (ties: the lower name), and a DeviceClass
selector sees device attributes, never the node. So whenever the chart is installed we render our own
class :data:`~gpucluster.upstream.DRA_EXTENDED_CLASS` with the same extended resource, created after the
chart (:data:`CHART_KINDS` orders it behind the release) and named to win ties, whose selector matches
only the whole GPUs of pools with ``extendedResource: true`` (by product name; validation refuses a pool
without the opt-in whose GPUs carry the same name). With no pool opted in it matches nothing, and plain
GPU pods stay on device-plugin pools. Verification checks which class the scheduler maps.
"""

from __future__ import annotations

from gpucluster import labels as L
from gpucluster.render.common import Obj, obj
from gpucluster.render.contract import Kind
from gpucluster.spec.model import ChartRef, ClaimTemplate, ClusterSpec, DeviceClass, SharingMode, Tenant
from gpucluster.spec.nvlink import compute_domains
from gpucluster.spec.selectors import device_class_cel, extended_class_cel
from gpucluster.upstream import (
    DRA_EXTENDED_CLASS,
    DRA_EXTENDED_RESOURCE,
    DRA_HEALTH_GATE,
    DRA_TOPOLOGY_ATTRIBUTES,
    DYNAMIC_MIG_GATE,
)

API = "resource.k8s.io/v1"
#: Our DeviceClasses wait for the DRA driver's release (when this run installs it), so the extended-resource
#: class is newer than the chart's ``gpu.nvidia.com`` (see the module docstring). DeviceClass is built in,
#: so listing it here changes nothing else.
CHART_KINDS = ((API, "DeviceClass"),)
BEFORE_OTHER_RELEASES = False
AFTER_KINDS: dict[Kind, Kind] = {}


def enabled(spec: ClusterSpec) -> bool:
    """The chart is installed when some pool uses DRA."""
    return spec.dra.enabled and any(p.uses_dra for p in spec.node_pools)


def namespace(spec: ClusterSpec) -> str:
    return spec.dra.namespace


def chart(spec: ClusterSpec) -> ChartRef:
    return spec.dra.chart


def after(spec: ClusterSpec) -> list[str]:
    return []


def dynamic_mig(spec: ClusterSpec) -> bool:
    """Whether the driver runs with DynamicMIG (some DRA pool asks for ``sharing.mode: dynamic-mig``)."""
    return any(p.uses_dra and p.sharing.mode is SharingMode.dynamic_mig for p in spec.gpu_pools)


def health_check(spec: ClusterSpec) -> bool:
    """Whether the driver runs its NVML health monitor (``NVMLDeviceHealthCheck``): asked for, and possible.

    The driver refuses the gate next to DynamicMIG (dra-driver-nvidia-gpu v0.4.1
    ``pkg/featuregates/featuregates.go``, fact driver-feature-gates: "DynamicMIG excludes
    NVMLDeviceHealthCheck"), so a release with a dynamic-mig pool runs without it (validation says so when
    the spec asked for it by name).
    """
    return spec.dra.device_health_check and not dynamic_mig(spec)


def plugin_tolerations(spec: ClusterSpec) -> list[dict]:
    """Tolerations for every taint of every DRA pool: the kubelet plugin must run wherever DRA GPUs are."""
    seen: dict[tuple[str, str, str], dict] = {}
    for pool in spec.node_pools:
        if not pool.uses_dra:
            continue
        for t in pool.effective_taints:
            tol = {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect} if t.value else \
                {"key": t.key, "operator": "Exists", "effect": t.effect}
            seen[(t.key, t.value, t.effect)] = tol
    return [seen[k] for k in sorted(seen)]


def mig_manager_pools(spec: ClusterSpec) -> list[str]:
    """DRA pools with a static MIG layout the GPU Operator's MIG manager applies (sorted names)."""
    if not spec.gpu_operator.enabled:
        return []  # no MIG manager, no pause to follow (and no operator to set the labels the terms read)
    return sorted(p.name for p in spec.node_pools
                  if p.uses_dra and p.sharing.mode is SharingMode.mig
                  and not (p.sharing.mig is not None and p.sharing.mig.managed_by == "host"))


def plugin_affinity(spec: ClusterSpec) -> dict | None:
    """The kubelet plugin's node affinity when a DRA pool's static MIG layout can change under it.

    The plugin enumerates its devices once, at start (dra-driver-nvidia-gpu v0.4.1
    ``cmd/gpu-kubelet-plugin/device_state.go:96`` from ``driver.go:71``), so after the MIG manager applies
    a new layout it would keep publishing the old one. The MIG manager sets the deploy labels of the GPU
    clients from ``true`` to ``paused-for-mig-change`` while it reconfigures and back to ``true`` after
    (mig-parted v0.14.0 ``pkg/mig/reconfigure/reconfigure.go:40,563,570``); on those pools the plugin's
    pods require GFD's deploy label (which the operator sets ``true`` on every GPU node,
    ``controllers/state_manager.go:91``), so the DaemonSet stops the plugin for the change and starts it
    after, reading the new layout. Other DRA pools keep one of the chart's own default terms
    (``nvidia.com/gpu.present``, values.yaml:318). None: no such pool, the chart's default stays.
    """
    paused = mig_manager_pools(spec)
    if not paused:
        return None
    others = [p.name for p in spec.node_pools if p.uses_dra and p.name not in paused]
    terms = []
    if others:
        terms.append({"matchExpressions": [{"key": L.POOL, "operator": "NotIn", "values": paused},
                                           {"key": L.GPU_PRESENT, "operator": "In", "values": ["true"]}]})
    terms.append({"matchExpressions": [{"key": L.POOL, "operator": "In", "values": paused},
                                       {"key": L.DEPLOY_GFD, "operator": "In", "values": ["true"]}]})
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def values(spec: ClusterSpec) -> dict:
    """Helm values for the DRA driver chart."""
    operator_driver = spec.gpu_operator.enabled and spec.gpu_operator.driver.managed_by == "operator"
    plugin: dict = {"nodeSelector": {L.DRA: "true"}, "tolerations": plugin_tolerations(spec)}
    affinity = plugin_affinity(spec)
    if affinity is not None:
        plugin["affinity"] = affinity
    return {
        # The chart refuses to serve GPUs unless this override is set (it wants the operator's
        # device plugin off on those nodes, which our node labels do).
        "gpuResourcesEnabledOverride": True,
        "nvidiaDriverRoot": "/run/nvidia/driver" if operator_driver else "/",
        # ComputeDomains only where some DRA pool shares NVLink across hosts (gb200-nvl72): the chart's
        # default (true, values.yaml:81) adds the compute-domain controller and a compute-domains container
        # to every kubelet plugin pod, which refuses to start on drivers older than 570.158.01.
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": compute_domains(spec)}},
        "kubeletPlugin": plugin,
        # One gate for every kubelet plugin of the release (FEATURE_GATES env, fact values-featureGates):
        # validation makes every MIG-capable DRA pool ask for dynamic-mig when one does.
        # NVMLDeviceHealthCheck: the plugin taints a device in its ResourceSlice on an NVML XID event.
        **({"featureGates": gates} if (gates := feature_gates(spec)) else {}),
    }


def feature_gates(spec: ClusterSpec) -> dict[str, bool]:
    """The driver's feature gates this spec turns on (the chart's ``featureGates``; absent: the defaults)."""
    gates = {}
    if dynamic_mig(spec):
        gates[DYNAMIC_MIG_GATE] = True
    if health_check(spec):
        gates[DRA_HEALTH_GATE] = True
    return gates


def cel(dc: DeviceClass) -> str:
    """The CEL expression of a DeviceClass (:func:`gpucluster.spec.selectors.device_class_cel`)."""
    return device_class_cel(dc)


def device_class(dc: DeviceClass) -> Obj:
    annotations = {L.DESCRIPTION: dc.description} if dc.description else None
    return obj(API, "DeviceClass", dc.name, annotations=annotations,
               spec={"selectors": [{"cel": {"expression": cel(dc)}}]})


def subrequest_name(index: int, device_class_name: str) -> str:
    """A firstAvailable alternative's name: a DNS label, unique in its request, saying which class it is
    (the claim's allocation names the one taken as ``<request>/<subrequest>``)."""
    base = device_class_name.replace(".", "-")[:58].strip("-")
    return f"{base}-{index}" if base else f"choice-{index}"


def claim_request(t: ClaimTemplate) -> dict:
    """The one device request of a claim template: ``exactly`` one class, or ``firstAvailable`` choices."""
    if not t.first_available:
        assert t.device_class is not None
        return {"name": "gpus" if t.count > 1 else "gpu",
                "exactly": {"deviceClassName": t.device_class, "allocationMode": "ExactCount", "count": t.count}}
    return {"name": "gpu", "firstAvailable": [
        {"name": subrequest_name(i, a.device_class), "deviceClassName": a.device_class,
         "allocationMode": "ExactCount", "count": a.count} for i, a in enumerate(t.first_available)]}


def claim_constraints(t: ClaimTemplate, request: dict) -> list[dict]:
    """The template's device constraints (resource.k8s.io/v1 DeviceConstraint): with ``matchAttribute``, every
    device of its one request (each alternative's, under firstAvailable) shares the attribute's value."""
    if t.match_attribute is None or t.match_attribute not in DRA_TOPOLOGY_ATTRIBUTES:
        return []  # numaNode is refused by validation (the pinned driver does not publish it)
    return [{"requests": [request["name"]], "matchAttribute": DRA_TOPOLOGY_ATTRIBUTES[t.match_attribute]}]


def claim_template(t: ClaimTemplate, namespace: str) -> Obj:
    request = claim_request(t)
    devices: dict = {"requests": [request]}
    if constraints := claim_constraints(t, request):
        devices["constraints"] = constraints
    return obj(API, "ResourceClaimTemplate", t.name, namespace, spec={"spec": {"devices": devices}})


def extended_class(spec: ClusterSpec) -> Obj:
    """The DeviceClass that serves plain ``nvidia.com/gpu`` on the opted-in DRA pools (module docstring)."""
    pools = [p.name for p in spec.gpu_pools if p.uses_dra and p.extended_resource]
    what = (f"pools {', '.join(pools)}" if pools else "no pool (none sets extendedResource)")
    return obj(API, "DeviceClass", DRA_EXTENDED_CLASS,
               annotations={L.DESCRIPTION: f"Plain {DRA_EXTENDED_RESOURCE} requests served through DRA by {what}"},
               spec={"selectors": [{"cel": {"expression": extended_class_cel(spec)}}],
                     "extendedResourceName": DRA_EXTENDED_RESOURCE})


def objects(spec: ClusterSpec) -> list[Obj]:
    if not spec.dra.enabled:
        return []
    out = [device_class(dc) for dc in spec.dra.device_classes]
    if enabled(spec):  # the chart (and its gpu.nvidia.com class) is installed
        out.append(extended_class(spec))
    return out


def tenant_claim_templates(spec: ClusterSpec, tenant: Tenant) -> list[Obj]:
    """The claim templates a tenant is offered, created in its namespace (tenants component)."""
    if not spec.dra.enabled:
        return []
    templates = {t.name: t for t in spec.dra.claim_templates}
    return [claim_template(templates[name], tenant.ns) for name in tenant.claim_templates]
