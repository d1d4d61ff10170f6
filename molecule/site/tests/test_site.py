"""The site playbook's outcome on every host, checked against what the spec says for each host.

Expected values are derived from inventory/cluster.yaml through the same code the inventory plugin
uses, so a role that ignored its inventory variables would fail here.
"""

import tomllib
from pathlib import Path

import pytest
import yaml

from gpucluster.render.gpu_operator import mig_config_name
from gpucluster.render.nodes import node_config
from gpucluster.spec import load_spec

SPEC = load_spec(Path(__file__).resolve().parent.parent / "inventory")
NODES = node_config(SPEC)
CP, H100, A100 = "gpuc-site-cp", "gpuc-site-h100", "gpuc-site-a100"
testinfra_hosts = [f"podman://{h.name}" for h in SPEC.hosts]


def name_of(host) -> str:
    return host.backend.get_hostname()


def test_host_prep_everywhere(host):
    assert host.sysctl("net.ipv4.ip_forward") == 1
    assert "br_netfilter" in host.file("/etc/modules-load.d/gpucluster.conf").content_string
    assert host.file("/etc/modprobe.d/gpucluster-blacklist-nouveau.conf").contains("blacklist nouveau")


def test_containerd_nvidia_runtime_only_on_gpu_hosts(host):
    config = tomllib.loads(host.check_output("containerd config dump"))
    runtimes = config["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    pool = SPEC.pool_of(name_of(host))
    if pool and pool.gpu:
        assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
        assert "version 1.18.0" in host.check_output("nvidia-ctk --version")
    else:
        assert "nvidia" not in runtimes
        assert not host.file("/usr/bin/nvidia-ctk").exists


def test_kubeadm_config_from_spec(host):
    name = name_of(host)
    docs = list(yaml.safe_load_all(host.file("/etc/kubernetes/kubeadm-config.yaml").content_string))
    init, cluster, kubelet = docs
    assert cluster["kubernetesVersion"] == f"v{SPEC.kubernetes.version}"
    assert cluster["networking"]["podSubnet"] == SPEC.kubernetes.pod_subnet
    assert kubelet["cgroupDriver"] == "systemd"
    gates = ",".join(f"{k}={str(v).lower()}" for k, v in SPEC.kubernetes.feature_gates.items())
    assert gates, "the site spec must set a feature gate for this check to mean anything"
    assert {"name": "feature-gates", "value": gates} in cluster["apiServer"]["extraArgs"]
    assert kubelet["featureGates"] == SPEC.kubernetes.feature_gates
    assert init["nodeRegistration"]["name"] == name
    assert init["nodeRegistration"]["taints"] == NODES[name]["taints"]
    args = init["nodeRegistration"]["kubeletExtraArgs"]
    labels = dict(kv.split("=", 1) for arg in args for kv in arg["value"].split(","))
    assert labels == NODES[name]["labels"]
    # kubeadm itself accepts the file (the role ran this too; the check must hold after converge).
    host.run_expect([0], "kubeadm config validate --config /etc/kubernetes/kubeadm-config.yaml")


def test_no_join_configuration_stays_on_joined_hosts(host):
    # kubeadm-join.yaml holds a bootstrap token (and a certificate key on control planes); the role removes
    # it once the host joined. The init host never had one; the others must have joined (kubelet.conf).
    assert host.file("/etc/kubernetes/kubelet.conf").exists
    assert not host.file("/etc/kubernetes/kubeadm-join.yaml").exists


def test_kubelet_installed_enabled(host):
    assert host.check_output("kubelet --version") == f"Kubernetes v{SPEC.kubernetes.version}"
    assert host.service("kubelet").is_enabled


def test_driver_mode_operator_on_gpu_hosts(host):
    fact = host.file("/etc/ansible/facts.d/gpucluster_nvidia_driver.fact")
    pool = SPEC.pool_of(name_of(host))
    assert fact.exists == bool(pool and pool.gpu)
    if fact.exists:
        assert '"managed_by": "operator"' in fact.content_string


def test_mig_only_on_mig_host(host):
    env = host.file("/etc/default/gpucluster-mig")
    if name_of(host) == A100:
        # one mig-parted config per pool, named by render (the same name the operator's label carries)
        config = mig_config_name(SPEC.pool_of(A100))
        assert f"MIG_PARTED_SELECTED_CONFIG={config}\n" in env.content_string
        doc = yaml.safe_load(host.file("/etc/nvidia-mig-manager/config.yaml").content_string)
        assert doc["mig-configs"][config][0]["mig-devices"] == {"1g.10gb": 7}
    else:
        assert not env.exists


@pytest.mark.parametrize("module", ["ib_umad", "ib_ipoib"])
def test_rdma_only_on_rdma_host(host, module):
    conf = host.file("/etc/modules-load.d/gpucluster-rdma.conf")
    if name_of(host) == H100:
        assert module in conf.content_string
        assert "vm.nr_hugepages=512" in host.file("/etc/sysctl.d/90-gpucluster-hugepages.conf").content_string
        assert host.package("rdma-core").is_installed
        # containerd runs with the memlock drop-in: pods inherit an unlimited memlock.
        assert host.check_output("systemctl show -p LimitMEMLOCK containerd.service") == "LimitMEMLOCK=infinity"
    else:
        assert not conf.exists
