"""The kubelet's Topology, CPU and Memory Managers as the spec sets them per pool (nodePools[].resourceManagers).

The l40s-infer pool's host, whose real kubelet serves NVIDIA's device plugin, runs the Topology Manager
restricted at pod scope, the static CPU manager with CPU 0 reserved and the Memory Manager's Static policy,
written by kubeadm join from the host layer's kubeletconfiguration patch; every other host keeps the
kubelet's defaults (the patch never reaches the cluster-wide kubelet-config ConfigMap). Read from each
kubelet itself (its /configz through the API server), from the managers' checkpoints, and from what a
Guaranteed pod with a GPU is given: the one CPU that is not reserved, for itself alone.

Expected values are written out from the scenario's spec (inventory/cluster.yaml), not computed by
gpucluster: 256Mi on the one NUMA node these containers see is systemReserved 156Mi plus the kubelet's
100Mi hard eviction threshold (k8s.io/kubernetes v1.37.2 pkg/kubelet/cm/memorymanager/memory_manager.go:433).
"""

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import testinfra
import yaml

from gpucluster.spec import load_spec

INVENTORY = Path(__file__).resolve().parent.parent / "inventory"
SPEC = load_spec(INVENTORY)
CP = SPEC.control_planes[0].name
TUNED = "gpuc-site-l40s"
KUBECTL = "kubectl --kubeconfig /etc/kubernetes/admin.conf"
NAMESPACE = "gpucluster-resource-managers"
EXPECTED = {
    "topologyManagerPolicy": "restricted", "topologyManagerScope": "pod", "cpuManagerPolicy": "static",
    "reservedSystemCPUs": "0", "memoryManagerPolicy": "Static",
    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "256Mi"}}],
}
DEFAULTS = {"topologyManagerPolicy": "none", "topologyManagerScope": "container", "cpuManagerPolicy": "none",
            "memoryManagerPolicy": "None"}


def kubectl(*args: str) -> str:
    return testinfra.get_host(f"podman://{CP}").check_output(f"{KUBECTL} {shlex.join(args)}")


def configz(node: str) -> dict:
    """The configuration the node's kubelet runs with, as it reports it (GET /configz, proxied)."""
    return json.loads(kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/configz"))["kubeletconfig"]


def test_the_pools_kubelet_runs_its_policies_and_every_other_kubelet_the_defaults():
    assert SPEC.pool_of(TUNED).resource_managers is not None
    assert [p.name for p in SPEC.node_pools if p.resource_managers] == ["l40s-infer"]
    for host in SPEC.hosts:
        running = configz(host.name)
        want = EXPECTED if host.name == TUNED else DEFAULTS
        assert {k: running.get(k) for k in want} == want, host.name
        if host.name == TUNED:
            # (the kubelet adds systemReserved.cpu from reservedSystemCPUs itself, cmd/kubelet/app/server.go:870-881)
            assert running["systemReserved"]["memory"] == "156Mi", running.get("systemReserved")
        else:
            assert "reservedSystemCPUs" not in running and not running.get("reservedMemory"), host.name


@pytest.mark.parametrize(("state", "policy"), [("cpu_manager_state", "static"),
                                               ("memory_manager_state", "Static")])
def test_the_managers_checkpoints_carry_the_policies(state, policy):
    tuned = json.loads(testinfra.get_host(f"podman://{TUNED}").check_output(f"cat /var/lib/kubelet/{state}"))
    assert tuned["policyName"] == policy, tuned
    other = next(h.name for h in SPEC.hosts if h.name != TUNED and SPEC.pool_of(h.name))  # another GPU host
    untuned = json.loads(testinfra.get_host(f"podman://{other}").check_output(f"cat /var/lib/kubelet/{state}"))
    assert untuned["policyName"].lower() == "none", untuned


@pytest.fixture
def guaranteed_gpu_pod():
    """A Guaranteed pod (1 CPU, 64Mi, 1 GPU) on the tuned host; it prints the CPUs and NUMA nodes it may use."""
    cp = testinfra.get_host(f"podman://{CP}")
    images = cp.check_output("ctr --namespace k8s.io images list --quiet").split()
    image = next(i for i in images if i.startswith("localhost/gpucluster/busybox:"))
    resources = {"cpu": "1", "memory": "64Mi", "nvidia.com/gpu": "1"}
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pinned", "namespace": NAMESPACE},
         "spec": {
             "restartPolicy": "Never",
             "nodeSelector": {"kubernetes.io/hostname": TUNED},
             "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
             "containers": [{
                 "name": "main", "image": image, "imagePullPolicy": "Never",
                 "command": ["busybox", "grep", "-E", "^(Cpus|Mems)_allowed_list:", "/proc/self/status"],
                 "resources": {"requests": resources, "limits": resources},
             }],
         }},
    ]
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    cp.check_output(f"echo {shlex.quote(manifest)} | {KUBECTL} apply -f -")
    try:
        kubectl("wait", "-n", NAMESPACE, "--for=jsonpath={.status.phase}=Succeeded", "pod/pinned", "--timeout=180s")
        yield json.loads(kubectl("get", "-n", NAMESPACE, "pod", "pinned", "-o", "json"))
    finally:
        cp.run(f"{KUBECTL} delete namespace {NAMESPACE} --wait=false")


def test_a_guaranteed_pod_gets_the_unreserved_cpu_for_itself(guaranteed_gpu_pod):
    assert guaranteed_gpu_pod["status"]["qosClass"] == "Guaranteed"
    out = dict(line.split(":\t") for line in kubectl("logs", "-n", NAMESPACE, "pinned").strip().splitlines())
    # The static CPU manager gave it CPU 1 exclusively: not 0 (reserved), not the shared pool 0-1 it would get
    # under the default policy.
    assert out["Cpus_allowed_list"] == "1", out
    assert out["Mems_allowed_list"] == "0", out


def _verify(inventory: Path) -> tuple[int, dict]:
    """`gpucluster verify` of the site through ``inventory``: its exit status and rows by (check, subject)."""
    from test_gpu_standin import _kubeconfig

    proc = subprocess.run(["gpucluster", "verify", "-i", str(inventory), "--no-chart-repositories",
                           "--allow-not-measured", "network-policy-enforcer", "--kubeconfig", str(_kubeconfig()),
                           "-o", "json"], capture_output=True, text=True, timeout=300, check=False)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return proc.returncode, {(r["check"], r["subject"]): r for r in json.loads(proc.stdout)["results"]}


def test_verify_reads_the_pools_policies_from_the_running_kubelet():
    rc, rows = _verify(INVENTORY)
    row = rows[("kubelet-resource-managers", TUNED)]
    assert row["verdict"] == "pass", row
    # one row per host of a pool that sets resourceManagers, none for the others
    assert [k for k in rows if k[0] == "kubelet-resource-managers"] == [("kubelet-resource-managers", TUNED)]
    assert rc == 0, {k: r for k, r in rows.items() if r["verdict"] == "fail"}


def test_verify_fails_where_the_kubelet_runs_other_policies_than_the_spec_sets(tmp_path):
    # The spec now says best-effort and 512Mi: the kubelet, joined under restricted and 256Mi, still runs those.
    shutil.copytree(INVENTORY, tmp_path / "inventory")
    path = tmp_path / "inventory" / "cluster.yaml"
    data = yaml.safe_load(path.read_text())
    pool = next(p for p in data["nodePools"] if p["name"] == SPEC.pool_of(TUNED).name)
    pool["resourceManagers"].update(topologyManagerPolicy="best-effort", reservedMemoryPerNumaNode="512Mi")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    rc, rows = _verify(tmp_path / "inventory")
    row = rows[("kubelet-resource-managers", TUNED)]
    assert rc == 1 and row["verdict"] == "fail", row
    assert "topologyManagerPolicy: runs 'restricted', spec 'best-effort'" in row["actual"], row
    assert "reservedMemory (bytes per NUMA node): runs NUMA 0: 268435456, spec NUMA 0: 536870912" in row["actual"], row
    assert "topologyManagerScope" not in row["actual"] and "cpuManagerPolicy" not in row["actual"], row
    # and nothing else fails for it
    assert {k for k, r in rows.items() if r["verdict"] == "fail"} == {("kubelet-resource-managers", TUNED)}
