"""GPU Operator: Helm values, the device-plugin sharing ConfigMap and the mig-parted ConfigMap.

The device plugin reads one config per node, chosen by the node label
``nvidia.com/device-plugin.config=<key>``; we write one key per shared pool (named after the pool)
plus ``default`` (no sharing). The MIG manager reads ``config.yaml`` from our ConfigMap and applies
the config named by the node label ``nvidia.com/mig.config``.
"""

from __future__ import annotations

import yaml

from gpucluster.render.common import Obj, config_map
from gpucluster.render.contract import Kind
from gpucluster.render.monitoring import DCGM_CONFIGMAP, dcgm_metrics_configmap, exporter_dra_rbac, exporter_env
from gpucluster.spec import mig as miglib
from gpucluster.spec.model import ChartRef, ClusterSpec, NodePool, SharingMode

DEVICE_PLUGIN_CONFIGMAP = "gpucluster-device-plugin-config"
MIG_CONFIGMAP = "gpucluster-mig-parted-config"
DEFAULT_KEY = "default"
BEFORE_OTHER_RELEASES = False
#: The chart's ClusterPolicy is the operator's own (the chart creates it): we render no object of its CRDs.
CHART_KINDS: tuple[Kind, ...] = ()
AFTER_KINDS: dict[Kind, Kind] = {}


def dump(data: object) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def device_plugin_config(spec: ClusterSpec) -> dict[str, dict]:
    """Config-file documents (device plugin ``version: v1``) keyed by pool name, plus ``default``."""
    flags = {"migStrategy": spec.gpu_operator.mig_strategy}
    configs: dict[str, dict] = {DEFAULT_KEY: {"version": "v1", "flags": flags}}
    for pool in spec.gpu_pools:
        s = pool.sharing
        if not pool.shares_gpus:
            continue
        section = "timeSlicing" if s.mode is SharingMode.time_slicing else "mps"
        sharing: dict = {"renameByDefault": s.rename_by_default}
        if s.mode is SharingMode.time_slicing:
            sharing["failRequestsGreaterThanOne"] = s.fail_requests_greater_than_one
        sharing["resources"] = [{"name": "nvidia.com/gpu", "replicas": s.replicas}]
        configs[pool.name] = {"version": "v1", "flags": flags, "sharing": {section: sharing}}
    return configs


def mig_config_name(pool: NodePool) -> str:
    """The mig-parted config a MIG pool's nodes are labelled with: one per pool.

    Never the layout's name: two pools of different GPU models asking for the same named layout
    (``all-balanced``) need different per-GPU layouts, and upstream tells those apart by PCI device ID
    (``device-filter``) inside one config, which we do not render.
    """
    return f"gpucluster-{pool.name}"


def mig_parted_config(spec: ClusterSpec) -> dict:
    configs: dict[str, list] = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    for pool in spec.gpu_pools:
        if pool.sharing.mode is not SharingMode.mig:
            continue
        layout = {p: n for p, n in sorted(miglib.pool_layout(pool).items()) if n}
        entry: dict = {"devices": "all", "mig-enabled": bool(layout)}
        if layout:
            entry["mig-devices"] = layout
        configs[mig_config_name(pool)] = [entry]
    return {"version": "v1", "mig-configs": configs}


def objects(spec: ClusterSpec) -> list[Obj]:
    ns = spec.gpu_operator.namespace
    out = [config_map(DEVICE_PLUGIN_CONFIGMAP, ns, {k: dump(v) for k, v in device_plugin_config(spec).items()})]
    if any(p.sharing.mode is SharingMode.mig for p in spec.gpu_pools):
        out.append(config_map(MIG_CONFIGMAP, ns, {"config.yaml": dump(mig_parted_config(spec))}))
    if spec.gpu_operator.dcgm_exporter.enabled:
        out.append(dcgm_metrics_configmap(ns))
        out += exporter_dra_rbac(spec)
    return out


def values(spec: ClusterSpec) -> dict:
    """Helm values for the GPU Operator chart."""
    g = spec.gpu_operator
    has_mig = any(p.sharing.mode is SharingMode.mig for p in spec.gpu_pools)
    v: dict = {
        "driver": {"enabled": g.driver.managed_by == "operator"},
        "toolkit": {"enabled": g.toolkit},
        "cdi": {"enabled": g.cdi},
        "nfd": {"enabled": g.nfd},
        "devicePlugin": {
            # Off when no pool uses it: the operator's validator otherwise waits for nvidia.com/gpu on
            # DRA-only nodes and crash-loops (it skips that step only when the plugin is off cluster-wide).
            "enabled": any(p.uses_device_plugin for p in spec.gpu_pools),
            "config": {"name": DEVICE_PLUGIN_CONFIGMAP, "default": DEFAULT_KEY, "create": False},
        },
        "mig": {"strategy": g.mig_strategy},
        "migManager": {"enabled": has_mig},
        "dcgmExporter": {"enabled": g.dcgm_exporter.enabled},
    }
    if g.driver.managed_by == "operator":
        v["driver"]["version"] = g.driver.version
        # A new version rolls over the nodes as this policy says (the chart keys are the spec's, camelCase).
        v["driver"]["upgradePolicy"] = g.driver.upgrade_policy.model_dump(by_alias=True)
    if has_mig:
        v["migManager"]["config"] = {"name": MIG_CONFIGMAP, "default": "all-disabled"}
    if g.dcgm_exporter.enabled:
        v["dcgmExporter"]["config"] = {"name": DCGM_CONFIGMAP}
        v["dcgmExporter"]["env"] = exporter_env(spec)
        # Our own ServiceMonitor (monitoring component, named differently: the operator deletes
        # its own name while this is off) adds the node and keeps the pod attribution; the chart's
        # is off so there is exactly one scrape of every exporter.
        v["dcgmExporter"]["serviceMonitor"] = {"enabled": False}
    return v


def enabled(spec: ClusterSpec) -> bool:
    """The GPU Operator release is installed unless the spec turns it off."""
    return spec.gpu_operator.enabled


def after(spec: ClusterSpec) -> list[str]:
    return []


def namespace(spec: ClusterSpec) -> str:
    return spec.gpu_operator.namespace


def chart(spec: ClusterSpec) -> ChartRef:
    return spec.gpu_operator.chart
