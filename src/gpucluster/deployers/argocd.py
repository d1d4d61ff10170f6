"""The Argo CD bundle: ``OUT/argocd/``, Applications applied by one app of apps (``OUT/argocd/entry.yaml``).

Layout (every Application in namespace ``argocd``, project ``default``, named ``gpucluster-...``)::

    argocd/entry.yaml                  Application gpucluster: applies argocd/ (apply it once)
    argocd/kustomization.yaml          kustomize: the Applications below
    argocd/application-*.yaml          gpucluster-namespaces (wave 0); gpucluster-release-<r> per lock
                                       entry (wave 1 + its ``after`` depth); gpucluster-<component> per
                                       component folder (the wave after the releases whose CRDs it
                                       needs and the folders that create its namespaces, else 1); a
                                       folder applied in two steps (common.Part) through overlays/

A release's Application has two sources, as Argo CD documents for "Helm value files from external
Git repository": the chart at its exact version from the repository the lock names, and the
bundle's Git repository as ``ref: values``, so ``helm/<r>.values.yaml`` of the bundle is the values
file (``$values/<path>/helm/<r>.values.yaml``) and exists once. OCI registries are written without
``oci://``, as Argo CD spells Helm OCI repositories.

Sync waves order Applications only when a parent Application syncs them (the app of apps here)
and only wait for a child's health if Argo CD assesses Applications' health, which it stopped
doing by default in 1.8 ("Argocd App": add the Lua health check to ``argocd-cm``); docs/gitops.md
says how. Sources (A = github.com/argoproj/argo-cd/v3@v3.3.19):
A/docs/user-guide/multiple_sources.md, A/docs/user-guide/helm.md, A/docs/operator-manual/health.md,
A/docs/user-guide/sync-options.md ("Server-Side Apply"), A/docs/operator-manual/application.yaml
(``retry.limit`` below 0: unlimited).
"""

from __future__ import annotations

from typing import Any

from gpucluster import labels as L
from gpucluster.bundle import dump, file_name
from gpucluster.deployers.common import (
    NAMESPACES,
    PREFIX,
    ChartRepo,
    GitSource,
    chart_repo,
    overlay,
    parts,
    waves,
)
from gpucluster.errors import InputError
from gpucluster.render import Rendered
from gpucluster.render.common import Obj, obj
from gpucluster.render.releases import Release
from gpucluster.spec.model import ClusterSpec

API = "argoproj.io/v1alpha1"
NAMESPACE = "argocd"
PROJECT = "default"
#: The cluster Argo CD runs in (its in-cluster destination).
IN_CLUSTER = "https://kubernetes.default.svc"
SYNC_POLICY: dict[str, Any] = {
    "automated": {"prune": True, "selfHeal": True},
    # Server-side apply: operator CRDs are too large for client-side apply's last-applied
    # annotation (262144 bytes), and the stacks apply server-side too.
    "syncOptions": ["ServerSideApply=true"],
    "retry": {"limit": 5, "backoff": {"duration": "30s", "factor": 2, "maxDuration": "10m"}},
}


def files(spec: ClusterSpec, rendered: Rendered, source: GitSource) -> dict[str, str]:
    """Relative path → content of ``argocd/``."""
    if not source.url:
        raise InputError("Argo CD Applications name the Git repository that holds the bundle: give --git-url URL "
                         "(the repository Argo CD reads, as registered there)")
    repos = {rel.name: chart_repo(rel, spec, "Argo CD") for rel in rendered.releases}
    wave = {rel: 1 + w for rel, w in waves(rendered.releases).items()}
    apps = [application(NAMESPACES, 0, git_source(source, NAMESPACES), None)]
    apps += [release_application(rel, repos[rel.name], wave[rel.name], source) for rel in rendered.releases]
    steps = {p.name: p for p in parts(rendered)}
    step_wave: dict[str, int] = {}  # apart from the releases' waves: a folder may share a release's name
    out: dict[str, str] = {}

    def part_wave(name: str, seen: tuple[str, ...] = ()) -> int:
        if name in seen:
            raise ValueError(f"component folders wait for each other in a cycle: {' -> '.join((*seen, name))}")
        if name not in step_wave:
            part = steps[name]
            before = [wave[r] for r in part.releases] + [part_wave(f, (*seen, name)) for f in part.folders]
            if part.after:
                before.append(part_wave(part.after, (*seen, name)))
            step_wave[name] = 1 + max(before, default=0)
        return step_wave[name]

    for part in steps.values():
        src = git_source(source, part.folder)
        if part.drop:
            src = git_source(source, f"argocd/overlays/{part.name}")
            out[f"argocd/overlays/{part.name}/kustomization.yaml"] = dump(overlay(part, 3))
        # a late step fails until the operator has made its kinds' CRDs: it retries without limit
        apps.append(application(part.name, part_wave(part.name), src, None, retry_forever=bool(part.after)))
    out.update({f"argocd/{file_name(a)}": dump(a) for a in apps})
    out["argocd/kustomization.yaml"] = dump({"apiVersion": "kustomize.config.k8s.io/v1beta1",
                                             "kind": "Kustomization", "resources": [file_name(a) for a in apps]})
    out["argocd/entry.yaml"] = dump(obj(API, "Application", PREFIX, NAMESPACE, spec={
        "project": PROJECT, "source": git_source(source, "argocd"),
        "destination": {"server": IN_CLUSTER, "namespace": NAMESPACE}, "syncPolicy": SYNC_POLICY}))
    return out


def git_source(source: GitSource, folder: str) -> dict[str, Any]:
    return {"repoURL": source.url, "targetRevision": source.revision, "path": source.join(folder)}


def application(part: str, wave: int, src: dict[str, Any] | None, sources: list[dict[str, Any]] | None,
                namespace: str | None = None, *, retry_forever: bool = False) -> Obj:
    """An Application ``gpucluster-<part>`` in sync wave ``wave`` (one source, or several)."""
    spec: dict[str, Any] = {"project": PROJECT}
    if src is not None:
        spec["source"] = src
    if sources is not None:
        spec["sources"] = sources
    spec["destination"] = {"server": IN_CLUSTER, **({"namespace": namespace} if namespace else {})}
    # retry.limit < 0: unlimited retries (see the module docstring's application.yaml)
    spec["syncPolicy"] = SYNC_POLICY
    if retry_forever:
        spec["syncPolicy"] = {**SYNC_POLICY, "retry": {**SYNC_POLICY["retry"], "limit": -1}}
    return obj(API, "Application", f"{PREFIX}-{part}", NAMESPACE, annotations={L.ARGOCD_SYNC_WAVE: str(wave)},
               spec=spec)


def release_application(rel: Release, repo: ChartRepo, wave: int, source: GitSource) -> Obj:
    chart = {
        "repoURL": repo.oci_host_path if repo.kind == "oci" else repo.url,
        "chart": rel.chart,
        "targetRevision": rel.version,
        "helm": {"releaseName": rel.name, "valueFiles": [f"$values/{source.join('helm', rel.name + '.values.yaml')}"]},
    }
    values = {"repoURL": source.url, "targetRevision": source.revision, "ref": "values"}
    return application(f"release-{rel.name}", wave, None, [chart, values], namespace=rel.namespace)
