"""The gpucluster inventory plugin: hosts, groups and variables come from cluster.yaml."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from testkit import hostvars, inventory, role_vars

from gpucluster.render.gpu_operator import mig_parted_config
from gpucluster.render.nodes import node_config
from gpucluster.spec import features, load_spec

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def local_inv() -> dict:
    proc = inventory(REPO / "inventories" / "local")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_groups_per_role_and_pool(local_inv):
    spec = load_spec(REPO / "inventories" / "local")
    assert local_inv["control_plane"]["hosts"] == ["cp-1"]
    for pool in spec.node_pools:
        group = "pool_" + pool.name.replace("-", "_")
        assert sorted(local_inv[group]["hosts"]) == sorted(pool.hosts), group
    assert sorted(local_inv["rdma"]["hosts"]) == ["h100-1", "h100-2"]
    assert "cp-1" not in local_inv["gpu"]["hosts"]
    assert len(local_inv["gpu"]["hosts"]) == sum(len(p.hosts) for p in spec.gpu_pools)


def test_host_vars_come_from_the_render_core(local_inv):
    spec = load_spec(REPO / "inventories" / "local")
    nodes = node_config(spec)
    for host in spec.hosts:
        hv = hostvars(local_inv, host.name)
        assert hv["kubernetes_node_labels"] == nodes[host.name]["labels"]
        assert hv["kubernetes_node_taints"] == nodes[host.name]["taints"]
        assert hv["ansible_host"] == host.address
    assert hostvars(local_inv, "h100-1")["rdma_host_interfaces"] == ["ibp12s0", "ibp75s0"]
    assert hostvars(local_inv, "l4-1")["rdma_host_enabled"] is False
    assert hostvars(local_inv, "cp-1")["kubernetes_node_role"] == "control-plane"
    assert hostvars(local_inv, "cp-1")["kubernetes_node_version"] == spec.kubernetes.version
    assert hostvars(local_inv, "cp-1")["nvidia_driver_enabled"] is False


def test_mig_managed_by_host_and_feature_gates(tmp_path):
    text = (REPO / "inventories" / "local" / "cluster.yaml").read_text()
    text = text.replace("mig: {layout: all-1g.10gb}", "mig: {layout: all-1g.10gb, managedBy: host}")
    text = text.replace('version: "1.37.2"', 'version: "1.37.2"\n  featureGates: {DRAAdminAccess: true}')
    (tmp_path / "cluster.yaml").write_text(text)
    shutil.copy(REPO / "inventories" / "local" / "hosts.gpucluster.yml", tmp_path)
    proc = inventory(tmp_path)
    assert proc.returncode == 0, proc.stderr
    inv = json.loads(proc.stdout)
    assert inv["mig_host"]["hosts"] == ["a100-1"]
    hv = hostvars(inv, "a100-1")
    assert hv["mig_host_config_name"] == "gpucluster-a100-mig"
    assert hv["mig_host_config"] == mig_parted_config(load_spec(tmp_path))
    assert hostvars(inv, "cp-1")["kubernetes_node_feature_gates"] == {"DRAAdminAccess": True}


def test_host_managed_driver_version_comes_from_the_spec(tmp_path, local_inv):
    # Operator-managed (the local inventory): the role default applies, the spec's version is the
    # driver container's.
    assert "nvidia_driver_version" not in hostvars(local_inv, "h100-1")
    text = (REPO / "inventories" / "local" / "cluster.yaml").read_text()
    assert "gpuOperator:" in text
    text = text.replace("gpuOperator:", 'gpuOperator:\n  driver: {managedBy: host, version: "580.95.05"}', 1)
    (tmp_path / "cluster.yaml").write_text(text)
    shutil.copy(REPO / "inventories" / "local" / "hosts.gpucluster.yml", tmp_path)
    proc = inventory(tmp_path)
    assert proc.returncode == 0, proc.stderr
    hv = hostvars(json.loads(proc.stdout), "h100-1")
    assert hv["nvidia_driver_managed_by"] == "host"
    assert hv["nvidia_driver_version"] == "580.95.05"


def test_only_hosts_of_a_multi_node_nvlink_pool_get_their_imex_service_masked(tmp_path):
    """A GB200 NVL72 pool's hosts get nvidia_driver_imex_host_service_masked (the DRA driver's ComputeDomains
    run IMEX in pods: kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 docs/prerequisites.md wants the host's
    nvidia-imex.service disabled and masked); an H100 pool's host and the CPU control plane do not."""
    spec = {
        "metadata": {"name": "t"},
        "hosts": [
            {"name": "cp", "address": "10.0.0.1", "roles": ["control-plane"]},
            {"name": "gb-1", "address": "10.0.0.2", "topology": {"nvlink": "rack-1"}},
            {"name": "h100-1", "address": "10.0.0.3", "topology": {"nvlink": "box-h100-1"}},
        ],
        "nodePools": [
            # a multi-node NVLink platform needs the NVLink tier and a DRA pool to validate
            {"name": "gb200", "hosts": ["gb-1"], "gpu": {"model": "GB200", "count": 4, "platform": "gb200-nvl72"},
             "dra": True},
            {"name": "h100", "hosts": ["h100-1"], "gpu": {"model": "H100-SXM5-80GB", "count": 8}},
        ],
        "topology": {"tiers": ["nvlink"], "nvlinkTier": "nvlink"},
        "tenants": [{"name": "team-a", "quota": {"gpus": 8}}],
    }
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    shutil.copy(REPO / "inventories" / "local" / "hosts.gpucluster.yml", tmp_path)
    proc = inventory(tmp_path)
    assert proc.returncode == 0, proc.stderr
    inv = json.loads(proc.stdout)
    assert hostvars(inv, "gb-1")["nvidia_driver_imex_host_service_masked"] is True
    assert hostvars(inv, "h100-1")["nvidia_driver_imex_host_service_masked"] is False
    assert hostvars(inv, "cp")["nvidia_driver_imex_host_service_masked"] is False


def test_broken_spec_fails_with_the_spec_message(tmp_path):
    (tmp_path / "cluster.yaml").write_text(
        "apiVersion: gpucluster.dev/v1alpha1\nkind: Cluster\nmetadata: {name: x}\n"
        "hosts: [{name: a, address: 10.0.0.1}]\nnodePools: [{name: p, hosts: [nope]}]\n")
    shutil.copy(REPO / "inventories" / "local" / "hosts.gpucluster.yml", tmp_path)
    proc = inventory(tmp_path)
    assert proc.returncode != 0
    assert "invalid cluster spec" in proc.stderr
    assert "nope" in proc.stderr  # the unknown host is named
    assert "Traceback" not in proc.stderr


def test_cluster_yaml_is_not_parsed_as_inventory(local_inv):
    # cluster.yaml's top-level keys (hosts, nodePools, ...) must not turn into groups.
    assert "nodePools" not in local_inv and "kubernetes" not in local_inv




def test_kubeadm_pod_subnet_is_the_pod_network_cidr(tmp_path):
    """Spec → inventory plugin → the kubernetes_node role's ClusterConfiguration: its podSubnet (from which
    kube-controller-manager gives every Node its podCIDR) must equal the flannel release's podCidr, or
    flannel refuses every node ("subnet ... doesn't contain PodCIDR of the node")."""
    from gpucluster.render import render

    text = (REPO / "inventories" / "lab" / "cluster.yaml").read_text()
    assert "podSubnet: 10.244.0.0/16" in text
    (tmp_path / "cluster.yaml").write_text(text.replace("podSubnet: 10.244.0.0/16", "podSubnet: 10.128.0.0/14"))
    shutil.copy(REPO / "inventories" / "lab" / "hosts.gpucluster.yml", tmp_path)
    kubeadm = role_vars(tmp_path, "cp-01", "kubernetes_node_cluster_configuration")
    (flannel,) = [r for r in render(load_spec(tmp_path)).releases if r.name == "pod-network"]
    assert kubeadm["networking"]["podSubnet"] == flannel.values["podCidr"] == "10.128.0.0/14"


@pytest.mark.parametrize("version", ["1.36.3", "1.37.2"])
def test_kubeadm_gets_the_gates_and_apis_the_specs_dra_features_need(tmp_path, version):
    """Spec → inventory plugin → kubeadm documents: on 1.36 DeviceTaintRules need their beta-off gate on every
    component and resource.k8s.io/v1beta2 served (facts fg-dra-device-taint-rules); on 1.37 no gate is set.
    On both, the local inventory's Volcano schedules with device taints on and watches DeviceTaintRules at
    resource.k8s.io/v1alpha3 (facts volcano.yaml scheduler-watches-taint-rules-at-v1alpha3), an alpha API
    the API server serves only when told, and its DCGM exporter attributes DRA GPUs by watching ResourceSlices
    at resource.k8s.io/v1beta1 (facts dcgm-exporter.yaml dra-resourceslice-api), off by default too."""
    text = (REPO / "inventories" / "local" / "cluster.yaml").read_text()
    assert 'version: "1.37.2"' in text
    (tmp_path / "cluster.yaml").write_text(text.replace('version: "1.37.2"', f'version: "{version}"'))
    shutil.copy(REPO / "inventories" / "local" / "hosts.gpucluster.yml", tmp_path)
    # kubelet_gates: the KubeletConfiguration's featureGates (vars/main.yml)
    cluster, kubelet_gates = role_vars(
        tmp_path, "cp-1", "[kubernetes_node_cluster_configuration, kubernetes_node_feature_gates]")
    args = {c: {a["name"]: a["value"] for a in cluster[c]["extraArgs"]}
            for c in ("apiServer", "controllerManager", "scheduler")}
    # The API client rate limits (defaults/main.yml says why) on both versions; the rest depends on the version.
    assert [args["controllerManager"].pop(k) for k in ("kube-api-qps", "kube-api-burst")] == ["100", "200"]
    assert [args["scheduler"].pop(k) for k in ("kube-api-qps", "kube-api-burst")] == ["200", "400"]
    if version == "1.36.3":
        assert all(a["feature-gates"] == "DRADeviceTaintRules=true" for a in args.values()), args
        assert args["apiServer"]["runtime-config"] == (f"{features.VOLCANO_TAINT_RULES_API}=true,"
                                                       f"{features.DCGM_EXPORTER_SLICES_API}=true,"
                                                       "resource.k8s.io/v1beta2=true")
        assert "runtime-config" not in args["scheduler"]
        assert kubelet_gates == {"DRADeviceTaintRules": True}
    else:
        assert args == {"apiServer": {"runtime-config": f"{features.VOLCANO_TAINT_RULES_API}=true,"
                                                        f"{features.DCGM_EXPORTER_SLICES_API}=true"},
                        "controllerManager": {}, "scheduler": {}}
        assert kubelet_gates == {}


def test_the_endpoint_provider_and_its_address_reach_the_api_endpoint_role(tmp_path, local_inv):
    # external (the default): the role gets the provider and nothing to serve.
    assert hostvars(local_inv, "cp-1")["api_endpoint_provider"] == "external"
    assert "api_endpoint_vip" not in hostvars(local_inv, "cp-1")
    text = (REPO / "inventories" / "local" / "cluster.yaml").read_text()
    assert 'version: "1.37.2"' in text
    text = text.replace('version: "1.37.2"', 'version: "1.37.2"\n  controlPlaneEndpoint: 10.0.0.250:8443'
                        '\n  controlPlaneEndpointProvider: keepalived-haproxy', 1)
    (tmp_path / "cluster.yaml").write_text(text)
    shutil.copy(REPO / "inventories" / "local" / "hosts.gpucluster.yml", tmp_path)
    proc = inventory(tmp_path)
    assert proc.returncode == 0, proc.stderr
    hv = hostvars(json.loads(proc.stdout), "cp-1")
    assert (hv["api_endpoint_provider"], hv["api_endpoint_vip"], hv["api_endpoint_port"]) == (
        "keepalived-haproxy", "10.0.0.250", 8443)
    # kubeadm gets the same endpoint: every kubeconfig it writes names it.
    assert hv["kubernetes_node_control_plane_endpoint"] == "10.0.0.250:8443"
