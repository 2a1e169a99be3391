"""Where a cassette path really leads: inside the project, or out of it through a symlink.

A cassette path is named inside the project (the pytest rootdir, or for ``use_cassette`` and
the command line the folder the current one belongs to), yet a symlink on the way (the
cassette folder, a folder below it, the file itself) can make it lead elsewhere: to a shared
cassette store, which is a setup of its own, or to a place nobody meant, where a recording
then lands unseen by ``git status``. :func:`link_out` tells the two apart from an ordinary
path, and :func:`link_message` says which file is read or written, so that the plugin, the
session helpers and the command line can say it (docs/security.md, "Cassettes outside the
project"). A path named outside the project to begin with (an absolute ``--cassette-dir``)
is where the user put it, and not a link out.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["PROJECT_MARKERS", "LinkOut", "link_message", "link_out", "project_root"]

PROJECT_MARKERS: Final = (
    ".git",
    ".hg",
    "pyproject.toml",
    "setup.cfg",
    "setup.py",
    "tox.ini",
    "pytest.ini",
)
"""What marks a folder as a project's top, for code that has no pytest rootdir to go by."""


def project_root(start: Path | None = None) -> Path:
    """The project ``start`` (the current folder by default) belongs to: the nearest folder
    from it upwards that holds one of :data:`PROJECT_MARKERS`, else ``start`` itself."""
    here = Path(os.path.abspath(start if start is not None else os.getcwd()))
    for folder in (here, *here.parents):
        if any(os.path.lexists(folder / marker) for marker in PROJECT_MARKERS):
            return folder
    return here


@dataclass(frozen=True, slots=True)
class LinkOut:
    """A cassette path inside the project that leads out of it."""

    path: Path
    """The cassette path, absolute, as named."""
    real: Path
    """The file it leads to (which may not exist yet)."""
    link: Path | None
    """The first symlink on the way whose target lies outside the project (the file itself,
    or a folder); None when no single link does (a ``..`` after a link)."""
    root: Path

    @property
    def file_link(self) -> bool:
        """Whether the link out is the cassette file itself: a write then replaces the link
        with a file in the project, and never writes through it."""
        return self.link == self.path


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def link_out(path: Path, root: Path) -> LinkOut | None:
    """How ``path`` leads out of the project at ``root`` through a symlink, or None when it
    does not: it is named outside the project, or it really lies inside it, or no file can be
    at it (the reader or the writer then says why)."""
    try:
        return _link_out(path, root)
    except (OSError, ValueError):  # a NUL in the name, a folder that went away
        return None


def _plainly_inside(given: str, top: str) -> bool:
    """Whether ``given`` is named under ``top`` with no ``..`` and no symlink from ``top``
    down: it then leads where it reads, inside. One ``lstat`` per folder below ``top``, where
    resolving both paths costs one per folder from the file system's root (the plugin asks
    this of every test's cassette)."""
    if os.pardir in given.split(os.sep):
        return False
    named = os.path.normpath(given)  # with no '..', only '.' and doubled separators go
    if not _under(named, top):
        return False
    at = top
    for part in named[len(top) :].split(os.sep):
        if not part:
            continue
        at = os.path.join(at, part)
        try:
            if stat.S_ISLNK(os.lstat(at).st_mode):
                return False
        except FileNotFoundError:
            return True  # nothing from here down exists, so no link either
    return True


def _link_out(path: Path, root: Path) -> LinkOut | None:
    given = os.path.join(os.getcwd(), path)  # as the system resolves it: '..' after a link
    top = os.path.abspath(root)
    if _plainly_inside(given, top):
        return None
    named = os.path.abspath(given)  # as it reads: '..' folded by name
    real_top = os.path.realpath(top)
    if not (_under(named, top) or _under(named, real_top)):
        return None  # named outside the project: where the user put it
    real = os.path.realpath(given)
    if _under(real, real_top):
        return None
    link: Path | None = None
    parts = Path(given).parts
    at = parts[0]
    for part in parts[1:]:
        at = os.path.join(at, part)
        inside = os.path.abspath(at)
        if (
            (_under(inside, top) or _under(inside, real_top))
            and os.path.islink(at)
            and not _under(os.path.realpath(at), real_top)
        ):
            link = Path(inside)
            break
    return LinkOut(Path(named), Path(real), link, Path(top))


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def link_message(found: LinkOut, *, records: bool, shown: str | None = None) -> str:
    """What to say of a cassette that leads out of the project: the link, where it leads,
    which file is read and, for a session that may record, where a recording goes.
    ``shown`` is the cassette as the caller's reports name it."""
    name = shown if shown is not None else _relative(found.path, found.root)
    if found.link is None:
        through = "its path resolves"
    else:
        target = os.path.realpath(found.link)
        through = f"the symlink {_relative(found.link, found.root)} -> {target} leads"
    head = (
        f"cassette {name} lies outside the project ({found.root}): {through} out of it, "
        f"so the cassette is read from {found.real}"
    )
    if not records:
        said = f"{head}."
    elif found.file_link:
        said = (
            f"{head}; a recording replaces the link with a file in the project and leaves "
            f"{found.real} as it is."
        )
    else:
        said = (
            f"{head}, and a recording is written there, where the project's git status does "
            "not show it."
        )
    return (
        f"{said} A shared cassette store outside the project is fine; if the link is not "
        "meant, remove it. Turn this warning into an error to refuse such cassettes "
        "(-W error::pytest_toolnexus.CassetteSymlinkWarning)."
    )
