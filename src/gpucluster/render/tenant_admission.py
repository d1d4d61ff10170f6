"""Admission policies for tenant namespaces: the limits quota cannot express, refused naming the tenant.

Quota bounds amounts; it cannot say *which* DeviceClass, PriorityClass or Volcano queue a tenant may
use, and its refusals name no tenant. ValidatingAdmissionPolicies (``admissionregistration.k8s.io/v1``,
GA since Kubernetes 1.30, admission plugin on by default; tests/upstream/facts/kubernetes.yaml) refuse,
in every namespace labelled ``gpucluster.dev/tenant``:

- a ResourceClaim or ResourceClaimTemplate asking for a DeviceClass outside the tenant's list
  (``exactly`` and every ``firstAvailable`` alternative), and a pod asking for another class's
  implicit extended resource ``deviceclass.resource.kubernetes.io/<class>``;
- a pod, Volcano Job or PodGroup naming a PriorityClass outside the tenant's list. A quota
  ``scopeSelector`` on PriorityClass could refuse such pods too, but only as "exceeded quota ...
  pods=0", naming neither class nor tenant, and it never sees the Volcano Job whose priority orders
  the queue before any pod exists;
- a pod picking one of the GPU Operator's NVIDIA runtime classes (``nvidia``, ``nvidia-cdi``,
  ``nvidia-legacy``): that runtime hands a container the GPUs its ``NVIDIA_VISIBLE_DEVICES`` names
  (CUDA images set ``all``), past the device plugin, DRA and every quota;
- with Volcano: a Job or PodGroup in another queue than the tenant's (the shared ``default`` queue
  included), and a pod whose queue annotation names one.

One policy per kind, so the API server type-checks every expression against that kind's schema
(``status.typeChecking`` stays empty; the tests assert it). The tenant's allowances live on its
Namespace (annotations :data:`~gpucluster.labels.ALLOWED_DEVICE_CLASSES`,
:data:`~gpucluster.labels.ALLOWED_PRIORITY_CLASSES`, Volcano's queue annotation), which tenants cannot
edit; a tenant namespace missing one fails closed (the policies' failurePolicy is Fail).

Claims, templates and pods are checked on CREATE only: their specs are immutable, and checking
updates would block finalizer removal on objects older than the policy.
"""

from __future__ import annotations

import copy

from gpucluster import labels as L
from gpucluster.render.common import Obj, cel_string, obj
from gpucluster.spec.model import ClusterSpec

API = "admissionregistration.k8s.io/v1"
#: Implicit extended resource of a DeviceClass (k8s.io/api v0.36.3 resource/v1/types.go:49).
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
#: The GPU Operator's RuntimeClasses all start with its default class name "nvidia" (gpu-operator v26.3.0
#: controllers/object_controls.go:82; nvidia-cdi and nvidia-legacy come with CDI, line 5144).
NVIDIA_RUNTIME_PREFIX = "nvidia"
PREFIX = "gpucluster-tenant-"


def _annotation(key: str) -> str:
    return f"namespaceObject.metadata.annotations[{cel_string(key)}]"


def _split(key: str) -> str:
    """A comma-separated Namespace annotation as a CEL list ([] when empty)."""
    return f"{_annotation(key)} == '' ? [] : {_annotation(key)}.split(',')"


TENANT = f"namespaceObject.metadata.labels[{cel_string(L.TENANT)}]"
COMMON_VARIABLES = [
    {"name": "tenant", "expression": TENANT},
    {"name": "allowedClasses", "expression": _split(L.ALLOWED_DEVICE_CLASSES)},
    {"name": "allowedPriorities", "expression": _split(L.ALLOWED_PRIORITY_CLASSES)},
]
CLASSES_TEXT = "(size(variables.allowedClasses) == 0 ? 'none' : variables.allowedClasses.join(', '))"
PRIORITIES_TEXT = "(size(variables.allowedPriorities) == 0 ? 'none' : variables.allowedPriorities.join(', '))"
CLASSES_RULE = "'tenant ' + variables.tenant + ' may claim devices of these DeviceClasses only: ' + " + CLASSES_TEXT
PRIORITIES_RULE = ("'tenant ' + variables.tenant + ' may use these PriorityClasses only (or none): ' + "
                   + PRIORITIES_TEXT)
QUEUE = _annotation(L.VOLCANO_QUEUE_NAME)


def _rule(group: str, version: str, resource: str, operations: list[str]) -> dict:
    return {"apiGroups": [group], "apiVersions": [version], "operations": operations,
            "resources": [resource], "scope": "Namespaced"}


def _denied_classes(requests: str) -> dict:
    """The ``deniedClasses`` variable: one entry per device request naming a class outside the list."""
    allowed = "variables.allowedClasses"
    return {"name": "deniedClasses", "expression":
            f"{requests}.filter(r, has(r.exactly) ? !(r.exactly.deviceClassName in {allowed}) : "
            f"(has(r.firstAvailable) && r.firstAvailable.exists(s, !(s.deviceClassName in {allowed}))))"
            f".map(r, has(r.exactly) ? r.exactly.deviceClassName : r.firstAvailable.filter(s, "
            f"!(s.deviceClassName in {allowed})).map(s, s.deviceClassName).join('/'))"}


def _classes_validation() -> dict:
    return {"expression": "size(variables.deniedClasses) == 0", "reason": "Forbidden",
            "message": "this tenant may not claim devices of that DeviceClass",
            "messageExpression": CLASSES_RULE + " + '; this ' + request.kind.kind + ' asks for ' + "
                                 "variables.deniedClasses.join(', ')"}


def _priority_validation(names: str) -> dict:
    return {"expression": f"{names}.all(p, p in variables.allowedPriorities)", "reason": "Forbidden",
            "message": "this tenant may not use that PriorityClass",
            "messageExpression": PRIORITIES_RULE + " + '; this ' + request.kind.kind + "
                                 f"' asks for ' + {names}.filter(p, !(p in variables.allowedPriorities)).join(', ')"}


def _queue_validation() -> dict:
    return {"expression": f"has(object.spec.queue) && object.spec.queue == {QUEUE}", "reason": "Forbidden",
            "message": "this tenant submits to its own Volcano queue only",
            "messageExpression": f"'tenant ' + variables.tenant + ' submits to its own Volcano queue only: set "
                                 f"spec.queue: ' + {QUEUE} + ' (this ' + request.kind.kind + ' names ' + "
                                 "(has(object.spec.queue) ? object.spec.queue : 'none') + ')'"}


def _implicit_ok(field: str) -> str:
    return (f"(!has(c.resources.{field}) || c.resources.{field}.all(k, !k.startsWith({cel_string(IMPLICIT_PREFIX)})"
            f" || k.substring({len(IMPLICIT_PREFIX)}) in variables.allowedClasses))")


def _pods(volcano: bool) -> tuple[list[dict], list[dict]]:
    variables = [{"name": "containers", "expression": "object.spec.containers + "
                  "(has(object.spec.initContainers) ? object.spec.initContainers : [])"},
                 {"name": "priorities", "expression": "has(object.spec.priorityClassName) ? "
                  "[object.spec.priorityClassName] : []"}]
    validations = [
        {"expression": "variables.containers.all(c, !has(c.resources) || ("
                       + _implicit_ok("requests") + " && " + _implicit_ok("limits") + "))",
         "reason": "Forbidden", "message": "this tenant may not claim devices of that DeviceClass",
         "messageExpression": CLASSES_RULE + f" + '; a container asks for another class through "
                              f"{IMPLICIT_PREFIX}<class>'"},
        _priority_validation("variables.priorities"),
        {"expression": "!has(object.spec.runtimeClassName) || "
                       f"!object.spec.runtimeClassName.startsWith({cel_string(NVIDIA_RUNTIME_PREFIX)})",
         "reason": "Forbidden",
         "message": "tenant pods may not use an NVIDIA runtime class: it hands a container the GPUs its "
                    "NVIDIA_VISIBLE_DEVICES names, outside quota; request GPUs as resources or ResourceClaims"},
    ]
    if volcano:
        key = cel_string(L.VOLCANO_QUEUE_NAME)
        validations.append(
            {"expression": f"!has(object.metadata.annotations) || !({key} in object.metadata.annotations) || "
                           f"object.metadata.annotations[{key}] == {QUEUE}", "reason": "Forbidden",
             "message": "this tenant submits to its own Volcano queue only",
             "messageExpression": f"'tenant ' + variables.tenant + ' submits to its own Volcano queue only: "
                                  f"annotate {L.VOLCANO_QUEUE_NAME}: ' + {QUEUE}"})
    return variables, validations


def _policies(spec: ClusterSpec) -> list[tuple[str, dict, list[dict], list[dict]]]:
    """(name suffix, resource rule, variables, validations) of every policy."""
    pod_vars, pod_checks = _pods(spec.scheduling.volcano.enabled)
    out = [
        ("pods", _rule("", "v1", "pods", ["CREATE"]), pod_vars, pod_checks),
        ("resourceclaims", _rule("resource.k8s.io", "v1", "resourceclaims", ["CREATE"]),
         [_denied_classes("(has(object.spec.devices) && has(object.spec.devices.requests) ? "
                          "object.spec.devices.requests : [])")],
         [_classes_validation()]),
        ("resourceclaimtemplates", _rule("resource.k8s.io", "v1", "resourceclaimtemplates", ["CREATE"]),
         [_denied_classes("(has(object.spec.spec) && has(object.spec.spec.devices) && "
                          "has(object.spec.spec.devices.requests) ? object.spec.spec.devices.requests : [])")],
         [_classes_validation()]),
    ]
    if spec.scheduling.volcano.enabled:
        job_priorities = ("(has(object.spec.priorityClassName) ? [object.spec.priorityClassName] : []) + "
                          "(has(object.spec.tasks) ? object.spec.tasks.filter(t, has(t.template) && "
                          "has(t.template.spec) && has(t.template.spec.priorityClassName))"
                          ".map(t, t.template.spec.priorityClassName) : [])")
        # Volcano Jobs are the tenant's own (CREATE, UPDATE); PodGroups come from vc-controller, made
        # from Jobs and pods (CREATE): the backstop for any route into another queue.
        out += [
            ("volcano-jobs", _rule("batch.volcano.sh", "v1alpha1", "jobs", ["CREATE", "UPDATE"]),
             [{"name": "priorities", "expression": job_priorities}],
             [_queue_validation(), _priority_validation("variables.priorities")]),
            ("podgroups", _rule("scheduling.volcano.sh", "v1beta1", "podgroups", ["CREATE"]),
             [{"name": "priorities", "expression": "has(object.spec.priorityClassName) ? "
               "[object.spec.priorityClassName] : []"}],
             [_queue_validation(), _priority_validation("variables.priorities")]),
        ]
    return out


def objects(spec: ClusterSpec) -> list[Obj]:
    """Every policy and its binding, each defaulted field written out so verify compares exactly."""
    if not spec.tenants:
        return []
    out: list[Obj] = []
    for suffix, rule, variables, validations in _policies(spec):
        name = PREFIX + suffix
        out.append(obj(API, "ValidatingAdmissionPolicy", name, spec={
            "failurePolicy": "Fail",
            "matchConstraints": {
                "matchPolicy": "Equivalent",  # requests through other API versions are converted and checked
                "namespaceSelector": {"matchExpressions": [{"key": L.TENANT, "operator": "Exists"}]},
                "objectSelector": {},
                "resourceRules": [rule],
            },
            "variables": copy.deepcopy(COMMON_VARIABLES) + variables,
            "validations": validations,
        }))
        out.append(obj(API, "ValidatingAdmissionPolicyBinding", name,
                       spec={"policyName": name, "validationActions": ["Deny"]}))
    return out


def namespace_annotations(spec: ClusterSpec, allowed_classes: list[str], priorities: list[str],
                          queue: str) -> dict[str, str]:
    """The annotations a tenant Namespace carries for the policies (and Volcano's PodGroup webhook)."""
    out = {L.ALLOWED_DEVICE_CLASSES: ",".join(sorted(allowed_classes)),
           L.ALLOWED_PRIORITY_CLASSES: ",".join(sorted(priorities))}
    if spec.scheduling.volcano.enabled:
        # Volcano's PodGroup webhook also moves a PodGroup naming the default queue into this one
        # (volcano v1.15.1 pkg/webhooks/admission/podgroups/mutate/mutate_podgroup.go:105).
        out[L.VOLCANO_QUEUE_NAME] = queue
    return out
