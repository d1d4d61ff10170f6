"""etcd snapshots of the local world: ``gpucluster backup etcd`` and ``gpucluster restore etcd``.

Upstream's tools do the work, built from etcd v3.6.16 (tools/etcd): ``etcdctl snapshot save`` asks the
running member for a snapshot over its client port, with the API server's etcd client certificate
(etcd-io/etcd v3.6.16 etcdctl/ctlv3/command/snapshot_command.go); ``etcdutl snapshot status`` reads one
and checks its hash; ``etcdutl snapshot restore`` makes a new data directory from it, for a member
named as ours with our peer URL (etcdutl/etcdutl/snapshot_command.go). The order of a restore follows
Kubernetes' "Operating etcd clusters for Kubernetes" (kubernetes/website
content/en/docs/tasks/administer-cluster/configure-upgrade-etcd.md, "Restoring an etcd cluster"): stop
every API server, restore etcd, start etcd and then the API servers (and the controllers and scheduler,
which must not act on the cluster as it was a moment before).

The snapshot is checked before anything stops; a failed restore leaves the old data directory in place
and the world as ``gpucluster up`` brings it back. After a restore the data it replaced is kept as
``etcd-data.before-restore`` (one generation; ``gpucluster local down`` removes it with the world).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucluster import atomic, ownership
from gpucluster.errors import InputError, LocalWorldError

if TYPE_CHECKING:
    from gpucluster.local.world import World

#: Where a restore keeps the data directory it replaced (listed in world.OWNED).
BEFORE_RESTORE = "etcd-data.before-restore"
RESTORING = "etcd-data.restoring"
TIMEOUT_S = 300.0


def _tool(name: str) -> Path:
    from gpucluster.toolchain import path_of

    return path_of(name)


def _run(cmd: list[str], what: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise LocalWorldError(f"{what}: {Path(cmd[0]).name} exited with {proc.returncode}: "
                              f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc.stdout


def save(world: World, out: Path) -> dict[str, Any]:
    """Save a snapshot of the running world's etcd to ``out`` (0600, never over an existing file)."""
    state = world.state()
    if state is None or "etcd" not in state.components or not state.alive().get("etcd"):
        raise InputError(f"the local world in {world.dir} is not running: start it with `gpucluster up` (a snapshot "
                         "is taken from the running etcd)")
    exists = check_out(out)
    pki = world.pki
    # etcdctl writes <path>.part and renames it to <path>, which would replace a file that appeared
    # meanwhile: both names are reserved first (created here, so ours alone, and the only files this
    # function removes), and the snapshot gets the asked name only if that is still free.
    tmp = atomic.reserve(out)
    part = Path(f"{tmp}.part")
    try:
        os.close(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        _run([str(_tool("etcdctl")), f"--endpoints=https://127.0.0.1:{state.ports['etcd']}",
              f"--cacert={pki.ca}", f"--cert={pki.cert('apiserver-etcd-client')}",
              f"--key={pki.key('apiserver-etcd-client')}", "snapshot", "save", str(tmp)], "etcd snapshot save")
        os.chmod(tmp, 0o600)
        status = snapshot_status(tmp)
        atomic.publish_new(tmp, out, exists)
    finally:
        tmp.unlink(missing_ok=True)
        part.unlink(missing_ok=True)
    return {"file": str(out), **status}


def check_out(out: Path) -> InputError:
    """Refuse a snapshot file that cannot be written as asked; return the error for one that appears later."""
    if not out.parent.is_dir():
        raise InputError(f"{out.parent} is not a folder: create it first, or name a file in a folder that exists")
    exists = InputError(f"{out} exists: a snapshot is never written over a file; name a new one")
    if out.exists() or out.is_symlink():
        raise exists
    return exists


def snapshot_status(path: Path) -> dict[str, Any]:
    """``etcdutl snapshot status`` of ``path``: its revision, keys and size, its hash checked."""
    out = _run([str(_tool("etcdutl")), "snapshot", "status", str(path), "-w", "json"], f"{path}: not a usable snapshot")
    try:
        doc = json.loads(out)
        return {"revision": int(doc["revision"]), "keys": int(doc["totalKey"]), "bytes": int(doc["totalSize"])}
    except (ValueError, KeyError, TypeError):
        raise LocalWorldError(f"{path}: etcdutl snapshot status printed {out.strip()[:200]!r}") from None


def restore(world: World, source: Path) -> dict[str, Any]:
    """Replace the world's etcd data with the snapshot ``source`` and bring the world back up on it."""
    from gpucluster.local.world import FOLDER

    if not source.is_file():
        raise InputError(f"{source}: no such file (the file `gpucluster backup etcd` wrote)")
    with world.hold():
        state = world.state()
        if state is None:
            raise InputError(f"no local world in {world.dir}: start one with `gpucluster up`, then restore into it")
        try:
            status = snapshot_status(source)
        except LocalWorldError as err:
            raise InputError(f"{err}. Nothing was stopped.") from None
        peer = f"https://127.0.0.1:{state.ports['etcd-peer']}"
        data = world.dir / "etcd-data"
        restoring = world.dir / RESTORING
        # A restore that stopped half way left it: removed as the world's own entries are (listed in OWNED,
        # in a folder marked ours; a link out of the folder refuses, nothing removed).
        ownership.remove(world.dir, FOLDER, (RESTORING,))
        _run([str(_tool("etcdutl")), "snapshot", "restore", str(source), f"--data-dir={restoring}", "--name=local",
              f"--initial-cluster=local={peer}", f"--initial-advertise-peer-urls={peer}"],
             f"etcd snapshot restore of {source}")
        world.stop_control_plane()
        before = world.dir / BEFORE_RESTORE
        ownership.remove(world.dir, FOLDER, (BEFORE_RESTORE,))  # the generation before: the world's own
        os.rename(data, before)
        os.rename(restoring, data)
        result = world.up()
    return {"file": str(source), **status, "restarted": result.restarted}
