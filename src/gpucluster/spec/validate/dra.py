"""``dra``: DeviceClasses, claim templates, the one DynamicMIG gate, the extended-resource class."""

from __future__ import annotations

from gpucluster import catalog
from gpucluster.spec import dra_fit
from gpucluster.spec.model import ClusterSpec, SharingMode
from gpucluster.spec.validate.common import Collector, close
from gpucluster.upstream import DRA_CHART_DEVICE_CLASSES, DRA_EXTENDED_CLASS, DRA_UNPUBLISHED_ATTRIBUTES


def check(spec: ClusterSpec, c: Collector) -> None:
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
                        close(s.mig_profile, profiles))
        if s.architecture is not None:
            archs = {m.architecture for m in catalog.catalog().values()}
            if s.architecture not in archs:
                c.error(f"dra.deviceClasses[{i}].selector.architecture", f"unknown architecture {s.architecture!r}",
                        close(s.architecture, archs))
    if any(p.uses_dra for p in spec.gpu_pools):
        classes.add(DRA_EXTENDED_CLASS)
    for i, t in enumerate(d.claim_templates):
        for j, alt in enumerate(t.alternatives):
            where = f"firstAvailable[{j}].deviceClass" if t.first_available else "deviceClass"
            if alt.device_class not in classes:
                c.error(f"dra.claimTemplates[{i}].{where}", f"unknown DeviceClass {alt.device_class!r}",
                        close(alt.device_class, classes))
        if t.match_attribute in DRA_UNPUBLISHED_ATTRIBUTES:
            name, since = DRA_UNPUBLISHED_ATTRIBUTES[t.match_attribute]
            c.error(f"dra.claimTemplates[{i}].matchAttribute",
                    f"claim template {t.name!r} matches on {t.match_attribute}, but the pinned DRA driver "
                    f"({d.chart.version}) does not publish {name} (it does from {since}): the scheduler picks only "
                    "devices that have the attribute, so this claim would never be allocated",
                    "use matchAttribute: pcieRoot, or drop it")
    if (d.device_classes or d.claim_templates) and not d.enabled:
        c.warn("dra.enabled", "DeviceClasses or claim templates are set but DRA is disabled; they are not rendered")
    _one_dynamic_mig_gate(spec, c)
    _extended_pools(spec, c)
    _health_check(spec, c)


def _health_check(spec: ClusterSpec, c: Collector) -> None:
    """The driver refuses NVMLDeviceHealthCheck next to DynamicMIG: say so when the spec asked for both."""
    d = spec.dra
    dynamic = [p.name for p in spec.gpu_pools if p.uses_dra and p.sharing.mode is SharingMode.dynamic_mig]
    if dynamic and d.device_health_check and "device_health_check" in d.model_fields_set:
        c.warn("dra.deviceHealthCheck", f"the DRA driver cannot run its health monitor with DynamicMIG, which "
               f"pool(s) {', '.join(dynamic)} turn on: it stays off, and a failing GPU on a DRA pool is isolated "
               "only by `gpucluster quarantine`", "drop deviceHealthCheck, or serve those pools with static MIG")


def _one_dynamic_mig_gate(spec: ClusterSpec, c: Collector) -> None:
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


def _extended_pools(spec: ClusterSpec, c: Collector) -> None:
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
