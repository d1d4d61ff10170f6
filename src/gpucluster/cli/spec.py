"""Commands on the spec alone: ``validate``, ``render``, ``catalog``, ``spec-reference``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from gpucluster import catalog
from gpucluster import inventory as inventories
from gpucluster.cli import options
from gpucluster.errors import SpecError


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
            click.echo(json.dumps({"valid": False, "source": err.source,
                                   "problems": [p.__dict__ for p in err.problems]}, indent=2))
        raise
    warnings = warnings_of(spec)
    if output == "json":
        click.echo(json.dumps({"valid": True, "cluster": spec.metadata.name,
                               "problems": [p.__dict__ for p in warnings]}, indent=2))
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
def render(inventory: Path | None, out_dir: Path | None, output: str, force: bool) -> None:
    """Render the GitOps bundle into --out-dir: manifests per component, kustomization, Helm values, chart lock."""
    from gpucluster import bundle
    from gpucluster.render import render as render_spec

    if out_dir is None:
        raise click.UsageError("where should the bundle go? give --out-dir PATH")
    fmt, out = output, out_dir
    started = time.perf_counter()
    spec = inventories.load(inventory)
    changes = bundle.write(render_spec(spec), out, force=force)
    counts = {k: sum(1 for v in changes.values() if v == k) for k in ("created", "updated", "removed", "unchanged")}
    if fmt == "json":
        click.echo(json.dumps({"cluster": spec.metadata.name, "outDir": str(out), "counts": counts,
                               "changes": {p: w for p, w in changes.items() if w != "unchanged"}}, indent=2))
        return
    for path, what in changes.items():
        if what != "unchanged":
            click.echo(f"  {what:8} {path}")
    summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    if not any(counts[k] for k in ("created", "updated", "removed")):
        summary += " (no changes)"
    click.echo(f"rendered {spec.metadata.name} to {out}: {summary} in {time.perf_counter() - started:.2f}s")


@click.command("catalog")
@options.output("text", "json")
def catalog_cmd(output: str) -> None:
    """List the GPU models the spec accepts, with memory and MIG profiles."""
    models = catalog.catalog()
    if output == "json":
        click.echo(json.dumps({key: {"productName": m.product_name, "memoryMiB": m.memory_mib,
                                     "architecture": m.architecture, "computeCapability": m.compute_capability,
                                     "migProfiles": list(m.mig.profiles) if m.mig else []}
                               for key, m in models.items()}, indent=2))
        return
    for key, m in models.items():
        migs = ", ".join(p for p in m.mig.profiles) if m.mig else "no MIG"
        click.echo(f"{key:16} {m.product_name:24} {m.memory_mib:>7} MiB  {m.architecture:13} "
                   f"cc {m.compute_capability:5} {migs}")


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
