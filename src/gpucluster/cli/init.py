"""``gpucluster init ENV``: scaffold an inventory folder for real hosts (see :mod:`gpucluster.scaffold`)."""

from __future__ import annotations

from pathlib import Path

import click

from gpucluster.cli import jsonout, options


@click.command("init")
@click.argument("folder", metavar="ENV", type=click.Path(path_type=Path))
@click.option("--name", default=None, help="The cluster's name (metadata.name) [default: the folder's name].")
@click.option("--gpu-model", default=None, metavar="MODEL",
              help="GPU model of the example pool, a `gpucluster catalog` key [default: H100-SXM5-80GB].")
@click.option("--ssh-user", default=None, metavar="USER", help="SSH login on the hosts [default: ubuntu].")
@options.output("text", "json")
def init(folder: Path, name: str | None, gpu_model: str | None, ssh_user: str | None, output: str) -> None:
    """Write a new inventory folder ENV for real hosts: cluster.yaml, hosts.gpucluster.yml, group_vars/all.yml.

    ENV must be missing or empty. The spec is valid as written; edit the lines marked CHANGE, then
    `gpucluster validate -i ENV`.
    """
    from gpucluster import scaffold

    written = scaffold.write(folder, name=name, gpu_model=gpu_model or scaffold.DEFAULT_GPU_MODEL,
                             ssh_user=ssh_user or scaffold.DEFAULT_SSH_USER)
    if output == "json":
        jsonout.emit({"cluster": written.name, "inventory": str(written.folder),
                               "files": list(written.files)})
        return
    for rel in written.files:
        click.echo(f"  created  {folder / rel}")
    click.echo(f"wrote the inventory of {written.name} to {folder}. Next: edit the lines marked CHANGE in "
               f"{folder / 'cluster.yaml'} and {folder / 'group_vars' / 'all.yml'}, then\n"
               f"  gpucluster validate -i {folder}\n"
               f"  gpucluster up -i {folder} --dry-run\n"
               "(docs/real-cluster.md walks through the rest)")
