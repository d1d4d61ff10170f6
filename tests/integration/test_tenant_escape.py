"""Tenants cannot take GPUs outside their quota by any route: tried on the real API server as a tenant.

The rendered tenant objects (namespaces, quotas, limit ranges, RBAC, network policies, admission
policies) of ``inventories/local`` are applied server-side as admin, with the PriorityClasses, Queues
and DeviceClasses they refer to, then every request is made as a tenant user through impersonation
(``kubectl --as --as-group``): the API server's own RBAC, ResourceQuota, PodSecurity and
ValidatingAdmissionPolicy admission decide, exactly as on a real cluster. No node runs anything; a
refusal at admission is the whole point.

The spec is the local one with two changes so that every kind of GPU resource is on offer:
``l4-infer`` advertises ``nvidia.com/gpu.shared`` (renameByDefault) and ``ml-research`` may use 7
MIG slices (``nvidia.com/mig-1g.10gb``) and 4 shared GPUs; ``inference`` keeps zero of both.

Every escape route has a test that tries it and is refused (``ESCAPES``), and every route a tenant
may use has a test where it still works (``ALLOWED``). docs/tenants.md lists them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster_helpers import Cluster, wait_for

from gpucluster.render import render
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec

pytestmark = pytest.mark.integration
LOCAL = Path(__file__).resolve().parents[2] / "inventories" / "local"
RESTRICTED = {"runAsNonRoot": True, "runAsUser": 1000, "allowPrivilegeEscalation": False,
              "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
#: (user, groups) of each identity the tests act as; the groups are the spec's.
ML_USER = ("ml-user", "ml-research")
ML_ADMIN = ("ml-admin", "ml-research-admins")
INF_USER = ("inf-user", "inference")


def escape_spec() -> ClusterSpec:
    spec = load_spec(LOCAL)
    pool = next(p for p in spec.node_pools if p.name == "l4-infer")
    pool.sharing.rename_by_default = True
    ml = next(t for t in spec.tenants if t.name == "ml-research")
    ml.quota.extended = {**ml.quota.extended, "nvidia.com/mig-1g.10gb": 7, "nvidia.com/gpu.shared": 4}
    return spec


def container(limits: dict[str, str] | None = None) -> dict:
    res = {"cpu": "100m", "memory": "64Mi"}
    return {"name": "main", "image": "registry.invalid/none:0", "securityContext": RESTRICTED,
            "resources": {"requests": dict(res), "limits": {**res, **(limits or {})}}}


def pod(name: str, ns: str, limits: dict[str, str] | None = None, **spec: Any) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [container(limits)], **spec}}


def claim(name: str, ns: str, *classes: str, count: int = 1) -> dict:
    """A ResourceClaim: one class asks ``exactly``; several are ``firstAvailable`` alternatives."""
    if len(classes) == 1:
        req = {"name": "gpu", "exactly": {"deviceClassName": classes[0], "allocationMode": "ExactCount",
                                          "count": count}}
    else:
        req = {"name": "gpu", "firstAvailable": [{"name": f"alt{i}", "deviceClassName": c,
                                                  "allocationMode": "ExactCount", "count": count}
                                                 for i, c in enumerate(classes)]}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": [req]}}}


def claim_template(name: str, ns: str, cls: str) -> dict:
    body = claim(name, ns, cls)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": body["metadata"],
            "spec": {"spec": body["spec"]}}


def volcano_job(name: str, ns: str, queue: str | None, priority: str | None = None,
                task_priority: str | None = None) -> dict:
    template: dict = {"spec": {"restartPolicy": "Never", "containers": [container()]}}
    if task_priority:
        template["spec"]["priorityClassName"] = task_priority
    spec: dict = {"minAvailable": 1, "schedulerName": "volcano",
                  "tasks": [{"name": "main", "replicas": 1, "template": template}]}
    if queue is not None:
        spec["queue"] = queue
    if priority:
        spec["priorityClassName"] = priority
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


def obj(api: str, kind: str, name: str, ns: str | None = None, **body: Any) -> dict:
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return {"apiVersion": api, "kind": kind, "metadata": meta, **body}


def resource(body: dict) -> str:
    """``kind.group`` for kubectl (``job`` alone would be batch/v1's Job)."""
    group = body["apiVersion"].rpartition("/")[0]
    return f"{body['kind'].lower()}.{group}" if group else body["kind"].lower()


def as_tenant(lw: Cluster, who: tuple[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """kubectl ``args`` as ``who`` (user, group): impersonation by the local world's admin."""
    user, group = who
    return lw.run(f"--as={user}", f"--as-group={group}", *args, stdin=stdin)


def create(lw: Cluster, who: tuple[str, str], body: dict) -> subprocess.CompletedProcess:
    return as_tenant(lw, who, "create", "-f", "-", stdin=json.dumps(body))


@pytest.fixture(scope="module")
def world(lw: Cluster) -> Iterator[Cluster]:
    from gpucluster.addons import volcano

    spec = escape_spec()
    volcano.install_crds(lw.kubeconfig)  # Queue, Job, PodGroup
    rendered = render(spec)
    # Tenants plus what they refer to: PriorityClasses and Queues (volcano), DeviceClasses (dra-driver).
    lw.apply(*rendered.objects("volcano", "dra-driver", "tenants"))
    # What the operators would add on a real cluster: the DRA chart's own DeviceClass (its selector,
    # facts chart-deviceclasses-gpus) and the GPU Operator's RuntimeClass.
    lw.apply(obj("resource.k8s.io/v1", "DeviceClass", "gpu.nvidia.com", spec={"selectors": [{"cel": {
                 "expression": "device.driver == 'gpu.nvidia.com' && "
                               "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}),
             obj("node.k8s.io/v1", "RuntimeClass", "nvidia", handler="nvidia"))
    for t in spec.tenants:
        wait_for(f"quota of {t.name} computed",
                 lambda ns=t.ns: lw.get("resourcequota", "-n", ns, "gpucluster-quota").get("status", {}).get("hard"))
    # The policies take effect once the API server's policy informer has them: poll a refused probe.
    probe = claim("probe", "inference", "gpu.nvidia.com")
    wait_for("admission policies active", lambda: "ValidatingAdmissionPolicy" in as_tenant(
        lw, INF_USER, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(probe)).stderr)
    yield lw


def test_admission_policies_type_check_against_the_served_schemas(world: Cluster) -> None:
    # The API server type-checks every expression against each matched kind's schema (the CRDs'
    # for Volcano); a typo in a field name would show here as a warning.
    policies = [p for p in world.get("validatingadmissionpolicies")["items"]
                if p["metadata"]["name"].startswith("gpucluster-tenant-")]
    assert len(policies) == 5
    for p in policies:
        name = p["metadata"]["name"]

        def checked(name: str = name) -> dict | None:
            cur = world.get("validatingadmissionpolicy", name)
            status = cur.get("status", {})
            return status if status.get("observedGeneration") == cur["metadata"]["generation"] else None

        status = wait_for(f"{name} type-checked", checked)
        assert not status.get("typeChecking", {}).get("expressionWarnings"), status


# --- every route out, refused --------------------------------------------------------------------
# id: (identity, object, substrings the refusal must contain)
ESCAPES: dict[str, tuple[tuple[str, str], dict, tuple[str, ...]]] = {
    "pod-over-gpu-quota": (
        INF_USER, pod("gpu17", "inference", {"nvidia.com/gpu": "17"}),
        ("exceeded quota: gpucluster-quota", "limited: requests.nvidia.com/gpu=16")),
    "mig-resource-without-quota": (
        INF_USER, pod("mig", "inference", {"nvidia.com/mig-1g.10gb": "1"}),
        ("exceeded quota", "limited: requests.nvidia.com/mig-1g.10gb=0")),
    "mig-over-quota": (
        ML_USER, pod("mig8", "ml-research", {"nvidia.com/mig-1g.10gb": "8"}),
        ("exceeded quota", "limited: requests.nvidia.com/mig-1g.10gb=7")),
    "shared-gpu-resource": (
        INF_USER, pod("shared", "inference", {"nvidia.com/gpu.shared": "1"}),
        ("exceeded quota", "limited: requests.nvidia.com/gpu.shared=0")),
    "rdma-without-quota": (
        INF_USER, pod("rdma", "inference", {"rdma/rdma_shared_device_a": "1"}),
        ("exceeded quota", "limited: requests.rdma/rdma_shared_device_a=0")),
    "claim-on-the-charts-gpu-class": (
        ML_USER, claim("chart-gpu", "ml-research", "gpu.nvidia.com"),
        ("tenant ml-research may claim devices of these DeviceClasses only: gpu-80gb, hopper, mig-1g-10gb",
         "this ResourceClaim asks for gpu.nvidia.com")),
    "claim-on-the-charts-mig-class": (
        ML_USER, claim("chart-mig", "ml-research", "mig.nvidia.com"),
        ("tenant ml-research", "asks for mig.nvidia.com")),
    "claim-on-a-spec-class-not-in-the-list": (
        INF_USER, claim("not-mine", "inference", "gpu-80gb"),
        ("tenant inference may claim devices of these DeviceClasses only: none",
         "this ResourceClaim asks for gpu-80gb")),
    "claim-first-available-with-a-foreign-class": (
        ML_USER, claim("alternatives", "ml-research", "gpu-80gb", "vfio.gpu.nvidia.com"),
        ("tenant ml-research", "asks for vfio.gpu.nvidia.com")),
    "claim-over-the-class-quota": (
        ML_USER, claim("nine", "ml-research", "gpu-80gb", count=9),
        ("exceeded quota", "limited: gpu-80gb.deviceclass.resource.k8s.io/devices=8")),
    "claim-with-allocation-mode-all": (
        ML_USER, {**claim("all", "ml-research", "hopper"), "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "hopper", "allocationMode": "All"}}]}}},
        ("exceeded quota", "hopper.deviceclass.resource.k8s.io/devices=32")),
    "claim-with-admin-access": (
        ML_USER, {**claim("admin", "ml-research", "gpu-80gb"), "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu-80gb", "allocationMode": "ExactCount",
                                        "count": 1, "adminAccess": True}}]}}},
        ("resource.kubernetes.io/admin-access",)),
    "claim-template-naming-a-foreign-class": (
        ML_USER, claim_template("tmpl", "ml-research", "gpu.nvidia.com"),
        ("tenant ml-research", "this ResourceClaimTemplate asks for gpu.nvidia.com")),
    "pod-asking-a-foreign-class-as-extended-resource": (
        ML_USER, pod("implicit", "ml-research", {"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "1"}),
        ("tenant ml-research may claim devices of these DeviceClasses only",
         "deviceclass.resource.kubernetes.io/<class>")),
    "pod-over-the-class-quota-as-extended-resource": (
        ML_USER, pod("implicit9", "ml-research", {"deviceclass.resource.kubernetes.io/gpu-80gb": "9"}),
        ("exceeded quota", "limited: requests.deviceclass.resource.kubernetes.io/gpu-80gb=8")),
    "pod-with-a-foreign-priority-class": (
        ML_USER, pod("prio", "ml-research", priorityClassName="online-inference"),
        ("tenant ml-research may use these PriorityClasses only (or none): batch-inference, notebooks, training",
         "this Pod asks for online-inference")),
    "pod-with-the-nvidia-runtime-class": (
        ML_USER, pod("runtime", "ml-research", runtimeClassName="nvidia"),
        ("may not use an NVIDIA runtime class",)),
    "privileged-pod-with-host-devices": (
        ML_USER, {**pod("host-dev", "ml-research"), "spec": {
            "containers": [{**container(), "securityContext": {"privileged": True}}],
            "volumes": [{"name": "dev", "hostPath": {"path": "/dev"}}]}},
        ("violates PodSecurity \"restricted:latest\"", "privileged", "hostPath")),
    "pod-naming-another-volcano-queue": (
        ML_USER, {**pod("queue", "ml-research", schedulerName="volcano"),
                  "metadata": {"name": "queue", "namespace": "ml-research",
                               "annotations": {"scheduling.volcano.sh/queue-name": "inference"}}},
        ("tenant ml-research submits to its own Volcano queue only",)),
    "volcano-job-in-another-tenants-queue": (
        ML_USER, volcano_job("other-queue", "ml-research", "inference"),
        ("set spec.queue: ml-research", "this Job names inference")),
    "volcano-job-in-the-default-queue": (
        ML_USER, volcano_job("default-queue", "ml-research", None),
        ("set spec.queue: ml-research", "this Job names default")),
    "volcano-job-with-a-foreign-priority-class": (
        ML_USER, volcano_job("job-prio", "ml-research", "ml-research", priority="online-inference"),
        ("may use these PriorityClasses only", "this Job asks for online-inference")),
    "volcano-task-with-a-foreign-priority-class": (
        ML_USER, volcano_job("task-prio", "ml-research", "ml-research", task_priority="online-inference"),
        ("may use these PriorityClasses only", "this Job asks for online-inference")),
    # RBAC: the objects that bound a tenant are not the tenant's to make
    "create-a-second-quota": (
        ML_ADMIN, obj("v1", "ResourceQuota", "more", "ml-research", spec={"hard": {"requests.nvidia.com/gpu": "99"}}),
        ("cannot create resource \"resourcequotas\"",)),
    "create-a-limit-range": (
        ML_ADMIN, obj("v1", "LimitRange", "mine", "ml-research", spec={"limits": [{"type": "Container"}]}),
        ("cannot create resource \"limitranges\"",)),
    "create-an-allow-all-network-policy": (
        ML_ADMIN, obj("networking.k8s.io/v1", "NetworkPolicy", "open", "ml-research", spec={
            "podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [{}], "egress": [{}]}),
        ("cannot create resource \"networkpolicies\"",)),
    "create-a-role": (
        ML_ADMIN, obj("rbac.authorization.k8s.io/v1", "Role", "all", "ml-research",
                      rules=[{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
        ("cannot create resource \"roles\"",)),
    "bind-cluster-admin": (
        ML_ADMIN, obj("rbac.authorization.k8s.io/v1", "RoleBinding", "admin", "ml-research",
                      roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                      subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ml-research"}]),
        ("cannot create resource \"rolebindings\"",)),
    "create-an-admission-policy-binding": (
        ML_ADMIN, obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "mine",
                      spec={"policyName": "gpucluster-tenant-pods", "validationActions": ["Warn"]}),
        ("cannot create resource \"validatingadmissionpolicybindings\"",)),
    "create-a-priority-class": (
        ML_ADMIN, obj("scheduling.k8s.io/v1", "PriorityClass", "mine", value=999999),
        ("cannot create resource \"priorityclasses\"",)),
    "create-a-device-class": (
        ML_ADMIN, obj("resource.k8s.io/v1", "DeviceClass", "mine", spec={}),
        ("cannot create resource \"deviceclasses\"",)),
}


@pytest.mark.parametrize("route", ESCAPES)
def test_escape_route_is_refused(world: Cluster, route: str) -> None:
    who, body, expect = ESCAPES[route]
    proc = create(world, who, body)
    assert proc.returncode != 0, f"{route}: created as {who}: {proc.stdout}"
    for text in expect:
        assert text in proc.stderr, f"{route}: {text!r} not in {proc.stderr}"
    kind, name, ns = resource(body), body["metadata"]["name"], body["metadata"].get("namespace")
    assert world.run("get", kind, name, *(("-n", ns) if ns else ())).returncode != 0, f"{route}: {kind}/{name} exists"


def _merge(into: dict, edit: dict) -> dict:
    for key, value in edit.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


def _edited(world: Cluster, path: str, edit: dict) -> str:
    """The object at API ``path``, read as admin, with ``edit`` merged in: what a tenant would PUT."""
    return json.dumps(_merge(json.loads(world.kubectl("get", "--raw", path)), edit))


NS_PATH = "/api/v1/namespaces/ml-research"
CLAIM_STATUS = "/apis/resource.k8s.io/v1/namespaces/ml-research/resourceclaims/probe-claim/status"
# id: (identity, kubectl arguments, the refusal's text, stdin built from the live object or None).
# kubectl patch/annotate read the object first, so edits of objects the tenant cannot even read go
# through `replace --raw` (a PUT) with the edited object.
CHANGES: dict[str, tuple[tuple[str, str], tuple[str, ...], str, Any]] = {
    "delete-the-quota": (ML_ADMIN, ("delete", "resourcequota", "-n", "ml-research", "gpucluster-quota"),
                         "cannot delete resource \"resourcequotas\"", None),
    "raise-the-quota": (ML_ADMIN, ("patch", "resourcequota", "-n", "ml-research", "gpucluster-quota", "--type=merge",
                                   "-p", '{"spec":{"hard":{"requests.nvidia.com/gpu":"99"}}}'),
                        "cannot patch resource \"resourcequotas\"", None),
    "delete-the-limit-range": (ML_ADMIN, ("delete", "limitrange", "-n", "ml-research", "gpucluster-defaults"),
                               "cannot delete resource \"limitranges\"", None),
    "delete-the-network-policy": (ML_ADMIN, ("delete", "networkpolicy", "-n", "ml-research", "gpucluster-isolate"),
                                  "cannot delete resource \"networkpolicies\"", None),
    "widen-the-namespace-allowances": (
        ML_ADMIN, ("replace", "--raw", NS_PATH, "-f", "-"), "cannot update resource \"namespaces\"",
        lambda w: _edited(w, NS_PATH, {"metadata": {"annotations": {
            "gpucluster.dev/allowed-device-classes": "gpu.nvidia.com"}}})),
    "lower-the-namespace-pod-security": (
        ML_ADMIN, ("replace", "--raw", NS_PATH, "-f", "-"), "cannot update resource \"namespaces\"",
        lambda w: _edited(w, NS_PATH, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})),
    "delete-an-admission-policy": (ML_ADMIN, ("delete", "validatingadmissionpolicy", "gpucluster-tenant-pods"),
                                   "cannot delete resource \"validatingadmissionpolicies\"", None),
    "edit-the-role": (ML_ADMIN, ("patch", "role", "-n", "ml-research", "tenant-user", "--type=json", "-p",
                                 '[{"op":"add","path":"/rules/-","value":{"apiGroups":["*"],"resources":["*"],'
                                 '"verbs":["*"]}}]'),
                      "cannot patch resource \"roles\"", None),
    "write-a-claims-allocation": (
        ML_USER, ("replace", "--raw", CLAIM_STATUS, "-f", "-"), "cannot update resource \"resourceclaims/status\"",
        lambda w: _edited(w, CLAIM_STATUS, {"status": {"allocation": {"devices": {"results": []}}}})),
}


@pytest.mark.parametrize("change", CHANGES)
def test_changing_what_bounds_the_tenant_is_refused(world: Cluster, change: str) -> None:
    who, args, text, body = CHANGES[change]
    if change == "write-a-claims-allocation":
        world.apply(claim("probe-claim", "ml-research", "gpu-80gb"))
    before = {k: world.get(*k.split()) for k in ("resourcequota -n ml-research gpucluster-quota", "ns ml-research")}
    proc = as_tenant(world, who, *args, stdin=body(world) if body else None)
    assert proc.returncode != 0 and text in proc.stderr, proc.stderr or proc.stdout
    after = {k: world.get(*k.split()) for k in before}
    assert [after[k]["metadata"]["resourceVersion"] for k in after] == \
        [before[k]["metadata"]["resourceVersion"] for k in before]
    assert world.run("get", "limitrange/gpucluster-defaults", "networkpolicy/gpucluster-isolate",
                     "-n", "ml-research").returncode == 0


# --- what a tenant may do still works --------------------------------------------------------------
ALLOWED: dict[str, tuple[tuple[str, str], dict]] = {
    "pod-within-gpu-quota": (INF_USER, pod("ok-gpus", "inference", {"nvidia.com/gpu": "4"})),
    "pod-within-mig-quota": (ML_USER, pod("ok-mig", "ml-research", {"nvidia.com/mig-1g.10gb": "7"})),
    "pod-within-shared-quota": (ML_USER, pod("ok-shared", "ml-research", {"nvidia.com/gpu.shared": "1"})),
    "pod-within-rdma-quota": (ML_USER, pod("ok-rdma", "ml-research", {"rdma/rdma_shared_device_a": "1"})),
    "claim-on-an-allowed-class": (ML_USER, claim("ok-mine", "ml-research", "gpu-80gb", count=2)),
    "claim-first-available-within-the-list": (ML_USER, claim("ok-alts", "ml-research", "hopper", "gpu-80gb")),
    "claim-template-on-an-allowed-class": (ML_USER, claim_template("ok-tmpl", "ml-research", "mig-1g-10gb")),
    "pod-asking-an-allowed-class-as-extended-resource": (
        ML_USER, pod("ok-implicit", "ml-research", {"deviceclass.resource.kubernetes.io/hopper": "2"})),
    "pod-with-an-allowed-priority-class": (ML_USER, pod("ok-prio", "ml-research", priorityClassName="training")),
    "pod-with-no-priority-class": (INF_USER, pod("ok-noprio", "inference")),
    "pod-in-its-own-volcano-queue": (
        INF_USER, {**pod("ok-queue", "inference", schedulerName="volcano"),
                   "metadata": {"name": "ok-queue", "namespace": "inference",
                                "annotations": {"scheduling.volcano.sh/queue-name": "inference"}}}),
    "volcano-job-in-its-own-queue": (
        ML_USER, volcano_job("ok-train", "ml-research", "ml-research", priority="training", task_priority="training")),
}


@pytest.mark.parametrize("use", ALLOWED)
def test_allowed_use_still_works(world: Cluster, use: str) -> None:
    who, body = ALLOWED[use]
    kind, name, ns = resource(body), body["metadata"]["name"], body["metadata"]["namespace"]
    try:
        proc = create(world, who, body)
        assert proc.returncode == 0, f"{use}: refused as {who}: {proc.stderr}"
        assert world.get(kind, "-n", ns, name)["metadata"]["name"] == name
    finally:
        world.run("delete", kind, "-n", ns, name, "--wait=false")


def test_every_route_the_docs_list_has_its_test() -> None:
    """docs/tenants.md lists each route by its test id (between the routes markers), and only those."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "tenants.md").read_text()
    table = doc.split("<!-- routes -->")[1].split("<!-- /routes -->")[0]
    listed = {line.split("`")[1] for line in table.splitlines() if line.startswith("| `")}
    assert listed == set(ESCAPES) | set(CHANGES) | set(ALLOWED)


def test_quota_names_every_class_and_offered_resource(world: Cluster) -> None:
    """The live quota bounds the chart's classes and the offered resources at zero for a tenant without them."""
    hard = world.get("resourcequota", "-n", "inference", "gpucluster-quota")["spec"]["hard"]
    for cls in ("gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com", "gpu-80gb", "hopper", "mig-1g-10gb"):
        assert hard[f"{cls}.deviceclass.resource.k8s.io/devices"] == "0"
        assert hard[f"requests.deviceclass.resource.kubernetes.io/{cls}"] == "0"
    for res in ("nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-1g.10gb.me",
                "rdma/rdma_shared_device_a"):
        assert hard[f"requests.{res}"] == "0"
    assert not any(k.startswith("limits.nvidia.com/") for k in hard)


def test_live_policies_equal_the_rendered_ones(world: Cluster) -> None:
    # The objects under test are the rendered ones, and the API server adds no defaults to them
    # (every defaulted field is rendered), which is what lets verify compare them exactly.
    spec = escape_spec()
    want = [o for o in render(spec).objects("tenants") if o["kind"] == "ValidatingAdmissionPolicy"]
    live = {p["metadata"]["name"]: p["spec"] for p in world.get("validatingadmissionpolicies")["items"]}
    for o in want:
        assert yaml.safe_dump(live[o["metadata"]["name"]], sort_keys=True) == yaml.safe_dump(o["spec"], sort_keys=True)
