"""`up` on a cluster without the Prometheus Operator's CRDs stops before either stack, naming them.

The cluster is this module's local world started without any operator CRD, reached as a real cluster
is (`-i inventories/lab --skip-hosts --kubeconfig ...`: the lab spec's monitoring renders a
ServiceMonitor and a PrometheusRule). In file order: `up` exits 2 naming both CRDs and the charts that
bring them, and nothing of either stack is in the cluster; then the CRDs are installed (as
kube-prometheus-stack would) and the same check passes on what the API server now serves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cluster_helpers import Cluster, skip_or_fail_without

from gpucluster import prerequisites
from gpucluster.pulumi.cluster import discover
from gpucluster.render import render
from gpucluster.spec import load_spec

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "inventories" / "lab"
LOCAL_WORLD = {"crds": False}
CRDS = ("servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com")


def _ours(lw: Cluster) -> dict[str, list[str]]:
    """Objects of either stack that could exist: the lab's namespaces and PriorityClasses."""
    spec = load_spec(LAB)
    names = json.loads(lw.kubectl("get", "namespaces,priorityclasses", "-o", "json"))["items"]
    wanted = {spec.monitoring.namespace, *(t.ns for t in spec.tenants),
              *(p.name for p in spec.scheduling.priority_classes)}
    return {"found": sorted(o["metadata"]["name"] for o in names if o["metadata"]["name"] in wanted)}


def test_up_without_the_crds_exits_2_naming_them_and_applies_nothing(lw: Cluster, tmp_path: Path, cli) -> None:
    for crd in CRDS:
        assert lw.run("get", "crd", crd).returncode != 0, f"{crd} is installed: this world must start without"
    state = tmp_path / "stacks"
    out = cli("up", "-i", LAB, "--skip-hosts", "--kubeconfig", lw.kubeconfig, "--state-dir", state, "--no-verify")
    assert out.exit_code == 2, out
    message = " ".join(out.stderr.split())
    assert "phase 'plan' failed: the cluster does not serve monitoring.coreos.com/v1 ServiceMonitor, " \
           "monitoring.coreos.com/v1 PrometheusRule (CRDs" in message
    for crd in CRDS:
        assert crd in message
    assert "kube-prometheus-stack" in message and "prometheus-operator-crds" in message
    assert "ServiceMonitor gpu-operator/gpucluster-dcgm-exporter" in message
    assert "monitoring.enabled: false" in message and "Nothing was applied to the cluster." in message
    assert _ours(lw) == {"found": []}
    assert not (state / "backend").exists()


def test_with_the_crds_installed_the_check_passes_on_what_the_cluster_serves(lw: Cluster) -> None:
    skip_or_fail_without(("crds",))
    from gpucluster.local.crds import install_crds

    install_crds(lw.kubeconfig)
    rendered = render(load_spec(LAB))
    facts = discover(lw.kubeconfig)
    assert prerequisites.missing(rendered.objects(), facts.served) == []
    prerequisites.check(rendered.objects(), facts.served)  # raises nothing


def test_with_the_crds_installed_up_previews_the_monitoring_objects(lw: Cluster, tmp_path: Path, cli) -> None:
    skip_or_fail_without(("crds", "pulumi", "pulumi-resource-kubernetes"))
    out = cli("up", "-i", LAB, "--skip-hosts", "--kubeconfig", lw.kubeconfig, "--state-dir", tmp_path / "stacks",
              "--no-chart-repositories", "--dry-run", "-o", "json")
    assert out.exit_code == 0, out
    report = json.loads(out.stdout)
    assert [p["phase"] for p in report["phases"]][:2] == ["validate", "plan"]
    assert not any("ServiceMonitor" in s["what"] or "PrometheusRule" in s["what"] for s in report["skipped"])
