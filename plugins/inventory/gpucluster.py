"""Ansible inventory plugin: hosts, groups and host variables straight from ``cluster.yaml``.

The spec stays the single source of truth: this plugin reads it with :func:`gpucluster.spec.load_spec`
(so a broken spec fails with the same messages as the CLI) and derives per-host variables with the
render core (:func:`gpucluster.render.nodes.node_config`, the mig-parted config) instead of restating
any fact in group_vars.

Groups: ``control_plane``, ``workers``, ``gpu`` (hosts of pools with GPUs), ``pool_<name>`` (one per
pool, dashes become underscores because Ansible group names must be identifiers), ``mig_host`` (MIG
pools whose layout the host applies) and ``rdma`` (pools with RDMA interfaces).

Variables are named after the role that consumes them (``kubernetes_node_*``, ``nvidia_driver_*``,
...), so roles take them without glue; cluster-wide ones are set on ``all``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin

DOCUMENTATION = r"""
name: gpucluster
short_description: Hosts, groups and variables from a gpucluster cluster.yaml
description:
  - Reads the gpucluster spec next to this config file (or the one named by C(spec)) and builds
    groups per pool and role with per-host variables for the gpucluster roles.
  - Needs the gpucluster Python package importable by Ansible's Python (the project virtualenv).
options:
  plugin:
    description: Must be C(gpucluster).
    required: true
    choices: [gpucluster, gpucluster.gpucluster]
  spec:
    description: Path of cluster.yaml, relative to this file's folder.
    type: str
    default: cluster.yaml
"""

EXAMPLES = r"""
# inventories/lab/hosts.gpucluster.yml
plugin: gpucluster
"""

CONFIG_SUFFIXES = ("gpucluster.yml", "gpucluster.yaml")


def group_name(pool: str) -> str:
    """``h100-train`` → ``pool_h100_train`` (Ansible group names must be valid identifiers)."""
    return "pool_" + re.sub(r"[^A-Za-z0-9_]", "_", pool)


def cluster_vars(spec: Any) -> dict[str, Any]:
    """Variables every host shares, named after the role that reads them."""
    from gpucluster.spec.names import split_endpoint
    from gpucluster.spec.validate.kubernetes import api_runtime_config, component_feature_gates

    k8s = spec.kubernetes
    control_planes = [h.name for h in spec.control_planes]
    operator = spec.gpu_operator
    out: dict[str, Any] = {
        "gpucluster_cluster_name": spec.metadata.name,
        "kubernetes_node_version": k8s.version,
        "kubernetes_node_pod_subnet": k8s.pod_subnet,
        "kubernetes_node_service_subnet": k8s.service_subnet,
        "kubernetes_node_control_plane_endpoint": k8s.control_plane_endpoint or "",
        # roles/api_endpoint serves the endpoint from the control-plane hosts, or leaves it to the operator.
        "api_endpoint_provider": k8s.control_plane_endpoint_provider,
        # What the spec's DRA features need on its version (spec/features.py), the spec's own gates over it.
        "kubernetes_node_feature_gates": component_feature_gates(spec),
        "kubernetes_node_api_runtime_config": api_runtime_config(spec),
        "kubernetes_node_cluster_name": spec.metadata.name,
        "kubernetes_node_init_host": control_planes[0] if control_planes else "",
        "nvidia_driver_managed_by": operator.driver.managed_by,
        "container_runtime_cdi_enabled": operator.cdi,
        # The pod network the stacks install (flannel) or none: the host layer's daemonless bridge
        # network (kubernetes_node_pod_network) may only stand in where the spec installs none.
        "gpucluster_pod_network_plugin": spec.networking.pod_network.plugin,
    }
    if k8s.control_plane_endpoint_provider == "keepalived-haproxy" and k8s.control_plane_endpoint:
        # Validation made it IPv4:port (spec/validate/hosts.py).
        vip, port = split_endpoint(k8s.control_plane_endpoint)
        out.update({"api_endpoint_vip": vip, "api_endpoint_port": int(port)})
    if operator.driver.managed_by == "host":
        # The spec pins the host driver too (a package version prefix); with the operator managing the
        # driver, the spec's version is the driver container's and the role default stays unused.
        out["nvidia_driver_version"] = operator.driver.version
    return out


def host_vars(spec: Any, host: Any, node: dict[str, Any]) -> dict[str, Any]:
    """Variables of one host: connection, pool facts, node labels/taints, MIG and RDMA settings."""
    # Imported here so that `ansible-doc` works without the package; the plugin itself needs it.
    from gpucluster import catalog
    from gpucluster.render.gpu_operator import mig_config_name, mig_parted_config
    from gpucluster.render.kubelet import kubelet_patch

    roles = [r.value for r in host.roles]
    pool = spec.pool_of(host.name)
    has_gpu = bool(pool and pool.gpu)
    # The host installs the toolkit (and containerd gets the NVIDIA runtime drop-in) unless the GPU
    # Operator's toolkit container does it.
    host_toolkit = has_gpu and not spec.gpu_operator.toolkit
    out: dict[str, Any] = {
        "ansible_host": host.address,
        "gpucluster_os": host.os,
        "gpucluster_roles": roles,
        "gpucluster_pool": pool.name if pool else "",
        "gpucluster_gpu_model": pool.gpu.model if has_gpu else "",
        "gpucluster_gpu_count": pool.gpu.count if has_gpu else 0,
        "kubernetes_node_role": "control-plane" if "control-plane" in roles else "worker",
        "kubernetes_node_labels": node["labels"],
        "kubernetes_node_taints": node["taints"],
        # The pool's kubelet Topology/CPU/Memory Manager policies, as a kubeadm patch of this node's
        # KubeletConfiguration ({}: the kubelet's defaults).
        "kubernetes_node_kubelet_patch": kubelet_patch(pool),
        "nvidia_driver_enabled": has_gpu,
        # GPUs in a multi-node NVLink domain (GB200 NVL72): the DRA driver's ComputeDomains run the IMEX
        # daemons in pods, so the host's own nvidia-imex.service is stopped, disabled and masked
        # (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 docs/prerequisites.md; role nvidia_driver).
        "nvidia_driver_imex_host_service_masked": bool(
            has_gpu and (plat := catalog.platform(pool.gpu.platform)) is not None and plat.multi_node_nvlink),
        "nvidia_container_toolkit_enabled": host_toolkit,
        "container_runtime_nvidia_enabled": host_toolkit,
        "mig_host_enabled": False,
        "rdma_host_enabled": bool(pool and pool.rdma),
    }
    if pool is not None and pool.sharing.mig is not None and pool.sharing.mig.managed_by == "host":
        out["mig_host_enabled"] = True
        out["mig_host_config"] = mig_parted_config(spec)
        out["mig_host_config_name"] = mig_config_name(pool)
    if pool is not None and pool.rdma is not None:
        out["rdma_host_interfaces"] = list(pool.rdma.interfaces)
        out["rdma_host_link_type"] = pool.rdma.link_type
        out["rdma_host_hugepages"] = pool.rdma.hugepages
    # Per-host overrides from the spec (ansible_user, ansible_connection, ...) win.
    out.update(host.ansible_vars)
    return out


def groups_of(spec: Any, host: Any) -> list[str]:
    """The groups one host belongs to."""
    roles = [r.value for r in host.roles]
    groups = ["control_plane" if "control-plane" in roles else "workers"]
    if "control-plane" in roles and "worker" in roles:
        groups.append("workers")
    pool = spec.pool_of(host.name)
    if pool is not None:
        groups.append(group_name(pool.name))
        if pool.gpu is not None:
            groups.append("gpu")
        if pool.sharing.mig is not None and pool.sharing.mig.managed_by == "host":
            groups.append("mig_host")
        if pool.rdma is not None:
            groups.append("rdma")
    return groups


class InventoryModule(BaseInventoryPlugin):
    """Build the inventory from a gpucluster spec."""

    NAME = "gpucluster"

    def verify_file(self, path: str) -> bool:
        """Claim only ``*gpucluster.yml`` files, so cluster.yaml itself is never parsed as inventory."""
        return super().verify_file(path) and path.endswith(CONFIG_SUFFIXES)

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        spec_file = Path(path).parent / self.get_option("spec")
        try:
            from gpucluster.errors import GpuclusterError
            from gpucluster.render.nodes import node_config
            from gpucluster.spec import load_spec
        except ImportError as err:
            raise AnsibleParserError(
                f"{path}: the gpucluster inventory plugin needs the gpucluster package in Ansible's "
                f"Python ({err}); run ansible from the project virtualenv (.venv/bin/ansible-playbook)"
            ) from None
        try:
            spec = load_spec(spec_file)
        except GpuclusterError as err:
            raise AnsibleParserError(f"{spec_file}: invalid cluster spec:\n{err}") from None
        self._populate(spec, node_config(spec), spec_file)

    def _populate(self, spec: Any, nodes: dict[str, dict], spec_file: Path) -> None:
        inv = self.inventory
        for name in ("control_plane", "workers", "gpu", "mig_host", "rdma"):
            inv.add_group(name)
        for key, value in cluster_vars(spec).items():
            inv.set_variable("all", key, value)
        inv.set_variable("all", "gpucluster_spec_path", str(spec_file.resolve()))
        for host in spec.hosts:
            inv.add_host(host.name)
            for group in groups_of(spec, host):
                inv.add_group(group)
                inv.add_child(group, host.name)
            for key, value in host_vars(spec, host, nodes[host.name]).items():
                inv.set_variable(host.name, key, value)
