"""The two stack programs: ``platform`` and ``tenants``.

Both are thin: one explicit Kubernetes provider, then one component per render component, fed by a
:class:`~gpucluster.pulumi.plan.StackPlan`. The same functions run inline through the Automation API
(:mod:`gpucluster.pulumi.engine`) and from ``stacks/<name>/__main__.py`` under a normal ``pulumi up``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pulumi

from gpucluster import components
from gpucluster.errors import InputError
from gpucluster.pulumi import components as c
from gpucluster.pulumi.objects import PROVIDER_VERSION, Obj
from gpucluster.pulumi.plan import StackPlan, plan
from gpucluster.render import render
from gpucluster.render.releases import CHART_MODULES
from gpucluster.spec import load_spec


def provider(kubeconfig: str | None, context: str | None = None) -> pulumi.ProviderResource:
    """The one explicit Kubernetes provider of a stack.

    It gets the kubeconfig *path*, not its contents: the state then holds no client keys, and a
    missing kubeconfig falls back to the provider's usual lookup ($KUBECONFIG, ~/.kube/config).
    """
    from pulumi_kubernetes import Provider

    return Provider(
        "cluster",
        kubeconfig=kubeconfig,
        context=context,
        # Server-side apply: node labels and taints are NodePatch resources, which provider 4.25.0 refuses
        # without it ("patch resources require Server-Side Apply mode", tried on the local world). With it a
        # create is an upsert, so `gpucluster up` checks first (gpucluster.pulumi.ownership).
        enable_server_side_apply=True,
        opts=pulumi.ResourceOptions(version=PROVIDER_VERSION),
    )


def check_platform(p: StackPlan) -> None:
    """Invariants the platform stack refuses to break, whatever the render core produced."""
    objs = p.objects()
    ncp = [o for o in objs if o["kind"] == "NicClusterPolicy"]
    if len(ncp) > 1:
        raise InputError(f"{len(ncp)} NicClusterPolicy objects rendered; the network operator "
                         "takes exactly one")
    nfd = [s.release.name for srcs in p.releases.values() for s in srcs
           if (s.release.values.get("nfd") or {}).get("enabled")]
    if len(nfd) > 1:
        raise InputError(f"releases {nfd} each deploy Node Feature Discovery; only one NFD may run per "
                         "cluster (set nfd.enabled: false on the network operator)")
    # A release can only wait for one registered before it: registry order must agree with `after`.
    order = [comp for comp in components.of_stack(components.PLATFORM) if p.releases.get(comp)]
    for comp in order:
        for src in p.releases[comp]:
            late = [n for n in src.release.after if n in order and order.index(n) > order.index(comp)]
            assert not late, f"release {src.release.name} must follow {late}, registered after it"


def platform(p: StackPlan, kubeconfig: str | None, context: str | None = None) -> dict[str, c.ClusterObjects]:
    """Program of the platform stack; returns its components by name."""
    check_platform(p)
    k8s = provider(kubeconfig, context)
    base = pulumi.ResourceOptions(providers={"kubernetes": k8s})
    ns = c.register("namespaces", "namespaces", {"objects": p.components.get("namespaces", []), "adopt": p.adopt},
                    base)
    out = {"namespaces": ns}
    by_ns = ns.namespaces
    installed: dict[str, pulumi.Resource] = {}  # releases registered so far (registry order)
    for comp in components.of_stack(components.PLATFORM):
        if comp == "namespaces":
            continue
        objects, releases = p.components.get(comp, []), p.releases.get(comp, [])
        if objects or releases:
            mod = CHART_MODULES.get(comp)  # None: the component installs no chart
            out[comp] = c.register(comp, comp, {
                "objects": objects, "releases": releases, "namespaces": by_ns, "installed": dict(installed),
                "chart_kinds": mod.CHART_KINDS if mod else (), "after_kinds": mod.AFTER_KINDS if mod else {},
                "adopt": p.adopt,
            }, base)
            installed.update(out[comp].releases)
    if p.node_patches:
        out["nodes"] = c.register("nodes", "nodes", {"objects": p.node_patches, "patch": True}, base)
    pulumi.export("skipped", [s.__dict__ for s in p.skipped])
    return out


#: Name of the tenants stack's component holding the cluster-scoped admission policies.
ADMISSION_GROUP = "tenant-admission"


def tenants(p: StackPlan, kubeconfig: str | None, context: str | None = None) -> dict[str, c.ClusterObjects]:
    """Program of the tenants stack: one Tenant component per tenant namespace and one for the admission
    policies they share; returns them by name."""
    k8s = provider(kubeconfig, context)
    base = pulumi.ResourceOptions(providers={"kubernetes": k8s})
    groups: dict[str, list[Obj]] = defaultdict(list)
    for obj in p.components.get("tenants", []):
        meta = obj["metadata"]
        # The admission policies are cluster-scoped and shared by every tenant: one group of their own.
        key = meta.get("namespace") or (meta["name"] if obj["kind"] == "Namespace" else ADMISSION_GROUP)
        groups[key].append(obj)
    ns_res: dict[str, pulumi.Resource] = {}
    out: dict[str, c.ClusterObjects] = {}
    for tenant, objs in groups.items():
        out[tenant] = c.register("tenants", tenant, {"objects": objs, "adopt": p.adopt}, base)
        ns_res.update(out[tenant].namespaces)
    nets = p.components.get("secondary-networks", [])
    if nets:
        out["secondary-networks"] = c.register("secondary-networks", "secondary-networks",
                                               {"objects": nets, "namespaces": ns_res, "adopt": p.adopt}, base)
    pulumi.export("skipped", [s.__dict__ for s in p.skipped])
    return out


Program = Callable[[StackPlan, str | None, str | None], dict[str, c.ClusterObjects]]
PROGRAMS: dict[str, Program] = {"platform": platform, "tenants": tenants}


def from_config() -> None:
    """Entry of ``stacks/<name>/__main__.py``: read stack config, plan, run the named program.

    Config: ``gpucluster:inventory`` (folder with cluster.yaml, relative to the stack folder or
    absolute), optional ``gpucluster:kubeconfig``, ``gpucluster:remoteCharts`` (default true) and
    ``gpucluster:adopt`` (a list of ``KIND/NAMESPACE/NAME``: objects imported and retained, as
    ``gpucluster up --adopt``; keep them listed, or a later run stops retaining them).
    """
    cfg = pulumi.Config("gpucluster")
    inventory = Path(cfg.require("inventory")).expanduser()
    given = cfg.get("kubeconfig")
    kubeconfig = str(Path(given).expanduser()) if given else None
    from gpucluster.pulumi.cluster import discover

    context = cfg.get("context")
    facts = discover(kubeconfig, remote_charts=cfg.get_bool("remoteCharts") is not False, context=context)
    plans = plan(render(load_spec(inventory)), facts)
    from gpucluster.pulumi.ownership import mark_adopted

    mark_adopted(plans, cfg.get_object("adopt") or [])
    name = pulumi.get_project().removeprefix("gpucluster-")
    PROGRAMS[name](plans[name], kubeconfig, context)
