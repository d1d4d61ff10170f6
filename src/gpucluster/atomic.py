"""Writing a file in one step: readers see the old content or the new, never a part of it.

:func:`write` writes into a new hidden file beside the target (``.NAME.<random>.tmp``, created
exclusively, so two writers never share one) and renames it over the target (``rename(2)`` replaces
atomically within one filesystem). If the write fails the temporary file is removed and the target is
untouched. Without ``mode`` the file gets the mode a plain ``open()`` would give it (0666 less the
umask); a replaced file does not keep its old mode.

No ``fsync``: this guards against a crash or interruption of gpucluster, not a power cut.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

SUFFIX = ".tmp"


def temporary_of(entry: str, name: str) -> bool:
    """Whether ``entry`` (a file name) is a temporary file :func:`write` made for ``name`` and left by a crash."""
    return entry.startswith(f".{name}.") and entry.endswith(SUFFIX)


def write(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Replace ``path``'s content with ``data`` (text is written as UTF-8) in one step; see the module docstring."""
    path = Path(path)
    blob = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}{SUFFIX}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)  # the umask narrowed the mode os.open was given
            fh.write(blob)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_if_changed(path: Path, data: str | bytes, *, mode: int | None = None) -> bool:
    """:func:`write` unless ``path`` already holds exactly ``data``; True when it wrote."""
    path = Path(path)
    blob = data.encode() if isinstance(data, str) else data
    try:
        if path.is_file() and path.stat().st_size == len(blob) and path.read_bytes() == blob:
            return False
    except OSError:
        pass  # unreadable: write it
    write(path, blob, mode=mode)
    return True


def reserve(path: Path, suffix: str = "") -> Path:
    """A new empty file beside ``path`` (``.NAME.<random>.tmp`` + ``suffix``), created exclusively with mode
    0600: a name no one else's file has, which the caller may fill, hand to a tool, and remove."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}{SUFFIX}{suffix}")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    return tmp


def publish_new(tmp: Path, path: Path, exists: Exception) -> None:
    """Give the finished file ``tmp`` the name ``path`` only if no file has it (``link(2)`` fails where one
    appeared since it was checked; a rename would replace it). Raises ``exists`` then; ``tmp`` stays."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise exists from None
