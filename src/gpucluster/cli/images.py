"""``gpucluster images``: image archives for air-gapped hosts (see :mod:`gpucluster.airgap`)."""

from __future__ import annotations

from pathlib import Path

import click

from gpucluster import airgap
from gpucluster.cli import jsonout, options
from gpucluster.errors import InputError


@click.group("images")
def images() -> None:
    """Container image archives for hosts that cannot pull from a registry."""


@images.command("build")
@click.argument("refs", nargs=-1, required=True)
@click.option("--out-dir", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder the archives go into (<name>_<tag>.tar each).")
@click.option("--bin-dir", "bin_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder holding the static binaries (kube-apiserver, kube-controller-manager, kube-scheduler, "
                   "etcd, pause) [default: the gpucluster toolchain cache].")
@options.output("text", "json")
def build(refs: tuple[str, ...], out_dir: Path, bin_dir: Path | None, output: str) -> None:
    """Write an OCI image archive for each REF (as `kubeadm config images list` prints them).

    Each image is one layer holding the binary of the image's name; its tag must name the version the
    binary reports. Archives are deterministic: an unchanged binary leaves its archive untouched, and a
    re-run reads no binary when neither it nor the archive changed (`.<archive>.inputs` records both).
    Import them on a host with `ctr -n k8s.io images import ARCHIVE`.
    """

    def binary_for(name: str) -> Path:
        if bin_dir is None:
            from gpucluster.toolchain import path_of

            return path_of(name)
        path = bin_dir / name
        if not path.is_file():
            raise InputError(f"{bin_dir} has no {name} binary: put the static {name} there, or leave out --bin-dir "
                             f"to use the toolchain's (`gpucluster tools install {name}`)")
        return path

    built = airgap.build(list(refs), out_dir, binary_for)
    if output == "json":
        jsonout.emit([{"ref": b.ref, "path": str(b.path), "binary": str(b.binary), "changed": b.changed}
                               for b in built])
        return
    for b in built:
        click.echo(f"{'wrote' if b.changed else 'unchanged'}\t{b.ref}\t{b.path}")
