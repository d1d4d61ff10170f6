"""kube-network-policies on the site hosts, run as the flannel chart's netpol add-on runs it (CI only).

The site scenario has no flannel (its chart cannot be fetched here); its pods are connected by the
host layer's bridge network. The tenants' NetworkPolicies are enforced by the same program flannel's
``netpol.enabled`` adds to flannel's DaemonSet: kube-network-policies (built from its Go module,
``versions.KUBE_NETWORK_POLICIES``), as a privileged host-network container of a DaemonSet on every
node, from an image laid out as upstream's (``/bin/netpol``), with the chart's arguments, environment,
``/lib/modules`` volume and ClusterRole rules (tests/upstream/facts/cni.yaml; the upstream tier
compares :func:`manifests` with them). Two things differ, both said where they are made: the image
comes from an archive (nothing can be pulled), and the API server's address is given to the
in-cluster client directly (the site has no kube-proxy, so the ``kubernetes`` Service's address
leads nowhere).

**The queue hook stand-in.** kube-network-policies hands pod packets to its program with nftables'
``queue`` statement (pkg/dataplane/controller.go), which needs the kernel's nft_queue. This build
machine's kernel has no loadable modules and was built without it (``CONFIG_NFT_QUEUE`` is not set;
nfnetlink_queue and the xtables ``NFQUEUE`` target are built in), so the program's whole nftables
table is refused and it logs ``initial nftables sync failed``; it still opens its queue and judges
whatever reaches it. Only on a node where it logged exactly that refusal, the tests put the same
hook in with the xtables target (:func:`standin_rules`): the rules of upstream's postrouting chain,
with the node's pod CIDR in place of the set of its policy-selected pods (a superset: a packet of a
pod no policy selects is judged "accepted"). Every verdict is still the program's own.

The same kernel has no ctnetlink glue for nfqueue (``CONFIG_NETFILTER_NETLINK_GLUE_CT`` is not set), so
a verdict cannot carry conntrack attributes: v1.1.1 marks each connection it accepts with a conntrack
label in its verdict and lets later packets through by that label; here the label never sticks
(measured in network namespaces: every packet of an accepted connection came back to the queue; opening
a queue with conntrack attributes fails with EOPNOTSUPP). The stand-in therefore lets packets of
established connections through by conntrack state, as upstream's rule did up to v0.8.0.
"""

from __future__ import annotations

import re

from gpucluster import versions

NAMESPACE = "gpucluster-netpol"
NAME = "kube-network-policies"
#: The container name the chart gives the add-on (chart/kube-flannel/templates/daemonset.yaml).
CONTAINER = "kube-network-policies"
IMAGE = f"localhost/gpucluster/kube-network-policies:{versions.KUBE_NETWORK_POLICIES}"
#: The program's default queue (pkg/cmd/cmd.go --nfqueue-id).
QUEUE = 100
#: The stand-in hook's chain (mangle table, hooked into POSTROUTING as upstream's chain is).
CHAIN = "GPUCLUSTER-KNP-QUEUE"
#: What the program logs when the kernel refuses its nftables table, and the refusal this kernel gives
#: (the netlink answer to an expression the kernel does not have: ENOENT).
SYNC_FAILED = "initial nftables sync failed"
NO_QUEUE_EXPRESSION = "no such file or directory"


def manifests(api_server: str) -> list[dict]:
    """The namespace, identity and DaemonSet of the enforcer; ``api_server`` is ``https://HOST:PORT``."""
    host, _, port = api_server.removeprefix("https://").rpartition(":")
    meta = {"name": NAME, "namespace": NAMESPACE}
    role = f"gpucluster-site-{NAME}"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        # The chart's ClusterRole (flannel's own rules plus those netpol.enabled adds).
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": role},
         "rules": [
             {"apiGroups": [""], "resources": ["pods", "nodes", "namespaces"], "verbs": ["get", "list", "watch"]},
             {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
             {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["list", "watch"]},
             {"apiGroups": ["policy.networking.k8s.io"],
              "resources": ["adminnetworkpolicies", "baselineadminnetworkpolicies"], "verbs": ["list", "watch"]},
         ]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": role},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta, "spec": {
            "selector": {"matchLabels": {"app": NAME}},
            "template": {"metadata": {"labels": {"app": NAME}}, "spec": {
                "hostNetwork": True,
                "serviceAccountName": NAME,
                "tolerations": [{"operator": "Exists", "effect": "NoExecute"},
                                {"operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{
                    "name": CONTAINER,
                    "image": IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/netpol"],
                    "args": ["--hostname-override=$(MY_NODE_NAME)", "--v=2"],
                    "env": [
                        {"name": "MY_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                        # No kube-proxy here: the in-cluster client is pointed at the API server itself.
                        {"name": "KUBERNETES_SERVICE_HOST", "value": host},
                        {"name": "KUBERNETES_SERVICE_PORT", "value": port},
                    ],
                    "volumeMounts": [{"name": "lib-modules", "mountPath": "/lib/modules", "readOnly": True}],
                    "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
                    "securityContext": {"privileged": True, "capabilities": {"add": ["NET_ADMIN"]}},
                }],
                "volumes": [{"name": "lib-modules", "hostPath": {"path": "/lib/modules"}}],
            }},
        }},
    ]


def standin_rules(pod_cidr: str) -> list[list[str]]:
    """``iptables`` argument lists that hook the node's pod traffic into the program's queue.

    Upstream's postrouting chain: packets of connections already let through pass, and packets from or
    to the node's pods go to the queue, bypassing it while nothing reads it (the program's default
    --fail-open). "Let through" is conntrack's established state, as upstream's rule was up to v0.8.0,
    not v1.1.1's conntrack label: the program sets that label with its accepting verdict, which this
    kernel cannot do (module docstring). With the label rule, every later packet of an accepted
    connection would be judged as if it opened one, and a reply that the reverse direction's policy does
    not allow (a DNS answer to a tenant pod) would be dropped.
    """
    mangle = ["-w", "-t", "mangle"]
    return [
        [*mangle, "-N", CHAIN],
        [*mangle, "-A", CHAIN, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"],
        [*mangle, "-A", CHAIN, "-s", pod_cidr, "-j", "NFQUEUE", "--queue-num", str(QUEUE), "--queue-bypass"],
        [*mangle, "-A", CHAIN, "-d", pod_cidr, "-j", "NFQUEUE", "--queue-num", str(QUEUE), "--queue-bypass"],
        [*mangle, "-I", "POSTROUTING", "-j", CHAIN],
    ]


def standin_removal() -> list[list[str]]:
    mangle = ["-w", "-t", "mangle"]
    return [[*mangle, "-D", "POSTROUTING", "-j", CHAIN], [*mangle, "-F", CHAIN], [*mangle, "-X", CHAIN]]


def sync_refusal(log: str) -> str:
    """The log entry in which the program says the kernel refused its nftables table ("" when there is none).

    klog writes a multi-line error value as ``err=<``, the lines indented with a tab, then `` >``.
    """
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if SYNC_FAILED in line:
            entry = [line]
            if line.rstrip().endswith("=<"):
                for more in lines[i + 1:]:
                    entry.append(more)
                    if not more.startswith("\t"):
                        break
            return "\n".join(entry)
    return ""


_KV = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def _fields(line: str) -> dict[str, str]:
    return {k: v.strip('"') for k, v in _KV.findall(line)}


def verdicts(log: str, src: str, dst: str) -> list[str]:
    """What the program decided for the packets it evaluated from pod ``src`` to pod ``dst`` (``ns/name``).

    Read from its -v=2 log: "Evaluating packet" names the packet's id and pods, and the verdict line
    ("Packet denied by egress policy", "... ingress policy", "Packet accepted by policy") carries the
    same id (pkg/networkpolicy/engine.go, logging.go).
    """
    ids: set[str] = set()
    out: list[str] = []
    for line in log.splitlines():
        if '"Evaluating packet"' in line:
            f = _fields(line)
            if f.get("srcPod") == src and f.get("dstPod") == dst and "id" in f:
                ids.add(f["id"])
            continue
        m = re.search(r'"(Packet (?:denied by (?:egress|ingress) policy|accepted by policy))"', line)
        if m and _fields(line).get("id") in ids:
            out.append(m.group(1))
    return out
