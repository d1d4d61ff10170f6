"""The cluster the site playbook built: kubeadm init and join with real kubelets and containerd.

Checked through the control-plane host's admin kubeconfig: every host of the spec is a Ready node, the
static control-plane pods run from the images the host layer imported (nothing was pulled: no
registry is reachable), and pods scheduled onto each worker reach each other across nodes over the
host layer's bridge pod network.
"""

import json
import shlex
import time
from pathlib import Path

import pytest

from gpucluster.spec import load_spec

SPEC = load_spec(Path(__file__).resolve().parent.parent / "inventory")
CONTROL_PLANES = [h.name for h in SPEC.control_planes]
CP = CONTROL_PLANES[0]
WORKERS = [h.name for h in SPEC.hosts if h.name not in CONTROL_PLANES]
testinfra_hosts = [f"podman://{CP}"]
KUBECTL = "kubectl --kubeconfig /etc/kubernetes/admin.conf"
NAMESPACE = "gpucluster-smoke"


def kubectl(host, *args: str) -> str:
    return host.check_output(f"{KUBECTL} {shlex.join(args)}")


def kubectl_json(host, *args: str) -> dict:
    return json.loads(kubectl(host, *args, "-o", "json"))


def test_every_host_is_a_ready_node(host):
    nodes = {n["metadata"]["name"]: n for n in kubectl_json(host, "get", "nodes")["items"]}
    assert set(nodes) == {h.name for h in SPEC.hosts}
    for name, node in nodes.items():
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True", (name, ready)
        info = node["status"]["nodeInfo"]
        assert info["kubeletVersion"] == f"v{SPEC.kubernetes.version}", name
        assert info["containerRuntimeVersion"].startswith("containerd://"), name


def test_static_control_plane_pods_run_from_the_imported_images(host):
    """Every static control-plane pod becomes Ready and runs an image kubeadm lists, imported locally.

    Readiness is waited for (the kubelet's own condition, up to three minutes) until one read shows every
    pod Ready, not read at one instant: with two etcd members on a busy host an API server's probes can
    fail for a few seconds while etcd catches up, and the kubelet reports that honestly, or restarts it
    (ci44: `kubectl wait` had passed, and the read after it showed cp2's API server restarted and not yet
    ready). A pod that never becomes Ready still fails, with its container state in the message.
    """
    listed = host.check_output("kubeadm config images list --config /etc/kubernetes/kubeadm-config.yaml").split()
    names = [f"{component}-{cp}" for component in ("etcd", "kube-apiserver", "kube-controller-manager",
                                                   "kube-scheduler") for cp in CONTROL_PLANES]
    deadline = time.monotonic() + 180
    while True:
        pods = {p["metadata"]["name"]: p for p in kubectl_json(host, "get", "pods", "-n", "kube-system")["items"]}
        unready = {}
        for name in names:
            status = (pods.get(name) or {}).get("status") or {}
            containers = status.get("containerStatuses") or [{}]
            state = (status.get("phase"), containers[0].get("ready"), containers[0].get("restartCount"),
                     containers[0].get("state"))
            if state[:2] != ("Running", True) or len(containers) != 1:
                unready[name] = state
        if not unready or time.monotonic() > deadline:
            break
        time.sleep(2)  # the kubelet's status updates come on its own timer
    assert not unready, unready
    for name in names:
        image = pods[name]["spec"]["containers"][0]["image"]
        assert image in listed and image.startswith("localhost/gpucluster/"), (name, image, listed)


@pytest.mark.parametrize("name", [h.name for h in SPEC.hosts])
def test_no_image_was_pulled(name):
    """Every image in containerd came from an archive: none carries a registry's name."""
    import testinfra

    node = testinfra.get_host(f"podman://{name}")
    images = node.check_output("ctr --namespace k8s.io images list --quiet").split()
    named = [i for i in images if not i.startswith("sha256:")]
    assert "localhost/gpucluster/pause:3.10.2" in named
    assert all(i.startswith("localhost/gpucluster/") for i in named), named


@pytest.fixture(scope="module")
def smoke_pods(host):
    """One web-serving busybox pod per worker, placed by the scheduler (nodeSelector), Ready."""
    images = host.check_output("ctr --namespace k8s.io images list --quiet").split()
    image = next(i for i in images if i.startswith("localhost/gpucluster/busybox:"))
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
    for worker in WORKERS:
        docs.append({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"smoke-{worker}", "namespace": NAMESPACE},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": worker},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{
                    "name": "web", "image": image, "imagePullPolicy": "Never",
                    # Serves its own pod name on :8080 (busybox httpd).
                    "command": ["busybox", "sh", "-c",
                                "mkdir -p /www && hostname > /www/index.html && exec busybox httpd -f -p 8080 -h /www"],
                }],
            },
        })
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    host.check_output(f"echo {shlex.quote(manifest)} | {KUBECTL} apply -f -")
    try:
        kubectl(host, "wait", "-n", NAMESPACE, "--for=condition=Ready", "pod", "--all", "--timeout=180s")
        pods = {p["spec"]["nodeName"]: p for p in kubectl_json(host, "get", "pods", "-n", NAMESPACE)["items"]}
        yield pods
    finally:
        host.run(f"{KUBECTL} delete namespace {NAMESPACE} --wait=false")


def test_a_pod_runs_on_each_worker(smoke_pods):
    assert set(smoke_pods) == set(WORKERS)
    for worker, pod in smoke_pods.items():
        assert pod["status"]["phase"] == "Running", worker
        assert pod["status"]["podIP"], worker


def test_pods_reach_each_other_across_nodes(host, smoke_pods):
    """Each worker's pod fetches the other worker's pod page by pod IP: the bridge network and routes."""
    for worker, pod in smoke_pods.items():
        other = next(p for w, p in smoke_pods.items() if w != worker)
        request = f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 5 {other['status']['podIP']} 8080"
        out = kubectl(host, "exec", "-n", NAMESPACE, pod["metadata"]["name"], "--", "busybox", "sh", "-c", request)
        assert "200 OK" in out and other["metadata"]["name"] in out, (worker, out)
