"""What every deployer bundle shares: where the bundle sits in Git, install order, chart repositories.

The order comes from the render core alone: each release's ``after`` (the lock's order) gives its
*wave* (0 without ``after``, else one more than the latest release it waits for), and a plain
component folder waits for the releases whose CRDs its objects need (the ``CHART_KINDS`` of each
release's render module, as the Pulumi stacks use them).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import yaml

from gpucluster.errors import InputError
from gpucluster.render import Rendered
from gpucluster.render.releases import Release, chart_module
from gpucluster.spec.model import ClusterSpec

#: Every object a deployer bundle adds is named ``gpucluster-...`` (they share namespaces such as
#: ``flux-system`` and ``argocd`` with the site's own objects).
PREFIX = "gpucluster"
#: The component folder that holds the release namespaces: applied before any release.
NAMESPACES = "namespaces"


@dataclass(frozen=True)
class GitSource:
    """Where a GitOps deployer reads the bundle: the repository, the revision, the bundle's folder in it."""

    #: The bundle's folder relative to the repository root, POSIX, "" for the root itself.
    path: str
    #: The repository's URL (Argo CD Applications name it; Flux reads the GitRepository ``flux_source``).
    url: str = ""
    revision: str = "HEAD"
    #: The Flux GitRepository (namespace ``flux-system``) that fetches the repository.
    flux_source: str = "flux-system"

    def join(self, *parts: str) -> str:
        """A path inside the repository: the bundle's folder joined with ``parts``."""
        return str(PurePosixPath(self.path or ".", *parts))


def path_in_git(out: Path) -> str | None:
    """Where folder ``out`` lies in the Git repository that holds it ("" for its root), or None outside one."""
    target = out.resolve()
    for folder in (target, *target.parents):
        if (folder / ".git").exists():
            rel = target.relative_to(folder).as_posix()
            return "" if rel == "." else rel
    return None


def check_git_path(path: str) -> str:
    """``path`` as a clean relative POSIX path inside a repository ("" for its root); InputError otherwise."""
    raw = path.strip()
    pure = PurePosixPath(raw or ".")
    if "\\" in raw or pure.is_absolute() or ".." in pure.parts:
        raise InputError(f"--git-path {path!r}: give the bundle's folder relative to the root of the Git "
                         "repository the deployer reads, without '..' (e.g. deploy/lab)")
    return "" if str(pure) == "." else str(pure)


def check_flux_source(name: str) -> str:
    """A GitRepository name (a DNS-1123 label, as every Flux object name); InputError otherwise."""
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", name):
        raise InputError(f"--flux-source {name!r} is not a Flux GitRepository name (lower-case letters, digits "
                         "and '-', at most 63): give the name of the GitRepository in flux-system, e.g. flux-system")
    return name


def check_git_url(url: str) -> str:
    """A repository URL without credentials in it (the bundle holds no secrets); InputError otherwise."""
    parts = urlsplit(url)
    if not url or any(c.isspace() for c in url):
        raise InputError(f"--git-url {url!r} is not a repository URL")
    # ssh://git@host/… names a user, not a secret; a password, or a user in an http(s) URL (a token), is one.
    if parts.password or (parts.scheme in ("http", "https") and parts.username):
        raise InputError(f"--git-url names credentials ({parts.username}@…): the bundle must hold no secrets; "
                         "give the URL without them and declare the repository's credentials in the deployer")
    return url


def waves(releases: list[Release]) -> dict[str, int]:
    """Each release's install wave: 0 when it waits for nothing, else one more than its latest ``after``."""
    by_name = {r.name: r for r in releases}
    out: dict[str, int] = {}

    def wave(name: str, seen: tuple[str, ...]) -> int:
        if name in seen:
            raise ValueError(f"releases wait for each other in a cycle: {' -> '.join((*seen, name))}")
        if name not in out:
            out[name] = 1 + max((wave(a, (*seen, name)) for a in by_name[name].after), default=-1)
        return out[name]

    for rel in releases:
        wave(rel.name, ())
    return {r.name: out[r.name] for r in releases}


#: A Kubernetes kind as (apiVersion, kind).
Kind = tuple[str, str]


def chart_kinds(release: str) -> set[Kind]:
    """Kinds whose CRDs ``release``'s chart installs (its render module's ``CHART_KINDS``)."""
    return set(chart_module(release).CHART_KINDS)


def late_kinds(release: str) -> dict[Kind, Kind]:
    """Kinds whose CRDs ``release``'s operator applies only while it reconciles another kind (``AFTER_KINDS``)."""
    return dict(chart_module(release).AFTER_KINDS)


@dataclass(frozen=True)
class Part:
    """One apply step of a component folder, with what it waits for (besides the namespaces folder).

    Usually the whole folder. A folder holding objects whose CRDs appear only once the operator has
    reconciled another of its objects (``AFTER_KINDS``: nv-ipam's IPPool after the NicClusterPolicy)
    is applied in two steps, because Flux and Argo CD refuse a whole apply when one object's kind is
    not served yet (Flux dry-runs every object before applying any: fluxcd/pkg ssa/manager_apply.go
    ``ApplyAll``; Argo CD: github.com/argoproj/argo-cd/v3@v3.3.19/docs/user-guide/sync-options.md, "Skip Dry Run for new
    custom resources types"): the folder without those objects, then those objects alone (``<folder>-late``).
    A step that leaves objects out is a kustomize overlay of the folder that deletes them.
    """

    name: str
    folder: str
    #: Objects of the folder this step leaves out.
    drop: tuple[dict, ...] = ()
    #: Releases whose CRDs its objects need (lock order).
    releases: tuple[str, ...] = ()
    #: Other component folders that create namespaces its objects live in (registry order), such as
    #: the tenants folder for a secondary network's attachments in tenant namespaces.
    folders: tuple[str, ...] = ()
    #: The step this one follows (a late step: the folder's first step).
    after: str = ""


def parts(rendered: Rendered) -> list[Part]:
    """The apply steps of every component folder but the namespaces, in registry order."""
    made = {k: rel.name for rel in rendered.releases for k in chart_kinds(rel.name)}
    late = {k for rel in rendered.releases for k in late_kinds(rel.name)}
    folders = [c for c, objs in rendered.components.items() if objs]
    if NAMESPACES not in folders:
        raise ValueError("the render has no namespaces component; releases have nowhere to go")
    creates = {o["metadata"]["name"]: comp for comp in folders for o in rendered.components[comp]
               if o["kind"] == "Namespace"}

    def needs(comp: str, objs: list[dict]) -> dict:
        kinds = {(o["apiVersion"], o["kind"]) for o in objs}
        homes = {creates.get(o["metadata"].get("namespace", "")) for o in objs}
        return {"releases": tuple(r.name for r in rendered.releases if r.name in {made.get(k) for k in kinds}),
                "folders": tuple(f for f in folders if f in homes and f not in (comp, NAMESPACES))}

    out = []
    for comp in folders:
        if comp == NAMESPACES:
            continue
        objs = rendered.components[comp]
        later = [o for o in objs if (o["apiVersion"], o["kind"]) in late]
        first = [o for o in objs if o not in later]
        if not later or not first:
            out.append(Part(comp, comp, **needs(comp, objs)))
            continue
        out.append(Part(comp, comp, drop=tuple(later), **needs(comp, first)))
        out.append(Part(f"{comp}-late", comp, drop=tuple(first), after=comp, **needs(comp, later)))
    return out


def overlay(part: Part, depth: int) -> dict:
    """A kustomization ``depth`` folders below the bundle that applies ``part``'s folder without ``part.drop``."""
    deletes = [{"$patch": "delete", "apiVersion": o["apiVersion"], "kind": o["kind"],
                "metadata": {k: o["metadata"][k] for k in ("name", "namespace") if k in o["metadata"]}}
               for o in part.drop]
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": ["../" * depth + part.folder],
            "patches": [{"patch": yaml.safe_dump(d, sort_keys=False)} for d in deletes]}


@dataclass(frozen=True)
class ChartRepo:
    """A release's chart repository as the lock names it."""

    #: "helm" (an http(s) chart repository), "oci" (an OCI registry) or "local" (a folder of charts).
    kind: str
    url: str

    @property
    def name(self) -> str:
        """A stable object name for the repository: ``gpucluster-`` + its host and path."""
        parts = urlsplit(self.url)
        slug = re.sub(r"[^a-z0-9]+", "-", f"{parts.netloc}{parts.path}".lower()).strip("-")
        name = f"{PREFIX}-{slug}"
        if len(name) > 63:  # a DNS label: Flux and helmfile use it in derived names
            name = name[:54].rstrip("-") + "-" + hashlib.sha256(self.url.encode()).hexdigest()[:8]
        return name

    @property
    def oci_host_path(self) -> str:
        """An OCI repository without its scheme (Argo CD and helmfile spell it so)."""
        return self.url.removeprefix("oci://").rstrip("/")


def chart_repo(rel: Release, spec: ClusterSpec, deployer: str, *, local_ok: bool = False) -> ChartRepo:
    """Classify ``rel``'s repository for ``deployer``; InputError (naming the spec key) for one it cannot read."""
    repo = rel.repository
    scheme = urlsplit(repo).scheme if "://" in repo else ""
    if scheme in ("http", "https"):
        return ChartRepo("helm", repo)
    if scheme == "oci":
        return ChartRepo("oci", repo)
    where = f"{spec_key(spec, rel)} ({repo!r}, release {rel.name})"
    if scheme:
        raise InputError(f"{where}: {deployer} reads charts from http(s) chart repositories and oci:// registries, "
                         f"not {scheme}://; serve the chart from one of those and point the repository there")
    if not local_ok:
        raise InputError(f"{where} is a local chart folder, which {deployer} cannot read: it fetches charts "
                         "itself, inside the cluster. Air-gapped, serve the charts from a chart repository or "
                         "OCI registry inside the site and set the repository to its URL (the lock and the "
                         "bundle then name it), or use --deployer helmfile, which reads local chart folders")
    if not PurePosixPath(repo).is_absolute():
        raise InputError(f"{where} is a relative local path: helmfile would read it relative to helmfile.yaml's "
                         "folder, gpucluster relative to the working directory; give an absolute path")
    return ChartRepo("local", repo.rstrip("/"))


def spec_key(spec: ClusterSpec, rel: Release) -> str:
    """The spec key that sets ``rel``'s chart (e.g. ``scheduling.volcano.chart.repository``)."""

    def walk(node: object, path: str) -> str | None:
        if isinstance(node, dict):
            if set(node) == {"repository", "version", "chart"}:
                return path if (node["chart"], node["repository"]) == (rel.chart, rel.repository) else None
            for key, value in node.items():
                found = walk(value, f"{path}.{key}" if path else key)
                if found:
                    return found
        return None

    found = walk(spec.model_dump(by_alias=True, mode="json"), "")
    return f"{found}.repository" if found else f"the chart repository of release {rel.name}"
