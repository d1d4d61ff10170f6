"""The local world against real components: etcd, kube-apiserver, controller manager, scheduler, kwok.

Tests marked ``integration`` need the toolchain (`gpucluster tools install`); they are skipped with
the reason when it is missing (GPUCLUSTER_REQUIRE_TOOLS=1 fails them instead). They share one world
for this module and run in file order: the last ones kill, recover and finally tear it down.
The unmarked tests at the end check error handling offline, without any binary.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from cluster_helpers import Cluster, wait_for

from gpucluster import ownership, procs
from gpucluster.errors import LocalWorldError
from gpucluster.local import world as world_mod
from gpucluster.local.stages import MANAGE_ANNOTATION, NOT_READY_ANNOTATION
from gpucluster.local.state import Component, State
from gpucluster.local.world import World
from gpucluster.procs import find_leftovers
from gpucluster.toolchain import path_of
from gpucluster.toolchain.versions import KUBERNETES

integration = pytest.mark.integration


def listeners(pids: set[int]) -> list[str]:
    """Local addresses that ``pids`` listen on (from `ss -ltnp`)."""
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        if any(f"pid={pid}," in line for pid in pids):
            found.append(fields[3])
    return found


def fake_node(name: str, taint: bool = True) -> dict:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {MANAGE_ANNOTATION: "fake"},
            "labels": {"type": "kwok", "kubernetes.io/hostname": name},
        },
        "spec": {},
    }
    if taint:
        node["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    return node


def node_ready(lw: Cluster, name: str) -> bool:
    node = json.loads(lw.kubectl("get", "node", name, "-o", "json"))
    conds = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
    return conds.get("Ready") == "True"


# -- against the running world ------------------------------------------------------------------


@integration
def test_version_is_the_pinned_release(lw: Cluster) -> None:
    version = json.loads(lw.kubectl("get", "--raw", "/version"))
    assert version["gitVersion"] == KUBERNETES
    assert lw.kubectl("version", "--client", "-o", "json").count(KUBERNETES) >= 1


@integration
def test_dra_api_is_served(lw: Cluster) -> None:
    out = lw.kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name")
    for kind in ("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"):
        assert f"{kind}.resource.k8s.io" in out
    assert "resource.k8s.io/v1" in lw.kubectl("api-versions")


@integration
def test_crds_are_established_and_validate(lw: Cluster) -> None:
    crds = lw.kubectl("get", "crd", "-o", "name")
    for name in (
        "servicemonitors.monitoring.coreos.com",
        "prometheusrules.monitoring.coreos.com",
        "ippools.nv-ipam.nvidia.com",
        "nicclusterpolicies.mellanox.com",
        "macvlannetworks.mellanox.com",
        "network-attachment-definitions.k8s.cni.cncf.io",
        "clusterpolicies.nvidia.com",
    ):
        assert f"customresourcedefinition.apiextensions.k8s.io/{name}" in crds
    bad = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "bad", "namespace": "default"},
        "spec": {"endpoints": "not-a-list"},
    }
    proc = subprocess.run(
        [str(path_of("kubectl")), f"--kubeconfig={lw.kubeconfig}", "apply", "--server-side", "-f", "-"],
        input=json.dumps(bad),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0 and "endpoints" in proc.stderr


@integration
def test_ip_pool_stand_in_takes_the_rendered_pools_and_refuses_what_nv_ipam_would_ignore(lw: Cluster) -> None:
    from gpucluster.render import network_operator
    from gpucluster.spec import load_spec

    # nothing uses whereabouts any more: its CRDs are not generated
    assert "whereabouts" not in lw.kubectl("get", "crd", "-o", "name")
    lab = load_spec(Path(__file__).resolve().parents[2] / "inventories" / "lab")
    lab.networking.secondary_networks[0].gateway = "172.30.0.1"
    pool = network_operator.ip_pool(lab, lab.networking.secondary_networks[0])
    pool["metadata"]["namespace"] = "default"
    pool["spec"]["exclusions"] = [{"startIP": "172.30.15.0", "endIP": "172.30.15.255"}]
    lw.apply(pool)
    stored = lw.get("ippools.nv-ipam.nvidia.com", "ib-rail-0", "-n", "default")
    assert stored["spec"]["perNodeBlockSize"] == 63 and stored["spec"]["nodeSelector"]["nodeSelectorTerms"]

    def refused(change: dict, text: str) -> None:
        bad = json.loads(json.dumps(pool))
        bad["metadata"]["name"] = "bad"
        bad["spec"].update(change)
        proc = lw.run("apply", "--server-side", "--field-manager=gpucluster-test", "-f", "-", stdin=json.dumps(bad))
        assert proc.returncode != 0 and text in proc.stderr, (change, proc.stderr)

    refused({"gateway": "10.1.1.1"}, "gateway must be an address inside subnet")
    refused({"perNodeBlockSize": 0}, "perNodeBlockSize")
    refused({"subnet": "172.30.0.0/29", "perNodeBlockSize": 7, "gateway": "172.30.0.1",
             "exclusions": []}, "larger than the addresses subnet holds")
    refused({"subnet": "not-a-cidr"}, "subnet must be a CIDR")
    refused({"exclusions": [{"startIP": "10.0.0.1", "endIP": "10.0.0.2"}]}, "exclusions must lie inside subnet")


@integration
def test_kwok_node_becomes_ready_and_keeps_its_capacity(lw: Cluster) -> None:
    node = fake_node("gpu-node-0")
    lw.kubectl("apply", "-f", "-", stdin=json.dumps(node))
    status = {
        "status": {
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"},
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"},
        }
    }
    lw.kubectl("patch", "node", "gpu-node-0", "--subresource=status", "--type=merge", "-p", json.dumps(status))
    wait_for("node gpu-node-0 Ready", lambda: node_ready(lw, "gpu-node-0"))
    alloc = json.loads(lw.kubectl("get", "node", "gpu-node-0", "-o", "jsonpath={.status.allocatable}"))
    assert alloc["nvidia.com/gpu"] == "8"


@integration
def test_tolerating_pod_is_scheduled_and_running(lw: Cluster) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpu-pod", "namespace": "default"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "example.invalid/cuda:1",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }
    lw.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    phase = wait_for(
        "pod Running",
        lambda: lw.kubectl("get", "pod", "gpu-pod", "-o", "jsonpath={.status.phase}") == "Running",
    )
    assert phase
    assert lw.kubectl("get", "pod", "gpu-pod", "-o", "jsonpath={.spec.nodeName}") == "gpu-node-0"
    lw.kubectl("delete", "pod", "gpu-pod", "--wait=true", "--timeout=60s")


@integration
def test_not_ready_annotation_makes_the_node_not_ready(lw: Cluster) -> None:
    lw.kubectl("annotate", "node", "gpu-node-0", f"{NOT_READY_ANNOTATION}=true")
    wait_for("node NotReady", lambda: not node_ready(lw, "gpu-node-0"))
    lw.kubectl("annotate", "node", "gpu-node-0", f"{NOT_READY_ANNOTATION}-")
    wait_for("node Ready again", lambda: node_ready(lw, "gpu-node-0"))


@integration
def test_nothing_listens_beyond_loopback(lw: Cluster) -> None:
    state = lw.world.state()
    assert state is not None
    pids = {c.pid for c in state.components.values()}
    addrs = listeners(pids)
    assert addrs, "no listening sockets found for the components"
    assert all(a.startswith("127.0.0.1:") for a in addrs), addrs
    assert set(state.ports.values()) <= {int(a.rsplit(":", 1)[1]) for a in addrs}


@integration
def test_up_again_changes_nothing_and_status_reports_healthy(lw: Cluster, cli) -> None:
    before = {n: c.pid for n, c in lw.world.state().components.items()}  # type: ignore[union-attr]
    result = cli("local", "up", "--state-dir", str(lw.state_dir))
    assert result.exit_code == 0, result.output
    assert "already running" in result.output
    assert {n: c.pid for n, c in lw.world.state().components.items()} == before  # type: ignore[union-attr]
    status = cli("local", "status", "--state-dir", str(lw.state_dir))
    assert status.exit_code == 0, status.output
    control_plane = [line for line in status.output.splitlines() if " pid " in line and "127.0.0.1:" in line]
    assert len(control_plane) == 5 and all(" healthy " in line for line in control_plane), status.output


@integration
def test_a_slow_health_probe_never_wipes_the_world(lw: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    lw.kubectl("create", "configmap", "survivor", "--from-literal=k=v")
    pids = {n: c.pid for n, c in lw.world.state().components.items()}  # type: ignore[union-attr]
    real = world_mod.procs.probe
    slow = {"left": 3}

    def probe(url, ctx, timeout=2.0):  # the first probes time out, as on a busy machine
        if slow["left"] > 0:
            slow["left"] -= 1
            return False, "timed out"
        return real(url, ctx, timeout)

    monkeypatch.setattr(world_mod.procs, "probe", probe)
    result = lw.world.up()
    assert not result.fresh and result.restarted == []
    assert {n: c.pid for n, c in lw.world.state().components.items()} == pids  # type: ignore[union-attr]
    assert lw.get("configmap", "survivor")["data"] == {"k": "v"}


@integration
def test_up_after_apiserver_sigkill_restarts_it_and_keeps_the_data(lw: Cluster) -> None:
    old = lw.world.state()
    assert old is not None
    low, high = procs.ephemeral_range()  # no outgoing connection can take a world's port while it is down
    assert all(not low <= port <= high for port in old.ports.values()), old.ports
    apiserver = old.components["kube-apiserver"]
    os.kill(apiserver.pid, signal.SIGKILL)
    wait_for("apiserver gone", lambda: not lw.world.healthy(), timeout=15)
    assert procs.wait_gone(apiserver.pid, timeout=30)  # not only unhealthy: its last thread has let go of the port
    with socket.socket() as squatter:  # another program took the port meanwhile: named, nothing stopped
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", apiserver.port))
        squatter.listen()
        with pytest.raises(LocalWorldError, match=f"kube-apiserver died and cannot be restarted: its port "
                                                  f"{apiserver.port} on 127.0.0.1 is now taken by another socket"):
            lw.world.up()
    assert all(comp.ours() for name, comp in old.components.items() if name != "kube-apiserver")
    result = lw.world.up()
    assert not result.already_running and not result.fresh
    assert result.restarted == ["kube-apiserver"]
    assert result.recovered == []  # nothing was stopped: the survivors keep running
    for name, comp in old.components.items():
        if name != "kube-apiserver":
            assert comp.ours(), f"{name} (pid {comp.pid}) was stopped"
    assert lw.world.healthy()
    assert json.loads(lw.kubectl("get", "--raw", "/version"))["gitVersion"] == KUBERNETES
    assert lw.get("configmap", "survivor")["data"] == {"k": "v"}  # etcd's data survived


@integration
def test_an_etcd_snapshot_puts_the_world_back_to_the_moment_it_was_taken(lw: Cluster, cli, tmp_path: Path) -> None:
    """`backup etcd` (upstream etcdctl against the real etcd) and `restore etcd` (etcdutl, then the control
    plane restarted on the new data): a ConfigMap deleted after the snapshot is back, one created after it
    is gone. Without --yes, or from a file that is no snapshot, nothing is stopped."""
    snap = tmp_path / "etcd.db"
    where = ("--world-dir", str(lw.state_dir))
    lw.kubectl("create", "configmap", "before-snapshot", "--from-literal=k=v")
    taken = cli("backup", "etcd", *where, "--out", str(snap), "-o", "json")
    assert taken.exit_code == 0, taken.output
    doc = json.loads(taken.stdout)
    # the database, then its SHA-256, which the member sends last (etcd-io/etcd v3.6.16
    # server/etcdserver/api/v3rpc/maintenance.go, Snapshot) and which etcdutl checks
    assert doc["revision"] > 0 and doc["keys"] > 0 and snap.stat().st_size == doc["bytes"] + 32
    assert snap.stat().st_mode & 0o777 == 0o600
    assert cli("backup", "etcd", *where, "--out", str(snap)).exit_code == 2  # never over a file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["etcd.db"]
    lw.kubectl("delete", "configmap", "before-snapshot")
    lw.kubectl("create", "configmap", "after-snapshot", "--from-literal=k=v")

    pids = {n: c.pid for n, c in lw.world.state().components.items()}  # type: ignore[union-attr]
    unsure = cli("restore", "etcd", *where, "--from", str(snap))
    assert unsure.exit_code == 2 and "Pass --yes to restore" in unsure.stderr
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a snapshot" * 100)
    refused = cli("restore", "etcd", *where, "--from", str(junk), "--yes")
    assert refused.exit_code == 2 and "not a usable snapshot" in refused.stderr and "Nothing was stopped" in \
        refused.stderr, refused.stderr
    assert {n: c.pid for n, c in lw.world.state().components.items()} == pids  # type: ignore[union-attr]

    restored = cli("restore", "etcd", *where, "--from", str(snap), "--yes", "-o", "json")
    assert restored.exit_code == 0, restored.output
    assert {"etcd", "kube-apiserver"} <= set(json.loads(restored.stdout)["restarted"])
    assert lw.world.healthy()
    assert lw.get("configmap", "before-snapshot")["data"] == {"k": "v"}
    assert lw.run("get", "configmap", "after-snapshot").returncode != 0
    assert lw.get("configmap", "survivor")["data"] == {"k": "v"}  # older data too
    assert (lw.state_dir / "etcd-data.before-restore" / "member").is_dir()
    now = {n: c.pid for n, c in lw.world.state().components.items()}  # type: ignore[union-attr]
    assert all(now[n] != pids[n] for n in pids), (pids, now)  # nothing ran on across the swap


@integration
def test_reset_discards_the_world_and_its_data(lw: Cluster) -> None:
    old = lw.world.state()
    assert old is not None
    result = lw.world.up(reset=True)
    assert result.fresh and "etcd" in result.recovered
    for name, comp in old.components.items():
        assert not comp.ours(), f"old {name} (pid {comp.pid}) still runs"
    assert lw.world.healthy()
    assert lw.run("get", "configmap", "survivor").returncode != 0


@integration
def test_down_leaves_no_process_and_no_port(lw: Cluster) -> None:
    from gpucluster.local import addons

    state = lw.world.state()
    assert state is not None
    extra = [a.component for a in addons.status(lw.state_dir) if a.running]
    pids = {c.pid for c in state.components.values()} | {c.pid for c in extra}
    stopped = lw.world.down()
    # every process of the world: the control plane and whatever add-ons it recorded
    assert sorted(stopped) == sorted([*state.components, *(c.name for c in extra)])
    assert not [p for p in pids if Path(f"/proc/{p}").exists()], "processes left after down"
    assert not (lw.state_dir / "addons").exists()
    for port in state.ports.values():
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still answers"
    assert not (lw.state_dir / "state.json").exists()
    assert lw.world.status() == []


# -- offline: error handling, no binaries needed ------------------------------------------------


def test_missing_binaries_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    monkeypatch.setenv("GPUCLUSTER_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", "/nonexistent")
    result = cli("local", "up", "--state-dir", str(tmp_path / "s"))
    assert result.exit_code == 1
    # kubectl is not among them: the CRDs go through the API client (gpucluster.kube), as everything else
    assert "missing binaries: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, crds." \
        in result.output
    assert "gpucluster tools install" in result.output and "Traceback" not in result.output


def test_pinned_port_in_use_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    monkeypatch.setattr(world_mod, "path_of", lambda name: Path("/bin/true"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli("local", "up", "--state-dir", str(tmp_path), "--apiserver-port", str(port))
    assert result.exit_code == 1
    assert f"port {port} for kube-apiserver is in use on 127.0.0.1" in result.output
    assert not (tmp_path / "state.json").exists()


def test_corrupt_state_is_a_clear_error_and_down_force_cleans(tmp_path: Path, cli) -> None:
    ownership.claim(tmp_path, world_mod.FOLDER)  # a world's folder whose state.json got damaged
    (tmp_path / "state.json").write_text("{not json")
    for args in (["up"], ["status"], ["down"]):
        result = cli("local", *args, "--state-dir", str(tmp_path))
        assert result.exit_code == 1, args
        assert "state.json is corrupt" in result.output and "Traceback" not in result.output
    result = cli("local", "down", "--force", "--state-dir", str(tmp_path))
    assert result.exit_code == 0
    assert not (tmp_path / "state.json").exists()


def test_stale_state_never_kills_a_reused_pid(tmp_path: Path) -> None:
    stranger = subprocess.Popen(["sleep", "60"])  # has a pid we "recorded", but is not ours
    try:
        state = State(dir=tmp_path, ports={"etcd": 1})
        state.components["etcd"] = Component("etcd", stranger.pid, "/x/etcd", [], "", time.time())
        state.save()
        assert World(tmp_path).down() == []
        assert stranger.poll() is None, "a process that is not ours was stopped"
        assert not (tmp_path / "state.json").exists()
    finally:
        stranger.kill()
        stranger.wait()


def test_leftovers_are_found_by_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "etcd"
    fake.parent.mkdir()
    fake.symlink_to(sys.executable)
    monkeypatch.setattr(world_mod, "locate", lambda name: fake if name == "etcd" else None)
    world = ownership.claim(tmp_path / "w", world_mod.FOLDER)
    proc = subprocess.Popen([str(fake), "-c", "import time; time.sleep(60)", f"--data-dir={world}/etcd-data"])
    try:
        wait_for("fake etcd", lambda: proc.pid in find_leftovers(world, [fake]), timeout=10)
        assert World(world).down(force=True) == [f"pid {proc.pid}"]
        assert proc.wait(timeout=5) is not None
    finally:
        proc.kill()


def test_kwok_config_is_ours_and_well_formed() -> None:
    from gpucluster.local.stages import config_text

    docs = list(yaml.safe_load_all(config_text("10.244.0.0/16")))
    assert docs[0]["kind"] == "KwokConfiguration"
    stages = {d["metadata"]["name"]: d for d in docs[1:]}
    assert {d["kind"] for d in docs[1:]} == {"Stage"}
    assert {"gpucluster-node-ready", "gpucluster-pod-running", "gpucluster-pod-delete"} <= set(stages)
    assert "capacity" in stages["gpucluster-node-ready"]["spec"]["next"]["statusTemplate"]
    assert stages["gpucluster-pod-delete"]["spec"]["next"] == {"delete": True}


def test_unknown_pinned_port_name() -> None:
    with pytest.raises(LocalWorldError, match="unknown port name"):
        World(Path("/tmp/x"), ports={"etcdd": 1})


def test_pki_chains_to_one_ca_with_loopback_names_and_private_keys(tmp_path: Path) -> None:
    import ipaddress

    from cryptography import x509

    from gpucluster.local.pki import generate

    pki = generate(tmp_path / "pki", "10.96.0.1")
    ca = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    api = x509.load_pem_x509_certificate(pki.cert("apiserver").read_bytes())
    api.verify_directly_issued_by(ca)
    sans = api.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert ipaddress.ip_address("10.96.0.1") in sans.get_values_for_type(x509.IPAddress)
    admin = x509.load_pem_x509_certificate(pki.cert("admin").read_bytes())
    assert admin.subject.get_attributes_for_oid(x509.NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    for key in pki.dir.glob("*.key"):
        assert key.stat().st_mode & 0o077 == 0, key


def test_concurrent_up_on_one_state_dir_is_refused_naming_the_holder(tmp_path: Path) -> None:
    from gpucluster.errors import StateLocked

    # another process holds the world (a lock is re-entrant within one process)
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from pathlib import Path; "
                               "from gpucluster.local.world import World\n"
                               "with World(Path(sys.argv[1])).hold(): print('held', flush=True); sys.stdin.read()",
                               str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(StateLocked, match=rf"pid {holder.pid} .* is working on the local world"):
            World(tmp_path).up()
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    World(tmp_path).down()  # released when the holder is done
