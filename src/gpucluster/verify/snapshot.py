"""A snapshot of the cluster state verification needs, fetched with a handful of LIST calls.

Responses are read as raw JSON (``_preload_content=False``): building the client's model objects
for thousands of nodes costs more than the LIST itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gpucluster.errors import GpuclusterError

Obj = dict[str, Any]


class ClusterUnreachable(GpuclusterError):
    exit_code = 2


@dataclass
class Snapshot:
    nodes: list[Obj] = field(default_factory=list)
    resource_slices: list[Obj] | None = None  # None: the API does not serve resource.k8s.io/v1
    device_classes: list[Obj] | None = None
    daemonsets: list[Obj] = field(default_factory=list)
    quotas: list[Obj] = field(default_factory=list)
    limit_ranges: list[Obj] = field(default_factory=list)
    queues: list[Obj] | None = None  # None: Volcano CRDs absent
    prometheus_rules: list[Obj] | None = None  # None: prometheus-operator CRDs absent
    namespaces: list[Obj] = field(default_factory=list)
    network_policies: list[Obj] = field(default_factory=list)
    priority_classes: list[Obj] = field(default_factory=list)
    calls: int = 0


def _items(api_client: Any, path: str) -> list[Obj] | None:
    from kubernetes.client.exceptions import ApiException

    try:
        resp = api_client.call_api(path, "GET", query_params=[("limit", "0")], auth_settings=["BearerToken"],
                                   _preload_content=False, _return_http_data_only=True)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return json.loads(resp.data)["items"]


def fetch(kubeconfig: str | None = None, context: str | None = None) -> Snapshot:
    """One LIST each: nodes, ResourceSlices, DeviceClasses, DaemonSets, quotas, limit ranges, Volcano
    queues, PrometheusRules, namespaces, NetworkPolicies, PriorityClasses (11 calls in all)."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        api = config.new_client_from_config(config_file=kubeconfig, context=context)
    except (config.ConfigException, FileNotFoundError, TypeError) as err:
        raise ClusterUnreachable(f"cannot load kubeconfig {kubeconfig or '(default)'}: {err}") from None
    api.configuration.retries = 1
    snap = Snapshot()
    paths = {
        "nodes": "/api/v1/nodes",
        "resource_slices": "/apis/resource.k8s.io/v1/resourceslices",
        "device_classes": "/apis/resource.k8s.io/v1/deviceclasses",
        "daemonsets": "/apis/apps/v1/daemonsets",
        "quotas": "/api/v1/resourcequotas",
        "limit_ranges": "/api/v1/limitranges",
        "queues": "/apis/scheduling.volcano.sh/v1beta1/queues",
        "prometheus_rules": "/apis/monitoring.coreos.com/v1/prometheusrules",
        "namespaces": "/api/v1/namespaces",
        "network_policies": "/apis/networking.k8s.io/v1/networkpolicies",
        "priority_classes": "/apis/scheduling.k8s.io/v1/priorityclasses",
    }
    try:
        for attr, path in paths.items():
            items = _items(api, path)
            snap.calls += 1
            if items is None and attr in ("nodes", "daemonsets", "quotas", "limit_ranges", "namespaces"):
                raise ClusterUnreachable(f"{path} is not served; is this a Kubernetes API server?")
            setattr(snap, attr, items)
    except ApiException as err:
        raise ClusterUnreachable(f"the API server refused a LIST ({err.status} {err.reason}); "
                                 "verification needs read access to nodes, DRA, quotas and CRs") from None
    except (HTTPError, OSError) as err:
        raise ClusterUnreachable(f"cannot reach the API server: {err}") from None
    finally:
        api.close()
    del client
    return snap
