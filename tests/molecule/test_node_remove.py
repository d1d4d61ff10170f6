"""Day 2 on the site scenario's real kubeadm cluster, in this order (molecule_helpers.SITE_DAY2_TESTS): an etcd
snapshot and restore, a certificate renewal, then `gpucluster node remove` (which destroys the hosts).

`gpucluster node remove` on real kubelets: the site scenario's cluster loses a worker and a control plane.

The hosts are the ones the site scenario's `molecule test` left converged and verified (conftest's
``scenario_runs`` keeps them for this test, which destroys them); run alone, the test converges the
scenario first. From the controller, as an operator would:

1. the first control-plane node (kubeadm init's) is refused (exit 2) and left as it was; so is a remove
   without --yes on a stdin that is not a terminal;
2. with the worker and the second control plane taken out of a copy of the inventory, `verify` fails
   `node-known` for the worker's Node;
3. `node remove` drains the worker, resets its host through playbooks/remove-node.yml (`kubeadm reset`: the
   kubelet's configuration gone, the kubelet stopped and disabled), deletes its Node, which stays
   deleted (nothing registers it again), and drops the Node's label patch from the platform stack's
   state;
4. a second `node remove` changes nothing and says so; then the second control plane goes: keepalived and
   haproxy stopped and disabled there (the first one holds the endpoint), its etcd member removed (etcd's
   own member list, read with upstream's etcdctl, names the first control plane alone, and the API server's
   etcd readiness check passes), its Node deleted (it is in no pool: the platform stack never patched it);
5. `up --skip-hosts` with the trimmed inventory (a copy in another folder, with a copy of the stack
   state) converges the stacks and its verify passes: the cluster without the two hosts is what the spec
   says, and the worker's Node did not come back (before the patch was dropped, this `up` created it again).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from molecule_helpers import (
    CERT_RENEWAL_TEST,
    ETCD_RESTORE_TEST,
    NODE_REMOVAL_TEST,
    SITE_DAY2_TESTS,
    after_scenario_run,
    left_created,
    molecule,
    scenario_env,
    state_dir,
    tail,
)

from gpucluster.toolchain import path_of

pytestmark = [pytest.mark.molecule, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "molecule" / "site" / "inventory"
WORKER = "gpuc-site-h100"   # its pool (h100-train) holds no other host; no tenant's quota names its devices
CONTROL_PLANE = "gpuc-site-cp"     # the first one: kubeadm init's host, which node remove refuses
SECOND_CONTROL_PLANE = "gpuc-site-cp2"
# What the site's own converge passes (molecule/site/converge.yml): no chart repositories here, and an
# enforcer the spec brings that verify cannot measure.
ALLOW = ("--no-chart-repositories", "--allow-not-measured", "network-policy-enforcer")


def _trimmed(tmp: Path) -> Path:
    """A copy of the site inventory without WORKER and its pool, and without SECOND_CONTROL_PLANE."""
    out = tmp / "inventory"
    shutil.copytree(INVENTORY, out)
    spec = yaml.safe_load((out / "cluster.yaml").read_text())
    spec["hosts"] = [h for h in spec["hosts"] if h["name"] not in (WORKER, SECOND_CONTROL_PLANE)]
    spec["nodePools"] = [p for p in spec["nodePools"] if WORKER not in p["hosts"]]
    (out / "cluster.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return out


def _run(env: dict[str, str], *args: str, stdin: str = "", timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["gpucluster", *args], env=env, input=stdin, capture_output=True, text=True,
                          timeout=timeout, check=False)


def _podman(env: dict[str, str], *args: str, host: str = WORKER) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", "exec", host, *args], env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def _etcdctl(env: dict[str, str], *args: str) -> dict:
    """An etcdctl command's JSON, asked of the first control plane's member with upstream's etcdctl (the
    toolchain's, copied in: kubeadm's etcd image holds etcd alone) and kubeadm's health-check client
    certificate."""
    copied = subprocess.run(["podman", "cp", str(path_of("etcdctl")), f"{CONTROL_PLANE}:/usr/local/bin/etcdctl"],
                            env=env, capture_output=True, text=True, timeout=120, check=False)
    assert copied.returncode == 0, copied.stderr
    pki = "/etc/kubernetes/pki/etcd"
    done = _podman(env, "etcdctl", "--endpoints=https://127.0.0.1:2379", f"--cacert={pki}/ca.crt",
                   f"--cert={pki}/healthcheck-client.crt", f"--key={pki}/healthcheck-client.key", *args, "-w", "json",
                   host=CONTROL_PLANE)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _etcd_members(env: dict[str, str]) -> set[str]:
    """The etcd members' names (etcd's own member list)."""
    return {m.get("name", "") for m in _etcdctl(env, "member", "list")["members"]}


def _site_hosts(env: dict[str, str], scenario_runs: dict, request: pytest.FixtureRequest) -> tuple[dict, Path]:
    """The site scenario's hosts, converged (by its own run, or here when run alone), and their admin kubeconfig."""
    after_scenario_run(scenario_runs, "site")
    if not left_created("site"):  # run alone, or the scenario's own run (or an earlier day-2 test) ended them
        first = molecule(env, "site", "converge", timeout=2400)
        assert first.returncode == 0, tail(first)
    return env, state_dir("site") / "gpucluster" / "admin.conf"


def _later_day2_test_in(request: pytest.FixtureRequest) -> bool:
    """Whether a day-2 test after this one runs in this session (then it, not this one, destroys the hosts)."""
    names = [getattr(item, "originalname", "") for item in request.session.items]
    return SITE_DAY2_TESTS.index(request.node.originalname) < max(
        (SITE_DAY2_TESTS.index(n) for n in names if n in SITE_DAY2_TESTS), default=-1)


def test_an_etcd_snapshot_restores_both_control_planes_to_the_moment_it_was_taken(
        molecule_env, scenario_runs, request, tmp_path):
    """`backup etcd` and `restore etcd` on the site's kubeadm cluster (two control planes, stacked etcd), from
    the controller as an operator would:

    1. refused before any host is contacted: a restore without --yes, from a file that is no snapshot;
    2. the snapshot: upstream etcdctl on the first control plane, copied here and checked with etcdutl (its
       SHA-256 trailer counted), 0600, never over a file; nothing of it left on the host;
    3. a ConfigMap deleted after the snapshot and one made after it; the restore: both members restored as
       one new etcd cluster (a new cluster ID, both names in etcd's own member list), its revision bumped
       past a billion (watchers from before relist), the deleted ConfigMap back and the later one gone, the
       API ready on etcd, writes accepted, every Node Ready again; each host keeps the data it replaced and
       nothing of the run (holding folder, restore folder).
    """
    assert request.node.originalname == ETCD_RESTORE_TEST  # conftest keeps the site's hosts for it by this name
    env = scenario_env("site", molecule_env, request)
    try:
        env, kubeconfig = _site_hosts(env, scenario_runs, request)
        state = kubeconfig.parent
        env = {**env, "GPUCLUSTER_STATE": str(tmp_path / "state")}  # nothing lands in the user's state folder
        base = ("-i", str(INVENTORY), "--state-dir", str(state))

        def kubectl(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([str(path_of("kubectl")), f"--kubeconfig={kubeconfig}", *args], env=env,
                                  capture_output=True, text=True, timeout=120, check=False)

        def on_hosts(script: str) -> dict[str, str]:
            return {h: _podman(env, "sh", "-c", script, host=h).stdout for h in (CONTROL_PLANE, SECOND_CONTROL_PLANE)}

        backups = tmp_path / "backups"
        backups.mkdir()
        snap = backups / "etcd.db"
        # 1. Refusals before any host is contacted.
        junk = backups / "junk.db"
        junk.write_bytes(b"not a snapshot" * 100)
        refused = _run(env, "restore", "etcd", *base, "--from", str(junk), "--yes")
        assert refused.returncode == 2 and "not a usable snapshot" in refused.stderr, refused.stderr
        assert "No host was contacted" in refused.stderr and "ansible-playbook" not in refused.stdout
        cluster_before = _etcdctl(env, "endpoint", "status")[0]["Status"]["header"]["cluster_id"]

        # 2. The snapshot.
        assert kubectl("create", "configmap", "before-snapshot", "--from-literal=k=v").returncode == 0
        taken = _run(env, "backup", "etcd", *base, "--out", str(snap), "-o", "json")
        assert taken.returncode == 0, taken.stderr[-4000:]
        doc = json.loads(taken.stdout)
        assert doc["host"] == CONTROL_PLANE and doc["revision"] > 0 and doc["keys"] > 0, doc
        # the database, then its SHA-256, which the member sends last and etcdutl checks
        assert snap.stat().st_size == doc["bytes"] + 32 and snap.stat().st_mode & 0o777 == 0o600
        assert sorted(p.name for p in backups.iterdir()) == ["etcd.db", "junk.db"]  # its folder went
        again = _run(env, "backup", "etcd", *base, "--out", str(snap))
        assert again.returncode == 2 and "exists" in again.stderr, again.stderr
        assert on_hosts("ls -d /tmp/gpucluster-etcd-snapshot.* 2>/dev/null")[CONTROL_PLANE] == ""
        unsure = _run(env, "restore", "etcd", *base, "--from", str(snap))
        assert unsure.returncode == 2 and "Pass --yes" in unsure.stderr, unsure.stderr

        # 3. Changes after the snapshot, then the restore.
        assert kubectl("delete", "configmap", "before-snapshot").returncode == 0
        assert kubectl("create", "configmap", "after-snapshot", "--from-literal=k=v").returncode == 0
        restored = _run(env, "restore", "etcd", *base, "--from", str(snap), "--yes", "-o", "json", timeout=1200)
        assert restored.returncode == 0, restored.stderr[-4000:]
        report = json.loads(restored.stdout)
        assert [r.split(":")[0] for r in report["restarted"]] == [CONTROL_PLANE, SECOND_CONTROL_PLANE], report
        assert report["revision"] == doc["revision"], report

        assert _etcd_members(env) == {CONTROL_PLANE, SECOND_CONTROL_PLANE}
        status = _etcdctl(env, "endpoint", "status", "--cluster")
        assert len(status) == 2, status  # both members answer, in one cluster
        assert {s["Status"]["header"]["cluster_id"] for s in status} != {cluster_before}, status
        assert all(s["Status"]["header"]["revision"] > 1_000_000_000 for s in status), status
        ready = kubectl("get", "--raw", "/readyz?verbose")
        assert ready.returncode == 0 and "[+]etcd ok" in ready.stdout, ready.stdout + ready.stderr
        back = kubectl("get", "configmap", "before-snapshot", "-o", "jsonpath={.data.k}")
        assert back.returncode == 0 and back.stdout == "v", back.stdout + back.stderr
        gone = kubectl("get", "configmap", "after-snapshot")
        assert gone.returncode != 0 and "NotFound" in gone.stderr, gone.stdout + gone.stderr
        assert kubectl("create", "configmap", "after-restore", "--from-literal=k=v").returncode == 0
        waited = kubectl("wait", "--for=condition=Ready", "node", "--all", "--timeout=300s")
        assert waited.returncode == 0, waited.stdout + waited.stderr
        kept = on_hosts("ls -d /var/lib/etcd/member.before-restore-*/snap")
        assert all(out.strip() for out in kept.values()), kept
        leftovers = on_hosts("ls -d /var/lib/etcd/.gpucluster-etcd-restore.* /etc/kubernetes/manifests-etcd-restore "
                             "2>/dev/null")
        assert leftovers == {CONTROL_PLANE: "", SECOND_CONTROL_PLANE: ""}, leftovers
    finally:
        if not _later_day2_test_in(request):
            molecule(env, "site", "destroy")


#: On a control-plane host: the SHA-256 of the certificate its API server serves, and of the one on disk.
SERVED_AND_ON_DISK = """
import hashlib, ssl
served = ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate(("127.0.0.1", 6443)))
on_disk = ssl.PEM_cert_to_DER_cert(open("/etc/kubernetes/pki/apiserver.crt").read())
print(hashlib.sha256(served).hexdigest(), hashlib.sha256(on_disk).hexdigest())
"""


def test_renewed_certificates_are_what_both_control_planes_serve_and_the_new_kubeconfig_works(
        molecule_env, scenario_runs, request, tmp_path):
    """playbooks/renew-certs.yml on real kubeadm control planes, run as docs/operations.md says (ansible-playbook
    from the checkout): one host at a time, `kubeadm certs renew all`, each static pod restarted by kubelet
    once its manifest leaves and comes back. Afterwards each API server serves the certificate now on disk,
    which is not the one it served before (kubeadm renews files only: without the restart it would serve the
    old one until its next start); the renewed admin kubeconfig lands 0600 on the controller with a new
    client certificate and is accepted; the API is ready and every Node Ready."""
    assert request.node.originalname == CERT_RENEWAL_TEST  # conftest keeps the site's hosts for it by this name
    env = scenario_env("site", molecule_env, request)
    try:
        env, kubeconfig = _site_hosts(env, scenario_runs, request)
        hosts = (CONTROL_PLANE, SECOND_CONTROL_PLANE)

        def served_and_on_disk(host: str) -> tuple[str, str]:
            done = _podman(env, "python3", "-c", SERVED_AND_ON_DISK, host=host)
            assert done.returncode == 0, done.stderr
            served, on_disk = done.stdout.split()
            return served, on_disk

        before = {h: served_and_on_disk(h) for h in hosts}
        assert all(served == on_disk for served, on_disk in before.values()), before
        fetched = tmp_path / "admin.conf"
        run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(INVENTORY),
                              str(REPO / "playbooks" / "renew-certs.yml"),
                              "-e", json.dumps({"gpucluster_kubeconfig": str(fetched)})],
                             cwd=REPO, env={**env, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
                             capture_output=True, text=True, timeout=1200, check=False)
        assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
        after = {h: served_and_on_disk(h) for h in hosts}
        for host in hosts:
            served, on_disk = after[host]
            assert served == on_disk and served != before[host][0], (host, before[host], after[host])

        assert fetched.stat().st_mode & 0o777 == 0o600

        def client_cert(path: Path) -> str:
            return yaml.safe_load(path.read_text())["users"][0]["user"]["client-certificate-data"]

        assert client_cert(fetched) != client_cert(kubeconfig)
        ready = subprocess.run([str(path_of("kubectl")), f"--kubeconfig={fetched}", "get", "--raw", "/readyz"],
                               capture_output=True, text=True, timeout=120, check=False)
        assert ready.returncode == 0 and ready.stdout == "ok", ready.stdout + ready.stderr
        waited = subprocess.run([str(path_of("kubectl")), f"--kubeconfig={fetched}", "wait", "--for=condition=Ready",
                                 "node", "--all", "--timeout=300s"], capture_output=True, text=True, timeout=360,
                                check=False)
        assert waited.returncode == 0, waited.stdout + waited.stderr
    finally:
        if not _later_day2_test_in(request):
            molecule(env, "site", "destroy")


def test_a_removed_worker_is_drained_reset_and_deleted_and_the_cluster_verifies_without_it(
        molecule_env, scenario_runs, request, tmp_path):
    assert request.node.originalname == NODE_REMOVAL_TEST  # conftest keeps the site's hosts for it by this name
    env = scenario_env("site", molecule_env, request)
    try:
        env, kubeconfig = _site_hosts(env, scenario_runs, request)
        state = kubeconfig.parent
        env = {**env, "GPUCLUSTER_STATE": str(tmp_path / "state")}  # nothing lands in the user's state folder

        def kubectl(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([str(path_of("kubectl")), f"--kubeconfig={kubeconfig}", *args], env=env,
                                  capture_output=True, text=True, timeout=120, check=False)

        base = ("-i", str(INVENTORY), "--state-dir", str(state))
        # 1. Refusals, before any change.
        refused = _run(env, "node", "remove", CONTROL_PLANE, *base, "--yes")
        assert refused.returncode == 2 and "first control-plane host" in refused.stderr, refused.stderr
        unasked = _run(env, "node", "remove", WORKER, *base)
        assert unasked.returncode == 2 and "--yes" in unasked.stderr, unasked.stderr
        for name in (CONTROL_PLANE, WORKER):
            node = json.loads(kubectl("get", "node", name, "-o", "json").stdout)
            assert not node["spec"].get("unschedulable"), f"{name} was cordoned by a refused remove"

        # 2. The worker out of the spec but still in the cluster: verify names it.
        trimmed = _trimmed(tmp_path)
        before = _run(env, "verify", "-i", str(trimmed), "--kubeconfig", str(kubeconfig), *ALLOW, "-o", "json")
        rows = {(r["check"], r["subject"]): r for r in json.loads(before.stdout)["results"]}
        assert before.returncode != 0
        assert rows[("node-known", WORKER)]["verdict"] == "fail", rows.get(("node-known", WORKER))

        # 3. Removed: drained, reset, deleted.
        done = _run(env, "node", "remove", WORKER, *base, "--yes", "-o", "json")
        assert done.returncode == 0, done.stderr[-4000:]
        report = json.loads(done.stdout)
        assert report["deleted"] is True and report["reset"] is True, report
        # its labels' patch left the platform stack's state, so no later `up` relinquishes it by an apply
        # that would create the Node again (noderemove.py)
        assert [u.rsplit("::", 1)[1] for u in report["forgotten"]] == [f"node/{WORKER}"], report
        assert "still a host of cluster.yaml" in " ".join(report["notes"]), report
        gone = kubectl("get", "node", WORKER)
        assert gone.returncode != 0 and "NotFound" in gone.stderr, gone.stdout + gone.stderr
        assert _podman(env, "test", "-e", "/etc/kubernetes/kubelet.conf").returncode == 1  # kubeadm reset's work
        assert _podman(env, "systemctl", "is-active", "kubelet").stdout.strip() == "inactive"
        assert _podman(env, "systemctl", "is-enabled", "kubelet").stdout.strip() == "disabled"
        # Nothing registers it again: its kubelet is stopped, so the Node is still gone now.
        assert kubectl("get", "node", WORKER).returncode != 0

        # 4. Again: nothing left to do, nothing changed.
        again = _run(env, "node", "remove", WORKER, *base, "--yes", "-o", "json")
        assert again.returncode == 0, again.stderr[-4000:]
        assert json.loads(again.stdout) | {"notes": []} == {
            "node": WORKER, "dryRun": False, "drained": None, "reset": False, "deleted": False, "forgotten": [],
            "notes": []}

        # 4b. The second control plane: the endpoint handed over, its etcd member removed, its Node deleted.
        assert _etcd_members(env) == {CONTROL_PLANE, SECOND_CONTROL_PLANE}
        cp_done = _run(env, "node", "remove", SECOND_CONTROL_PLANE, *base, "--yes", "-o", "json")
        assert cp_done.returncode == 0, cp_done.stderr[-4000:]
        report = json.loads(cp_done.stdout)
        assert report["deleted"] is True and report["reset"] is True, report
        # the platform stack patches the Nodes of pool hosts only: a control plane in no pool has none to drop
        assert report["forgotten"] == [], report
        assert any("haproxy and keepalived still name it" in n for n in report["notes"]), report
        assert kubectl("get", "node", SECOND_CONTROL_PLANE).returncode != 0
        for unit in ("keepalived", "haproxy"):
            assert _podman(env, "systemctl", "is-active", unit, host=SECOND_CONTROL_PLANE).stdout.strip() == "inactive"
            assert _podman(env, "systemctl", "is-enabled", unit, host=SECOND_CONTROL_PLANE).stdout.strip() == "disabled"
        # kubeadm reset removed its member: the first control plane's member is the whole cluster. Had the member
        # stayed, etcd would count two members with one silent, have no quorum, and the API no storage.
        assert _etcd_members(env) == {CONTROL_PLANE}
        ready = kubectl("get", "--raw", "/readyz?verbose")
        assert ready.returncode == 0 and "[+]etcd ok" in ready.stdout, ready.stdout + ready.stderr

        # 5. The stacks converge on the trimmed spec, and its verify (part of `up`) passes. The trimmed
        # inventory is a copy in another folder, as an inventory moved there: its state goes with it (a copy
        # of the scenario's, without the record of the folder it belonged to).
        moved = tmp_path / "state"
        shutil.copytree(state, moved)
        (moved / "inventory.json").unlink()
        up = _run(env, "up", "-i", str(trimmed), "--skip-hosts", "--state-dir", str(moved), *ALLOW, "-o", "json")
        report = json.loads(up.stdout)
        failed = [r for r in (report.get("verify") or {}).get("problems", []) if r["verdict"] == "fail"]
        assert up.returncode == 0, (failed, up.stderr[-3000:])
        assert report["verify"]["summary"]["fail"] == 0, failed
        assert kubectl("get", "node", WORKER).returncode != 0  # and the Nodes did not come back
        assert kubectl("get", "node", SECOND_CONTROL_PLANE).returncode != 0
    finally:
        molecule(env, "site", "destroy")
