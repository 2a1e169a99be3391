"""Writing a recording so that it is never lost.

:func:`write_atomic` makes a write all-or-nothing; this module decides where the bytes go when
the target cannot take them. A folder that cannot be written (a full disk, a read-only
mount, a path through a file) is found before recording where it can be
(:func:`check_target`), and otherwise the recording is saved in the temp folder and
:class:`CassetteWriteError` names both files (:func:`write_or_rescue`). An unreadable cassette
that record mode ``all`` replaces is kept beside it (:func:`set_aside`), and so is a recording
cut short by an interruption (:meth:`RecordingWriter.keep_beside`). :func:`fingerprint`
tells a session whether another writer replaced the file while it was recording.

:class:`RecordingWriter` is a recording session's write: under a lock held across processes,
it merges the new interactions with what another writer put in the file meanwhile, sends the
result through the store's gate (:mod:`._store_safe`: redaction, then the secret scan) and
writes it atomically, or rescues it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import os
import secrets
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from pytest_toolnexus._safety.gate import redacted_cassette, safe_bytes
from pytest_toolnexus._safety.secrets import SecretScanner
from pytest_toolnexus._seam.errors import CassetteError, CassetteSetAsideWarning, CassetteWriteError
from pytest_toolnexus._version import __version__

from . import cassette as _cassette
from .provenance import client_versions

__all__ = [
    "RESCUE_FOLDER",
    "RecordingWriter",
    "check_target",
    "file_lock",
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


def rescue(path: Path, data: bytes, *, beside: str | None = None) -> Path | None:
    """Save ``data`` under a new name made from ``path``, and return it; None on failure.

    With ``beside`` (``"interrupted"``, say) the file goes next to the cassette first, as
    ``<name>.msgpack.<beside>-<time>-<random>`` (not a ``*.msgpack``, so ``check`` skips it);
    otherwise, or when that folder refuses it, into the temp folder.
    """
    if beside is not None:
        target = path.with_name(f"{path.name}.{beside}-{_stamp()}-{secrets.token_hex(4)}")
        try:
            _cassette.write_atomic(target, data)
        except OSError:
            pass
        else:
            return target
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


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path``, held across processes (xdist workers).

    The lock file lives in the temp folder, named after the cassette's absolute path, so the
    cassette folder that users commit stays clean.
    """
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:24]
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


class RecordingWriter:
    """Writes what one recording session recorded into its cassette file.

    Made when recording may begin: it refuses a path no write can succeed at
    (:func:`check_target`) and notes what the file is then (:func:`fingerprint`).
    ``merge_always`` merges with the file on disk at every write (record mode ``new``);
    otherwise the file is merged with only when it may hold another writer's recording: one of
    the same run (``run_id``), or any writer that replaced it since. ``replace_unreadable``
    (record mode ``all``) records over a file that cannot be read, keeping it aside;
    otherwise such a file is left as it is and the recording rescued. ``fix`` ends the message
    of a write the secret scan refuses.
    """

    def __init__(
        self,
        path: Path,
        *,
        run_id: str | None,
        merge_always: bool,
        replace_unreadable: bool,
        before_write: Callable[[_cassette.Cassette], None] | None,
        fix: str,
    ) -> None:
        self.path = path
        self._run_id = run_id
        self._merge_always = merge_always
        self._replace_unreadable = replace_unreadable
        self._before_write = before_write
        self._fix = fix
        # What the file was when recording began: a different file at the write means another
        # writer (another process, or a test of this run) wrote it meanwhile.
        self._found_at_start = fingerprint(path)
        check_target(path)

    def write(
        self,
        recorded: Sequence[_cassette.Interaction],
        meta: Mapping[str, Any],
        scanner: SecretScanner,
    ) -> CassetteSetAsideWarning | None:
        """Merge, redact, scan and write ``recorded`` with ``meta`` (stamped with the time,
        this library's version and the client versions). Returns the warning to give when an
        unreadable file was set aside to make room (the caller gives it, from its own frame)."""
        path = self.path
        with file_lock(path):
            try:
                data, unreadable = self._prepare(recorded, meta, scanner)
            except CassetteError:
                raise  # a secret, a value msgpack cannot hold: refused on purpose
            except Exception as exc:  # MemoryError from the scan, a hook that raised, ...
                raise self._unexpected(exc, recorded, meta, scanner) from exc
            if unreadable is not None and not self._replace_unreadable:
                # The file became unreadable while this session recorded (it was readable,
                # or absent, when it began): leave it for a person to look at.
                rescued = rescue(path, data)
                saved = (
                    f"the recording was saved to {rescued}"
                    if rescued is not None
                    else "saving the recording to the temp folder failed too, so it is lost"
                )
                raise CassetteWriteError(
                    f"cannot write cassette {path}: another writer left it unreadable "
                    f"while this session recorded ({unreadable}). It was left as it is, and "
                    f"{saved}. Restore the file, or record with record mode 'all'.",
                    path=str(path),
                    rescued=None if rescued is None else str(rescued),
                )
            kept = write_or_rescue(path, data, set_aside_first=unreadable is not None)
        if kept is None:
            return None
        return CassetteSetAsideWarning(
            f"cassette {path} could not be read ({unreadable}); record mode 'all' recorded it "
            f"again, and the old file is kept as {kept}"
        )

    def keep_beside(
        self,
        recorded: Sequence[_cassette.Interaction],
        meta: Mapping[str, Any],
        scanner: SecretScanner,
    ) -> Path | None:
        """Save what :meth:`write` would write, through the same gate, under a new name
        beside the cassette (``<name>.msgpack.interrupted-...``; in the temp folder when the
        folder refuses it), and leave the cassette as it is: the recording was cut short.
        Returns the file, or None when it could not be saved anywhere."""
        with file_lock(self.path):
            try:
                data, _ = self._prepare(recorded, meta, scanner)
            except CassetteError:
                raise
            except Exception as exc:
                raise self._unexpected(exc, recorded, meta, scanner) from exc
        return rescue(self.path, data, beside="interrupted")

    def _unexpected(
        self,
        error: Exception,
        recorded: Sequence[_cassette.Interaction],
        meta: Mapping[str, Any],
        scanner: SecretScanner,
    ) -> CassetteWriteError:
        """The error to raise when the write failed in a way no rule expects (``MemoryError``
        from the scan, a ``before_write`` hook that raised): this session's recording alone
        (no merge, no hook), saved in the temp folder. It goes through the gate when the gate
        still works; when the gate fails too, it is saved redacted but not scanned, readable
        by its owner only, and the message says so."""
        path = self.path
        cassette = _cassette.Cassette(path, list(recorded), dict(meta))
        cause = scanner.mask(f"{type(error).__name__}: {error}".rstrip(": "))
        head = f"cannot write cassette {path}: the write failed unexpectedly ({cause})."
        unscanned = False
        data: bytes | None
        try:
            data = safe_bytes(cassette, scanner=scanner, fix=self._fix)
        except CassetteError as refused:  # a secret in it: it is not to be saved anywhere
            return CassetteWriteError(
                f"{head} The recording was not saved either: {refused}", path=str(path)
            )
        except Exception:
            unscanned = True
            try:
                data = redacted_cassette(cassette).to_bytes()
            except Exception:
                data = None
        rescued = None if data is None else rescue(path, data)
        if rescued is None:
            return CassetteWriteError(
                f"{head} Saving the recording to the temp folder failed too, so it is lost.",
                path=str(path),
            )
        note = ""
        if unscanned:
            with contextlib.suppress(OSError):
                os.chmod(rescued, 0o600)
            note = (
                " It is redacted but was not scanned for secrets (the scan failed too), and "
                "only you can read it: run pytest-toolnexus check on it before you move it."
            )
        return CassetteWriteError(
            f"{head} The recording was saved to {rescued} instead.{note} Move it to {path} "
            "to keep it (it holds this session's recording alone), or record again.",
            path=str(path),
            rescued=str(rescued),
        )

    def _prepare(
        self,
        recorded: Sequence[_cassette.Interaction],
        meta: Mapping[str, Any],
        scanner: SecretScanner,
    ) -> tuple[bytes, str | None]:
        """The bytes to write (merged, stamped, through the hook and the gate), and why the
        file on disk cannot be read, if it cannot. Called with the lock held."""
        path = self.path
        on_disk, unreadable = self._on_disk()
        # Merge with what is on disk now instead of overwriting it when it may hold what
        # another writer recorded since this session began: a test of this run (perhaps
        # on another xdist worker), or any other process that wrote the file meanwhile.
        same_run = (
            on_disk is not None
            and self._run_id is not None
            and on_disk.meta.get("run_id") == self._run_id
        )
        changed = fingerprint(path) != self._found_at_start
        if on_disk is not None and (same_run or changed or self._merge_always):
            base = list(on_disk.interactions)
        else:
            base = []
        stamped = {
            **meta,
            "recorded_at": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
            "recorded_with": f"pytest-toolnexus {__version__}",
            "versions": client_versions(),
        }
        if self._run_id is not None:
            stamped["run_id"] = self._run_id
        cassette = _cassette.Cassette(path, base + list(recorded), stamped)
        if self._before_write is not None:
            self._before_write(cassette)
        return safe_bytes(cassette, scanner=scanner, fix=self._fix), unreadable

    def _on_disk(self) -> tuple[_cassette.Cassette | None, str | None]:
        """The cassette on disk now, or None; and, for a file that cannot be read, why."""
        if not self.path.exists():
            return None, None
        try:
            # Decoded whole now: what the write keeps of it must not fail halfway through.
            cassette = _cassette.load_cassette(self.path)
            cassette.decode()
            return cassette, None
        except CassetteError as exc:
            return None, str(exc).removeprefix(f"cassette {self.path} ")
