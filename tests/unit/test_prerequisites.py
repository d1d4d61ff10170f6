"""`up` refuses, before any stack runs, a cluster that lacks CRDs no release of ours brings (the
Prometheus Operator's); the live proof is tests/integration/test_monitoring_prerequisites.py."""

from __future__ import annotations

import pytest

from gpucluster import prerequisites
from gpucluster.errors import InputError
from gpucluster.render import render

MONITORING = frozenset({("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule")})


def test_a_cluster_without_the_crds_is_refused_naming_crds_objects_and_charts(lab):
    objects = render(lab).objects()
    with pytest.raises(InputError) as caught:
        prerequisites.check(objects, frozenset({("v1", "Namespace")}), source="the spec of lab")
    message = str(caught.value)
    assert caught.value.exit_code == 2
    assert "(CRDs servicemonitors.monitoring.coreos.com, prometheusrules.monitoring.coreos.com)" in message
    assert "PrometheusRule monitoring/gpucluster-gpu-alerts, ServiceMonitor gpu-operator/gpucluster-dcgm-exporter" \
        in message
    assert "kube-prometheus-stack" in message and "prometheus-operator-crds" in message
    assert "set monitoring.enabled: false in the spec of lab" in message


def test_only_the_missing_kind_is_named(lab):
    objects = render(lab).objects()
    with pytest.raises(InputError) as caught:
        prerequisites.check(objects, frozenset({("monitoring.coreos.com/v1", "ServiceMonitor")}))
    assert "does not serve monitoring.coreos.com/v1 PrometheusRule (CRDs prometheusrules.monitoring.coreos.com)" \
        in str(caught.value)
    assert "ServiceMonitor gpu-operator" not in str(caught.value)


def test_the_local_world_is_told_how_it_gets_them(local):
    with pytest.raises(InputError, match="gpucluster tools install crds"):
        prerequisites.check(render(local).objects(), frozenset(), simulated=True)


@pytest.mark.parametrize("served", [
    MONITORING,  # the CRDs are installed
    None,        # unknown (no cluster to ask): nothing is refused
])
def test_passes_when_served_or_unknown(lab, served):
    prerequisites.check(render(lab).objects(), served)


def test_monitoring_off_needs_nothing(lab):
    lab.monitoring.enabled = False
    assert prerequisites.missing(render(lab).objects(), frozenset()) == []
