"""Day-2 tooling against upstream facts: the labels, states, events and messages the watchdog, the
driver-upgrade check, the drain and the doctor read are the ones upstream writes."""

from __future__ import annotations

import re

from upstream_facts import fact, source

from gpucluster import labels as L
from gpucluster.doctor import workloads
from gpucluster.verify import upgrades
from gpucluster.verify.nodestate import MIG_FAILED, MIG_PAUSED_LABELS, MIG_PENDING, MIG_REBOOTING, MIG_SUCCESS, PAUSED


def test_mig_manager_labels_and_states() -> None:
    assert list(MIG_PAUSED_LABELS) == fact("gpu-operator", "mig-paused-labels"), source("gpu-operator",
                                                                                       "mig-paused-labels")
    assert PAUSED == fact("gpu-operator", "mig-paused-value")
    assert {MIG_PENDING, MIG_REBOOTING, MIG_SUCCESS, MIG_FAILED} == set(fact("gpu-operator", "mig-config-state-values"))
    assert L.MIG_CONFIG_STATE == fact("gpu-operator", "mig-config-state-label")
    wedge = fact("gpu-operator", "mig-wedge-on-client-shutdown-timeout")
    assert (wedge["state"], wedge["deploy-labels"]) == (MIG_PENDING, PAUSED)


def test_driver_upgrade_label_states_and_events() -> None:
    assert upgrades.STATE_LABEL == fact("gpu-operator", "driver-upgrade-state-label")
    states = set(fact("gpu-operator", "driver-upgrade-states"))
    assert {upgrades.DONE, upgrades.FAILED, upgrades.REQUIRED, *upgrades.HINTS} <= states
    assert upgrades.DRIVER_DAEMONSET == fact("gpu-operator", "daemonset-driver-name")
    event = fact("gpu-operator", "driver-upgrade-state-change-event")
    assert event["reason"] == upgrades.EVENT_REASON
    assert upgrades.MOVED.search(event["message"].replace("<state>", "upgrade-done")).group(1) == "upgrade-done"
    recovery = fact("gpu-operator", "driver-upgrade-failed-recovery")
    assert (recovery["from"], recovery["to"]) == (upgrades.FAILED, "uncordon-required")


def test_the_doctor_reads_the_admission_messages_kubernetes_writes() -> None:
    quota = fact("host-config", "quota-refusal-message")
    sample = quota.replace("<quota>", "q").replace("<res>=<n>,...", "requests.nvidia.com/gpu=1")
    m = workloads.QUOTA.search(sample)
    assert m and m.group(1) == "q", source("host-config", "quota-refusal-message")
    missing = fact("host-config", "priority-class-missing-message").replace("<name>", "nope")
    assert workloads.MISSING_PRIORITY.search(missing).group(1) == "nope"


def test_the_drain_reads_the_eviction_refusal_kubernetes_writes() -> None:
    from gpucluster import drain

    refusal = fact("host-config", "eviction-pdb-refusal")
    assert refusal["status"].startswith(str(drain.PDB_REFUSED))
    assert re.search("disruption budget", refusal["message"])
    assert set(fact("host-config", "eviction-finished-pods-ignore-pdb")) == set(drain.FINISHED)


def test_the_spec_upgrade_policy_defaults_are_the_charts_and_reach_its_keys() -> None:
    from gpucluster import inventory
    from gpucluster.render import gpu_operator
    from gpucluster.spec.model import DriverUpgradePolicy

    def flat(d: dict, prefix: str = "") -> dict:
        out: dict = {}
        for k, v in d.items():
            out |= flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v}
        return out
    defaults = flat(DriverUpgradePolicy().model_dump(by_alias=True))
    assert defaults == fact("gpu-operator", "default-driver-upgrade-policy")
    spec = inventory.load(inventory.REPO_ROOT / "inventories" / "lab")
    policy = spec.gpu_operator.driver.upgrade_policy.model_copy(update={"max_parallel_upgrades": 3})
    spec.gpu_operator.driver.upgrade_policy = policy
    keys = fact("gpu-operator", "values-keys")
    values = gpu_operator.values(spec)["driver"]["upgradePolicy"]
    assert values["maxParallelUpgrades"] == 3
    assert all(f"driver.upgradePolicy.{k}" in keys for k in flat(values)), source("gpu-operator", "values-keys")


def test_the_doctor_finds_the_device_plugin_pods_the_operator_names() -> None:
    from gpucluster.doctor.diagnose import DEVICE_PLUGIN_POD

    assert DEVICE_PLUGIN_POD.rstrip("-") in fact("gpu-operator", "daemonsets"), source("gpu-operator", "daemonsets")
