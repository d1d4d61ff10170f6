"""Our networking artifacts against the upstream facts at the pinned versions.

Facts: ``tests/upstream/facts/network-operator.yaml`` (network operator 26.4.1, nv-ipam, the RDMA shared
device plugin, Multus, the CNI plugins) and ``cni.yaml`` (flannel v0.28.10, kubeadm's podSubnet, the
reference CNI plugins on the host). Every kind the networking render produces is checked here
(:data:`COVERED`), so a new kind fails :func:`test_every_rendered_networking_kind_is_covered` until it
is compared with upstream too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from upstream_facts import fact

from gpucluster import components, versions
from gpucluster import labels as L
from gpucluster.local.crds import stand_ins
from gpucluster.render import network_operator, pod_network, render
from gpucluster.simulator.agents import rdma_plugin
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec, Rdma, SecondaryNetwork

REPO = Path(__file__).resolve().parents[2]


def netop(name: str) -> Any:
    return fact("network-operator", name)


def cni(name: str) -> Any:
    return fact("cni", name)


@pytest.fixture
def spec() -> ClusterSpec:
    """The lab spec plus a RoCE pool and one network of each CNI type, so every branch renders."""
    s = load_spec(REPO / "inventories" / "lab")
    next(p for p in s.node_pools if p.name == "l40s-infer").rdma = Rdma(
        interfaces=["ens1f0np0"], link_type="ether", resource_name="roce")
    s.networking.secondary_networks += [
        SecondaryNetwork(name="roce-0", type="macvlan", master="ens1f0np0", cidr="172.31.0.0/24",
                         resource_name="roce", gateway="172.31.0.1",
                         exclusions=[{"startIP": "172.31.0.200", "endIP": "172.31.0.254"}]),
        SecondaryNetwork(name="storage", type="host-device", master="eth7", cidr="172.31.1.0/24"),
    ]
    return s


def objects(spec: ClusterSpec, kind: str) -> list[dict]:
    return [o for o in network_operator.objects(spec) if o["kind"] == kind]


def ncp_spec(spec: ClusterSpec) -> dict:
    (ncp,) = objects(spec, "NicClusterPolicy")
    return ncp["spec"]


#: Every kind the networking components render, each checked by the tests below.
COVERED = {"NicClusterPolicy", "IPPool", "NetworkAttachmentDefinition", "release/network-operator",
           "release/pod-network"}


def test_every_rendered_networking_kind_is_covered(spec):
    rendered = render(spec)
    kinds = {o["kind"] for name in ("network-operator", "pod-network") for o in rendered.components[name]}
    kinds |= {f"release/{r.name}" for r in rendered.releases if r.name in ("network-operator", "pod-network")}
    assert kinds == COVERED


# -- network-operator chart ---------------------------------------------------------------------------


def test_network_operator_chart_pin():
    pin = components.get("network-operator").chart
    assert pin is not None
    assert (pin.name, pin.version, pin.repository) == (
        netop("chart-name"), netop("chart-version"), netop("chart-repository"))


def test_network_operator_values_keys_exist_upstream(spec):
    values = network_operator.values(spec)
    assert netop("chart-nfd-subchart-condition") == "nfd.enabled" and set(values["nfd"]) == {"enabled"}
    requests = values["operator"]["resources"]["requests"]
    assert {f"operator.resources.requests.{k}" for k in requests} <= set(netop("values-operator-resources-keys"))


# -- NicClusterPolicy -------------------------------------------------------------------------------


def test_nic_cluster_policy_identity_and_keys(spec):
    (ncp,) = objects(spec, "NicClusterPolicy")
    assert ncp["apiVersion"] == netop("ncp-api-version") and ncp["kind"] == netop("ncp-kind")
    assert ncp["metadata"]["name"] == netop("ncp-required-name")
    assert "namespace" not in ncp["metadata"]  # cluster-scoped
    assert netop("ncp-scope") == "Cluster"
    body = ncp["spec"]
    assert set(body) <= set(netop("ncp-spec-keys"))
    assert set(body["secondaryNetwork"]) <= set(netop("ncp-secondary-network-keys"))
    assert "ipamPlugin" not in body["secondaryNetwork"]  # whereabouts: gone since 25.10
    for key in ("multus", "cniPlugins", "ipoib"):
        assert set(body["secondaryNetwork"][key]) <= set(netop("ncp-multus-keys"))
    assert set(body["rdmaSharedDevicePlugin"]) <= set(netop("ncp-rdma-shared-device-plugin-keys"))
    assert set(body["nvIpam"]) <= set(netop("ncp-nv-ipam-keys"))
    assert body["nvIpam"]["enableWebhook"] is netop("example-ncp-nv-ipam-enable-webhook") is False


def test_nic_cluster_policy_images_are_the_releases(spec):
    body = ncp_spec(spec)
    images = {
        "image-rdma-shared-device-plugin": body["rdmaSharedDevicePlugin"],
        "image-cni-plugins": body["secondaryNetwork"]["cniPlugins"],
        "image-multus": body["secondaryNetwork"]["multus"],
        "image-ipoib": body["secondaryNetwork"]["ipoib"],
        "image-nv-ipam": body["nvIpam"],
    }
    for name, image in images.items():
        assert image["image"] == netop(name), name
        assert image["repository"] == netop("image-repository"), name
        assert set(netop("ncp-image-spec-required-by-operator")) <= set(image), name
    assert body["nvIpam"]["version"] == netop("image-nv-ipam-version")
    assert {i["version"] for i in images.values()} == {netop("image-version")}


def test_nic_cluster_policy_tolerations_add_to_the_builtin_one(spec):
    body = ncp_spec(spec)
    assert "tolerations" in netop("ncp-spec-keys")
    builtin = netop("tolerations-built-into-daemonsets")
    # the simulator models the same built-in toleration
    assert list(rdma_plugin.BUILTIN_TOLERATIONS) == builtin
    for tol in body["tolerations"]:
        assert set(tol) == {"key", "operator", "effect"} and tol["operator"] == "Exists"


def test_rdma_config_schema(spec):
    config = json.loads(ncp_spec(spec)["rdmaSharedDevicePlugin"]["config"])
    assert set(config) <= set(netop("rdma-dp-config-top-keys"))
    names = [e["resourceName"] for e in config["configList"]]
    assert len(names) == len(set(names))  # the plugin refuses repeated names
    for entry in config["configList"]:
        assert set(netop("rdma-dp-required-entry-keys")) <= set(entry) <= set(netop("rdma-dp-config-entry-keys"))
        assert set(entry["selectors"]) <= set(netop("rdma-dp-selector-keys"))
        assert set(entry["selectors"]["linkTypes"]) <= {netop("rdma-dp-link-type-ethernet"),
                                                         netop("rdma-dp-link-type-infiniband")}
    # no resourcePrefix: the default, which the NADs' annotation and expectations use
    assert netop("rdma-dp-default-resource-prefix") == rdma_plugin.DEFAULT_PREFIX == "rdma"


def test_node_labels_the_rdma_daemonset_selects_on():
    assert L.MELLANOX_NIC == netop("label-mellanox-nic")
    assert L.MELLANOX_NIC == "feature.node.kubernetes.io/" + netop("node-feature-rule-label")
    assert L.MOFED_WAIT == netop("label-mofed-wait")
    assert rdma_plugin.DAEMONSET_NODE_SELECTOR == netop("rdma-dp-daemonset-node-selector")


# -- nv-ipam IPPool -----------------------------------------------------------------------------------


def test_ip_pools_match_nv_ipam(spec):
    pools = objects(spec, "IPPool")
    assert {p["metadata"]["name"] for p in pools} == {n.name for n in spec.networking.secondary_networks}
    for pool in pools:
        assert pool["apiVersion"] == netop("nv-ipam-api-version") and pool["kind"] == netop("nv-ipam-ippool-kind")
        assert netop("nv-ipam-ippool-scope") == "Namespaced"
        # nv-ipam started by the operator watches the operator's namespace only
        assert pool["metadata"]["namespace"] == spec.networking.network_operator.namespace
        body = pool["spec"]
        assert set(netop("nv-ipam-ippool-required")) <= set(body) <= set(netop("nv-ipam-ippool-spec-keys"))
        assert body["perNodeBlockSize"] >= netop("nv-ipam-per-node-block-size-min")
        for ex in body.get("exclusions", []):
            assert set(ex) == set(netop("nv-ipam-exclusion-keys"))
        if "nodeSelector" in body:
            assert set(body["nodeSelector"]) == {"nodeSelectorTerms"}


def test_ip_pool_stand_in_names_the_upstream_fields():
    (crd,) = [c for c in stand_ins() if c["spec"]["names"]["kind"] == "IPPool"]
    assert crd["spec"]["group"] == netop("nv-ipam-api-version").split("/")[0]
    (version,) = crd["spec"]["versions"]
    assert version["name"] == netop("nv-ipam-api-version").split("/")[1]
    assert crd["spec"]["scope"] == netop("nv-ipam-ippool-scope")
    schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert set(schema["properties"]) == set(netop("nv-ipam-ippool-spec-keys"))
    assert schema["required"] == netop("nv-ipam-ippool-required")
    assert schema["properties"]["perNodeBlockSize"]["minimum"] == netop("nv-ipam-per-node-block-size-min")
    assert set(schema["properties"]["exclusions"]["items"]["properties"]) == set(netop("nv-ipam-exclusion-keys"))


# -- NetworkAttachmentDefinitions ---------------------------------------------------------------------

COMMON_CNI_KEYS = {"cniVersion", "name", "type", "ipam"}


def test_network_attachments_match_multus_and_the_cni_plugins(spec):
    nads = objects(spec, "NetworkAttachmentDefinition")
    assert {json.loads(n["spec"]["config"])["type"] for n in nads} == {"ipoib", "macvlan", "host-device"}
    keys = {"macvlan": "macvlan-keys", "host-device": "host-device-keys", "ipoib": "ipoib-keys"}
    for nad in nads:
        assert nad["apiVersion"] == netop("nad-api-version") and nad["kind"] == netop("nad-kind")
        assert set(nad["spec"]) == {netop("nad-spec-config").split(".")[1]}
        conf = json.loads(nad["spec"]["config"])
        assert conf["cniVersion"] == str(netop("operator-nad-cni-version"))
        assert set(conf) - COMMON_CNI_KEYS <= set(netop(keys[conf["type"]])), conf
        if conf["type"] == "ipoib":
            assert set(netop("ipoib-required")) <= set(conf)
        if conf["type"] == "macvlan":
            assert conf["mode"] == netop("macvlan-default-mode")
        # IPAM: nv-ipam, naming the pool (its default would be the network name: say it explicitly)
        assert conf["ipam"]["type"] == netop("nv-ipam-cni-type")
        assert set(conf["ipam"]) <= set(netop("nv-ipam-cni-keys"))
        assert conf["ipam"]["poolName"] == conf["name"]
        annotations = nad["metadata"].get("annotations") or {}
        if annotations:
            assert set(annotations) == {netop("nad-resource-name-annotation")}
            prefix, _, name = annotations[L.NAD_RESOURCE_NAME].partition("/")
            assert prefix == netop("rdma-dp-default-resource-prefix") and name
            assert conf["type"] != "host-device"  # Multus would hand it "0".."N" as a PCI address


def test_nothing_asks_for_whereabouts(spec):
    text = json.dumps(network_operator.objects(spec))
    assert netop("whereabouts-cni-type") not in text
    assert not [c for c in stand_ins() if c["spec"]["group"] == netop("whereabouts-crd-group")]


# -- the primary pod network (flannel) ----------------------------------------------------------------


def test_flannel_chart_pin_and_namespace(spec):
    pin = components.get("pod-network").chart
    assert pin is not None
    assert (pin.name, pin.version, pin.repository) == (
        cni("flannel-chart-name"), cni("flannel-chart-version"), cni("flannel-chart-repository"))
    assert pod_network.namespace(spec) == cni("flannel-chart-install-namespace")
    namespaces = {o["metadata"]["name"]: o for o in render(spec).components["namespaces"]}
    labels = namespaces[cni("flannel-chart-install-namespace")]["metadata"]["labels"]
    assert cni("flannel-namespace-pod-security").items() <= labels.items()


def _dotted(values: dict, prefix: str = "") -> set[str]:
    out = set()
    for k, v in values.items():
        path = f"{prefix}{k}"
        out |= _dotted(v, f"{path}.") if isinstance(v, dict) else {path}
    return out


def test_flannel_values_keys_and_pod_cidr(spec):
    values = pod_network.values(spec)
    assert _dotted(values) <= set(cni("flannel-values-keys"))
    assert values[cni("flannel-values-pod-cidr-key")] == spec.kubernetes.pod_subnet
    assert cni("kubeadm-pod-subnet-key") == "networking.podSubnet"
    assert values["flannel"]["backend"] in cni("flannel-values-backends")
    # the default pod subnet is flannel's own default, so an untouched spec and chart agree
    assert ClusterSpec.model_fields["kubernetes"].default_factory().pod_subnet == cni(
        "flannel-values-pod-cidr-default")


def test_our_values_turn_flannels_network_policy_add_on_on(spec):
    """The chart's templates add the enforcer where ``.Values.netpol.enabled`` is true: we set exactly that key."""
    assert spec.tenants and spec.networking.pod_network.network_policy_enforcement == "pod-network"
    values = pod_network.values(spec)
    guards = cni("flannel-netpol-template-guards")
    assert {g["guard"] for g in guards} == {".Values.netpol.enabled"}
    assert {g["adds"].split()[0] for g in guards} == {"container", "hostPath", "ClusterRole"}
    node: Any = values
    for key in guards[0]["guard"].removeprefix(".Values.").split("."):
        node = node[key]
    assert node is True  # a YAML/JSON boolean: Go templates' `if` takes it as true
    # the chart's own default is off, so nothing enforces the policies unless we set it
    assert cni("flannel-values-netpol-enabled") == {"key": "netpol.enabled", "default": False}
    assert "netpol.enabled" in cni("flannel-values-keys")
    assert "`netpol.enabled`" in cni("flannel-netpol-enabling-is-enough")
    # an enforcer of the owner's: ours stays off, said explicitly
    spec.networking.pod_network.network_policy_enforcement = "bring-your-own"
    assert pod_network.values(spec)["netpol"] == {"enabled": False}


def test_verify_looks_for_what_the_chart_creates():
    assert pod_network.DAEMONSET == cni("flannel-daemonset-name")
    assert pod_network.NETPOL_CONTAINER == cni("flannel-netpol-container-name")
    assert ClusterSpec.model_fields["networking"].default_factory().pod_network.namespace == cni(
        "flannel-chart-install-namespace")


def test_the_recorded_flannel_daemonset_is_the_charts():
    """The real-cluster recording verify's faults replay (tests/data/verify/record.py) holds flannel's DaemonSet
    as the pinned chart names, labels and places it, with the container its netpol guard adds."""
    data = json.loads((REPO / "tests" / "data" / "verify" / "real-cluster.json").read_text())
    (ds,) = [d for d in data["daemonsets"] if d["metadata"]["name"] == cni("flannel-daemonset-name")]
    assert ds["metadata"]["namespace"] == cni("flannel-chart-install-namespace")
    assert ds["metadata"]["labels"] == ds["spec"]["template"]["metadata"]["labels"] == cni("flannel-daemonset-labels")
    assert ds["spec"]["selector"]["matchLabels"] == cni("flannel-daemonset-selector")
    pod = ds["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == [cni("flannel-container-name"),
                                                      cni("flannel-netpol-container-name")]
    assert pod["tolerations"] == cni("flannel-values-tolerations") and "nodeSelector" not in pod
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [cni("flannel-daemonset-node-affinity")]
    # every recorded node is one the chart places a pod on, and the recording counts them all ready
    assert all(n["metadata"]["labels"]["kubernetes.io/os"] == "linux" for n in data["nodes"])
    assert {t["effect"] for n in data["nodes"] for t in n["spec"].get("taints") or []} <= {
        t["effect"] for t in cni("flannel-values-tolerations")}
    assert ds["status"]["desiredNumberScheduled"] == ds["status"]["numberReady"] == len(data["nodes"])


def _site_enforcer():
    """molecule/site/tests/netpol_enforcer.py (the site scenario's test helper), loaded from its file."""
    import importlib.util

    path = REPO / "molecule" / "site" / "tests" / "netpol_enforcer.py"
    module_spec = importlib.util.spec_from_file_location("site_netpol_enforcer", path)
    assert module_spec and module_spec.loader
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def test_the_site_scenario_runs_the_enforcer_as_flannels_add_on_does():
    """The isolation proof runs what netpol.enabled would add: container, command, args, env, privileges, RBAC."""
    site = _site_enforcer()
    docs = {d["kind"]: d for d in site.manifests("https://10.0.0.1:6443")}
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is cni("flannel-daemonset-host-network") is True
    (container,) = pod["containers"]
    assert container["name"] == cni("flannel-netpol-container-name")
    assert container["command"] == [cni("flannel-netpol-command")] == [cni("knp-image-binary")]
    assert container["args"] == cni("flannel-netpol-args")
    env = {e["name"]: e for e in container["env"]}
    want_env = cni("flannel-netpol-env-node-name")
    assert env[want_env["name"]]["valueFrom"] == {"fieldRef": {"fieldPath": want_env["fieldPath"]}}
    # the one addition: the API server's address for the in-cluster client (no kube-proxy on the site)
    assert set(env) - {want_env["name"]} == {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}
    assert (env["KUBERNETES_SERVICE_HOST"]["value"], env["KUBERNETES_SERVICE_PORT"]["value"]) == ("10.0.0.1", "6443")
    assert container["securityContext"] == cni("flannel-netpol-security-context")
    (volume,) = pod["volumes"]
    assert volume["hostPath"] == {"path": "/lib/modules"}
    assert docs["ClusterRole"]["rules"] == cni("flannel-clusterrole-rules") + cni("flannel-clusterrole-netpol-rules")
    # the program's own defaults the stand-in hook and the log reader rely on
    assert cni("knp-flag-nfqueue-id")["default"] == site.QUEUE
    # the stand-in's rules: upstream's chain, with v0.8.0's conntrack-state rule for v1.1.1's label rule
    rules = [" ".join(r) for r in site.standin_rules("10.244.1.0/24")]
    assert f"--queue-num {site.QUEUE} --queue-bypass" in rules[2] and "-s 10.244.1.0/24" in rules[2]
    assert "-d 10.244.1.0/24" in rules[3]
    assert "--ctstate ESTABLISHED,RELATED -j ACCEPT" in rules[1] and "connlabel" not in " ".join(rules)
    assert cni("knp-v0.8.0-established-rule").startswith("ct state established,related accept")
    assert "ct label 100" in cni("knp-queue-rules")["rules"][0]
    assert cni("knp-initial-sync-failure-is-logged-not-fatal") == site.SYNC_FAILED
    assert site.IMAGE.endswith(":" + versions.KUBE_NETWORK_POLICIES)


def test_the_log_reader_pairs_each_verdict_with_its_packet():
    site = _site_enforcer()
    lines = cni("knp-verdict-log-lines")
    log = "\n".join([
        'I1203 10:00:00.000001 1 logging.go:67] "Evaluating packet" id=7 direction="Egress" srcPod="a/client" '
        'dstPod="b/server" packet="[7] 10.244.1.5:40000 10.244.2.6:8080 TCP"',
        f'I1203 10:00:00.000002 1 engine.go:57] "{lines["egress-denied"]}" id=7',
        'I1203 10:00:00.000003 1 logging.go:67] "Evaluating packet" id=8 direction="Egress" srcPod="a/client" '
        'dstPod="a/server"',
        f'I1203 10:00:00.000004 1 engine.go:72] "{lines["accepted"]}" id=8',
    ])
    assert site.verdicts(log, "a/client", "b/server") == [lines["egress-denied"]]
    assert site.verdicts(log, "a/client", "a/server") == [lines["accepted"]]
    assert site.verdicts(log, "b/server", "a/client") == []


def test_the_refusal_of_the_nftables_table_is_read_whole():
    """klog writes the error on the lines after the message; the site's stand-in needs the kernel's answer."""
    site = _site_enforcer()
    failed = cni("knp-initial-sync-failure-is-logged-not-fatal")
    # as kube-network-policies v1.1.1 logged it on the build machine (a network namespace of its own)
    log = "\n".join([
        'I1202 07:18:11.220157   13111 resolver.go:83] nri plugin exited, retrying 9 times in 5 seconds',
        f'E1202 07:18:11.765384   13111 controller.go:217] "{failed}" err=<',
        "\tconn.Receive: netlink receive: no such file or directory",
        "\tnetlink receive: no such file or directory",
        " >",
        'I1202 07:18:16.221071   13111 resolver.go:83] nri plugin exited, retrying 8 times in 5 seconds',
    ])
    entry = site.sync_refusal(log)
    assert entry.startswith("E1202") and site.NO_QUEUE_EXPRESSION in entry and "resolver.go" not in entry
    assert site.sync_refusal(log.replace(failed, "Syncing nftables rules")) == ""


def test_host_layer_provides_the_reference_plugins():
    defaults = yaml.safe_load((REPO / "roles" / "kubernetes_node" / "defaults" / "main.yml").read_text())
    debian = yaml.safe_load((REPO / "roles" / "kubernetes_node" / "vars" / "Debian.yml").read_text())
    # flannel's README names portmap; its CNI plugin delegates to bridge and host-local; containerd's
    # CRI runs the loopback plugin for every pod
    needed = set(cni("flannel-needs-reference-cni-plugins")) | {"bridge", "host-local", "loopback"}
    assert needed <= set(defaults["kubernetes_node_cni_plugins"])
    assert cni("containerd-cri-loopback-network") == "cni.WithLoNetwork"
    assert defaults["kubernetes_node_cni_bin_dir"] == cni("kubernetes-cni-package-dir") == "/opt/cni/bin"
    assert debian["kubernetes_node_cni_package_dir"] == cni("debian12-cni-plugins-dir")
