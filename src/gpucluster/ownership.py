"""Folders gpucluster owns: a marker in each, and removal only inside a marked folder.

Every folder gpucluster keeps state in (the local world's state folder and its add-ons' folder, a
stack state folder) carries the marker ``.gpucluster-folder``, a JSON object::

    {"owner": "gpucluster", "kind": "local-world", "format": 1, "note": "..."}

- :func:`claim` makes a folder ours before anything is written into it: a missing or empty folder is
  marked; a folder with the marker of the same kind is taken as it is; one holding files without the
  marker is refused with :class:`~gpucluster.errors.NotOurs` (exit 2), naming the folder and how to go
  on. A folder an earlier gpucluster version made (before markers existed) is recognised by its layout
  (:class:`Kind`: only the names gpucluster writes there, plus a proof such as our lock file) and
  marked then.
- :func:`remove` deletes named entries of a folder only when the folder is ours (marked, or an earlier
  version's), each name being one path component inside it. A symbolic link among them that leads
  out of the folder is refused, the rest untouched; a folder is removed with :func:`shutil.rmtree`,
  which unlinks symbolic links inside it instead of following them (``rmtree.avoids_symlink_attacks``
  on Linux).

Paths are resolved first: a folder reached through a symbolic link is judged (and marked) where it is.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from gpucluster import atomic, lockfile
from gpucluster.errors import NotOurs

MARKER = ".gpucluster-folder"
FORMAT = 1
OWNER = "gpucluster"


@dataclass(frozen=True)
class Kind:
    """One kind of folder gpucluster makes.

    ``name`` goes into the marker; ``what`` names the folder in messages. ``names`` are the entries
    gpucluster writes at the top of such a folder (None: any): a folder without a marker counts as an
    earlier version's only when it holds nothing else, and ``earlier`` says so (default: the lock file
    :func:`gpucluster.lockfile.hold` leaves behind); ``inside``: instead, its parent folder carries the
    marker of that kind.
    """

    name: str
    what: str
    names: frozenset[str] | None = None
    earlier: Callable[[Path], bool] = lockfile.written_by_us
    inside: str | None = None


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _marker_kind(root: Path) -> str | None:
    """The kind the marker of ``root`` names; None when there is no marker; NotOurs when it is not one of ours."""
    marker = root / MARKER
    if not os.path.lexists(marker):
        return None
    why = ""
    if marker.is_symlink() or not marker.is_file():
        why = "not a regular file"
    else:
        try:
            data = json.loads(marker.read_text())
        except (OSError, ValueError) as err:
            data, why = None, f"not JSON: {err}"
        if not why and not (isinstance(data, dict) and data.get("owner") == OWNER
                            and data.get("format") == FORMAT and isinstance(data.get("kind"), str)):
            why = f'not {{"owner": "{OWNER}", "kind": ..., "format": {FORMAT}}}'
        if not why:
            assert isinstance(data, dict)
            return str(data["kind"])
    raise NotOurs(f"{marker} is not a gpucluster folder marker ({why}), so gpucluster writes and deletes "
                  f"nothing in {root}. Point the command at another folder, or remove {root} yourself if it "
                  "is an old gpucluster folder you no longer need.")


def _ours(root: Path, kind: Kind) -> bool:
    """True when ``root`` is ours (marked, or an earlier version's, which is marked now); False when empty.

    Raises :class:`NotOurs` for a folder that holds files without the marker, or another kind's marker.
    """
    found = _marker_kind(root)
    if found == kind.name:
        return True
    if found is not None:
        raise NotOurs(f"{root} is gpucluster's {found!r} folder ({root / MARKER}), not {kind.what}; "
                      "point the command at another folder")
    # a marker half-written by a crashed claim (an earlier version wrote it as MARKER.tmp)
    entries = sorted(e for e in os.listdir(root) if e != f"{MARKER}.tmp" and not atomic.temporary_of(e, MARKER))
    if not entries:
        return False
    if _earlier(root, kind, set(entries)):
        _mark(root, kind)
        return True
    shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
    raise NotOurs(f"{root} holds files ({shown}) but no {MARKER}, so it is not {kind.what} gpucluster made "
                  "and gpucluster writes and deletes nothing there. Pick an empty or new folder, or, if it "
                  "is an old gpucluster folder you no longer need, remove it yourself.")


def _earlier(root: Path, kind: Kind, entries: set[str]) -> bool:
    if kind.names is not None and not entries <= kind.names | {lockfile.LOCK_FILE}:
        return False
    if kind.inside is not None:
        try:
            return _marker_kind(root.parent) == kind.inside
        except NotOurs:
            return False
    return kind.earlier(root)


def _mark(root: Path, kind: Kind) -> None:
    data = {"owner": OWNER, "kind": kind.name, "format": FORMAT,
            "note": f"{kind.what}: gpucluster removes files here only while this marker is present"}
    atomic.write(root / MARKER, json.dumps(data, indent=1) + "\n")


def claim(folder: Path, kind: Kind) -> Path:
    """Make ``folder`` ours (created and marked when missing or empty) and return it resolved.

    Raises :class:`NotOurs` when it holds files and is not ours (see the module docstring).
    """
    root = Path(folder).expanduser().resolve()
    if os.path.lexists(root) and not root.is_dir():
        raise NotOurs(f"{root} exists and is not a folder; point the command at a folder")
    root.mkdir(parents=True, exist_ok=True)
    if not _ours(root, kind):
        _mark(root, kind)
    return root


def owned(folder: Path, kind: Kind) -> bool:
    """True when ``folder`` is ours (an earlier version's is marked now); False when missing or empty.

    Raises :class:`NotOurs` when it holds files and is not ours.
    """
    root = Path(folder).expanduser().resolve()
    return root.is_dir() and _ours(root, kind)


def remove(folder: Path, kind: Kind, names: Iterable[str]) -> list[str]:
    """Remove the entries ``names`` of ``folder`` when it is ours; returns the names removed.

    Nothing happens in a missing or empty folder. Each name is one path component. A symbolic link
    that leads out of the folder refuses the whole call (:class:`NotOurs`) before anything is removed;
    one inside is removed as a link.
    """
    root = Path(folder).expanduser().resolve()
    if not root.is_dir() or not _ours(root, kind):
        return []
    present = []
    for name in names:
        if name in ("", ".", "..") or "/" in name or "\0" in name:
            raise ValueError(f"not one path component: {name!r}")
        path = root / name
        if path.is_symlink() and not _inside(path.resolve(), root):
            raise NotOurs(f"{path} is a symbolic link to {path.resolve()}, outside {root}; gpucluster never "
                          "makes such a link, and nothing was removed: remove the link yourself (what it points "
                          "to is yours) and run again")
        if os.path.lexists(path):
            present.append(path)
    for path in present:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return [p.name for p in present]
