"""etcd snapshots of a kubeadm cluster: ``gpucluster backup etcd`` and ``restore etcd`` on real hosts.

kubeadm runs one etcd member as a static pod on every control-plane host. The host layer's playbooks do
the work there with upstream's tools from the toolchain (etcd v3.6.16, copied to the host for the run and
removed after it; kubeadm's etcd image need not hold them):

- ``playbooks/etcd-snapshot.yml``: ``etcdctl snapshot save`` against the first control-plane host's
  member, with kubeadm's etcd health-check client certificate, copied into a folder of the controller
  only its owner can read. Here the copy is checked with ``etcdutl snapshot status`` (its hash) and
  only then named as asked (0600, never over an existing file).
- ``playbooks/etcd-restore.yml``: the snapshot checked here first (a file that is no snapshot: exit 2,
  no host contacted); then on every control-plane host the API server, controller manager, scheduler
  and etcd stop, ``etcdutl snapshot restore`` makes each member's new data (one new cluster of all of
  them) inside its data directory, and etcd, the API servers and the controllers start again, in that
  order. Each data directory keeps the member folder it replaced as ``<data-dir>/member.before-restore-<stamp>``.

The local world has its own (:mod:`gpucluster.local.etcdsnap`); the snapshot file is the same format.
"""

from __future__ import annotations

import contextlib
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpucluster import atomic
from gpucluster.errors import GpuclusterError, InputError, LocalWorldError
from gpucluster.local import etcdsnap
from gpucluster.spec.model import ClusterSpec

SNAPSHOT_PLAYBOOK = "etcd-snapshot.yml"
RESTORE_PLAYBOOK = "etcd-restore.yml"
#: What the playbooks stop and start again on every control-plane host, in the order they start.
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")


def _tools(*names: str) -> dict[str, str]:
    from gpucluster.toolchain import path_of

    return {f"etcd_tools_{n}": str(path_of(n)) for n in names}


def _arch() -> str:
    """The controller's machine name as ``uname -m`` prints it: the toolchain's binaries are built for it."""
    return platform.machine()


def control_planes(spec: ClusterSpec) -> list[str]:
    return [h.name for h in spec.control_planes]


Runner = Callable[[tuple[str, ...], dict[str, Any]], Any]


def save(spec: ClusterSpec, out: Path, run_playbook: Runner) -> dict[str, Any]:
    """Snapshot the cluster's etcd on its first control-plane host into ``out``.

    ``run_playbook(playbooks, extra_vars)`` runs the host layer's playbooks (:func:`gpucluster.hostlayer.run`).
    """
    exists = etcdsnap.check_out(out)
    tools = _tools("etcdctl", "etcdutl")  # both now: a missing one fails before any host is contacted
    # 0700: the snapshot holds Secrets. Absolute: ansible-playbook runs in the checkout, not in this folder.
    folder = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent)).resolve()
    fetched = folder / "snapshot.db"
    try:
        run_playbook((SNAPSHOT_PLAYBOOK,), {**tools, "etcd_tools_arch": _arch(), "etcd_snapshot_dest": f"{folder}/"})
        if not fetched.is_file():
            raise GpuclusterError(
                f"playbooks/{SNAPSHOT_PLAYBOOK} ended without copying a snapshot to {folder}: "
                f"was {control_planes(spec)[0]} skipped (not in the inventory's control_plane "
                "group?)"
            )
        os.chmod(fetched, 0o600)
        status = etcdsnap.snapshot_status(fetched)
        atomic.publish_new(fetched, out, exists)
    finally:
        fetched.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # only when empty: the folder is ours, what else is in it is not
            folder.rmdir()
    return {"file": str(out), "host": control_planes(spec)[0], **status}


def restore(spec: ClusterSpec, source: Path, run_playbook: Runner) -> dict[str, Any]:
    """Put every control-plane host's etcd member back to the snapshot ``source`` (checked first)."""
    if not source.is_file():
        raise InputError(f"{source}: no such file (the file `gpucluster backup etcd` wrote)")
    try:
        status = etcdsnap.snapshot_status(source)
    except LocalWorldError as err:  # etcdutl refused it: the file is the user's mistake here
        raise InputError(f"{err}. No host was contacted.") from None
    tools = _tools("etcdutl")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    run_playbook(
        (RESTORE_PLAYBOOK,),
        {
            **tools,
            "etcd_tools_arch": _arch(),
            "etcd_restore_confirm": True,
            "etcd_restore_snapshot": str(source.resolve()),
            "etcd_restore_stamp": stamp,
        },
    )
    hosts = control_planes(spec)
    return {
        "file": str(source),
        **status,
        "restarted": [f"{h}: {', '.join(COMPONENTS)}" for h in hosts],
        "keptAs": f"<data-dir>/member.before-restore-{stamp}",
    }
