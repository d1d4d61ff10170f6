"""The control-plane endpoint the control-plane hosts serve themselves (roles/api_endpoint).

The site spec has two control planes behind ``kubernetes.controlPlaneEndpoint`` with
``controlPlaneEndpointProvider: keepalived-haproxy``: keepalived holds the virtual IP on one control-plane
host, and haproxy on each forwards the endpoint's port to every API server whose /healthz answers.
kubeadm init wrote the endpoint into every kubeconfig and kubeadm join --control-plane came in through it.

Checked from the hosts, as an operator would: exactly one host holds the address, every kubeconfig names
the endpoint and the API answers there (with TLS verified, so the serving certificate names the address),
the second control plane's own API server serves the whole cluster (its etcd member holds the data), and
two faults: haproxy stopped on the holder moves the address to the other host, and an API server that
is down is left out while the endpoint keeps answering. Each fault is undone, and waited for, before the
next test. Addresses are read here with ``ip -j``, not with the role's filter.
"""

import json
import shlex
from pathlib import Path

import pytest
import testinfra
import yaml
from waiting import wait_for

from gpucluster.spec import load_spec

SPEC = load_spec(Path(__file__).resolve().parent.parent / "inventory")
CONTROL_PLANES = [h.name for h in SPEC.control_planes]
VIP, _, PORT = (SPEC.kubernetes.control_plane_endpoint or "").rpartition(":")
ENDPOINT = f"https://{VIP}:{PORT}"
MANIFEST = "/etc/kubernetes/manifests/kube-apiserver.yaml"
PARKED = "/etc/kubernetes/kube-apiserver.yaml.parked"


def on(name: str):
    return testinfra.get_host(f"podman://{name}")


def addresses(name: str) -> list[str]:
    return [
        a["local"]
        for iface in json.loads(on(name).check_output("ip -4 -j addr show"))
        for a in iface.get("addr_info", [])
    ]


def own_address(name: str) -> str:
    """The host's address on podman's network (eth0), not the virtual IP."""
    (address,) = [
        a["local"]
        for iface in json.loads(on(name).check_output("ip -4 -j addr show dev eth0"))
        for a in iface["addr_info"]
        if a["local"] != VIP
    ]
    return address


def holders() -> list[str]:
    return [name for name in CONTROL_PLANES if VIP in addresses(name)]


def api(name: str, *args: str, server: str = "") -> object:
    """kubectl on ``name`` with its admin kubeconfig (whose server is the endpoint), or another server."""
    flag = f"--server {shlex.quote(server)} " if server else ""
    kubectl = "kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout 5s"
    return on(name).run(f"{kubectl} {flag}{shlex.join(args)}")


def journal_since(name: str, unit: str, since: str) -> str:
    return on(name).check_output(f"journalctl -u {unit} --since @{since} --no-pager -o cat")


def control_plane_back(name: str) -> bool:
    """``name``'s Node is Ready and its four static pods' containers are ready, as the API reports them."""
    node = api(CONTROL_PLANES[0], "get", "node", name, "-o", "json")
    pods = api(
        CONTROL_PLANES[0], "get", "pods", "-n", "kube-system", "--field-selector", f"spec.nodeName={name}", "-o", "json"
    )
    if node.rc != 0 or pods.rc != 0:
        return False
    ready = {c["type"]: c["status"] for c in json.loads(node.stdout)["status"]["conditions"]}.get("Ready")
    statics = {p["metadata"]["name"]: p for p in json.loads(pods.stdout)["items"]}
    for component in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        containers = (statics.get(f"{component}-{name}") or {}).get("status", {}).get("containerStatuses") or []
        if not containers or not all(container.get("ready") for container in containers):
            return False
    return ready == "True"


def test_the_spec_has_two_control_planes_behind_the_endpoint():
    assert len(CONTROL_PLANES) == 2 and VIP and PORT == "8443", (CONTROL_PLANES, VIP, PORT)
    assert SPEC.kubernetes.control_plane_endpoint_provider == "keepalived-haproxy"


@pytest.mark.parametrize("name", CONTROL_PLANES)
def test_haproxy_and_keepalived_run_on_each_control_plane(name):
    host = on(name)
    for unit in ("haproxy", "keepalived"):
        assert host.service(unit).is_running, (name, unit)
        assert host.service(unit).is_enabled, (name, unit)
    # haproxy listens on the endpoint's port on every control plane, holder or not.
    assert host.socket(f"tcp://0.0.0.0:{PORT}").is_listening, name


def test_exactly_one_control_plane_holds_the_address_the_first_one():
    # keepalived's priorities put kubeadm init's host first while its haproxy runs.
    assert wait_for(f"{VIP} held by one host", lambda: holders() if len(holders()) == 1 else None, timeout=30) == [
        CONTROL_PLANES[0]
    ]


@pytest.mark.parametrize(
    ("name", "kubeconfig"),
    [(cp, "admin.conf") for cp in CONTROL_PLANES]
    + [(h.name, "kubelet.conf") for h in SPEC.hosts if h.name not in CONTROL_PLANES],
)
def test_kubeconfigs_name_the_endpoint(name, kubeconfig):
    # Every admin kubeconfig, and every worker's kubelet: none depends on one control plane.
    config = yaml.safe_load(on(name).file(f"/etc/kubernetes/{kubeconfig}").content_string)
    (cluster,) = config["clusters"]
    assert cluster["cluster"]["server"] == ENDPOINT, (name, kubeconfig, cluster)


@pytest.mark.parametrize("name", CONTROL_PLANES)
def test_the_api_answers_at_the_endpoint_from_each_control_plane(name):
    # TLS is verified against the cluster CA: the API server's certificate names the virtual IP.
    result = api(name, "get", "--raw", "/readyz")
    assert result.rc == 0 and result.stdout.strip() == "ok", (name, result.stdout, result.stderr)


@pytest.mark.parametrize("name", CONTROL_PLANES)
def test_each_api_server_advertises_its_own_address_not_the_virtual_ip(name):
    # kubeadm picks the advertise address from the default route's interface, where keepalived adds the
    # virtual IP: an API server advertising it would put an address that moves into the kubernetes Service.
    manifest = yaml.safe_load(on(name).file(MANIFEST).content_string)
    args = manifest["spec"]["containers"][0]["command"]
    assert f"--advertise-address={own_address(name)}" in args, (name, [a for a in args if "advertise" in a])


def test_the_second_control_plane_serves_the_whole_cluster_from_its_own_etcd_member():
    # kubeadm's local etcd: each API server talks to its own host's member only (--etcd-servers
    # https://127.0.0.1:2379), so the second one listing every Node means its member joined the first's.
    second = CONTROL_PLANES[1]
    manifest = yaml.safe_load(on(second).file(MANIFEST).content_string)
    args = manifest["spec"]["containers"][0]["command"]
    assert "--etcd-servers=https://127.0.0.1:2379" in args, args
    result = api(second, "get", "nodes", "-o", "json", server=f"https://{own_address(second)}:6443")
    assert result.rc == 0, result.stderr
    assert {n["metadata"]["name"] for n in json.loads(result.stdout)["items"]} == {h.name for h in SPEC.hosts}


@pytest.fixture
def haproxy_stopped_on_the_holder():
    first, second = CONTROL_PLANES
    assert holders() == [first]
    on(first).check_output("systemctl stop haproxy")
    try:
        yield first, second
    finally:
        on(first).check_output("systemctl start haproxy")
        # The first host's priority is the higher one: it takes the address back once haproxy runs again.
        wait_for(f"{VIP} back on {first}", lambda: holders() == [first], timeout=60)
        wait_for(f"the API at {ENDPOINT} from {first}", lambda: api(first, "get", "--raw", "/readyz").rc == 0)


def test_the_address_moves_when_haproxy_stops_on_its_holder(haproxy_stopped_on_the_holder):
    first, second = haproxy_stopped_on_the_holder
    wait_for(f"{VIP} to move to {second}", lambda: holders() == [second], timeout=60)
    # From the host whose haproxy is down, through the other's.
    result = wait_for(
        f"the API at {ENDPOINT} from {first}", lambda: (r := api(first, "get", "--raw", "/readyz")).rc == 0 and r
    )
    assert result.stdout.strip() == "ok"


@pytest.fixture
def api_server_down_on_the_second():
    first, second = CONTROL_PLANES
    assert holders() == [first]
    since = on(first).check_output("date +%s")
    # The kubelet stops a static pod whose manifest leaves its folder, and starts it again when it returns.
    on(second).check_output(f"mv {MANIFEST} {PARKED}")
    try:
        yield first, second, since
    finally:
        on(second).check_output(f"test -e {MANIFEST} || mv {PARKED} {MANIFEST}")
        wait_for(
            f"the API server on {second} to answer again",
            lambda: api(second, "get", "--raw", "/readyz", server=f"https://{own_address(second)}:6443").rc == 0,
            timeout=180,
        )
        wait_for(
            f"haproxy on {first} to send to {second}'s API server again",
            lambda: f"kube-apiserver/{second} is UP" in journal_since(first, "haproxy", since),
            timeout=60,
        )
        # Its kubelet and controllers talk to their own API server: the Node and every static pod must be
        # Ready again before the next tests read them.
        wait_for(f"{second}'s Node and static pods to be Ready again", lambda: control_plane_back(second), 180)


def test_an_api_server_that_is_down_is_left_out_and_the_endpoint_keeps_answering(api_server_down_on_the_second):
    first, second, since = api_server_down_on_the_second
    local = f"https://{own_address(second)}:6443"
    wait_for(
        f"the API server on {second} to stop",
        lambda: (
            not on(second).socket("tcp://0.0.0.0:6443").is_listening
            and not on(second).socket("tcp://:::6443").is_listening
        ),
        timeout=120,
    )
    assert api(second, "get", "--raw", "/readyz", server=local).rc != 0
    # haproxy's health check (GET /healthz over TLS) on the holder takes it out of the backend ...
    wait_for(
        f"haproxy on {first} to mark {second}'s API server down",
        lambda: f"kube-apiserver/{second} is DOWN" in journal_since(first, "haproxy", since),
        timeout=60,
    )
    # once in the journal: haproxy's standard error, with no second log target repeating it (haproxy.cfg.j2)
    assert journal_since(first, "haproxy", since).count(f"kube-apiserver/{second} is DOWN") == 1
    # ... so every request at the endpoint reaches the first API server (round robin would send every
    # other one to the stopped server if it did not).
    assert holders() == [first]
    for _ in range(6):
        result = api(first, "get", "--raw", "/readyz")
        assert result.rc == 0 and result.stdout.strip() == "ok", (result.stdout, result.stderr)
