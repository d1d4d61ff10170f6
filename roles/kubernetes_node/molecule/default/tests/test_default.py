"""kubernetes_node outcome: pinned binaries, kubelet unit wiring, a kubeadm config kubeadm accepts."""

import yaml

testinfra_hosts = ["podman://gpuc-kubernetes-node"]


def test_pinned_binaries(host):
    assert host.check_output("kubeadm version -o short") == "v1.37.2"
    assert host.check_output("kubelet --version") == "Kubernetes v1.37.2"
    assert "v1.37.2" in host.check_output("kubectl version --client")


def test_kubelet_unit_wired_for_kubeadm(host):
    assert host.service("kubelet").is_enabled
    props = host.check_output("systemctl show -p DropInPaths -p Environment -p ExecStart kubelet")
    assert "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf" in props
    # systemd merged the drop-in: the kubelet would start with kubeadm's config and kubeconfig.
    assert "KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml" in props
    assert "$KUBELET_CONFIG_ARGS" in props


def test_kubeadm_config_valid_and_from_vars(host):
    host.run_expect([0], "kubeadm config validate --config /etc/kubernetes/kubeadm-config.yaml")
    f = host.file("/etc/kubernetes/kubeadm-config.yaml")
    assert f.mode == 0o600
    init, cluster, kubelet = yaml.safe_load_all(f.content_string)
    assert cluster["kubernetesVersion"] == "v1.37.2"
    assert cluster["clusterName"] == "molecule"
    assert {"name": "feature-gates", "value": "DRAAdminAccess=true"} in cluster["scheduler"]["extraArgs"]
    assert kubelet["featureGates"] == {"DRAAdminAccess": True}
    assert kubelet["cgroupDriver"] == "systemd"
    assert init["nodeRegistration"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    labels = [{"name": "node-labels", "value": "gpucluster.dev/pool=h100-train"}]
    assert init["nodeRegistration"]["kubeletExtraArgs"] == labels


def test_not_bootstrapped(host):
    # kubernetes_node_bootstrap is off here (no control-plane images): init must not have run.
    assert not host.file("/etc/kubernetes/admin.conf").exists


def test_reference_cni_plugins_in_containerds_folder(host):
    # flannel delegates to bridge/host-local/portmap and containerd's CRI runs loopback for every pod,
    # from /opt/cni/bin (air-gapped source here: the distribution's containernetworking-plugins).
    assert host.package("containernetworking-plugins").is_installed
    for plugin in ("bridge", "host-local", "loopback", "portmap"):
        f = host.file(f"/opt/cni/bin/{plugin}")
        assert f.is_file and f.mode & 0o111, plugin
        # a CNI plugin answers the VERSION command with the spec versions it speaks
        out = host.check_output(f"CNI_COMMAND=VERSION /opt/cni/bin/{plugin} </dev/null")
        assert '"supportedVersions"' in out and "0.3.1" in out, (plugin, out)
