"""A recording session's write: merged, stamped, through the gate, then placed.

:class:`RecordingWriter` holds a lock across processes (xdist workers) while it merges the
new interactions with what the file holds (what the session read when it opened, while the
file is still that one; else the file read again, with what another writer put in it
meanwhile), stamps ``meta``, runs the ``before_write`` hook, sends the result through the gate
(redaction, then the secret scan of all of it) and writes it atomically, encoding it as it
goes, or rescues it (:mod:`.write`). So a write into a large cassette holds it once, as the
session does, and never its whole encoding. A write that fails in a way no rule expects still
saves the session's recording where it can, and says where.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_toolnexus._safety.gate import redacted_cassette, safe_bytes, safe_cassette
from pytest_toolnexus._safety.secrets import SecretScanner
from pytest_toolnexus._seam.errors import CassetteError, CassetteSetAsideWarning, CassetteWriteError
from pytest_toolnexus._version import __version__

from . import cassette as _cassette
from .provenance import client_versions
from .write import check_target, file_lock, fingerprint, rescue, write_or_rescue

__all__ = ["RecordingWriter"]


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

    ``loaded`` is what the session read from the file when it opened, with the file's
    :func:`fingerprint` when it read it (record mode ``new``): while the file is still that
    one at the write, those interactions are merged instead of reading the file again, so a
    large cassette is not held twice.
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
        loaded: tuple[tuple[int, int, int], Sequence[_cassette.Interaction]] | None = None,
    ) -> None:
        self.path = path
        self._loaded = loaded
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
                kept, unreadable = self._write(recorded, meta, scanner)
            except CassetteError:
                raise  # a secret, a value msgpack cannot hold, a full disk: said already
            except Exception as exc:  # MemoryError from the scan or the encoder, a hook, ...
                raise self._unexpected(exc, recorded, meta, scanner) from exc
        if kept is None:
            return None
        return CassetteSetAsideWarning(
            f"cassette {path} could not be read ({unreadable}); record mode 'all' recorded it "
            f"again, and the old file is kept as {kept}"
        )

    def _write(
        self,
        recorded: Sequence[_cassette.Interaction],
        meta: Mapping[str, Any],
        scanner: SecretScanner,
    ) -> tuple[Path | None, str | None]:
        """:meth:`write` under the lock: the file moved aside (if any) and why it was."""
        path = self.path
        safe, unreadable = self._prepare(recorded, meta, scanner)
        if unreadable is not None and not self._replace_unreadable:
            # The file became unreadable while this session recorded (it was readable,
            # or absent, when it began): leave it for a person to look at.
            rescued = rescue(path, safe)
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
        kept = write_or_rescue(path, safe, set_aside_first=unreadable is not None)
        return kept, unreadable

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
                safe, _ = self._prepare(recorded, meta, scanner)
                return rescue(self.path, safe, beside="interrupted")
            except CassetteError:
                raise
            except Exception as exc:
                raise self._unexpected(exc, recorded, meta, scanner) from exc

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
    ) -> tuple[_cassette.Cassette, str | None]:
        """What to write (merged, stamped, through the hook and the gate: redacted and
        scanned), and why the file on disk cannot be read, if it cannot. Called with the lock
        held."""
        path = self.path
        now = fingerprint(path)
        base: list[_cassette.Interaction]
        if self._merge_always and self._loaded is not None and self._loaded[0] == now:
            # The file is the one the session read: what it read is what is there.
            base, unreadable = list(self._loaded[1]), None
        else:
            on_disk, unreadable = self._on_disk()
            # Merge with what is on disk now instead of overwriting it when it may hold what
            # another writer recorded since this session began: a test of this run (perhaps
            # on another xdist worker), or any other process that wrote the file meanwhile.
            same_run = (
                on_disk is not None
                and self._run_id is not None
                and on_disk.meta.get("run_id") == self._run_id
            )
            changed = now != self._found_at_start
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
        base.extend(recorded)
        cassette = _cassette.Cassette(path, base, stamped)
        if self._before_write is not None:
            self._before_write(cassette)
        return safe_cassette(cassette, scanner=scanner, fix=self._fix), unreadable

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
