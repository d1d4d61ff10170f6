"""Decide, before any resource exists, what each stack registers and what it leaves out, and why.

Pure: takes the render core's output plus facts about the target cluster (which kinds it serves,
which nodes exist, whether chart repositories are reachable) and returns one :class:`StackPlan` per
stack. Everything left out is listed as a :class:`Skipped` with a reason the summary prints, so
nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpucluster import components
from gpucluster.errors import InputError
from gpucluster.pulumi.objects import Obj, gvk, namespace_names
from gpucluster.render import Release, Rendered
from gpucluster.render.releases import chart_module


@dataclass(frozen=True)
class Skipped:
    """Something a stack does not register, and why.

    ``cause``: ``unserved`` (an object whose kind the cluster does not serve yet), ``chart`` (a release
    whose chart repository cannot be reached), ``node`` (labels of a node that has not joined).
    """

    stack: str
    what: str
    reason: str
    cause: str = "unserved"


@dataclass(frozen=True)
class ChartSource:
    """Where a release's chart comes from: a local chart folder, or a repository URL."""

    release: Release
    local_path: Path | None = None

    @property
    def chart(self) -> str:
        return str(self.local_path) if self.local_path else self.release.chart


@dataclass
class StackPlan:
    """What one stack registers: objects per component, releases per component, node patches."""

    name: str
    components: dict[str, list[Obj]] = field(default_factory=dict)
    releases: dict[str, list[ChartSource]] = field(default_factory=dict)
    node_patches: list[Obj] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    #: Logical name → import ID of the objects adopted from the cluster (``--adopt``, now or in an earlier
    #: run): imported and retained on delete (:mod:`gpucluster.pulumi.ownership`).
    adopt: dict[str, str] = field(default_factory=dict)

    def objects(self) -> list[Obj]:
        return [o for objs in self.components.values() for o in objs]


@dataclass(frozen=True)
class ClusterFacts:
    """What the target cluster offers. ``None`` means "unknown: assume everything" (mocks, previews)."""

    served: frozenset[tuple[str, str]] | None = None
    nodes: frozenset[str] | None = None
    #: False where chart repositories cannot be reached (the local world): remote charts are skipped.
    remote_charts: bool = True
    #: True in the local world, where the GPU simulator stands in for the node agents of those charts.
    simulated: bool = False
    #: Discovery's (apiVersion, kind) → (plural, namespaced), for looking objects up (empty: unknown).
    resources: Mapping[tuple[str, str], tuple[str, bool]] = field(default_factory=dict, compare=False)
    #: Which cluster this is: the uid of its ``kube-system`` Namespace ("": unknown).
    uid: str = ""


def chart_source(rel: Release) -> ChartSource:
    """Resolve a release's chart: ``repository`` naming an existing folder means a local chart."""
    repo = rel.repository
    if "://" in repo:
        return ChartSource(rel)
    path = (Path(repo).expanduser() / rel.chart).resolve()
    chart_yaml = path / "Chart.yaml"
    where = f"release {rel.name}: chart repository {repo!r} is a local path"
    if not chart_yaml.is_file():
        raise InputError(f"{where}, but {chart_yaml} does not exist; point `repository` at the folder "
                         f"that holds the chart folder {rel.chart!r}, or use a repository URL")
    found = str((yaml.safe_load(chart_yaml.read_text()) or {}).get("version", ""))
    if found.lstrip("v") != rel.version.lstrip("v"):
        raise InputError(f"{where}; its Chart.yaml says version {found!r} but the spec pins "
                         f"{rel.version!r}: set the chart version in the spec to {found!r}")
    return ChartSource(rel, path)


def node_patch(name: str, config: dict) -> Obj:
    """A server-side-apply patch of one Node: the labels and taints the spec gives it."""
    body: dict = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": config["labels"]}}
    if config.get("taints"):
        body["spec"] = {"taints": config["taints"]}
    return body


def plan(rendered: Rendered, facts: ClusterFacts | None = None) -> dict[str, StackPlan]:
    """Split ``rendered`` into the platform and tenants stacks, leaving out what the cluster cannot take.

    Objects of platform components that live in a namespace the tenants stack creates (secondary
    network attachments) move to the tenants stack: they cannot exist before their namespace, and
    they come and go with it.
    """
    facts = facts or ClusterFacts()
    platform, tenants = StackPlan("platform"), StackPlan("tenants")
    platform_components = components.of_stack(components.PLATFORM)
    tenant_components = components.of_stack(components.TENANTS)
    tenant_ns = namespace_names(rendered.objects(*tenant_components))

    #: Kinds whose CRDs only a release left out below would bring, and that release.
    not_coming: dict[tuple[str, str], str] = {}
    for rel in rendered.releases:
        src = chart_source(rel)
        comp = rel.name  # a release is named after the component that installs it
        if src.local_path is None and not facts.remote_charts:
            platform.skipped.append(Skipped("platform", f"release {rel.name} ({rel.chart} {rel.version})",
                                            "chart repositories are unreachable here; the GPU simulator "
                                            "stands in for its node agents" if facts.simulated else
                                            "chart repositories are unreachable here (air-gapped sites "
                                            "point `repository` at a local chart folder)", cause="chart"))
            for k in chart_module(comp).CHART_KINDS:
                not_coming[k] = rel.name
            continue
        platform.releases.setdefault(comp, []).append(src)
    # Kinds whose CRDs a release of this run installs: admitted though not served yet (the stack
    # registers them after that release; the tenants stack runs after the platform stack).
    coming = {k for comp in platform.releases for k in chart_module(comp).CHART_KINDS}

    def admit(stack: StackPlan, component: str, obj: Obj) -> None:
        if facts.served is not None and gvk(obj) not in facts.served and gvk(obj) in not_coming:
            api, kind = gvk(obj)
            stack.skipped.append(Skipped(stack.name, f"{kind} {obj['metadata']['name']}",
                                         f"{api} {kind} comes with the release {not_coming[gvk(obj)]}, which "
                                         "is not installed (its chart repository is unreachable here)",
                                         cause="chart"))
            return
        if facts.served is not None and gvk(obj) not in facts.served and gvk(obj) not in coming:
            api, kind = gvk(obj)
            stack.skipped.append(Skipped(stack.name, f"{kind} {obj['metadata']['name']}",
                                         f"{api} {kind} is not served by the cluster (its CRD is not "
                                         "installed); install the operator's CRDs and run up again"))
            return
        stack.components.setdefault(component, []).append(obj)

    for comp in platform_components:
        for obj in rendered.components.get(comp, []):
            if obj["metadata"].get("namespace") in tenant_ns:
                admit(tenants, "secondary-networks", obj)
            else:
                admit(platform, comp, obj)
    for comp in tenant_components:
        for obj in rendered.components.get(comp, []):
            admit(tenants, comp, obj)

    for node, config in sorted(rendered.node_config.items()):
        if not config["labels"] and not config["taints"]:
            continue
        if facts.nodes is not None and node not in facts.nodes:
            platform.skipped.append(Skipped("platform", f"labels/taints of node {node}",
                                            "the node is not registered in the cluster yet; run up "
                                            "again once it has joined", cause="node"))
            continue
        platform.node_patches.append(node_patch(node, config))
    return {"platform": platform, "tenants": tenants}
