"""Tenant isolation with real packets: one tenant's pods cannot reach another's, allowed traffic flows.

`gpucluster up` deployed both tenants' default-deny NetworkPolicies (``render.tenants.network_policy``)
on this kubeadm cluster. A NetworkPolicy is only an object; here the program flannel's ``netpol``
add-on runs, kube-network-policies, enforces them on every node (``netpol_enforcer``: the chart's
container, arguments and RBAC, from an image archive; on this kernel with the xtables stand-in for
nftables' queue statement, only where the program logged that the kernel refused its own). Real
pods on the bridge pod network then connect to each other with busybox's nc, and every outcome is
checked twice: what the client saw, and the verdict the program logged for that pair of pods (so a
refusal is the enforcer's, not a broken route, and a success was judged, not missed).

The site has no CoreDNS and no monitoring stack (monitoring is off in its spec, so the tenants'
policies allow no monitoring namespace): DNS is a stand-in pod with CoreDNS's labels in
``kube-system`` serving TCP on the DNS port, and the monitoring rule is proven on the policy the
render core gives a tenant when monitoring is on, applied to a probe namespace.
"""

import json
import shlex
import time
from pathlib import Path

import netpol_enforcer as enforcer
import pytest
import testinfra
from waiting import wait_for

from gpucluster.render import tenants as render_tenants
from gpucluster.spec import load_spec
from gpucluster.spec.model import Tenant

INVENTORY = Path(__file__).resolve().parent.parent / "inventory"
SPEC = load_spec(INVENTORY)
CP = SPEC.control_planes[0].name
H100, A100, L40S = "gpuc-site-h100", "gpuc-site-a100", "gpuc-site-l40s"
KUBECTL = "kubectl --kubeconfig /etc/kubernetes/admin.conf"
RESEARCH, VISION = (t.ns for t in SPEC.tenants)
OUTSIDERS = "gpucluster-outsiders"  # a namespace no policy covers
PROBE_TENANT, PROBE_MONITORING = "gpucluster-probe-tenant", "gpucluster-probe-monitoring"
DNS_NS = render_tenants.DNS_NAMESPACE
PROBE_LABEL = "gpucluster.dev/isolation-probe"
#: Every probe pod: (namespace, name) -> (node, ports it serves; none for a client).
PODS: dict[tuple[str, str], tuple[str, tuple[int, ...]]] = {
    (RESEARCH, "server"): (H100, (8080,)),
    (RESEARCH, "client"): (A100, ()),
    (VISION, "server"): (A100, (8080,)),  # on the research client's node: bridged, not routed
    (VISION, "client"): (L40S, ()),
    (DNS_NS, "gpucluster-dns-standin"): (L40S, (53, 8080)),
    (OUTSIDERS, "outsider"): (L40S, ()),
    (PROBE_TENANT, "exporter"): (H100, (8080,)),
    (PROBE_MONITORING, "scraper"): (A100, ()),
}
DENIED_EGRESS, DENIED_INGRESS, ACCEPTED = (
    "Packet denied by egress policy", "Packet denied by ingress policy", "Packet accepted by policy")


def cp():
    return testinfra.get_host(f"podman://{CP}")


def kubectl(*args: str) -> str:
    return cp().check_output(f"{KUBECTL} {shlex.join(args)}")


def apply(docs: list[dict]) -> None:
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    cp().check_output(f"echo {shlex.quote(manifest)} | {KUBECTL} apply -f -")


def _refusal(pod: str, grace: float = 10.0) -> str:
    """The entry in which the enforcer says the kernel refused its nftables table ("" when it never does).

    Called once its queue is read: the program logs the outcome of its first nftables sync before it
    opens the queue, so the line is written by then; ``grace`` covers the runtime's log shipping.
    """
    deadline = time.monotonic() + grace
    while True:
        found = enforcer.sync_refusal(cp().run(f"{KUBECTL} logs -n {enforcer.NAMESPACE} {pod}").stdout)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(1)


def _queue_read(node: str) -> bool:
    """Whether a program reads the enforcer's nfqueue in ``node``'s network namespace."""
    table = testinfra.get_host(f"podman://{node}").run("cat /proc/net/netfilter/nfnetlink_queue").stdout
    return any(line.split()[:1] == [str(enforcer.QUEUE)] for line in table.splitlines())


@pytest.fixture(scope="module")
def enforcers():
    """kube-network-policies on every node, its queue read; node -> (its pod, why a stand-in hook is there)."""
    server = kubectl("config", "view", "--raw", "-o", "jsonpath={.clusters[0].cluster.server}").strip()
    docs = enforcer.manifests(server)
    hooked: list[str] = []
    apply(docs)
    try:
        kubectl("rollout", "status", "-n", enforcer.NAMESPACE, f"daemonset/{enforcer.NAME}", "--timeout=180s")
        listed = json.loads(kubectl("get", "pods", "-n", enforcer.NAMESPACE, "-l", f"app={enforcer.NAME}",
                                    "-o", "json"))["items"]
        pods = {p["spec"]["nodeName"]: p["metadata"]["name"] for p in listed}
        nodes = json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
        cidrs = {n["metadata"]["name"]: n["spec"]["podCIDR"] for n in nodes}
        out: dict[str, tuple[str, str]] = {}
        for node, pod in sorted(pods.items()):
            # It opens its queue once its informers have synced and it has tried its nftables table.
            wait_for(f"kube-network-policies on {node} to read queue {enforcer.QUEUE}", lambda n=node: _queue_read(n))
            refused = _refusal(pod)
            if refused:
                # Only this kernel's refusal of the queue statement is stood in for; any other failure is a failure.
                assert enforcer.NO_QUEUE_EXPRESSION in refused, refused
                host = testinfra.get_host(f"podman://{node}")
                hooked.append(node)
                for argv in enforcer.standin_rules(cidrs[node]):
                    host.check_output(f"iptables {shlex.join(argv)}")
            out[node] = (pod, refused)
        yield out
    finally:
        for node in hooked:
            host = testinfra.get_host(f"podman://{node}")
            for argv in enforcer.standin_removal():
                host.run(f"iptables {shlex.join(argv)}")
        cp().run(f"{KUBECTL} delete namespace {enforcer.NAMESPACE} --wait=false")
        for doc in docs:
            if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                cp().run(f"{KUBECTL} delete {doc['kind'].lower()} {doc['metadata']['name']}")


def _pod(ns: str, name: str, node: str, ports: tuple[int, ...], image: str) -> dict:
    serve = ""
    if ports:
        *background, last = ports
        serve = (f"mkdir -p /tmp/www && echo {ns}/{name} > /tmp/www/index.html && "
                 + "".join(f"busybox httpd -p {p} -h /tmp/www && " for p in background)
                 + f"exec busybox httpd -f -p {last} -h /tmp/www")
    root = any(p < 1024 for p in ports)  # the DNS stand-in binds port 53 (kube-system enforces no Pod Security)
    container: dict = {
        "name": "main", "image": image, "imagePullPolicy": "Never",
        "command": ["busybox", "sh", "-c", serve or "exec busybox sleep 3600"],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}},
    }
    spec: dict = {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 0,
                  "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                  "containers": [container]}
    if not root:  # what the tenants' Pod Security level (restricted) admits
        spec["securityContext"] = {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                                   "seccompProfile": {"type": "RuntimeDefault"}}
        container["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    labels = {PROBE_LABEL: "true", **(dict(render_tenants.DNS_POD_LABELS) if ns == DNS_NS else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": spec}


@pytest.fixture(scope="module")
def pods(enforcers):
    """Every probe pod Ready on its node; (namespace, name) -> its pod IP."""
    images = cp().check_output("ctr --namespace k8s.io images list --quiet").split()
    image = next(i for i in images if i.startswith("localhost/gpucluster/busybox:"))
    ours = [OUTSIDERS, PROBE_TENANT, PROBE_MONITORING]
    docs: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in ours]
    # The policy a tenant gets when the spec's monitoring is on, with the probe namespace as monitoring's.
    docs.append(render_tenants.network_policy(Tenant(name=PROBE_TENANT), PROBE_MONITORING))
    docs += [_pod(ns, name, node, ports, image) for (ns, name), (node, ports) in PODS.items()]
    apply(docs)
    try:
        kubectl("wait", "--for=condition=Ready", "pod", "-A", "-l", PROBE_LABEL, "--timeout=180s")
        listed = json.loads(kubectl("get", "pods", "-A", "-l", PROBE_LABEL, "-o", "json"))["items"]
        got = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in listed}
        assert {k: p["spec"]["nodeName"] for k, p in got.items()} == {k: node for k, (node, _) in PODS.items()}
        yield {k: p["status"]["podIP"] for k, p in got.items()}
    finally:
        # The tenants' namespaces and kube-system are not ours: only our pods go there.
        cp().run(f"{KUBECTL} delete pod -A -l {PROBE_LABEL} --wait=false")
        for ns in ours:
            cp().run(f"{KUBECTL} delete namespace {ns} --wait=false")


def fetch(pods: dict, src: tuple[str, str], dst: tuple[str, str], port: int = 8080) -> str:
    """What ``src`` gets for an HTTP request to ``dst``'s pod IP ("" when no connection is made in 2 s)."""
    request = f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 2 {pods[dst]} {port}"
    return cp().run(f"{KUBECTL} exec -n {src[0]} {src[1]} -- busybox sh -c {shlex.quote(request)}").stdout


def judged(enforcers: dict, src: tuple[str, str], dst: tuple[str, str]) -> set[str]:
    """The verdicts the enforcer on ``src``'s node logged for packets from ``src`` to ``dst``."""
    pod, _ = enforcers[PODS[src][0]]
    log = cp().check_output(f"{KUBECTL} logs -n {enforcer.NAMESPACE} {pod}")
    return set(enforcer.verdicts(log, "/".join(src), "/".join(dst)))


def fetch_judged(enforcers: dict, pods: dict, src: tuple[str, str], dst: tuple[str, str],
                 port: int = 8080) -> tuple[list[str], set[str]]:
    """:func:`fetch` until the enforcer on ``src``'s node has judged a packet from ``src`` to ``dst`` by name;
    every attempt's answer and the verdicts.

    The program names a packet's pods from its pod informer ("external" for an address it does not know
    yet, pkg/networkpolicy/logging.go), which can lag the pods' start on a busy machine: such a verdict
    cannot be told apart from another packet's, so the request is made again (a new connection each time).
    The caller judges every answer, not only the last.
    """
    answers: list[str] = []

    def attempt() -> set[str]:
        answers.append(fetch(pods, src, dst, port))
        return judged(enforcers, src, dst)

    verdicts = wait_for(f"the enforcer on {PODS[src][0]} to judge {'/'.join(src)} -> {'/'.join(dst)}:{port} by name",
                        attempt, timeout=60, every=2)
    return answers, verdicts


def test_the_enforcer_reads_its_queue_on_every_node(enforcers):
    assert set(enforcers) == {h.name for h in SPEC.hosts}
    for node, (_pod, refused) in enforcers.items():
        # Where the stand-in hook was put in, the kernel had refused the program's own table, and only so.
        assert not refused or (enforcer.SYNC_FAILED in refused and enforcer.NO_QUEUE_EXPRESSION in refused), node


def test_a_tenant_reaches_its_own_pods_on_another_node(enforcers, pods):
    src, dst = (RESEARCH, "client"), (RESEARCH, "server")
    answers, verdicts = fetch_judged(enforcers, pods, src, dst)
    assert "200 OK" in answers[-1] and f"{RESEARCH}/server" in answers[-1], (answers, verdicts)
    assert verdicts == {ACCEPTED}


@pytest.mark.parametrize("src, dst", [
    ((RESEARCH, "client"), (VISION, "server")),  # both on one node: across the node's bridge
    ((VISION, "client"), (RESEARCH, "server")),  # across nodes, over the routes between them
], ids=["same-node", "across-nodes"])
def test_a_tenant_cannot_reach_another_tenants_pods(enforcers, pods, src, dst):
    answers, verdicts = fetch_judged(enforcers, pods, src, dst)
    assert not [a for a in answers if "200 OK" in a], answers
    # the sender's own policy lets it reach its namespace and DNS only
    assert verdicts == {DENIED_EGRESS}


def test_a_pod_outside_every_tenant_cannot_reach_into_one(enforcers, pods):
    src, dst = (OUTSIDERS, "outsider"), (RESEARCH, "server")
    answers, verdicts = fetch_judged(enforcers, pods, src, dst)
    assert not [a for a in answers if "200 OK" in a], answers
    # nothing limits the outsider's egress; the tenant's ingress refuses it
    assert verdicts == {DENIED_INGRESS}


def test_tenant_pods_reach_cluster_dns_on_its_port_only(enforcers, pods):
    src, dns = (RESEARCH, "client"), (DNS_NS, "gpucluster-dns-standin")
    answers, verdicts = fetch_judged(enforcers, pods, src, dns, 53)
    assert "200 OK" in answers[-1] and f"{DNS_NS}/gpucluster-dns-standin" in answers[-1], (answers, verdicts)
    assert verdicts == {ACCEPTED}
    # the DNS pod by name now: the next request's verdict is logged by name
    assert "200 OK" not in fetch(pods, src, dns, 8080)
    assert judged(enforcers, src, dns) == {ACCEPTED, DENIED_EGRESS}


def test_the_monitoring_namespace_may_scrape_a_tenant_and_nobody_else_may(enforcers, pods):
    scraper, outsider, exporter = (PROBE_MONITORING, "scraper"), (OUTSIDERS, "outsider"), (PROBE_TENANT, "exporter")
    answers, verdicts = fetch_judged(enforcers, pods, scraper, exporter)
    assert "200 OK" in answers[-1] and f"{PROBE_TENANT}/exporter" in answers[-1], (answers, verdicts)
    assert verdicts == {ACCEPTED}
    answers, verdicts = fetch_judged(enforcers, pods, outsider, exporter)
    assert not [a for a in answers if "200 OK" in a], answers
    assert verdicts == {DENIED_INGRESS}
