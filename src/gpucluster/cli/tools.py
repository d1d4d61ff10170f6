"""``gpucluster tools``: build and list the pinned toolchain."""

from __future__ import annotations

import click

from gpucluster.cli import jsonout, options
from gpucluster.toolchain import cache, core
from gpucluster.toolchain.versions import DEFAULT_TOOLS, TOOLS


@click.group("tools")
def tools() -> None:
    """Build and inspect the pinned toolchain (Kubernetes, etcd, kwok, controller-gen, Pulumi, ...)."""


@tools.command("install")
@click.argument("names", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Also build the optional tools (kubeadm, kubelet).")
@click.option("-q", "--quiet", is_flag=True, help="Print only the resulting paths.")
def install(names: tuple[str, ...], everything: bool, quiet: bool) -> None:
    """Build NAMES (default: every non-optional tool) into the per-user cache.

    Cached tools, and binaries on PATH reporting exactly the pinned version, are reused.
    """
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        raise click.BadParameter(
            f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(TOOLS)}", param_hint="NAMES"
        )
    wanted = list(names) or (list(TOOLS) if everything else list(DEFAULT_TOOLS))
    paths = core.ensure(wanted, progress=not quiet)
    if quiet:
        for name, path in paths.items():
            click.echo(f"{name}\t{path}")


@tools.command("list")
@options.output("text", "json")
def list_tools(output: str) -> None:
    """Show every tool with its pinned version and where it is (or ``missing``)."""
    rows = []
    for name, tool in TOOLS.items():
        found = core.locate(name)
        seconds = cache.marker_info(tool).get("seconds") if found else None
        rows.append({"name": name, "version": tool.version, "path": str(found) if found else None,
                     "optional": tool.optional, "buildSeconds": seconds})
    if output == "json":
        jsonout.emit(rows)
        return
    width = max(len(n) for n in TOOLS)
    vwidth = max(len(t.version) for t in TOOLS.values())
    for r in rows:
        built = f"  [built in {r['buildSeconds']} s]" if r["buildSeconds"] is not None else ""
        note = " (optional)" if r["optional"] else ""
        click.echo(f"{r['name']:<{width}}  {r['version']:<{vwidth}}  {r['path'] or 'missing'}{built}{note}")
