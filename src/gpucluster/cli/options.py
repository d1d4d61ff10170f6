"""Options every command spells the same way.

- ``-i/--inventory PATH``: the inventory folder (default: ``$GPUCLUSTER_INVENTORY``, else ``inventories/local``).
- ``--kubeconfig PATH`` and ``--context NAME``: the cluster to act on.
- ``-o/--output FORMAT``: what is printed on stdout: ``text`` (the default), ``json`` (one document, on
  error too: docs/output.md), and per command ``csv`` or ``junit``.
- ``--out-dir PATH``: where a command writes files (a bundle, reports).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from gpucluster.verify import checks

F = TypeVar("F", bound=Callable[..., Any])


def combine(options: Sequence[Callable[[F], F]]) -> Callable[[F], F]:
    def decorate(f: F) -> F:
        for opt in reversed(options):
            f = opt(f)
        return f

    return decorate


inventory = click.option(
    "-i", "--inventory", "inventory", type=click.Path(path_type=Path), default=None,
    help="Inventory folder holding cluster.yaml [default: $GPUCLUSTER_INVENTORY, else inventories/local, the "
         "embedded local world].",
)
kubeconfig = click.option(
    "--kubeconfig", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Kubeconfig of the cluster [default: the local world's for the local inventory, else the admin "
         "kubeconfig `gpucluster up` fetched from the init host, else $KUBECONFIG].",
)
context = click.option("--context", default=None, metavar="NAME", help="Kubeconfig context to use.")
cluster = combine([kubeconfig, context])
no_chart_repositories = click.option(
    "--no-chart-repositories", "no_chart_repositories", is_flag=True,
    help="Chart repositories cannot be reached from here: releases from a repository are reported as not "
         "installed, with the objects whose CRDs they bring, and what their node agents would publish is not "
         "measured (those checks are allowed to be). Air-gapped sites point a release's `repository` at a local "
         "chart folder.",
)
allow_not_measured = click.option(
    "--allow-not-measured", "allow_not_measured", multiple=True, metavar="CHECK[,CHECK...]",
    help="Rows of these checks that cannot be measured do not fail the run (each is still listed with its "
         "reason). Every other unmeasured row fails it. The local world allows "
         f"{', '.join(sorted(checks.LOCAL_WORLD))} (it installs no chart), and nothing else.",
)
out_dir = click.option(
    "--out-dir", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Folder to write files into.",
)
world_dir = click.option(
    "--world-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="State folder of the local world (local inventory only).",
)
local_state_dir = click.option(
    "--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Where the local world's state, certificates, logs and kubeconfig live "
         "[default: $GPUCLUSTER_STATE/local or ~/.local/state/gpucluster/local].",
)


def output(*formats: str, default: str | None = None) -> Callable[[F], F]:
    """``-o/--output FORMAT`` with the command's formats (the first is the default)."""
    return click.option(
        "-o", "--output", "output", type=click.Choice(list(formats)), default=default or formats[0],
        show_default=True, help="What to print on stdout.",
    )
