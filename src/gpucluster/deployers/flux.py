"""The Flux bundle: ``OUT/flux/``, applied by one Flux Kustomization (``OUT/flux/entry.yaml``).

Layout (every object in namespace ``flux-system``, named ``gpucluster-...``)::

    flux/entry.yaml                      Kustomization gpucluster: applies flux/ (apply it once)
    flux/kustomization.yaml              kustomize: the HelmRepositories and Flux Kustomizations below
    flux/helmrepository-*.yaml           one per chart repository of the lock
    flux/kustomization-*.yaml            Flux Kustomizations: gpucluster-namespaces, then one per
                                         release (gpucluster-release-<r>) and one per component folder
    flux/releases/<r>/kustomization.yaml kustomize: the HelmRelease and its values ConfigMap
    flux/releases/<r>/helmrelease-*.yaml HelmRelease gpucluster-<r>: chart and exact version from the
                                         lock, ``dependsOn`` its ``after``, values from the ConfigMap
    flux/releases/<r>/values.yaml        the values (the same bytes as helm/<r>.values.yaml)
    flux/releases/<r>/kustomizeconfig.yaml  lets kustomize rewrite valuesFrom to the hashed ConfigMap name
    flux/overlays/<part>/kustomization.yaml a folder applied in two steps (common.Part): each step's objects

Values reach a HelmRelease as Flux's documentation recommends for values managed in Git: a
ConfigMap from kustomize's configMapGenerator, whose name carries a hash of the content, referenced
from ``spec.valuesFrom`` through a ``nameReference`` configuration (fluxcd/website
content/en/flux/use-cases/helm.md, "Managing Secrets and ConfigMaps"; guides/helmreleases.md shows
the kustomizeconfig.yaml), so a change of values is a new ConfigMap name and thus an upgrade. The
values are copied next to the HelmRelease because kustomize (as kubectl runs it) loads files only
from inside the kustomization's folder.

Order: Flux Kustomizations can depend only on Flux Kustomizations (kustomize-controller api
v1.9.4 ``KustomizationSpec.DependsOn``), so each release sits behind its own Kustomization with
``wait: true`` (Ready only once its HelmRelease is Ready). A release's Kustomization depends on the
namespaces and on the Kustomizations of its ``after``; its HelmRelease repeats ``after`` as
``dependsOn``. A component folder's Kustomization depends on the namespaces, on the folders that
create the namespaces its objects live in, and on the release Kustomizations whose CRDs it needs; the
second step of a folder applied in two (:class:`~gpucluster.deployers.common.Part`) depends on the first.
"""

from __future__ import annotations

from typing import Any

from gpucluster.bundle import dump, file_name
from gpucluster.deployers.common import (
    NAMESPACES,
    PREFIX,
    ChartRepo,
    GitSource,
    chart_repo,
    overlay,
    parts,
)
from gpucluster.render import Rendered
from gpucluster.render.common import Obj, obj
from gpucluster.render.releases import Release
from gpucluster.spec.model import ClusterSpec

NAMESPACE = "flux-system"
SOURCE_API = "source.toolkit.fluxcd.io/v1"
HELM_API = "helm.toolkit.fluxcd.io/v2"
KUSTOMIZE_API = "kustomize.toolkit.fluxcd.io/v1"
#: How often Flux re-checks: the repository index (versions are pinned, so rarely), the releases and
#: Kustomizations (drift correction).
REPOSITORY_INTERVAL = "1h"
RELEASE_INTERVAL = "30m"
KUSTOMIZATION_INTERVAL = "10m"
#: Helm actions and health waits: operator charts pull images and wait for their Deployments.
RELEASE_TIMEOUT = "15m"
KUSTOMIZATION_TIMEOUT = "20m"
ENTRY_TIMEOUT = "60m"


def release_name(rel: Release) -> str:
    return f"{PREFIX}-{rel.name}"


def values_name(rel: Release) -> str:
    return f"{PREFIX}-{rel.name}-values"


def kustomization_name(part: str) -> str:
    return f"{PREFIX}-{part}"


def files(spec: ClusterSpec, rendered: Rendered, values: dict[str, str], source: GitSource) -> dict[str, str]:
    """Relative path → content of ``flux/`` (``values``: release name → the values file's text)."""
    out: dict[str, str] = {}
    repos = {rel.name: chart_repo(rel, spec, "Flux") for rel in rendered.releases}
    top: list[Obj] = [helm_repository(repo) for repo in _unique(repos.values())]
    top.append(kustomization(NAMESPACES, source.join(NAMESPACES), [], source))
    for rel in rendered.releases:
        folder = f"releases/{rel.name}"
        top.append(kustomization(f"release-{rel.name}", source.join("flux", folder),
                                 [NAMESPACES, *(f"release-{a}" for a in rel.after)], source))
        hr = helm_release(rel, repos[rel.name])
        out[f"flux/{folder}/{file_name(hr)}"] = dump(hr)
        out[f"flux/{folder}/values.yaml"] = values[rel.name]
        out[f"flux/{folder}/kustomizeconfig.yaml"] = dump(_NAME_REFERENCE)
        out[f"flux/{folder}/kustomization.yaml"] = dump({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": [file_name(hr)],
            "configMapGenerator": [{"name": values_name(rel), "namespace": NAMESPACE, "files": ["values.yaml"]}],
            "configurations": ["kustomizeconfig.yaml"]})
    for part in parts(rendered):
        path = source.join(part.folder)
        if part.drop:
            path = source.join("flux", "overlays", part.name)
            out[f"flux/overlays/{part.name}/kustomization.yaml"] = dump(overlay(part, 3))
        top.append(kustomization(part.name, path, [NAMESPACES, *part.folders, *([part.after] if part.after else []),
                                                   *(f"release-{r}" for r in part.releases)], source))
    for o in top:
        out[f"flux/{file_name(o)}"] = dump(o)
    out["flux/kustomization.yaml"] = dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                                           "resources": [file_name(o) for o in top]})
    out["flux/entry.yaml"] = dump(entry(source))
    return out


def _unique(repos: Any) -> list[ChartRepo]:
    return sorted({r.url: r for r in repos}.values(), key=lambda r: r.name)


#: kustomize's nameReference configuration for HelmRelease values (Flux guide "Refer to values in
#: Secret generated with Kustomize and SOPS", here for a ConfigMap).
_NAME_REFERENCE = {"nameReference": [{"kind": "ConfigMap", "version": "v1",
                                      "fieldSpecs": [{"path": "spec/valuesFrom/name", "kind": "HelmRelease"}]}]}


def helm_repository(repo: ChartRepo) -> Obj:
    spec: dict[str, Any] = {"interval": REPOSITORY_INTERVAL, "url": repo.url}
    if repo.kind == "oci":
        spec["type"] = "oci"
    return obj(SOURCE_API, "HelmRepository", repo.name, NAMESPACE, spec=spec)


def helm_release(rel: Release, repo: ChartRepo) -> Obj:
    """The HelmRelease of one lock entry: Helm release ``rel.name`` in ``rel.namespace``, stored there too."""
    spec: dict[str, Any] = {
        "interval": RELEASE_INTERVAL,
        "timeout": RELEASE_TIMEOUT,
        # Without releaseName Flux names the release <targetNamespace>-<name>; the stacks and verify
        # know it by the component's name.
        "releaseName": rel.name,
        "targetNamespace": rel.namespace,
        "storageNamespace": rel.namespace,
        "chart": {"spec": {"chart": rel.chart, "version": rel.version, "reconcileStrategy": "ChartVersion",
                           "sourceRef": {"kind": "HelmRepository", "name": repo.name, "namespace": NAMESPACE}}},
        # CRDs of a chart's crds/ folder are created on install and, unlike Helm's default, replaced
        # on upgrade, so an operator upgrade brings its new CRD versions.
        "install": {"crds": "CreateReplace", "remediation": {"retries": 3}},
        "upgrade": {"crds": "CreateReplace", "remediation": {"retries": 3}},
        "valuesFrom": [{"kind": "ConfigMap", "name": values_name(rel), "valuesKey": "values.yaml"}],
    }
    if rel.after:
        spec["dependsOn"] = [{"name": f"{PREFIX}-{a}"} for a in rel.after]
    return obj(HELM_API, "HelmRelease", release_name(rel), NAMESPACE, spec=spec)


def kustomization(part: str, path: str, depends: list[str], source: GitSource) -> Obj:
    """A Flux Kustomization applying one folder of the repository once ``depends`` are Ready."""
    spec: dict[str, Any] = {
        "interval": KUSTOMIZATION_INTERVAL,
        "retryInterval": "1m",
        "timeout": KUSTOMIZATION_TIMEOUT,
        "sourceRef": {"kind": "GitRepository", "name": source.flux_source},
        "path": f"./{path}",
        "prune": True,
        # Ready only when everything applied is healthy (a HelmRelease: released and its workloads
        # ready), which is what the Kustomizations depending on this one wait for.
        "wait": True,
    }
    if depends:
        spec["dependsOn"] = [{"name": kustomization_name(d)} for d in dict.fromkeys(depends)]
    return obj(KUSTOMIZE_API, "Kustomization", kustomization_name(part), NAMESPACE, spec=spec)


def entry(source: GitSource) -> Obj:
    """The one object to apply by hand (or from the cluster's own Flux path): it applies ``flux/``."""
    return obj(KUSTOMIZE_API, "Kustomization", PREFIX, NAMESPACE, spec={
        "interval": KUSTOMIZATION_INTERVAL, "retryInterval": "1m", "timeout": ENTRY_TIMEOUT,
        "sourceRef": {"kind": "GitRepository", "name": source.flux_source},
        "path": f"./{source.join('flux')}", "prune": True, "wait": True})
