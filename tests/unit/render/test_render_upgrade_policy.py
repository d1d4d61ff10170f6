"""The GPU Operator's driver upgrade policy comes from the spec, with a new driver version or without."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster import inventory
from gpucluster.errors import SpecError
from gpucluster.render import gpu_operator
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec


@pytest.fixture
def spec_with(tmp_path: Path):
    def load(driver: str) -> ClusterSpec:
        text = (inventory.REPO_ROOT / "inventories" / "lab" / "cluster.yaml").read_text()
        assert "  driver: {managedBy: operator}" in text
        (tmp_path / "cluster.yaml").write_text(text.replace("  driver: {managedBy: operator}", driver))
        return load_spec(tmp_path)
    return load


def test_a_new_driver_version_rolls_out_with_the_specs_policy(spec_with) -> None:
    spec = spec_with("  driver:\n    managedBy: operator\n    version: 580.126.20\n    upgradePolicy:\n"
                     "      maxParallelUpgrades: 2\n      maxUnavailable: 1\n"
                     "      drain: {enable: true, timeoutSeconds: 900, podSelector: 'gpucluster.dev/drain=true'}\n")
    driver = gpu_operator.values(spec)["driver"]
    assert driver["version"] == "580.126.20"
    policy = driver["upgradePolicy"]
    assert policy["maxParallelUpgrades"] == 2 and policy["maxUnavailable"] == 1
    assert policy["drain"] == {"enable": True, "force": False, "podSelector": "gpucluster.dev/drain=true",
                               "timeoutSeconds": 900, "deleteEmptyDir": False}
    assert policy["autoUpgrade"] is True  # untouched keys keep the chart's defaults


def test_host_drivers_get_no_operator_policy_and_a_bad_value_is_a_spec_error(spec_with) -> None:
    assert "upgradePolicy" not in gpu_operator.values(spec_with("  driver: {managedBy: host, version: '535'}"))[
        "driver"]
    with pytest.raises(SpecError, match=r"upgradePolicy\.maxUnavailable"):
        spec_with("  driver: {managedBy: operator, upgradePolicy: {maxUnavailable: 'most'}}")
