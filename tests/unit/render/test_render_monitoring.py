"""render/monitoring.py: DCGM metrics, ServiceMonitor, alerts and recording rules."""

from __future__ import annotations

from gpucluster.render import monitoring


def test_monitoring_thresholds_come_from_spec(local):
    spec = local.model_copy(deep=True)
    spec.monitoring.alerts.temperature_celsius = 77
    rules = {r["alert"]: r for r in monitoring.alert_rules(spec)}
    assert rules["GPUTemperatureHigh"]["expr"] == "DCGM_FI_DEV_GPU_TEMP > 77"
    assert "< 8" in rules["GPUCountBelowSpec"]["expr"] and "h100-1|h100-2" in rules["GPUCountBelowSpec"]["expr"]
