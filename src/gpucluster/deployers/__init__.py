"""Deployer bundles: the objects Flux, Argo CD or helmfile need to install the pinned charts of a render.

``gpucluster render --deployer NAME`` adds them to the kustomize bundle (:mod:`gpucluster.bundle`),
which stays as it is: ``kubectl apply -k OUT`` applies the Helm-free parts whatever the deployer.
Every deployer installs each release of ``charts.lock.yaml`` from the repository the lock names, at
its exact version, with the bundle's ``helm/<release>.values.yaml``, in the lock's order (``after``),
after the namespaces, and applies each component folder after the releases whose CRDs it needs:

- ``flux`` (:mod:`.flux`): HelmRepository, HelmRelease and Flux Kustomizations under ``OUT/flux/``;
- ``argocd`` (:mod:`.argocd`): Applications with sync waves under ``OUT/argocd/``;
- ``helmfile`` (:mod:`.helmfile`): ``OUT/helmfile.yaml``;
- ``kustomize``: nothing more (the default).

Output is deterministic (the spec and the Git location alone decide it) and holds no secrets.
docs/gitops.md shows each bundle and how a pipeline uses it.
"""

from __future__ import annotations

from gpucluster.deployers import argocd, flux, helmfile
from gpucluster.deployers.common import GitSource, check_flux_source, check_git_path, check_git_url, path_in_git
from gpucluster.render import Rendered
from gpucluster.spec.model import ClusterSpec

__all__ = ["DEPLOYERS", "GIT_DEPLOYERS", "GitSource", "check_flux_source", "check_git_path", "check_git_url", "files",
           "path_in_git"]

DEPLOYERS = ("kustomize", "flux", "argocd", "helmfile")
#: Deployers that read the bundle from a Git repository (and so need to know where it sits there).
GIT_DEPLOYERS = ("flux", "argocd")


def files(deployer: str, spec: ClusterSpec, rendered: Rendered, base: dict[str, str],
          source: GitSource | None = None) -> dict[str, str]:
    """The files ``deployer`` adds to the bundle ``base`` (relative path → content; ``{}`` for kustomize).

    ``source`` (where the bundle sits in Git) is required for the Git deployers; ``base`` is the
    kustomize bundle (:func:`gpucluster.bundle.files`) whose values files the deployers use.
    """
    if deployer not in DEPLOYERS:
        raise ValueError(f"unknown deployer {deployer!r}; known: {', '.join(DEPLOYERS)}")
    if deployer in GIT_DEPLOYERS and source is None:
        raise ValueError(f"the {deployer} bundle needs the bundle's place in Git (a GitSource)")
    if deployer == "flux":
        assert source is not None
        values = {rel.name: base[f"helm/{rel.name}.values.yaml"] for rel in rendered.releases}
        return flux.files(spec, rendered, values, source)
    if deployer == "argocd":
        assert source is not None
        return argocd.files(spec, rendered, source)
    if deployer == "helmfile":
        return helmfile.files(spec, rendered)
    return {}
