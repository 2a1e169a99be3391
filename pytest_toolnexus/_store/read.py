"""Reading a cassette file's bytes: a regular file, or a typed error at once.

A path can name something that is not a file a cassette could be: a FIFO (reading it waits
for a writer, forever), a device such as ``/dev/zero`` (read until memory runs out), a socket,
or a symlink to any of them. The file is opened without blocking (``O_NONBLOCK`` makes opening
a FIFO return at once) and asked what it is on the open descriptor, so a path swapped between
a check and the read cannot slip through; only a regular file is read. A path no file can
have (a NUL character, a name too long, a symlink loop on the way) is refused with the reason,
by :func:`read_cassette_bytes` and, before a session uses the path, by :func:`unusable`.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO, Final

from pytest_toolnexus._seam.errors import CassetteFormatError, CassetteNotFoundError

__all__ = ["open_cassette_file", "read_cassette_bytes", "unusable"]

_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)

_KINDS: Final = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


_REASONS: Final = {
    errno.ELOOP: "a symlink on the path leads round in a loop",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.ENAMETOOLONG: "the file name is too long",
    errno.EACCES: "permission is denied",
    errno.EPERM: "permission is denied",
}


def _reason(exc: OSError) -> str:
    known = _REASONS.get(exc.errno or 0)
    said = f"[Errno {exc.errno}] {exc.strerror}" if exc.errno else str(exc)
    return f"{known} ({said})" if known else said


def _shown(target: Path) -> str:
    text = os.fspath(target)
    return repr(text) if "\x00" in text else text


def unusable(target: Path) -> str | None:
    """Why no file can be at ``target``, or None when one can (whether or not one is there):
    the name holds a NUL character or is too long, a folder on the way or the file itself is a
    symlink loop, or permission to look is denied. A missing file, and a part of the path that
    is a file (which a recording session refuses with its own message), are not this."""
    if "\x00" in os.fspath(target):
        return "the path holds a NUL character, which no file name can"
    try:
        if stat.S_ISLNK(os.lstat(target).st_mode):
            os.stat(target)  # the link itself: one that leads round in a loop
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return _reason(exc)
    return None


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a file"


def _refused(target: Path, mode: int) -> CassetteFormatError:
    through = ""
    if target.is_symlink():
        through = f" (a symlink to {os.path.realpath(target)})"
    return CassetteFormatError(
        f"cassette path {target}{through} is not a regular file: it is {_kind(mode)}, which "
        "cannot hold a cassette (reading it could block forever, or never end). Point the "
        "cassette at a regular .msgpack file.",
        path=str(target),
    )


def read_cassette_bytes(target: Path) -> bytes:
    """The bytes of the regular file at ``target``. Raises :class:`CassetteNotFoundError`
    when nothing is there, and :class:`CassetteFormatError` for a folder or anything else that
    is not a regular file, without reading from it."""
    # Read from the descriptor: a buffered file object costs more than a small cassette's read.
    fd, size = _open_regular(target)
    try:
        pieces: list[bytes] = []
        while True:
            piece = os.read(fd, max(size + 1, _READ_AT_LEAST))  # + 1: see a grown file's end
            if not piece:
                return b"".join(pieces)
            pieces.append(piece)
            size = 0  # read on in large pieces: the file grew while it was read
    finally:
        os.close(fd)


_READ_AT_LEAST: Final = 1 << 16


def open_cassette_file(target: Path) -> BinaryIO:
    """The regular file at ``target``, open for reading (the caller closes it). Raises as
    :func:`read_cassette_bytes` does, without reading from anything that is not a file."""
    fd, _ = _open_regular(target)
    try:
        return open(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def _open_regular(target: Path) -> tuple[int, int]:
    """A descriptor open for reading on the regular file at ``target``, and the file's size
    then (the caller closes it)."""
    try:
        fd = os.open(target, _FLAGS)
    except FileNotFoundError as exc:
        raise CassetteNotFoundError(f"cassette {target} does not exist", path=str(target)) from exc
    except IsADirectoryError as exc:  # Windows; POSIX opens a folder and fstat tells
        raise CassetteFormatError(
            f"cassette path {target} is a directory", path=str(target)
        ) from exc
    except ValueError as exc:  # a NUL character: no file has such a name
        raise CassetteFormatError(
            f"cassette path {_shown(target)} cannot be read: it holds a NUL character, which "
            "no file name can",
            path=str(target),
        ) from exc
    except OSError as exc:
        # A Unix socket cannot be opened at all (ENXIO): say what it is, if it is not a file.
        try:
            mode: int | None = os.stat(target).st_mode
        except OSError:
            mode = None
        if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise _refused(target, mode) from exc
        raise CassetteFormatError(
            f"cassette {target} cannot be read: {_reason(exc)}", path=str(target)
        ) from exc
    try:
        status = os.fstat(fd)
        mode = status.st_mode
        if stat.S_ISDIR(mode):
            raise CassetteFormatError(f"cassette path {target} is a directory", path=str(target))
        if not stat.S_ISREG(mode):
            raise _refused(target, mode)
        return fd, status.st_size
    except BaseException:
        os.close(fd)
        raise
