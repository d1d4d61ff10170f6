"""kwok's configuration and the Stages that make kwok act as every node's kubelet.

kwok exits with "no stages found" without Stages. Ours: a node becomes Ready (keeping whatever
capacity/allocatable the GPU simulator published) and keeps heart-beating; a pod bound to a kwok node
becomes Running and Ready; a deleted pod goes away. A node annotated with :data:`NOT_READY_ANNOTATION`
is turned NotReady and left so (the simulator's "node NotReady" fault), until the annotation goes.
Built as Python data and serialized with PyYAML; the ``statusTemplate`` strings are kwok's
Go-template language, not YAML templating.
"""

from __future__ import annotations

from typing import Any

import yaml

from gpucluster import labels as L

STAGE_API = "kwok.x-k8s.io/v1alpha1"
CONFIG_API = "config.kwok.x-k8s.io/v1alpha1"
#: Nodes kwok manages carry this annotation (value ``fake``); everything else it ignores.
MANAGE_ANNOTATION = L.KWOK_NODE
MANAGE_SELECTOR = f"{MANAGE_ANNOTATION}=fake"
#: Set to "true" on a kwok node to make (and keep) it NotReady.
NOT_READY_ANNOTATION = L.FAULT_NOT_READY
#: Node lease duration kwok sets; the controller manager's grace period is derived from it.
NODE_LEASE_SECONDS = 120

_READY_STATUS = '.status.conditions.[] | select( .type == "Ready" ) | .status'
_NOT_READY_KEY = f'.metadata.annotations["{NOT_READY_ANNOTATION}"]'


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def _stage(name: str, kind: str, exprs: list[dict[str, Any]], nxt: dict[str, Any], **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": kind},
        "selector": {"matchExpressions": exprs},
    }
    spec.update(extra)
    spec["next"] = nxt
    return {"apiVersion": STAGE_API, "kind": "Stage", "metadata": {"name": name}, "spec": spec}


def _conditions(ready: bool) -> str:
    """Template lines for the node conditions (kwok's NodeConditions, or one failed Ready)."""
    head = "{{ $now := Now }}\n{{ $since := or .metadata.creationTimestamp $now }}\nconditions:\n"
    if not ready:
        return head + (
            '- type: Ready\n  status: "False"\n  reason: SimulatedNotReady\n'
            f'  message: "annotation {NOT_READY_ANNOTATION} is set"\n'
            "  lastHeartbeatTime: {{ $now | Quote }}\n  lastTransitionTime: {{ $now | Quote }}\n"
        )
    return head + (
        "{{ range NodeConditions }}\n"
        "- type: {{ .type | Quote }}\n  status: {{ .status | Quote }}\n"
        "  reason: {{ .reason | Quote }}\n  message: {{ .message | Quote }}\n"
        "  lastHeartbeatTime: {{ $now | Quote }}\n  lastTransitionTime: {{ $since | Quote }}\n"
        "{{ end }}\n"
    )


# Capacity/allocatable keep what is there (the simulator's GPUs); defaults only for a bare node.
_NODE_STATUS = """
{{ $kwok := printf "kwok-%s" Version }}
{{ $status := or .status dict }}
addresses:
{{ with NodeIP }}
- type: InternalIP
  address: {{ . | Quote }}
{{ end }}
- type: Hostname
  address: {{ .metadata.name | Quote }}
{{ range $field := list "capacity" "allocatable" }}
{{ $field }}:
{{ with index $status $field }}
{{ YAML . 1 }}
{{ else }}
  cpu: "64"
  memory: 512Gi
  pods: "110"
{{ end }}
{{ end }}
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: {{ $kwok }}
  kubeProxyVersion: {{ $kwok }}
  kernelVersion: {{ $kwok }}
  containerRuntimeVersion: {{ $kwok }}
  osImage: gpucluster simulated node
  machineID: ""
  bootID: ""
  systemUUID: ""
phase: Running
"""

_POD_RUNNING = """
{{ $now := Now }}
conditions:
{{ range list "Initialized" "PodScheduled" "ContainersReady" "Ready" }}
- type: {{ . }}
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
{{ with NodeIPsWith .spec.nodeName }}
hostIP: {{ index . 0 | Quote }}
{{ end }}
{{ $m := .metadata }}
{{ $hostNet := or .spec.hostNetwork false }}
{{ with PodIPsWith .spec.nodeName $hostNet (or $m.uid "") (or $m.name "") (or $m.namespace "") }}
podIP: {{ index . 0 | Quote }}
podIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
"""


def stages() -> list[dict[str, Any]]:
    """The Stage objects, in the order kwok should consider them."""
    not_ready = [_expr(_READY_STATUS, "NotIn", "True"), _expr(_NOT_READY_KEY, "DoesNotExist")]
    heartbeat = [
        _expr(".status.phase", "In", "Running"),
        _expr(_READY_STATUS, "In", "True"),
        _expr(_NOT_READY_KEY, "DoesNotExist"),
    ]
    faulty = [_expr(_NOT_READY_KEY, "In", "true"), _expr(_READY_STATUS, "In", "True")]
    pod_pending = [
        _expr(".metadata.deletionTimestamp", "DoesNotExist"),
        _expr(".status.phase", "In", "Pending"),
    ]
    return [
        _stage("gpucluster-node-ready", "Node", not_ready, {"statusTemplate": _conditions(True) + _NODE_STATUS}),
        # With node leases on, status heart-beats are rare (like a kubelet's 5-minute report).
        _stage(
            "gpucluster-node-heartbeat",
            "Node",
            heartbeat,
            {"statusTemplate": _conditions(True)},
            delay={"durationMilliseconds": 240_000, "jitterDurationMilliseconds": 300_000},
            immediateNextStage=True,
        ),
        _stage("gpucluster-node-not-ready", "Node", faulty, {"statusTemplate": _conditions(False)}),
        _stage("gpucluster-pod-running", "Pod", pod_pending, {"statusTemplate": _POD_RUNNING}),
        _stage("gpucluster-pod-delete", "Pod", [_expr(".metadata.deletionTimestamp", "Exists")], {"delete": True}),
    ]


def kwok_configuration(pod_cidr: str) -> dict[str, Any]:
    """kwok's own options: a pod IP range, node leases for liveness, no profiling handlers.

    kwok v0.8.0 applies its defaults only when no KwokConfiguration is given, so every option it
    needs is spelled out (a zero parallelism makes it exit).
    """
    return {
        "apiVersion": CONFIG_API,
        "kind": "KwokConfiguration",
        "options": {
            "cidr": pod_cidr,
            "nodeIP": "10.255.0.1",
            "manageAllNodes": False,
            "manageNodesWithAnnotationSelector": MANAGE_SELECTOR,
            # Renewed every quarter of this (30 s): 1,000 nodes cost ~33 writes/s, not the
            # ~100/s of the kubelet's 40 s, which two cores cannot spare.
            "nodeLeaseDurationSeconds": NODE_LEASE_SECONDS,
            "nodeLeaseParallelism": 8,
            "nodePlayStageParallelism": 8,
            "podPlayStageParallelism": 8,
            "podsOnNodeSyncParallelism": 2,
            "enablePodsOnNodeSyncListPager": True,
            "enablePodsOnNodeSyncStreamWatch": False,
            "enableDebuggingHandlers": True,
            "enableContentionProfiling": False,
            "enableProfilingHandler": False,
        },
    }


def config_text(pod_cidr: str) -> str:
    """The multi-document file passed to ``kwok --config``."""
    return yaml.safe_dump_all([kwok_configuration(pod_cidr), *stages()], sort_keys=False)
