"""A snapshot of the cluster state verification needs, fetched with a handful of LIST calls.

Responses are read as raw JSON through the client's REST layer: building the client's model objects
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


def _get(api: Any, host: str, path: str) -> tuple[int, bytes]:
    """One GET through the client's connection pool (TLS and auth from the kubeconfig), raw bytes back."""
    headers = {"Accept": "application/json"}
    headers.update(api.default_headers)
    # Token-based kubeconfigs (cloud providers, service accounts) authenticate by header; client
    # certificates are already in the connection pool's TLS settings.
    api.update_params_for_auth(headers, [], ["BearerToken"], path, "GET", None)
    resp = api.rest_client.request("GET", host + path, headers=headers, _request_timeout=60)
    return resp.status, resp.read()


def _items(api: Any, host: str, path: str) -> list[Obj] | None:
    status, data = _get(api, host, path)
    if status == 404:
        return None
    if status != 200:
        try:
            message = json.loads(data).get("message", "")
        except ValueError:
            message = data[:200].decode(errors="replace")
        raise ClusterUnreachable(f"the API server refused GET {path} (HTTP {status}: {message}); verification "
                                 "needs read access to nodes, DRA objects, quotas and the operators' CRs")
    return json.loads(data)["items"]


def fetch(kubeconfig: str | None = None, context: str | None = None) -> Snapshot:
    """One LIST each: nodes, ResourceSlices, DeviceClasses, DaemonSets, quotas, limit ranges, Volcano
    queues, PrometheusRules, namespaces, NetworkPolicies, PriorityClasses (11 calls in all)."""
    from kubernetes import client, config
    from urllib3.exceptions import HTTPError

    cfg = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    except (config.ConfigException, FileNotFoundError, TypeError, ValueError) as err:
        raise ClusterUnreachable(f"cannot load kubeconfig {kubeconfig or '(default)'}: {err}") from None
    cfg.retries = 1
    api = client.ApiClient(cfg)
    host = cfg.host.rstrip("/")
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
            items = _items(api, host, path)
            snap.calls += 1
            if items is None and attr in ("nodes", "daemonsets", "quotas", "limit_ranges", "namespaces"):
                raise ClusterUnreachable(f"{path} is not served; is this a Kubernetes API server?")
            setattr(snap, attr, items)
    except (HTTPError, OSError) as err:
        raise ClusterUnreachable(f"cannot reach the API server at {host}: {err}") from None
    finally:
        api.close()
    return snap
