"""A release that brings the CRDs of objects `up` left out: applied in the same run, or `up` fails.

On a fresh cluster the kinds an operator's chart defines are not served when `up` plans, so those
objects are left out of the first pass. After the platform stack installed the release, `up` waits
for the kinds, plans again and applies them. If they never come, `up` must not succeed.

Here the network operator's release is a local chart of ours (no chart repository is reachable): its
``crds/`` folder holds the NicClusterPolicy CRD (the local world's stand-in), which the world starts
without.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from cluster_helpers import Cluster

from gpucluster.flow import run_up
from gpucluster.local.crds import stand_ins
from gpucluster.versions import CHARTS

pytestmark = [pytest.mark.integration, pytest.mark.slow]
LOCAL_WORLD = {"tools": ("pulumi", "pulumi-resource-kubernetes")}
LOCAL = Path(__file__).resolve().parents[2] / "inventories" / "local"
NCP_CRD = "nicclusterpolicies.mellanox.com"


def _chart(root: Path, with_crd: bool) -> Path:
    folder = root / "network-operator"
    (folder / "templates").mkdir(parents=True)
    (folder / "Chart.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v2", "name": "network-operator", "type": "application",
        "version": CHARTS["network-operator"].version, "description": "test stand-in for the operator's chart"}))
    (folder / "templates" / "marker.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: network-operator-marker\n"
        "  namespace: {{ .Release.Namespace }}\ndata: {}\n")
    if with_crd:
        (folder / "crds").mkdir()
        (ncp,) = [d for d in stand_ins() if d["metadata"]["name"] == NCP_CRD]
        (folder / "crds" / "nicclusterpolicy.yaml").write_text(yaml.safe_dump(ncp))
    return root


def _inventory(tmp: Path, name: str, charts: Path) -> Path:
    data = yaml.safe_load((LOCAL / "cluster.yaml").read_text())
    data.setdefault("networking", {}).setdefault("networkOperator", {})["chart"] = {
        "repository": str(charts), "chart": "network-operator", "version": CHARTS["network-operator"].version}
    folder = tmp / name
    folder.mkdir()
    (folder / "cluster.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return folder


@pytest.fixture(scope="module")
def state(lw: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    lw.kubectl("delete", "crd", NCP_CRD, "--wait=true")
    return Path(tmp_path_factory.mktemp("stacks"))


def test_kinds_that_never_come_make_up_fail_naming_them(lw: Cluster, state: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch, cli) -> None:
    import gpucluster.flow as flow

    monkeypatch.setattr(flow, "CRD_WAIT_S", 5.0)  # the kind will not come: do not wait two minutes
    inv = _inventory(tmp_path, "no-crd", _chart(tmp_path / "charts", with_crd=False))
    out = cli("up", "-i", str(inv), "--world-dir", str(lw.state_dir), "--state-dir", str(state), "--no-verify")
    assert out.exit_code == 1, out.output[-3000:]
    assert "not applied" in out.stdout and "NicClusterPolicy nic-cluster-policy" in out.stdout
    assert "1 object(s) not applied: their kind is not served" in out.stderr
    assert lw.run("get", "nicclusterpolicy", "nic-cluster-policy").returncode != 0
    # leave no release behind: the next test installs the chart afresh (Helm installs crds/ only then)
    flow.run_down(inv, world_dir=lw.state_dir, state_dir=state, keep_world=True, quiet=True)


def test_a_release_that_brings_the_crd_gets_its_objects_applied_in_the_same_run(
        lw: Cluster, state: Path, tmp_path: Path) -> None:
    charts = _chart(tmp_path / "charts", with_crd=True)
    inv = _inventory(tmp_path, "with-crd", charts)
    report = run_up(inv, world_dir=lw.state_dir, state_dir=state, quiet=True, verify=False)
    assert report.left_out == []
    assert any(s["stack"] == "platform (second pass)" for s in report.stacks)
    ncp = lw.get("nicclusterpolicy", "nic-cluster-policy")
    assert ncp["spec"]["rdmaSharedDevicePlugin"]["config"]
    shutil.rmtree(charts)
