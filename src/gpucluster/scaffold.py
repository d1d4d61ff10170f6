"""``gpucluster init ENV``: a new inventory folder for real hosts, valid as written.

Writes ``cluster.yaml`` (the spec, commented, with the choices only the operator can make marked
``CHANGE``), ``hosts.gpucluster.yml`` (the Ansible inventory plugin's config) and
``group_vars/all.yml`` (SSH user, privilege escalation, package repositories). The files are the
templates ``data/init/<file>.in`` with a few values filled in (``string.Template``): comments are their
point, so they are text, not YAML written by a dumper; the tests load what they make.

Nothing is written into a folder that holds anything: the folder must be missing or empty (the rule
of :mod:`gpucluster.ownership`, without its marker: an inventory is the operator's, not a state folder
of ours). The files are written into a new sibling folder that is renamed into place once they are all
there and the spec has loaded, so a failure leaves nothing behind.
"""

from __future__ import annotations

import os
import re
import shutil
import string
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from gpucluster import catalog, versions
from gpucluster.errors import InputError

#: The files ``init`` writes, relative to the inventory folder (their templates: ``data/init/<file>.in``).
FILES = ("cluster.yaml", "hosts.gpucluster.yml", "group_vars/all.yml")
DEFAULT_GPU_MODEL = "H100-SXM5-80GB"
#: Ubuntu's cloud images log in as ``ubuntu`` (the spec's default OS is Ubuntu 24.04).
DEFAULT_SSH_USER = "ubuntu"
#: The Kubernetes community package repository of one minor version, as ``kubernetes_node`` derives it
#: (roles/kubernetes_node/defaults/main.yml): shown in group_vars/all.yml for the spec's minor.
REPO_URL = "https://pkgs.k8s.io/core:/stable:/v{minor}/deb/"
#: A login name: what useradd accepts by default on Debian and Ubuntu (NAME_REGEX in adduser.conf),
#: and nothing that could break the YAML it is written into.
SSH_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


@dataclass(frozen=True)
class Written:
    """What :func:`write` made: the inventory folder and the files in it."""

    folder: Path
    files: tuple[str, ...]
    name: str


def _name_of(folder: Path, name: str | None) -> str:
    from gpucluster.spec.model import DNS1123_LABEL

    value = name if name is not None else folder.name
    if not DNS1123_LABEL.fullmatch(value):
        fixed = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")[:63].rstrip("-") or "prod"
        where = "--name" if name is not None else f"the folder name {value!r} (the cluster's default name)"
        raise InputError(f"{where}: {value!r} is not a valid cluster name (at most 63 lowercase letters, digits "
                         f"and '-', starting and ending with a letter or digit); hint: --name {fixed}")
    return value


def _check_empty(folder: Path) -> None:
    if os.path.lexists(folder) and not folder.is_dir():
        raise InputError(f"{folder} exists and is not a folder: give a new folder for the inventory")
    if folder.is_dir():
        entries = sorted(os.listdir(folder))
        if entries:
            shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
            raise InputError(f"{folder} holds files ({shown}); gpucluster init writes only into a new or empty "
                             "folder, so nothing of yours is overwritten. Give another folder, e.g. "
                             f"{folder.parent / (folder.name + '-new')}")


def _values(inventory: Path, name: str, gpu_model: str, ssh_user: str) -> dict[str, str]:
    if gpu_model not in catalog.catalog():
        from difflib import get_close_matches

        keys = list(catalog.catalog())
        near = [k for k in keys if k.lower().startswith(gpu_model.lower())] or get_close_matches(gpu_model, keys, n=3)
        raise InputError(f"--gpu-model {gpu_model!r} is not in the GPU catalog"
                         + (f"; hint: {', '.join(near)}" if near else "")
                         + " (`gpucluster catalog` lists them)")
    if not SSH_USER.fullmatch(ssh_user):
        raise InputError(f"--ssh-user {ssh_user!r} is not a login name (lowercase letters, digits, '_' and '-', "
                         "starting with a letter or '_', at most 32 characters)")
    if not str(inventory).isprintable():
        raise InputError(f"the inventory path {str(inventory)!r} holds control characters: give a plain path")
    minor = ".".join(versions.KUBERNETES.split(".")[:2])
    return {"name": name, "inventory": str(inventory), "gpu_model": gpu_model, "ssh_user": ssh_user,
            "version": versions.KUBERNETES, "minor": minor, "repo_url": REPO_URL.format(minor=minor)}


def render(inventory: Path, name: str, gpu_model: str = DEFAULT_GPU_MODEL,
           ssh_user: str = DEFAULT_SSH_USER) -> dict[str, str]:
    """The text of each file of :data:`FILES` for this inventory (raises InputError for a bad option)."""
    values = _values(inventory, name, gpu_model, ssh_user)
    base = resources.files("gpucluster") / "data" / "init"
    return {rel: string.Template(base.joinpath(f"{rel}.in").read_text()).substitute(values) for rel in FILES}


def write(folder: Path, *, name: str | None = None, gpu_model: str = DEFAULT_GPU_MODEL,
          ssh_user: str = DEFAULT_SSH_USER) -> Written:
    """Write a new inventory into ``folder`` (missing or empty), or raise InputError and write nothing."""
    from gpucluster.spec import load_spec

    folder = Path(folder)
    cluster = _name_of(folder.resolve(), name)
    _check_empty(folder)
    texts = render(folder, cluster, gpu_model, ssh_user)
    target = folder.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.init-", dir=target.parent))
    try:
        for rel, text in texts.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        load_spec(staging)  # the spec as written must load: a failure here is a bug of these templates
        if target.is_dir():
            target.rmdir()  # empty (checked above); fails, and writes nothing, if something appeared since
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o777 & ~umask)  # mkdtemp made it private; an inventory is an ordinary folder
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Written(target, FILES, cluster)
