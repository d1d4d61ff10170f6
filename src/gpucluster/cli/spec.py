"""Commands on the spec alone: ``validate``, ``render``, ``catalog``, ``spec-reference``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpucluster import catalog
from gpucluster import inventory as inventories
from gpucluster.cli import jsonout, options
from gpucluster.errors import InputError, Problem, SpecError
from gpucluster.spec import spec_path

if TYPE_CHECKING:
    from gpucluster.deployers import GitSource


def _validation(valid: bool, source: str, cluster: str | None, problems: list[Problem]) -> dict[str, Any]:
    """``validate -o json``: the same keys whether the spec is valid or not."""
    return {"valid": valid, "source": source, "cluster": cluster,
            "errors": sum(p.severity == "error" for p in problems),
            "warnings": sum(p.severity == "warning" for p in problems),
            "problems": [p.__dict__ for p in problems]}


@click.command()
@options.inventory
@options.output("text", "json")
def validate(inventory: Path | None, output: str) -> None:
    """Check a cluster spec; list every problem with its path and a hint. Exit 2 on errors."""
    from gpucluster.spec import warnings_of

    try:
        spec = inventories.load(inventory)
    except SpecError as err:
        if output == "json":
            jsonout.emit(_validation(False, err.source, None, err.problems))
        raise
    except InputError as err:  # no spec file, unreadable, not YAML: the same document, one problem
        if output == "json":
            jsonout.emit(_validation(False, str(inventories.resolve(inventory)), None, [Problem("", str(err))]))
        raise
    warnings = warnings_of(spec)
    if output == "json":
        jsonout.emit(_validation(True, str(spec_path(inventories.resolve(inventory))), spec.metadata.name, warnings))
        return
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    gpus = sum(len(p.hosts) * p.gpu.count for p in spec.gpu_pools if p.gpu)
    click.echo(f"{spec.metadata.name}: valid ({len(spec.hosts)} hosts, {len(spec.node_pools)} pools, "
               f"{gpus} GPUs, {len(spec.tenants)} tenants)")


@click.command()
@options.inventory
@options.out_dir
@options.output("text", "json")
@click.option("--force", is_flag=True, help="Replace a non-empty folder that holds no previous bundle.")
@click.option("--deployer", type=click.Choice(["kustomize", "flux", "argocd", "helmfile"]), default="kustomize",
              show_default=True,
              help="Also write what this deployer needs to install the pinned charts in the lock's order: Flux "
                   "HelmReleases and Kustomizations (OUT/flux), Argo CD Applications with sync waves (OUT/argocd), "
                   "or OUT/helmfile.yaml. kustomize: the bundle alone. See docs/gitops.md.")
@click.option("--git-path", default=None, metavar="PATH",
              help="flux, argocd: the bundle's folder relative to the root of the Git repository the deployer "
                   "reads [default: where --out-dir lies in the Git repository that holds it].")
@click.option("--git-url", default=None, metavar="URL",
              help="argocd: the URL of that Git repository, as Argo CD knows it (no credentials in it).")
@click.option("--git-revision", default=None, metavar="REV",
              help="argocd: the revision Argo CD syncs (a branch, tag or commit) [default: HEAD].")
@click.option("--flux-source", default=None, metavar="NAME",
              help="flux: the GitRepository in flux-system that fetches that repository [default: flux-system, "
                   "the one `flux bootstrap` creates].")
def render(inventory: Path | None, out_dir: Path | None, output: str,
           force: bool, deployer: str, git_path: str | None, git_url: str | None, git_revision: str | None,
           flux_source: str | None) -> None:
    """Render the GitOps bundle into --out-dir: manifests per component, kustomization, Helm values, chart lock.

    With --deployer flux|argocd|helmfile, also the objects that deployer needs to install the pinned
    charts with these values in the lock's order; `kubectl apply -k OUT` still applies the Helm-free parts.
    """
    from gpucluster import bundle, deployers
    from gpucluster.render import render as render_spec

    if out_dir is None:
        raise click.UsageError("where should the bundle go? give --out-dir PATH")
    fmt, out = output, out_dir
    source = _git_source(deployer, out, git_path, git_url, git_revision, flux_source)
    started = time.perf_counter()
    spec = inventories.load(inventory)
    rendered = render_spec(spec)
    extra = deployers.files(deployer, spec, rendered, bundle.files(rendered), source)
    changes = bundle.write(rendered, out, force=force, extra=extra)
    counts = {k: sum(1 for v in changes.values() if v == k) for k in ("created", "updated", "removed", "unchanged")}
    if fmt == "json":
        jsonout.emit({"cluster": spec.metadata.name, "outDir": str(out), "deployer": deployer,
                               "counts": counts, "changes": {p: w for p, w in changes.items() if w != "unchanged"}})
        return
    for path, what in changes.items():
        if what != "unchanged":
            click.echo(f"  {what:8} {path}")
    summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    if not any(counts[k] for k in ("created", "updated", "removed")):
        summary += " (no changes)"
    click.echo(f"rendered {spec.metadata.name} to {out}: {summary} in {time.perf_counter() - started:.2f}s")


def _git_source(deployer: str, out: Path, git_path: str | None, git_url: str | None, git_revision: str | None,
                flux_source: str | None) -> GitSource | None:
    """Where a Git deployer finds the bundle (None for the others); usage errors name the flag."""
    from gpucluster import deployers

    given = {"--git-path": git_path, "--git-url": git_url, "--git-revision": git_revision, "--flux-source": flux_source}
    allowed = {"flux": ("--git-path", "--flux-source"), "argocd": ("--git-path", "--git-url", "--git-revision")}
    stray = [flag for flag, value in given.items() if value is not None and flag not in allowed.get(deployer, ())]
    if stray:
        raise click.UsageError(f"{', '.join(stray)} {'does' if len(stray) == 1 else 'do'} not apply to "
                               f"--deployer {deployer}")
    if deployer not in deployers.GIT_DEPLOYERS:
        return None
    if git_path is None:
        git_path = deployers.path_in_git(out)
        if git_path is None:
            raise InputError(f"--out-dir {out} is not inside a Git repository, so where {deployer} will find the "
                             "bundle is unknown: give --git-path PATH (the bundle's folder relative to the root of "
                             "the repository the deployer reads)")
    if deployer == "argocd" and git_url is None:
        raise InputError("--deployer argocd: give --git-url URL, the Git repository Argo CD reads the bundle from "
                         "(its Applications name it)")
    return deployers.GitSource(path=deployers.check_git_path(git_path),
                               url=deployers.check_git_url(git_url) if git_url is not None else "",
                               revision=git_revision or "HEAD",
                               flux_source=deployers.check_flux_source(flux_source or "flux-system"))


@click.command("catalog")
@options.output("text", "json")
def catalog_cmd(output: str) -> None:
    """List the GPU models the spec accepts, with memory and MIG profiles, and the server platforms whose PCIe
    layout is cited (text output)."""
    models = catalog.catalog()
    if output == "json":
        jsonout.emit({key: {"productName": m.product_name, "memoryMiB": m.memory_mib,
                            "architecture": m.architecture, "computeCapability": m.compute_capability,
                            "migProfiles": list(m.mig.profiles) if m.mig else [],
                            # where each value comes from: a real-board capture, a mock, nominal
                            "sources": dict(m.sources),
                            "migProfileMemory": {p.name: {"memoryMiB": p.memory_mib, "source": p.memory_source}
                                                 for p in (m.mig.profiles.values() if m.mig else [])}}
                      for key, m in models.items()})
        return
    for key, m in models.items():
        migs = ", ".join(p for p in m.mig.profiles) if m.mig else "no MIG"
        click.echo(f"{key:16} {m.product_name:24} {m.memory_mib:>7} MiB  {m.architecture:13} "
                   f"cc {m.compute_capability:5} {migs}")
    click.echo("\nplatforms with a cited PCIe/NUMA layout (nodePools[].gpu.platform; docs/topology.md):")
    for key, p in catalog.platforms().items():
        click.echo(f"{key:16} {len(p.gpus)} x {', '.join(p.models):24} {p.description}")


@click.command("spec-reference")
@options.out_dir
def spec_reference(out_dir: Path | None) -> None:
    """Print the spec reference (Markdown) generated from the model, or write it as OUT_DIR/spec-reference.md."""
    from gpucluster.spec.reference import markdown

    text = markdown()
    if out_dir is None:
        click.echo(text, nl=False)
        return
    out_dir.mkdir(parents=True, exist_ok=True)  # click has refused an existing file already
    target = out_dir / "spec-reference.md"
    target.write_text(text)
    click.echo(f"wrote {target}")


commands = [validate, render, catalog_cmd, spec_reference]
