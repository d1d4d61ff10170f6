"""The upstream tier covers every kind we render: each has a test that proves it against upstream.

"Against upstream" is one of: the real API server's strict server-side validation (core kinds and
DRA), the real operator or scheduler acting on it (PrometheusRule, ServiceMonitor, Queue, HyperNode), upstream
code judging it (the device-plugin ConfigMap through nvidia-oracle, dashboard queries through
promtool), or cited facts for what no proxy-served code can run (NicClusterPolicy, IPPool,
NetworkAttachmentDefinition, the mig-parted and DCGM ConfigMaps). A new kind fails this test until
a proof is added here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpucluster.render import render
from gpucluster.spec.model import ClusterSpec

REPO = Path(__file__).resolve().parents[2]
APPLY = "tests/integration/test_scheduling_live.py::test_rendered_bundle_applies_server_side_and_is_validated"
STACKS = "tests/integration/test_stacks.py::test_cold_up_creates_every_non_chart_object"
ESCAPE = "tests/integration/test_tenant_escape.py::test_escape_route_is_refused"

#: (kind, ConfigMap name or "") -> tests that prove it against upstream.
PROOFS: dict[tuple[str, str], list[str]] = {
    ("Namespace", ""): [APPLY, STACKS],
    ("ResourceQuota", ""): [
        APPLY,
        ESCAPE,
        "tests/integration/test_stacks.py::test_pods_beyond_the_gpu_quota_are_rejected",
    ],
    ("LimitRange", ""): [APPLY, STACKS],
    ("Role", ""): [APPLY, "tests/integration/test_tenant_escape.py::test_changing_what_bounds_the_tenant_is_refused"],
    ("RoleBinding", ""): [APPLY, "tests/integration/test_tenant_escape.py::test_allowed_use_still_works"],
    ("NetworkPolicy", ""): [APPLY, STACKS],
    ("PriorityClass", ""): [APPLY, "tests/integration/test_volcano.py::test_online_inference_preempts_batch_when_full"],
    ("ValidatingAdmissionPolicy", ""): [
        "tests/integration/test_tenant_escape.py::test_admission_policies_type_check_against_the_served_schemas",
        ESCAPE,
    ],
    ("ValidatingAdmissionPolicyBinding", ""): [
        "tests/integration/test_tenant_escape.py::test_live_policies_equal_the_rendered_ones",
        ESCAPE,
    ],
    ("DeviceClass", ""): [
        APPLY,
        "tests/integration/test_scheduling_live.py::test_claim_for_80gb_gets_an_80gb_device_never_an_l4",
    ],
    ("ResourceClaimTemplate", ""): [APPLY, "tests/integration/test_tenant_escape.py::test_allowed_use_still_works"],
    ("HyperNode", ""): [
        APPLY,
        "tests/integration/test_topology_live.py::test_hard_leaf_gang_waits_while_no_leaf_has_room_then_lands_in_one_leaf",
        "tests/integration/test_topology_live.py::test_same_gang_allowed_the_spine_takes_gpus_split_over_two_leaves",
    ],
    ("Queue", ""): [
        "tests/integration/test_volcano.py::test_rendered_volcano_objects_apply_server_side",
        "tests/integration/test_volcano.py::test_queue_capability_caps_a_tenant_while_others_run",
    ],
    ("PrometheusRule", ""): [
        "tests/integration/test_alerts_live.py::test_xid_and_idle_gpu_alerts_fire_with_the_tenant_pods_labels"
    ],
    ("ServiceMonitor", ""): [
        "tests/integration/test_alerts_live.py::test_the_tenant_pods_gpu_reaches_prometheus_with_the_tenants_labels",
        "tests/upstream/test_monitoring_upstream.py::test_our_service_monitor_is_not_the_one_the_operator_deletes",
    ],
    ("NicClusterPolicy", ""): [
        "tests/upstream/test_network_upstream.py::test_nic_cluster_policy_identity_and_keys",
        "tests/upstream/test_network_upstream.py::test_rdma_config_schema",
    ],
    ("IPPool", ""): ["tests/upstream/test_network_upstream.py::test_ip_pools_match_nv_ipam"],
    ("NetworkAttachmentDefinition", ""): [
        "tests/upstream/test_network_upstream.py::test_network_attachments_match_multus_and_the_cni_plugins"
    ],
    ("ConfigMap", "gpucluster-device-plugin-config"): [
        "tests/upstream/test_device_plugin_upstream.py::test_every_rendered_config_starts_both_agents_strictly",
        "tests/upstream/test_expected_upstream.py::test_expected_labels_and_resources_are_what_upstream_publishes",
    ],
    ("ConfigMap", "gpucluster-mig-parted-config"): [
        "tests/upstream/test_gpu_operator_upstream.py::test_mig_parted_config_has_upstreams_schema",
        "tests/unit/simulator/test_mig_manager.py::test_configs_mig_parted_refuses",
    ],
    ("ConfigMap", "gpucluster-gpu-dashboard"): [
        "tests/promtool/test_promtool_rules.py::test_dashboard_queries_are_valid_promql",
        "tests/upstream/test_monitoring_upstream.py::test_no_rule_or_panel_reads_gpu_util_which_mig_instances_do_not_report",
    ],
    ("ClusterRole", ""): [
        "tests/upstream/test_monitoring_upstream.py::"
        "test_dra_pools_get_the_exporters_dra_attribution_configured_as_upstream_needs_it",
    ],
    ("ClusterRoleBinding", ""): [
        "tests/upstream/test_monitoring_upstream.py::"
        "test_dra_pools_get_the_exporters_dra_attribution_configured_as_upstream_needs_it",
    ],
    ("ConfigMap", "gpucluster-dcgm-metrics"): [
        "tests/upstream/test_gpu_operator_upstream.py::test_dcgm_metrics_configmap_key_is_the_one_the_operator_mounts",
        "tests/upstream/test_monitoring_upstream.py::test_csv_help_texts_and_types_are_the_exporters",
    ],
}


def rendered_kinds(spec: ClusterSpec) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"] if o["kind"] == "ConfigMap" else "") for o in render(spec).objects()}


@pytest.mark.parametrize("inventory", ["local", "lab"])
def test_every_rendered_kind_has_an_upstream_proof(inventory: str, request) -> None:
    spec = request.getfixturevalue(f"{inventory}_spec")
    assert sorted(rendered_kinds(spec) - set(PROOFS)) == []


def test_every_proof_names_a_real_test() -> None:
    missing = []
    for kind, refs in PROOFS.items():
        assert refs, kind
        for ref in refs:
            path, _, name = ref.partition("::")
            file = REPO / path
            if not file.is_file() or not re.search(rf"^def {re.escape(name)}\(", file.read_text(), re.M):
                missing.append(f"{kind}: {ref}")
    assert missing == []
