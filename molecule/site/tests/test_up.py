"""`gpucluster up` from fresh hosts (this scenario's converge) ended with a verified real cluster.

converge.yml ran `gpucluster up -i inventory --no-chart-repositories` on fresh containers (their image
holds the Debian packages the roles install, tests/molecule/site_image.py):
the host layer, the admin kubeconfig from the init host, both stacks against the kubeadm cluster,
verify. Molecule's idempotence step ran it again. Both runs' JSON reports are read here, and the
fetched kubeconfig is used from the controller by `gpucluster verify`, as an operator would.
"""

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
import testinfra

from gpucluster.labels import POOL as POOL_LABEL
from gpucluster.simulator import standin
from gpucluster.spec import load_spec
from gpucluster.verify import checks

INVENTORY = Path(__file__).resolve().parent.parent / "inventory"
SPEC = load_spec(INVENTORY)
STATE = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "gpucluster"
KUBECONFIG = STATE / "admin.conf"
GPU_HOSTS = sorted(h.name for h in SPEC.hosts if (p := SPEC.pool_of(h.name)) and p.gpu)
CP = next(h.name for h in SPEC.hosts if h.name not in GPU_HOSTS)
STANDIN = set(standin.hosts(SPEC))  # NVIDIA's device plugin publishes their GPUs (prepare.yml)


def report(which: str) -> dict:
    return json.loads((STATE / f"up-{which}.json").read_text())


def verify(*extra: str) -> tuple[int, dict]:
    """`gpucluster verify` from the controller with the kubeconfig `up` fetched; rows by (check, subject)."""
    proc = subprocess.run(["gpucluster", "verify", "-i", str(INVENTORY), "--kubeconfig", str(KUBECONFIG),
                           "--no-chart-repositories", "-o", "json", *extra],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    rows = {(r["check"], r["subject"]): r for r in json.loads(proc.stdout)["results"]}
    return proc.returncode, rows


def test_first_run_built_everything_in_one_command():
    first = report("first")
    phases = [p["phase"] for p in first["phases"]]
    assert phases[:2] == ["validate", "host layer"], phases
    assert {"platform stack", "tenants stack", "readiness", "verify"} <= set(phases), phases
    # Every host of the spec was converged by the host layer, and each one changed.
    assert set(first["hosts"]) == {h.name for h in SPEC.hosts}
    assert all(c["changed"] > 0 and c["failures"] == 0 and c["unreachable"] == 0 for c in first["hosts"].values())
    created = {s["stack"]: s["created"] for s in first["stacks"]}
    assert created["platform"] > 0 and created["tenants"] > 0, first["stacks"]
    assert first["changes"] > 0 and first["left_out"] == [] and first["not_ready"] == []


def test_first_run_verified_the_cluster():
    summary = report("first")["verify"]["summary"]
    assert summary["fail"] == 0 and summary["pass"] > 0, summary
    # the enforcer the spec brings is not measured; the run was told so (converge.yml), no chart allowance did
    assert report("first")["verify"]["allowedNotMeasured"]["network-policy-enforcer"] == checks.BY_USER


def test_releases_without_a_repository_are_reported_not_installed():
    skipped = {s["what"]: s for s in report("first")["skipped"]}
    releases = {w for w in skipped if w.startswith("release ")}
    assert {w.split()[1] for w in releases} == {"gpu-operator", "dra-driver", "volcano", "network-operator"}
    assert all(skipped[w]["cause"] == "chart" for w in releases)
    # The objects whose CRDs only those releases bring are left out with them, not as failures.
    assert skipped["Queue research"]["cause"] == "chart", skipped
    assert "volcano" in skipped["Queue research"]["reason"]


def test_second_run_changed_nothing():
    again = report("again")
    assert again["changes"] == 0, again
    assert all(c["changed"] == 0 for c in again["hosts"].values()), again["hosts"]
    assert all(s["created"] == s["updated"] == s["deleted"] == 0 for s in again["stacks"]), again["stacks"]
    assert again["verify"]["summary"]["fail"] == 0


def test_fetched_kubeconfig_is_private():
    assert stat.S_IMODE(KUBECONFIG.stat().st_mode) == 0o600
    assert stat.S_IMODE(KUBECONFIG.parent.stat().st_mode) == 0o700


def test_verify_from_the_controller_measures_the_real_cluster():
    rc, rows = verify()
    failed = {k: r for k, r in rows.items() if r["verdict"] == "fail"}
    assert not failed, failed
    # Nothing failed, and the one row no allowance covers is the enforcer the spec brings (bring-your-own):
    # --no-chart-repositories does not allow it, so the run fails until the operator allows it by name.
    unallowed = {k for k, r in rows.items() if r["verdict"] == "not-measured" and "allowed" not in r}
    assert rc == 1 and unallowed == {("network-policy-enforcer", "networking/podNetwork")}, (rc, unallowed)
    for host in SPEC.hosts:
        for check in ("node-ready", "node-labels", "node-taints"):
            assert rows[(check, host.name)]["verdict"] == "pass", rows[(check, host.name)]
    # The certificates real kubeadm signed at init (one year, CertificateValidityPeriod): the API server's, read
    # over TLS, and the fetched admin kubeconfig's client certificate, both with most of the year left.
    [certs] = [r for (check, _), r in rows.items() if check == "control-plane-certificates"]
    assert certs["verdict"] == "pass" and certs["actual"].endswith("2 certificates read"), certs
    assert int(certs["actual"].split(" days left")[0].rsplit("(", 1)[1]) >= 360, certs
    # The control-plane host is expected to publish no GPU or RDMA resources: measured, and none.
    assert rows[("node-capacity", CP)]["verdict"] == "pass"
    # The other GPU hosts' devices cannot be measured: no GPU, and no device plugin (its chart is not
    # installed); on the stand-in NVIDIA's device plugin publishes them, so they are measured and pass.
    # The labels we apply are measured; those GPU Feature Discovery and NFD would publish are not.
    assert STANDIN and STANDIN < set(GPU_HOSTS)
    for host in GPU_HOSTS:
        row = rows[("node-capacity", host)]
        if host in STANDIN:
            assert row["verdict"] == "pass" and row["actual"].startswith("nvidia.com/gpu="), row
        else:
            assert row["verdict"] == "not-measured" and "are not installed" in row["reason"], row
        assert rows[("node-labels", f"{host} (agent labels)")]["verdict"] == "not-measured"
    # The tenant's quota, limits, Pod Security and access are measured on the real API server (the
    # access rows from its SubjectAccessReviews).
    for tenant in SPEC.tenants:
        for check in ("tenant-quota", "tenant-limitrange", "tenant-security"):
            assert rows[(check, f"tenants/{tenant.name}")]["verdict"] == "pass", rows[(check, f"tenants/{tenant.name}")]
    rbac = [r for (check, _), r in rows.items() if check == "tenant-rbac"]
    assert rbac and all(r["verdict"] == "pass" for r in rbac), rbac
    # What enforces the tenants' NetworkPolicies here is not gpucluster's (bring-your-own): said, not passed.
    enforcer = rows[("network-policy-enforcer", "networking/podNetwork")]
    assert enforcer["verdict"] == "not-measured" and "bring-your-own" in enforcer["reason"], enforcer


@pytest.fixture
def relabelled():
    """One node label of the spec changed on the live node, and put back afterwards."""
    cp = testinfra.get_host(f"podman://{CP}")
    node = GPU_HOSTS[0]
    key = POOL_LABEL
    kubectl = "kubectl --kubeconfig /etc/kubernetes/admin.conf"
    cp.run_expect([0], f"{kubectl} label node {node} --overwrite {key}=tampered")
    try:
        yield node, key
    finally:
        cp.run_expect([0], f"{kubectl} label node {node} --overwrite {key}={SPEC_LABELS[node][key]}")


def _spec_labels() -> dict[str, dict[str, str]]:
    from gpucluster.render.nodes import node_config

    return {name: cfg["labels"] for name, cfg in node_config(SPEC).items()}


SPEC_LABELS = _spec_labels()


def test_verify_fails_on_a_tampered_node_label(relabelled):
    node, key = relabelled
    rc, rows = verify()
    assert rc == 1
    row = rows[("node-labels", node)]
    assert row["verdict"] == "fail" and key in json.dumps(row["actual"]), row
