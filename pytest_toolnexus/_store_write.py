"""Writing a recording so that it is never lost.

:func:`write_atomic` makes a write all-or-nothing; this module decides where the bytes go when
the target cannot take them. A folder that cannot be written (a full disk, a read-only
mount, a path through a file) is found before recording where it can be
(:func:`check_target`), and otherwise the recording is saved in the temp folder and
:class:`CassetteWriteError` names both files (:func:`write_or_rescue`). An unreadable cassette
that record mode ``all`` replaces is kept beside it (:func:`set_aside`). :func:`fingerprint`
tells a session whether another writer replaced the file while it was recording.
"""

from __future__ import annotations

import datetime as _dt
import errno
import os
import secrets
import tempfile
from pathlib import Path
from typing import Final

from . import _cassette
from ._errors import CassetteWriteError

__all__ = [
    "RESCUE_FOLDER",
    "check_target",
    "fingerprint",
    "rescue",
    "set_aside",
    "write_or_rescue",
]

RESCUE_FOLDER: Final = "pytest-toolnexus-rescued"

_REASONS: Final = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "the folder is not writable",
    errno.EPERM: "the folder is not writable",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "the cassette path is a folder",
    errno.ENAMETOOLONG: "the file name is too long",
}


def _stamp() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def fingerprint(path: Path) -> tuple[int, int, int] | None:
    """What identifies the file now (inode, size, modification time), or None when absent.
    Every write replaces the file, so another writer's write changes it."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def check_target(path: Path) -> None:
    """Refuse, before anything is recorded, a cassette path no write can succeed at: the path
    is a folder, or a part of it is a file."""
    if path.is_dir():
        raise CassetteWriteError(
            f"cannot record cassette {path}: that path is a folder. Name a file instead "
            "(or remove the folder).",
            path=str(path),
        )
    for parent in path.parents:
        if parent.is_dir():
            return
        if parent.exists() or parent.is_symlink():
            raise CassetteWriteError(
                f"cannot record cassette {path}: {parent} is a file, not a folder, so the "
                "cassette cannot be written there. Move that file, or set another cassette "
                "folder (pytest: --cassette-dir).",
                path=str(path),
            )


def set_aside(path: Path) -> Path:
    """Move the file at ``path`` to a new name beside it, and return that name."""
    while True:
        backup = path.with_name(f"{path.name}.unreadable-{_stamp()}-{secrets.token_hex(3)}")
        if not backup.exists():
            break
    os.replace(path, backup)
    return backup


def rescue(path: Path, data: bytes) -> Path | None:
    """Save ``data`` in the temp folder under a new name made from ``path``; None on failure."""
    folder = Path(tempfile.gettempdir()) / RESCUE_FOLDER
    target = folder / f"{path.stem}-{_stamp()}-{secrets.token_hex(4)}{path.suffix}"
    try:
        _cassette.write_atomic(target, data)
    except OSError:
        return None
    return target


def write_or_rescue(path: Path, data: bytes, *, set_aside_first: bool = False) -> Path | None:
    """Write ``data`` to ``path`` atomically, first moving the file there aside when asked (and
    returning the name it was moved to). When that fails, save ``data`` in the temp folder and
    raise :class:`CassetteWriteError` naming the cassette, the reason and the rescued file."""
    kept: Path | None = None
    try:
        if set_aside_first:
            kept = set_aside(path)
        # Looked up on the module: it is the store's one write seam.
        _cassette.write_atomic(path, data)
    except OSError as exc:
        rescued = rescue(path, data)
        reason = _REASONS.get(exc.errno or 0, exc.strerror or type(exc).__name__)
        moved = (
            f" The unreadable file that was there is kept as {kept}." if kept is not None else ""
        )
        if rescued is not None:
            saved = (
                f"The recording was saved to {rescued} instead: fix the cause, then move "
                f"that file to {path} (or record again)."
            )
        else:
            saved = "Saving it to the temp folder failed too, so the recording is lost."
        raise CassetteWriteError(
            f"cannot write cassette {path}: {reason} ({exc.__class__.__name__}: "
            f"[Errno {exc.errno}] {exc.strerror}). {saved}{moved}",
            path=str(path),
            rescued=None if rescued is None else str(rescued),
        ) from exc
    return kept
