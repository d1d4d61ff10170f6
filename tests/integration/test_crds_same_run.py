"""Objects whose CRD appears during `up` are applied in the same run, or `up` fails naming them.

The network operator applies nv-ipam's IPPool CRD itself once it has reconciled the NicClusterPolicy
(tests/upstream/facts/network-operator.yaml), so on a fresh cluster the IPPools cannot be planned when
`up` starts. `up` must wait for the kind after the platform stack ran, plan again and apply them; if
the kind never comes, `up` must not succeed.

The local world starts without the IPPool CRD here. A thread stands in for the network operator (not
served as a Go module): when this run's NicClusterPolicy reaches the cluster, it applies the CRD (the
local world's stand-in for nv-ipam's), as the operator does on a real cluster.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import yaml
from cluster_helpers import Cluster, wait_for

from gpucluster.flow import run_up
from gpucluster.local.crds import stand_ins

pytestmark = [pytest.mark.integration, pytest.mark.slow]
LOCAL_WORLD = {"tools": ("pulumi", "pulumi-resource-kubernetes")}
LOCAL = Path(__file__).resolve().parents[2] / "inventories" / "local"
IPPOOL_CRD = "ippools.nv-ipam.nvidia.com"


@pytest.fixture(scope="module")
def state(lw: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    lw.kubectl("delete", "crd", IPPOOL_CRD, "--wait=true")
    return Path(tmp_path_factory.mktemp("stacks"))


def _policy_version(lw: Cluster) -> str:
    proc = lw.run("get", "nicclusterpolicy", "nic-cluster-policy", "-o", "jsonpath={.metadata.resourceVersion}")
    return proc.stdout if proc.returncode == 0 else ""


def _operator_stand_in(lw: Cluster, before: str, done: threading.Event) -> None:
    (crd,) = [d for d in stand_ins() if d["metadata"]["name"] == IPPOOL_CRD]

    def policy_reconciled() -> bool:  # this run's policy is in the cluster (created or updated)
        return done.is_set() or _policy_version(lw) not in ("", before)

    wait_for("the NicClusterPolicy", policy_reconciled, timeout=600)
    if not done.is_set():
        lw.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(crd))


def test_kinds_that_never_come_make_up_fail_naming_them(lw: Cluster, state: Path,
                                                        monkeypatch: pytest.MonkeyPatch, cli) -> None:
    import gpucluster.flow as flow

    monkeypatch.setattr(flow, "CRD_WAIT_S", 5.0)  # nothing will bring the kind: do not wait two minutes
    out = cli("up", "-i", str(LOCAL), "--world-dir", str(lw.state_dir), "--state-dir", str(state), "--no-verify")
    assert out.exit_code == 1, out.output[-3000:]
    assert "not applied" in out.stdout and "IPPool " in out.stdout, out.stdout[-3000:]
    assert "object(s) not applied: their kind is not served" in out.stderr
    assert lw.run("get", "crd", IPPOOL_CRD).returncode != 0


def test_a_kind_that_appears_during_up_gets_its_objects_applied_in_the_same_run(lw: Cluster, state: Path,
                                                                              tmp_path: Path) -> None:
    # A spec change that updates the policy: the stand-in reacts to this run's policy, after planning.
    data = yaml.safe_load((LOCAL / "cluster.yaml").read_text())
    data.setdefault("networking", {})["rdmaHcaMax"] = 62
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    done = threading.Event()
    operator = threading.Thread(target=_operator_stand_in, args=(lw, _policy_version(lw), done), daemon=True)
    operator.start()
    try:
        report = run_up(tmp_path, world_dir=lw.state_dir, state_dir=state, quiet=True, verify=False)
    finally:
        done.set()
        operator.join(30)
    assert report.left_out == []
    assert any(s["stack"] == "platform (second pass)" for s in report.stacks)
    pools = lw.get("ippools.nv-ipam.nvidia.com", "-A")["items"]
    assert pools and {p["spec"]["subnet"] for p in pools}
