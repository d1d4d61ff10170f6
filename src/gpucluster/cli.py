"""The ``gpucluster`` command line.

:func:`main` is a click group tests call in-process; :func:`entrypoint` is the console script. One
handler maps our exceptions to exit codes (2 for bad input, 1 for failures) and never shows a
traceback for a user mistake.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import click

from gpucluster import __version__, catalog
from gpucluster.errors import GpuclusterError, SpecError

REPO_ROOT = Path(__file__).resolve().parents[2]


def default_inventory() -> Path:
    """``inventories/local`` in the current folder, else the one shipped next to this package."""
    here = Path("inventories/local")
    return here if here.exists() else REPO_ROOT / "inventories" / "local"


inventory_option = click.option(
    "-i", "--inventory", "inventory", type=click.Path(path_type=Path), default=None,
    help="Inventory folder holding cluster.yaml (default: inventories/local, the embedded local world).",
)


def _load(inventory: Path | None):
    from gpucluster.spec import load_spec

    return load_spec(inventory or default_inventory())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpucluster")
def main() -> None:
    """Stand up and verify GPU Kubernetes clusters from one spec (inventories/<env>/cluster.yaml)."""


@main.command()
@inventory_option
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def validate(inventory: Path | None, output: str) -> None:
    """Check a cluster spec; list every problem with its path and a hint. Exit 2 on errors."""
    from gpucluster.spec import warnings_of

    try:
        spec = _load(inventory)
    except SpecError as err:
        if output == "json":
            click.echo(json.dumps({"valid": False, "source": err.source,
                                   "problems": [p.__dict__ for p in err.problems]}, indent=2))
            raise click.exceptions.Exit(err.exit_code) from None
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


@main.command()
@inventory_option
@click.option("-o", "--out", "out", type=click.Path(path_type=Path), required=True, help="Output folder.")
@click.option("--force", is_flag=True, help="Replace a non-empty folder that holds no previous bundle.")
def render(inventory: Path | None, out: Path, force: bool) -> None:
    """Render the GitOps bundle: manifests per component, kustomization, Helm values, chart lock."""
    from gpucluster import bundle
    from gpucluster.render import render as render_spec

    started = time.perf_counter()
    spec = _load(inventory)
    changes = bundle.write(render_spec(spec), out, force=force)
    counts = {k: sum(1 for v in changes.values() if v == k) for k in ("created", "updated", "removed", "unchanged")}
    for path, what in changes.items():
        if what != "unchanged":
            click.echo(f"  {what:8} {path}")
    summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    if not any(counts[k] for k in ("created", "updated", "removed")):
        summary += " (no changes)"
    click.echo(f"rendered {spec.metadata.name} to {out}: {summary} in {time.perf_counter() - started:.2f}s")


@main.command("catalog")
def catalog_cmd() -> None:
    """List the GPU models the spec accepts, with memory and MIG profiles."""
    for key, m in catalog.catalog().items():
        migs = ", ".join(p for p in m.mig.profiles) if m.mig else "no MIG"
        click.echo(f"{key:16} {m.product_name:24} {m.memory_mib:>7} MiB  {m.architecture:13} "
                   f"cc {m.compute_capability:5} {migs}")


@main.command("spec-reference")
@click.option("-o", "--out", "out", type=click.Path(path_type=Path), default=None,
              help="Write to this file instead of stdout.")
def spec_reference(out: Path | None) -> None:
    """Print the spec reference (Markdown) generated from the model."""
    from gpucluster.spec.reference import markdown

    text = markdown()
    if out:
        out.write_text(text)
        click.echo(f"wrote {out}")
    else:
        click.echo(text, nl=False)


def _add_optional_groups() -> None:
    """Command groups that live in their own packages (toolchain, local world, stacks, ...)."""
    import importlib

    for module, attr in (("gpucluster.toolchain.cli", "tools"), ("gpucluster.local.cli", "local"),
                         ("gpucluster.flow", "commands"), ("gpucluster.verify.cli", "verify"),
                         ("gpucluster.cost", "cost")):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name and module.startswith(err.name):
                continue  # that part of the product is not installed in this checkout
            raise
        found = getattr(mod, attr)
        for cmd in found if isinstance(found, list) else [found]:
            main.add_command(cmd)


_add_optional_groups()


def entrypoint(argv: list[str] | None = None) -> int:
    """Run the CLI; map errors to exit codes without tracebacks for user mistakes."""
    try:
        rc = main.main(args=argv, prog_name="gpucluster", standalone_mode=False)
        if isinstance(rc, int):  # click returns ctx.exit(code) codes when not standalone
            return rc
    except click.exceptions.Exit as err:
        return err.exit_code
    except click.ClickException as err:
        err.show()
        return err.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except GpuclusterError as err:
        click.secho(f"error: {err}", fg="red", err=True)
        return err.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    except Exception as err:  # a bug in gpucluster, not a user mistake
        if os.environ.get("GPUCLUSTER_DEBUG"):
            raise
        click.secho(f"internal error: {type(err).__name__}: {err}\n"
                    "(this is a gpucluster bug; rerun with GPUCLUSTER_DEBUG=1 for the traceback)",
                    fg="red", err=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(entrypoint())
