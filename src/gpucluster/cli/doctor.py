"""``gpucluster doctor``: why a GPU pod is Pending, one answer per pod with the fix.

Exit 0 when nothing diagnosed is blocked, 1 when something is (the answers were printed), 2 for bad
input (a malformed NS/NAME, a namespace or pod that does not exist, a bad spec or kubeconfig), 4 when
it could not look (the API server cannot be reached or refuses the reads: nothing was judged).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpucluster import inventory as inventories
from gpucluster.cli import jsonout, options
from gpucluster.errors import ClusterError, CouldNotLook, Failed

if TYPE_CHECKING:
    from gpucluster.doctor.model import Diagnosis
    from gpucluster.kube import Kube
    from gpucluster.spec.model import ClusterSpec


def _api(inventory: Path | None, kubeconfig: Path | None, context: str | None) -> tuple[ClusterSpec, Kube]:
    from gpucluster import kube

    spec = inventories.load(inventory)
    return spec, kube.Kube(inventories.kubeconfig_for(spec, kubeconfig), context=context)


@contextmanager
def _looking() -> Iterator[None]:
    """A cluster that cannot be read is "could not look" (exit 4), never "blocked" (exit 1)."""
    try:
        yield
    except ClusterError as err:
        raise CouldNotLook(f"could not look, nothing was diagnosed: {err}") from None


def _show(diagnoses: list[Diagnosis], output: str, started: float, calls: int) -> None:
    from gpucluster.doctor import report

    if output == "json":
        meta = {"seconds": round(time.perf_counter() - started, 3), "apiCalls": calls}
        jsonout.emit_text(report.to_json(diagnoses, meta))
    else:
        click.echo(report.text(diagnoses))
    blocked = sum(d.blocked for d in diagnoses)
    if blocked:
        raise Failed(f"{blocked} of {len(diagnoses)} blocked")


@click.group()
def doctor() -> None:
    """Why is my GPU pod Pending? The blocking cause and the fix, per pod."""


@doctor.command("pod")
@click.argument("target", metavar="NAMESPACE/NAME")
@options.inventory
@options.cluster
@options.output("text", "json")
def pod(target: str, inventory: Path | None, kubeconfig: Path | None, context: str | None, output: str) -> None:
    """Diagnose one pod (or the workload NAME whose pods the API server refuses to create)."""
    ns, sep, name = target.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise click.BadParameter(f"{target!r}: give the pod as NAMESPACE/NAME, e.g. ml-research/train-0",
                                 param_hint="NAMESPACE/NAME")
    from gpucluster import doctor as doc

    started = time.perf_counter()
    spec, api = _api(inventory, kubeconfig, context)
    with api, _looking():
        found = doc.pod(api, spec, ns, name)
        calls = api.reads
    _show([found], output, started, calls)


@doctor.command("pending")
@click.option("-n", "--namespace", required=True, help="Namespace whose Pending GPU pods to diagnose.")
@options.inventory
@options.cluster
@options.output("text", "json")
def pending(namespace: str, inventory: Path | None, kubeconfig: Path | None, context: str | None,
            output: str) -> None:
    """Diagnose every Pending GPU pod of a namespace, and every workload there whose pods are refused."""
    from gpucluster import doctor as doc

    started = time.perf_counter()
    spec, api = _api(inventory, kubeconfig, context)
    with api, _looking():
        found = doc.pending_in(api, spec, namespace)
        calls = api.reads
    _show(found, output, started, calls)
