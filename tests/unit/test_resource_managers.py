"""``nodePools[].resourceManagers``: the kubelet's Topology, CPU and Memory Manager policies per pool, what
validation refuses or warns about, the KubeletConfiguration patch the host layer gets, and how it reaches the
kubernetes_node role (live, on real kubelets: molecule/site/tests/test_resource_managers.py).

Expected values are written out here, from the kubelet's rules (k8s.io/kubernetes v1.37.2
pkg/kubelet/cm/memorymanager/memory_manager.go:433-468: the per-NUMA reservations add up to kubeReserved +
systemReserved + the memory.available hard eviction threshold, 100Mi by default), not computed with the code
under test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from testkit import ANSIBLE_PLAYBOOK, REPO, find, hostvars, inventory, problems, role_vars

from gpucluster.render.kubelet import kubelet_patch
from gpucluster.spec import load_spec

RESTRICTED_CPU = {"topologyManagerPolicy": "restricted", "topologyManagerScope": "pod",
                  "cpuManagerPolicy": "static", "reservedSystemCPUs": "0,56"}


def with_managers(base: dict, pool: int = 0, **fields) -> dict:
    base["nodePools"][pool]["resourceManagers"] = fields
    return base


# -- validation ------------------------------------------------------------------------------------------

def test_a_static_cpu_manager_without_reserved_cpus_is_refused_naming_the_field(write_spec, base):
    p = find(problems(write_spec, with_managers(base, cpuManagerPolicy="static")),
             "nodePools[0].resourceManagers.reservedSystemCPUs")
    assert "kubelet refuses to start" in p.message and "0,56" in p.hint


@pytest.mark.parametrize(("cpus", "says"), [("0-", "not a CPU list"), ("a", "not a CPU list"),
                                            ("0, 56", "not a CPU list"), ("3-1", "runs backwards")])
def test_a_reserved_cpu_list_the_kubelet_cannot_parse_is_refused(write_spec, base, cpus, says):
    p = find(problems(write_spec, with_managers(base, cpuManagerPolicy="static", reservedSystemCPUs=cpus)),
             "nodePools[0].resourceManagers.reservedSystemCPUs")
    assert says in p.message, p


def test_a_static_memory_manager_needs_a_reservation_that_exceeds_the_eviction_threshold(write_spec, base):
    p = find(problems(write_spec, with_managers(base, memoryManagerPolicy="Static")),
             "nodePools[0].resourceManagers.reservedMemoryPerNumaNode")
    assert "kubelet refuses to start" in p.message
    # one NUMA node (no platform): 100Mi is exactly the eviction threshold, nothing left for systemReserved
    p = find(problems(write_spec, with_managers(base, memoryManagerPolicy="Static", reservedMemoryPerNumaNode="100Mi")),
             "nodePools[0].resourceManagers.reservedMemoryPerNumaNode")
    assert "1 NUMA node(s)" in p.message and "100Mi" in p.message
    # two NUMA nodes (the DGX H100 platform): 2 x 100Mi exceeds it
    base["nodePools"][0]["gpu"]["platform"] = "dgx-h100"
    spec = load_spec(write_spec(with_managers(base, memoryManagerPolicy="Static", reservedMemoryPerNumaNode="100Mi")))
    assert spec.node_pools[0].resource_managers.reserved_memory_per_numa_node == "100Mi"


def test_a_memory_reservation_without_the_static_policy_is_refused(write_spec, base):
    p = find(problems(write_spec, with_managers(base, reservedMemoryPerNumaNode="2Gi")),
             "nodePools[0].resourceManagers.reservedMemoryPerNumaNode")
    assert "memoryManagerPolicy Static" in p.message


def test_policy_names_are_the_kubelets_own(write_spec, base):
    # the kubelet spells the memory policy capitalised and the others in lower case
    for field, wrong in (("memoryManagerPolicy", "static"), ("topologyManagerPolicy", "Restricted"),
                         ("cpuManagerPolicy", "Static"), ("topologyManagerScope", "node")):
        probs = problems(write_spec, with_managers(base, **{field: wrong}))
        assert any(p.path.endswith(f"resourceManagers.{field}") for p in probs), (field, [str(p) for p in probs])


def test_single_numa_node_on_a_dgx_h100_device_plugin_pool_warns_that_8_gpu_pods_are_rejected(write_spec, base):
    base["nodePools"][0]["gpu"]["platform"] = "dgx-h100"
    spec = load_spec(write_spec(with_managers(base, topologyManagerPolicy="single-numa-node")))
    (w,) = spec.warnings
    assert w.path == "nodePools[0].resourceManagers.topologyManagerPolicy"
    assert "more than 4 GPUs on dgx-h100" in w.message and "restricted" in w.hint
    # restricted gives an 8-GPU pod both sockets: no warning
    base = yaml.safe_load(yaml.safe_dump(base))
    assert load_spec(write_spec(with_managers(base, topologyManagerPolicy="restricted"))).warnings == []
    # four GPUs fit one socket: single-numa-node is fine
    base["nodePools"][0]["gpu"]["count"] = 4
    assert load_spec(write_spec(with_managers(base, topologyManagerPolicy="single-numa-node"))).warnings == []


def test_a_topology_policy_on_a_dra_pool_warns_that_claimed_gpus_are_not_aligned(write_spec, base):
    base["nodePools"][0]["dra"] = True
    base["dra"] = {"enabled": True}
    spec = load_spec(write_spec(with_managers(base, topologyManagerPolicy="restricted")))
    (w,) = [w for w in spec.warnings if w.path.endswith("topologyManagerPolicy")]
    assert "no hints" in w.message and "pcieRoot" in w.hint


# -- the patch ---------------------------------------------------------------------------------------------

def test_the_patch_carries_the_policies_and_reserves_memory_on_every_socket_of_the_platform(write_spec, base):
    base["nodePools"][0]["gpu"]["platform"] = "dgx-h100"
    spec = load_spec(write_spec(with_managers(base, **RESTRICTED_CPU, memoryManagerPolicy="Static",
                                              reservedMemoryPerNumaNode="2Gi")))
    assert kubelet_patch(spec.node_pools[0]) == {
        **RESTRICTED_CPU, "memoryManagerPolicy": "Static",
        # DGX H100: GPUs 0-3 on NUMA 0, 4-7 on NUMA 1 (platforms.yaml, DGX user guide Table 6)
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "2Gi"}}, {"numaNode": 1, "limits": {"memory": "2Gi"}}],
        # 2 x 2048Mi = systemReserved + 100Mi
        "systemReserved": {"memory": "3996Mi"},
    }
    # no platform: NUMA node 0 alone; a byte amount that is not whole Mi stays in bytes
    base["nodePools"][0]["gpu"].pop("platform")
    spec = load_spec(write_spec(with_managers(base, memoryManagerPolicy="Static", reservedMemoryPerNumaNode="1G")))
    patch = kubelet_patch(spec.node_pools[0])
    assert patch["reservedMemory"] == [{"numaNode": 0, "limits": {"memory": "1G"}}]
    assert patch["systemReserved"] == {"memory": str(10**9 - 100 * 2**20)}
    assert "reservedSystemCPUs" not in patch and patch["cpuManagerPolicy"] == "none"
    # a pool without resourceManagers gets no patch at all (the kubelet's defaults, no patches folder)
    assert kubelet_patch(spec.node_pools[1]) == {}


# -- through the inventory plugin to the kubernetes_node role ----------------------------------------------

@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    """The lab inventory, whose DGX H100 training pool sets restricted/pod and the static CPU manager."""
    folder = tmp_path_factory.mktemp("lab")
    for name in ("cluster.yaml", "hosts.gpucluster.yml"):
        shutil.copy(REPO / "inventories" / "lab" / name, folder)
    return folder


def test_the_pools_hosts_get_the_patch_and_no_other_host_does(lab):
    proc = inventory(lab)
    assert proc.returncode == 0, proc.stderr
    inv = json.loads(proc.stdout)
    spec = load_spec(lab)
    (pool,) = [p for p in spec.node_pools if p.resource_managers]
    assert pool.name == "h100-train"
    for host in spec.hosts:
        got = hostvars(inv, host.name)["kubernetes_node_kubelet_patch"]
        assert got == ({**RESTRICTED_CPU, "memoryManagerPolicy": "None"} if host.name in pool.hosts else {}), host


def test_kubeadm_reads_the_patches_folder_only_where_a_patch_is_set(lab):
    # what vars/main.yml merges into the host's InitConfiguration and its JoinConfiguration
    spec = load_spec(lab)
    folder = {"kubernetes_node_patches_dir": "/etc/kubernetes/patches"}
    assert role_vars(lab, spec.control_planes[0].name, "kubernetes_node_patches_part", extra=folder) == {}
    worker = next(h for p in spec.node_pools if p.resource_managers for h in p.hosts)
    assert role_vars(lab, worker, "kubernetes_node_patches_part", extra=folder) == {
        "patches": {"directory": "/etc/kubernetes/patches"}}


# -- the doctor names a pod the kubelet's Topology Manager refused -----------------------------------------

def rejected_pod(reason: str, gpus: int = 8) -> dict:
    """A pod as the kubelet leaves one it refused at admission (pkg/kubelet/kubelet.go:2640 rejectPod)."""
    return {"metadata": {"name": "train", "namespace": "team-a", "uid": "u1"},
            "spec": {"nodeName": "g1", "containers": [{"name": "main", "resources": {
                "limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": "Failed", "reason": reason,
                       "message": "Pod was rejected: Resources cannot be allocated with Topology locality"}}


@pytest.mark.parametrize("policy", ["single-numa-node", "restricted"])
def test_the_doctor_names_a_topology_affinity_rejection_with_the_pools_policy(write_spec, base, policy):
    from gpucluster.doctor import diagnose_pod
    from gpucluster.doctor.model import View

    base["nodePools"][0]["gpu"]["platform"] = "dgx-h100"
    spec = load_spec(write_spec(with_managers(base, topologyManagerPolicy=policy)))
    pod = rejected_pod("TopologyAffinityError")
    d = diagnose_pod(pod, View(spec=spec, nodes=[], pods=[pod]))
    assert d.blocked and d.cause.cause == "topology-affinity" and d.node == "g1", d
    assert f"under the topologyManagerPolicy {policy} of pool h100" in d.cause.summary
    assert "Resources cannot be allocated with Topology locality" in d.cause.evidence[0]
    if policy == "single-numa-node":
        assert "at most 4 GPUs per pod" in d.cause.fix and "restricted" in d.cause.fix
    else:
        assert "at most" not in d.cause.fix
    # the kubelet refusing it for another reason is not the Topology Manager's doing
    other = rejected_pod("OutOfcpu")
    assert diagnose_pod(other, View(spec=spec, nodes=[], pods=[other])).cause.cause != "topology-affinity"


# -- the role stops on a joined node whose kubelet runs other policies ------------------------------------

def check_running(tmp_path: Path, config: dict, patch: dict) -> subprocess.CompletedProcess:
    """roles/kubernetes_node/tasks/kubelet-policies.yml, run by ansible-playbook on this machine against
    ``config`` as the node's kubelet configuration file."""
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    extra = {"kubernetes_node_kubelet_patch": patch,
             "kubernetes_node_kubelet_config_path": str(tmp_path / "config.yaml")}
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False, "connection": "local",
        "tasks": [{"ansible.builtin.include_tasks": str(REPO / "roles/kubernetes_node/tasks/kubelet-policies.yml")}]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    return subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", "localhost,", str(tmp_path / "play.yml"),
                           "-e", json.dumps(extra), "-e", f"ansible_python_interpreter={sys.executable}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_a_joined_node_with_other_policies_stops_the_role_naming_both_values(tmp_path):
    kubeadm_wrote = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                     "cgroupDriver": "systemd"}  # joined before the pool had resourceManagers: the defaults
    proc = check_running(tmp_path, kubeadm_wrote, {**RESTRICTED_CPU, "memoryManagerPolicy": "None"})
    assert proc.returncode != 0
    out = proc.stdout
    assert ('has topologyManagerPolicy: "none", topologyManagerScope: "container", cpuManagerPolicy: "none", '
            'reservedSystemCPUs: "(absent)"') in out, out[-3000:]
    assert ('says topologyManagerPolicy: "restricted", topologyManagerScope: "pod", cpuManagerPolicy: "static", '
            'reservedSystemCPUs: "0,56"') in out, out[-3000:]
    assert "memoryManagerPolicy" not in out.split("but the spec")[0].split(" has ")[-1]  # None is the default
    assert "playbooks/remove-node.yml --limit localhost" in out


def test_a_node_that_joined_with_the_pools_policies_passes(tmp_path):
    joined = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", **RESTRICTED_CPU,
              "memoryManagerPolicy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "2Gi"}}]}
    patch = {**RESTRICTED_CPU, "memoryManagerPolicy": "Static",
             "reservedMemory": [{"numaNode": 0, "limits": {"memory": "2Gi"}}]}
    proc = check_running(tmp_path, joined, patch)
    assert proc.returncode == 0, proc.stdout[-3000:]
    # one field off (another reservation) is named alone
    proc = check_running(tmp_path, {**joined, "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]}, patch)
    assert proc.returncode != 0
    assert 'has reservedMemory: [{"limits": {"memory": "1Gi"}, "numaNode": 0}]' in proc.stdout, proc.stdout[-3000:]
