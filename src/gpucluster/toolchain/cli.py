"""``gpucluster tools``: build and list the pinned toolchain."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from gpucluster.errors import GpuclusterError
from gpucluster.toolchain import cache, core
from gpucluster.toolchain.versions import DEFAULT_TOOLS, TOOLS


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn gpucluster errors into one ``Error: …`` line and the error's exit code."""
    try:
        yield
    except GpuclusterError as err:
        click.echo(f"Error: {err}", err=True)
        raise SystemExit(err.exit_code) from None


@click.group("tools")
def tools() -> None:
    """Build and inspect the pinned toolchain (Kubernetes, etcd, kwok, controller-gen)."""


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
    with user_errors():
        paths = core.ensure(wanted, progress=not quiet)
    if quiet:
        for name, path in paths.items():
            click.echo(f"{name}\t{path}")


@tools.command("list")
def list_tools() -> None:
    """Show every tool with its pinned version and where it is (or ``missing``)."""
    width = max(len(n) for n in TOOLS)
    vwidth = max(len(t.version) for t in TOOLS.values())
    for name, tool in TOOLS.items():
        found = core.locate(name)
        where = str(found) if found else "missing"
        note = " (optional)" if tool.optional else ""
        seconds = cache.marker_info(tool).get("seconds")
        built = f"  [built in {seconds} s]" if found and seconds is not None else ""
        click.echo(f"{name:<{width}}  {tool.version:<{vwidth}}  {where}{built}{note}")
