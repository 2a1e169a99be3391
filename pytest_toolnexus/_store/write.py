"""Writing bytes to a cassette path so that nothing is ever lost.

:func:`write_atomic` makes a write all-or-nothing; the rest of this module decides where the
bytes go when the target cannot take them. A folder that cannot be written (a full disk, a
read-only mount, a path through a file) is found before recording where it can be
(:func:`check_target`), and otherwise the bytes are saved in the temp folder and
:class:`CassetteWriteError` names both files (:func:`write_or_rescue`). An unreadable cassette
that record mode ``all`` replaces is kept beside it (:func:`set_aside`), and so is a recording
cut short by an interruption (:func:`rescue` with ``beside``). :func:`fingerprint` tells a
session whether another writer replaced the file while it was recording, and
:func:`file_lock` keeps two writers of one file apart.

What is written is the gate's to decide (:mod:`pytest_toolnexus._safety.gate`: redaction,
then the secret scan); this module only places the bytes it is given, or the bytes a cassette
gives as it encodes itself one interaction at a time (:class:`Encoding`), so that a large
cassette's encoding is never held whole.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import os
import secrets
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, Protocol

from pytest_toolnexus._seam.errors import CassetteWriteError

__all__ = [
    "RESCUE_FOLDER",
    "Encoding",
    "check_target",
    "file_lock",
    "fingerprint",
    "rescue",
    "set_aside",
    "write_atomic",
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


class Encoding(Protocol):
    """What writes its own bytes: a cassette, one interaction at a time
    (``Cassette.write_to``)."""

    def write_to(self, write: Callable[[bytes], object]) -> None: ...


def _stamp() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def write_atomic(path: Path, data: bytes | Encoding) -> None:
    """Replace ``path`` with ``data`` (bytes, or a cassette encoded as it is written) so that a
    crash, or an encoding that fails halfway, leaves the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    # os.open with 0o666 lets the umask decide the mode, as for any file the user creates.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                data.write_to(handle.write)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


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


def rescue(path: Path, data: bytes | Encoding, *, beside: str | None = None) -> Path | None:
    """Save ``data`` (bytes, or a cassette to encode as it is written) under a new name made
    from ``path``, and return it; None on failure.

    With ``beside`` (``"interrupted"``, say) the file goes next to the cassette first, as
    ``<name>.msgpack.<beside>-<time>-<random>`` (not a ``*.msgpack``, so ``check`` skips it);
    otherwise, or when that folder refuses it, into the temp folder.
    """
    if beside is not None:
        target = path.with_name(f"{path.name}.{beside}-{_stamp()}-{secrets.token_hex(4)}")
        try:
            write_atomic(target, data)
        except OSError:
            pass
        else:
            return target
    folder = Path(tempfile.gettempdir()) / RESCUE_FOLDER
    target = folder / f"{path.stem}-{_stamp()}-{secrets.token_hex(4)}{path.suffix}"
    try:
        write_atomic(target, data)
    except OSError:
        return None
    return target


def write_or_rescue(
    path: Path, data: bytes | Encoding, *, set_aside_first: bool = False
) -> Path | None:
    """Write ``data`` to ``path`` atomically, first moving the file there aside when asked (and
    returning the name it was moved to). When the file system refuses it, save ``data`` in the
    temp folder and raise :class:`CassetteWriteError` naming the cassette, the reason and the
    rescued file. Any other failure (the encoding of ``data``) puts a file moved aside back."""
    kept: Path | None = None
    try:
        if set_aside_first:
            kept = set_aside(path)
        write_atomic(path, data)
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
    except BaseException:
        if kept is not None:
            with contextlib.suppress(OSError):
                os.replace(kept, path)
        raise
    return kept


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path``, held across processes (xdist workers).

    The lock file lives in the temp folder, named after the cassette's absolute path, so the
    cassette folder that users commit stays clean.
    """
    # realpath, not Path.resolve: a symlink loop at the path is written over, not an error;
    # fsencode: a name that is not UTF-8 (a byte 0xff, read as a surrogate) still has a lock.
    digest = hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest()[:24]
    lock_path = Path(tempfile.gettempdir()) / f"pytest-toolnexus-{digest}.lock"
    with open(lock_path, "a+b") as handle:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
