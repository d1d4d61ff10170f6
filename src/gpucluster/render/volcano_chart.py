"""What Volcano's Helm chart makes of our values: the daemons' arguments, the admission webhooks, the scheduler's conf.

The chart (``installer/helm/chart/volcano`` of ``volcano.sh/volcano``: v1.15.1 is what real clusters
install, v1.14.1 what the local world builds its daemons from) turns the values the render core sets
(:func:`gpucluster.render.volcano.values`) into three Deployments and the webhook configurations. This
module writes that mapping down once, per chart version; the local world starts ``vc-scheduler``,
``vc-controller-manager`` and ``vc-webhook-manager`` from it (:mod:`gpucluster.addons.volcano`), and
``tests/upstream/test_volcano_chart_upstream.py`` renders the real chart of both versions with ``helm
template`` and compares every argument, webhook configuration and the scheduler's configuration.

Each function follows one template of the chart (``templates/scheduler.yaml``, ``controllers.yaml``,
``admission.yaml``, ``webhooks.yaml``): a flag is there when the template's ``if`` is true for the value
(Go templates: ``false``, ``0``, ``""`` and null are false), with the value printed as Go prints it. The
chart's literal last argument ``2>&1`` is kept: a container runtime passes it to the binary as one more
positional argument, which the daemons ignore.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

#: Chart versions this mapping knows, by the Volcano release whose module carries the chart.
VERSIONS = ("1.14.1", "1.15.1")

#: The chart's default ``custom.enabled_admissions`` (the same in both versions): no ``/podgroups/mutate``.
ENABLED_ADMISSIONS = ("/jobs/mutate,/jobs/validate,/podgroups/validate,/queues/mutate,/queues/validate,"
                      "/hypernodes/validate,/cronjobs/validate")

#: The chart's defaults (``values.yaml``) for every key the daemon and webhook templates read, per version.
#: v1.15.1 adds ``controller_enabled_controllers``, ``scheduler_percentage_nodes_to_find``,
#: ``admission_feature_gates`` and ``sharding_configmap_enable`` (true: the controller manager gets the
#: sharding ConfigMap's name); every other default is the same in both.
_COMMON_DEFAULTS: dict[str, dict[str, Any]] = {
    "basic": {
        "admission_secret_name": "volcano-admission-secret",
        "admission_config_file": "config/volcano-admission.conf",
        "scheduler_config_file": "config/volcano-scheduler.conf",
        "admission_port": 8443,
    },
    "custom": {
        "admission_enable": True,
        "controller_enable": True,
        "controller_metrics_enable": True,
        "scheduler_enable": True,
        "scheduler_metrics_enable": True,
        "scheduler_pprof_enable": False,
        "scheduler_plugins_dir": "",
        "scheduler_name": None,
        "leader_elect_enable": False,
        "controller_kube_api_qps": 50,
        "controller_kube_api_burst": 100,
        "controller_worker_threads": 3,
        "controller_worker_threads_for_gc": 5,
        "controller_worker_threads_for_podgroup": 5,
        "scheduler_kube_api_qps": 2000,
        "scheduler_kube_api_burst": 2000,
        "scheduler_schedule_period": "1s",
        "scheduler_node_worker_threads": 20,
        "enabled_admissions": ENABLED_ADMISSIONS,
        "ignored_provisioners": None,
        "admission_config_override": None,
        "scheduler_config_override": None,
        "webhooks_namespace_selector_expressions": None,
        "admission_log_level": 4,
        "scheduler_log_level": 3,
        "controller_log_level": 4,
        "scheduler_feature_gates": None,
        "scheduler_sharding_mode": None,
    },
}
_ADDED_IN_1_15: dict[str, Any] = {
    "controller_enabled_controllers": None,
    "scheduler_percentage_nodes_to_find": None,
    "admission_feature_gates": None,
    "sharding_configmap_enable": True,
}


def defaults(version: str) -> dict[str, dict[str, Any]]:
    """The chart's defaults (of the keys this module reads) at chart ``version``."""
    _known(version)
    out = copy.deepcopy(_COMMON_DEFAULTS)
    if version != "1.14.1":
        out["custom"].update(_ADDED_IN_1_15)
    return out


def _known(version: str) -> None:
    if version not in VERSIONS:
        raise ValueError(f"no mapping for Volcano chart {version} (known: {', '.join(VERSIONS)})")


def merged(values: dict[str, Any], version: str) -> dict[str, dict[str, Any]]:
    """``values`` over the chart's defaults (Helm merges maps key by key; a value replaces a default)."""
    out = defaults(version)
    for section in ("basic", "custom"):
        out[section].update(values.get(section) or {})
    return out


def _go(value: Any) -> str:
    """A value as Go's template engine prints it (booleans lower case; whole floats without a point)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Release:
    """Where the chart is installed: the Helm release name and namespace."""

    name: str
    namespace: str


#: Where each template mounts what its daemon reads (the chart's volumeMounts).
SCHEDULER_CONF_DIR = "/volcano.scheduler"
ADMISSION_CERTS_DIR = "/admission.local.config/certificates"
ADMISSION_CONF_DIR = "/admission.local.config/configmap"


def scheduler_args(values: dict[str, Any], release: Release, version: str) -> list[str]:
    """``vc-scheduler``'s container args (``templates/scheduler.yaml``); [] when the chart runs no scheduler."""
    v = merged(values, version)
    b, c = v["basic"], v["custom"]
    if not c["scheduler_enable"]:
        return []
    out = ["--logtostderr", f"--scheduler-conf={SCHEDULER_CONF_DIR}/{_base(b['scheduler_config_file'])}"]
    if c["scheduler_name"]:
        out.append(f"--scheduler-name={_go(c['scheduler_name'])}")
    out.append("--enable-healthz=true")
    if c["scheduler_metrics_enable"]:
        out.append("--enable-metrics=true")
    if c["scheduler_pprof_enable"]:
        out.append("--enable-pprof=true")
    out.append(f"--leader-elect={_go(c['leader_elect_enable'])}")
    if c["leader_elect_enable"]:
        out.append(f"--leader-elect-resource-namespace={release.namespace}")
    for key, flag in (("scheduler_kube_api_qps", "kube-api-qps"), ("scheduler_kube_api_burst", "kube-api-burst"),
                      ("scheduler_schedule_period", "schedule-period"),
                      ("scheduler_node_worker_threads", "node-worker-threads")):
        if c[key]:
            out.append(f"--{flag}={_go(c[key])}")
    # v1.15.1: `ne ... nil`, so an explicit 0 is passed
    if version != "1.14.1" and c["scheduler_percentage_nodes_to_find"] is not None:
        out.append(f"--percentage-nodes-to-find={_go(c['scheduler_percentage_nodes_to_find'])}")
    for key, flag in (("scheduler_plugins_dir", "plugins-dir"), ("scheduler_feature_gates", "feature-gates"),
                      ("ignored_provisioners", "ignored-provisioners"),
                      ("scheduler_sharding_mode", "scheduler-sharding-mode")):
        if c[key]:
            out.append(f"--{flag}={_go(c[key])}")
    return [*out, f"-v={_go(c['scheduler_log_level'])}", "2>&1"]


def controller_args(values: dict[str, Any], release: Release, version: str) -> list[str]:
    """``vc-controller-manager``'s container args (``templates/controllers.yaml``); [] when it is off."""
    v = merged(values, version)
    c = v["custom"]
    if not c["controller_enable"]:
        return []
    out = ["--logtostderr", "--enable-healthz=true"]
    if c["controller_metrics_enable"]:
        out.append("--enable-metrics=true")
    out.append(f"--leader-elect={_go(c['leader_elect_enable'])}")
    if c["scheduler_name"]:
        out.append(f"--scheduler-name={_go(c['scheduler_name'])}")
    if c["leader_elect_enable"]:
        out.append(f"--leader-elect-resource-namespace={release.namespace}")
    for key, flag in (("controller_kube_api_qps", "kube-api-qps"), ("controller_kube_api_burst", "kube-api-burst"),
                      ("controller_worker_threads", "worker-threads"),
                      ("controller_worker_threads_for_gc", "worker-threads-for-gc"),
                      ("controller_worker_threads_for_podgroup", "worker-threads-for-podgroup")):
        if c[key]:
            out.append(f"--{flag}={_go(c[key])}")
    if version != "1.14.1":
        if c["sharding_configmap_enable"]:
            out += [f"--sharding-configmap={release.name}-sharding-configmap",
                    f"--sharding-configmap-namespace={release.namespace}"]
        if c["controller_enabled_controllers"]:
            out.append(f"--controllers={_go(c['controller_enabled_controllers'])}")
    return [*out, f"-v={_go(c['controller_log_level'])}", "2>&1"]


def admission_args(values: dict[str, Any], release: Release, version: str) -> list[str]:
    """``vc-webhook-manager``'s container args (``templates/admission.yaml``); [] when admission is off."""
    v = merged(values, version)
    b, c = v["basic"], v["custom"]
    if not c["admission_enable"]:
        return []
    out = [
        f"--enabled-admission={_go(c['enabled_admissions'])}",
        f"--tls-cert-file={ADMISSION_CERTS_DIR}/tls.crt",
        f"--tls-private-key-file={ADMISSION_CERTS_DIR}/tls.key",
        f"--ca-cert-file={ADMISSION_CERTS_DIR}/ca.crt",
        f"--admission-conf={ADMISSION_CONF_DIR}/{_base(b['admission_config_file'])}",
        f"--webhook-namespace={release.namespace}",
        f"--webhook-service-name={service_name(release)}",
    ]
    if c["scheduler_name"]:
        out.append(f"--scheduler-name={_go(c['scheduler_name'])}")
    if version != "1.14.1" and c["admission_feature_gates"]:
        out.append(f"--feature-gates={_go(c['admission_feature_gates'])}")
    return [*out, "--enable-healthz=true", "--logtostderr", f"--port={_go(b['admission_port'])}",
            f"-v={_go(c['admission_log_level'])}", "2>&1"]


def service_name(release: Release) -> str:
    """The admission Service the webhook configurations point at."""
    return f"{release.name}-admission-service"


def scheduler_conf(values: dict[str, Any]) -> str | None:
    """The ``volcano-scheduler.conf`` the chart's ConfigMap carries: our override, or None for the chart's file."""
    return (values.get("custom") or {}).get("scheduler_config_override") or None


def admission_conf(values: dict[str, Any]) -> str:
    """The ``volcano-admission.conf`` the chart's admission ConfigMap carries: our override, else the
    chart's file, whose every line is a comment (no resource groups): empty."""
    return str((values.get("custom") or {}).get("admission_config_override") or "")


# -- admission webhooks (templates/webhooks.yaml) ---------------------------------------------------
@dataclass(frozen=True)
class Webhook:
    """One admission the chart can register: the configuration it renders when its path is enabled."""

    path: str
    mutating: bool
    webhook: str  # the webhook's name inside the configuration
    group: str
    version: str
    resource: str
    operations: tuple[str, ...]
    #: False for cluster-scoped HyperNodes: no namespace/object selector, no scope, sideEffects None.
    namespaced: bool = True

    @property
    def configuration(self) -> str:
        """The configuration's name; the webhook manager looks it up by this name to add its CA bundle
        (``volcano-admission-service`` + the path with ``/`` as ``-``, cmd/webhook-manager/app/util.go)."""
        return "volcano-admission-service" + self.path.replace("/", "-")


#: In the template's order. ``/jobflows/validate``'s webhook name repeats the Job one's, as upstream's does.
WEBHOOKS: tuple[Webhook, ...] = (
    Webhook("/pods/mutate", True, "mutatepod.volcano.sh", "", "v1", "pods", ("CREATE",)),
    Webhook("/queues/mutate", True, "mutatequeue.volcano.sh", "scheduling.volcano.sh", "v1beta1", "queues",
            ("CREATE",)),
    Webhook("/podgroups/mutate", True, "mutatepodgroup.volcano.sh", "scheduling.volcano.sh", "v1beta1",
            "podgroups", ("CREATE",)),
    Webhook("/jobs/mutate", True, "mutatejob.volcano.sh", "batch.volcano.sh", "v1alpha1", "jobs", ("CREATE",)),
    Webhook("/jobs/validate", False, "validatejob.volcano.sh", "batch.volcano.sh", "v1alpha1", "jobs",
            ("CREATE", "UPDATE")),
    Webhook("/jobflows/validate", False, "validatejob.volcano.sh", "flow.volcano.sh", "v1alpha1", "jobflows",
            ("CREATE", "UPDATE")),
    Webhook("/pods/validate", False, "validatepod.volcano.sh", "", "v1", "pods", ("CREATE",)),
    Webhook("/queues/validate", False, "validatequeue.volcano.sh", "scheduling.volcano.sh", "v1beta1", "queues",
            ("CREATE", "UPDATE", "DELETE")),
    Webhook("/podgroups/validate", False, "validatepodgroup.volcano.sh", "scheduling.volcano.sh", "v1beta1",
            "podgroups", ("CREATE",)),
    Webhook("/hypernodes/validate", False, "validatehypernodes.volcano.sh", "topology.volcano.sh", "v1alpha1",
            "hypernodes", ("CREATE", "UPDATE"), namespaced=False),
    Webhook("/cronjobs/validate", False, "validatecronjob.volcano.sh", "batch.volcano.sh", "v1alpha1", "cronjobs",
            ("CREATE", "UPDATE")),
)


def enabled_webhooks(values: dict[str, Any], version: str) -> list[Webhook]:
    """The admissions whose configurations the chart renders: each template is guarded by
    ``regexMatch "<path>"`` on ``custom.enabled_admissions`` (a search anywhere in the list, not a match
    of one entry)."""
    c = merged(values, version)["custom"]
    if not c["admission_enable"]:
        return []
    text = str(c["enabled_admissions"] or "")
    return [w for w in WEBHOOKS if re.search(w.path, text)]


def webhook_configuration(w: Webhook, values: dict[str, Any], release: Release, version: str) -> dict[str, Any]:
    """One Mutating/ValidatingWebhookConfiguration as the chart renders it (no CA bundle: the webhook
    manager adds its own at start)."""
    c = merged(values, version)["custom"]
    hook: dict[str, Any] = {
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": service_name(release), "namespace": release.namespace,
                                     "path": w.path, "port": 443}},
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "name": w.webhook,
    }
    rule: dict[str, Any] = {"apiGroups": [w.group], "apiVersions": [w.version], "operations": list(w.operations),
                            "resources": [w.resource]}
    if w.namespaced:
        exprs = [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                  "values": [release.namespace, "kube-system"]}]
        exprs += list(c["webhooks_namespace_selector_expressions"] or [])
        hook["namespaceSelector"] = {"matchExpressions": exprs}
        hook["objectSelector"] = {}
        if w.mutating:
            hook["reinvocationPolicy"] = "Never"
        rule["scope"] = "*"
    hook["rules"] = [rule]
    hook["sideEffects"] = "NoneOnDryRun" if w.namespaced else "None"
    hook["timeoutSeconds"] = 10
    kind = "MutatingWebhookConfiguration" if w.mutating else "ValidatingWebhookConfiguration"
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": w.configuration}, "webhooks": [hook]}


def webhook_configurations(values: dict[str, Any], release: Release, version: str) -> list[dict[str, Any]]:
    """Every webhook configuration the chart renders for ``values``."""
    return [webhook_configuration(w, values, release, version) for w in enabled_webhooks(values, version)]


def admission_reads_namespaces(values: dict[str, Any], version: str) -> bool:
    """Whether the chart lets the webhook manager read Namespaces (its ClusterRole gets
    ``namespaces: get, list, watch`` only when ``/podgroups/mutate`` is enabled, which needs them)."""
    c = merged(values, version)["custom"]
    return bool(c["admission_enable"]) and bool(re.search("/podgroups/mutate", str(c["enabled_admissions"] or "")))
