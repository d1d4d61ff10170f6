"""ComponentResources that register the render core's output: one per render component.

Each component takes rendered objects (and, for operator components, the pinned Helm releases) and
registers them as children (``parent=self``) through one explicit Kubernetes provider. Namespaced
objects depend on their Namespace when the same stack creates it; a release depends on the releases it
must follow (``Release.after``: the pod network, the GPU Operator's NFD); a custom resource whose CRD
its component's chart installs depends on that release, and one whose CRD the operator applies while
reconciling another object depends on that object. So a fresh cluster converges in one run where the
CRDs allow it. No object is spelled out here: the data comes from :mod:`gpucluster.render`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, TypedDict

import pulumi

from gpucluster import components
from gpucluster.pulumi.objects import PROVIDER_VERSION, K8sObject, Obj, gvk, object_key
from gpucluster.pulumi.ownership import release_key
from gpucluster.pulumi.plan import ChartSource


class ObjectsArgs(TypedDict, total=False):
    """Inputs of every component."""

    objects: Sequence[Obj]
    """Rendered Kubernetes objects to register (required)."""
    releases: Sequence[ChartSource]
    """Pinned Helm releases this component installs (operator components only)."""
    namespaces: Mapping[str, pulumi.Resource]
    """Namespace resources of this stack by name; namespaced children depend on theirs."""
    patch: bool
    """Register the objects as server-side-apply patches (objects owned by someone else: Nodes)."""
    installed: Mapping[str, pulumi.Resource]
    """Releases registered earlier in this stack, by name; a release depends on those it names in
    ``Release.after``."""
    chart_kinds: Collection[tuple[str, str]]
    """(apiVersion, kind) whose CRD this component's chart installs: such objects depend on its releases."""
    after_kinds: Mapping[tuple[str, str], tuple[str, str]]
    """(apiVersion, kind) → the kind whose objects (of this component) must exist first, e.g. a CRD the
    operator applies while it reconciles them."""
    adopt: Mapping[str, str]
    """Logical name (``kind/namespace/name``, ``release/<name>``) → import ID of the children adopted from
    the cluster: imported (Pulumi ``import``) and retained on delete, so destroying the stack leaves them."""


class ClusterObjects(pulumi.ComponentResource):
    """Registers a list of rendered objects (and releases) as children; see the module docstring."""

    resources: dict[str, pulumi.Resource]
    """Registered objects by logical name (``kind/namespace/name``)."""
    releases: dict[str, pulumi.Resource]
    """Registered Helm releases by release name."""
    namespaces: dict[str, pulumi.Resource]
    """The Namespace resources this component created, by namespace name."""

    def __init__(self, type_: str, name: str, args: ObjectsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_, name, {}, opts)
        namespaces = dict(args.get("namespaces") or {})
        installed = args.get("installed") or {}
        chart_kinds = set(args.get("chart_kinds") or ())
        after_kinds = dict(args.get("after_kinds") or {})
        patch = bool(args.get("patch"))
        adopt = args.get("adopt") or {}
        self.resources = {}
        self.releases = {}
        by_kind: dict[tuple[str, str], list[pulumi.Resource]] = {}

        def ns_deps(ns: str | None) -> list[pulumi.Resource]:
            return [namespaces[ns]] if ns in namespaces else []

        def child(key: str, deps: list[pulumi.Resource]) -> pulumi.ResourceOptions:
            if key in adopt and not patch:
                # Someone else's object, adopted: imported by its ID (a no-op once in the state), and never
                # deleted by this stack (the engine also refuses to replace an imported resource).
                return pulumi.ResourceOptions(parent=self, depends_on=deps, import_=adopt[key], retain_on_delete=True)
            return pulumi.ResourceOptions(parent=self, depends_on=deps)

        def add(obj: Obj, deps: list[pulumi.Resource]) -> None:
            key = object_key(obj)
            res = K8sObject(key, obj, child(key, deps), patch=patch)
            self.resources[key] = res
            by_kind.setdefault(gvk(obj), []).append(res)
            if obj["kind"] == "Namespace" and not patch:
                namespaces[obj["metadata"]["name"]] = res

        # Namespaces of this component first: its other children depend on them.
        for obj in (o for o in args["objects"] if o["kind"] == "Namespace"):
            add(obj, [])
        # Releases next, after the releases they name (the pod network, NFD's provider, ...).
        for src in args.get("releases") or ():
            rel = src.release
            deps = ns_deps(rel.namespace) + [installed[n] for n in rel.after if n in installed]
            self.releases[rel.name] = helm_release(src, child(release_key(rel.name), deps))
        own_releases = list(self.releases.values())
        # Then the other objects; those another kind waits for come first.
        waited_for = set(after_kinds.values())
        rest = sorted((o for o in args["objects"] if o["kind"] != "Namespace"),
                      key=lambda o: gvk(o) not in waited_for)
        for obj in rest:
            deps = ns_deps(obj["metadata"].get("namespace"))
            if gvk(obj) in chart_kinds:
                deps += own_releases
            if gvk(obj) in after_kinds:
                deps += by_kind.get(after_kinds[gvk(obj)], [])
            add(obj, deps)
        self.namespaces = {n: r for n, r in namespaces.items() if r in self.resources.values()}
        self.register_outputs({
            "objects": sorted(self.resources),
            "releases": sorted(self.releases),
        })


def helm_release(src: ChartSource, opts: pulumi.ResourceOptions) -> pulumi.Resource:
    """A Helm release (``helm.sh/v3`` Release) of a pinned chart with the render core's values.

    A local chart is installed from its folder; a remote one from its repository at the pinned
    version. ``atomic`` rolls a failed install back so a re-run starts clean.
    """
    from pulumi_kubernetes.helm.v3 import Release, ReleaseArgs, RepositoryOptsArgs

    rel = src.release
    args: dict[str, Any] = {
        "name": rel.name,
        "chart": src.chart,
        "namespace": rel.namespace,
        "values": rel.values,
        "atomic": True,
        "create_namespace": False,
    }
    if src.local_path is None:
        args["version"] = rel.version
        args["repository_opts"] = RepositoryOptsArgs(repo=rel.repository)
    opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=PROVIDER_VERSION))
    return Release(release_key(rel.name), ReleaseArgs(**args), opts)


def register(component: str, name: str, args: ObjectsArgs, opts: pulumi.ResourceOptions) -> ClusterObjects:
    """Create the Pulumi component of registry row ``component`` (see :mod:`gpucluster.components`).

    Earlier names of the row become aliases, so a renamed component keeps its resources.
    """
    row = components.get(component)
    aliases = [pulumi.Alias(name=old if name == component else name, type_=components.type_token(row.stack, kind))
               for old, kind in row.aliases]
    if aliases:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=aliases))
    return ClusterObjects(row.type_token, name, args, opts)
