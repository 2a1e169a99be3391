"""The cassettes a server serves: each found by name, each with a play state of its own.

A cassette's name is its path below the folder it was found in, without ``.msgpack``
(``serve cassettes/`` serves ``cassettes/tests/test_chat/test_reply.msgpack`` as
``tests/test_chat/test_reply``), or the file's stem when the file itself was named. Each is
replayed by a :class:`~pytest_toolnexus._session.session.CassetteSession` of its own, made with
the same options a test's cassette takes, so a request matches here exactly as in pytest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal
from urllib.parse import unquote, urlsplit

from pytest_toolnexus._seam.errors import CassetteError, CassetteMissError
from pytest_toolnexus._session.faults import Fault
from pytest_toolnexus._session.session import CassetteSession

__all__ = ["Catalog", "CatalogError", "ServeOptions", "ServedCassette", "names_in"]

SUFFIX: Final = ".msgpack"
_ROUTES_KEPT: Final = 4096


class CatalogError(CassetteError):
    """A path given to the server holds no cassette, or two cassettes would share a name."""


@dataclass(frozen=True)
class ServeOptions:
    """How every served cassette replays and matches: the options a test's marker takes."""

    timing: Literal["real", "instant"] = "real"
    speed: float = 1.0
    allow_repeats: bool = False
    match_on: str = "default"
    ignore_body: tuple[str, ...] = ()
    ignore_query: tuple[str, ...] = ()
    ignore_headers: tuple[str, ...] = ()
    match_headers: tuple[str, ...] = ()

    def session(self, path: Path) -> CassetteSession:
        """A replay-only session on ``path`` with these options (never started: the server
        installs no clock and no patch; it replays on real time, which a foreign process
        shares)."""
        return CassetteSession(
            path,
            record="none",
            timing=self.timing,
            speed=self.speed,
            allow_repeats=self.allow_repeats,
            match_on=self.match_on,
            ignore_body=self.ignore_body,
            ignore_query=self.ignore_query,
            ignore_headers=self.ignore_headers,
            match_headers=self.match_headers,
            on_unused="ignore",
        )


def names_in(path: Path) -> list[tuple[str, Path]]:
    """The cassettes a PATH argument names, with their names, in a stable order."""
    if path.is_dir():
        found = sorted(p for p in path.rglob(f"*{SUFFIX}") if p.is_file())
        return [(p.relative_to(path).as_posix()[: -len(SUFFIX)], p) for p in found]
    if path.is_file():
        name = path.name[: -len(SUFFIX)] if path.name.endswith(SUFFIX) else path.name
        return [(name, path)]
    raise CatalogError(
        f"{path} is neither a cassette file nor a folder; give a .msgpack file or a folder of them",
        path=str(path),
    )


@dataclass
class ServedCassette:
    """One cassette being served: its session (replaced on reset), the misses it answered."""

    name: str
    path: Path
    options: ServeOptions
    session: CassetteSession = field(init=False)
    misses: list[str] = field(default_factory=list)
    websocket_leftovers: list[str] = field(default_factory=list)
    """What each WebSocket client left of the session it opened (unsent client frames,
    unread server frames), once its connection ended."""
    faults: list[Fault] = field(default_factory=list)
    _origins: dict[str, str] = field(default_factory=dict)
    _origin: str = "http://localhost"

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Play the cassette from the start again: every interaction unplayed, no misses, no
        faults."""
        self.session = self.options.session(self.path)
        self.misses = []
        self.faults = []
        self.websocket_leftovers = []
        origins: dict[str, str] = {}
        for interaction in self.session.interactions:
            split = urlsplit(interaction.request.url)
            origins.setdefault(split.path or "/", f"{split.scheme}://{split.netloc}")
        self._origins = origins
        self._origin = next(iter(origins.values()), "http://localhost")

    def inject(self, faults: Sequence[Fault]) -> None:
        """Faults for this cassette's next requests (docs/faults.md)."""
        self.session.inject(*faults)
        self.faults.extend(faults)

    def url_for(self, target: str) -> str:
        """The recorded URL a request for ``target`` (path and query) stands for: the origin
        recorded for that path, else the cassette's first origin."""
        path = target.split("?", 1)[0] or "/"
        return self._origins.get(path, self._origin) + target

    def missed(self, miss: CassetteMissError) -> None:
        self.misses.append(str(miss))


class Catalog:
    """Every cassette a server serves, by name; more can be loaded while it runs."""

    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        self._lock = threading.Lock()
        self._served: dict[str, ServedCassette] = {}
        # A /c/ path's cassette name and the rest, found once per path (most clients send the
        # same few paths again and again); emptied whenever the names served change.
        self._routes: dict[str, tuple[str, str] | None] = {}
        self.unrouted: list[str] = []
        """Requests that named no cassette this server has, as the answers said."""

    def load(self, paths: Iterable[Path]) -> list[str]:
        """Serve the cassettes under ``paths``; returns their names. A name already served by
        another file is refused (nothing of this call is loaded then); the same file again is
        reloaded, from the start."""
        found: dict[str, Path] = {}
        for path in paths:
            for name, file in names_in(path):
                other = found.get(name)
                if other is not None and other.resolve() != file.resolve():
                    raise _clash(name, other, file)
                found[name] = file
        with self._lock:
            for name, file in found.items():
                served = self._served.get(name)
                if served is not None and served.path.resolve() != file.resolve():
                    raise _clash(name, served.path, file)
            made = {name: ServedCassette(name, file, self.options) for name, file in found.items()}
            self._served.update(made)
            self._routes.clear()
        return list(made)

    def get(self, name: str) -> ServedCassette | None:
        with self._lock:
            return self._served.get(_plain(name))

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._served)

    def all(self) -> list[ServedCassette]:
        with self._lock:
            return [self._served[name] for name in sorted(self._served)]

    def route(self, raw_path: str) -> tuple[ServedCassette, str] | None:
        """The cassette a ``/c/<name>/rest`` path names and the rest (``/rest``), the longest
        name that fits first; None when no served cassette's name fits."""
        with self._lock:
            if raw_path not in self._routes:
                if len(self._routes) >= _ROUTES_KEPT:
                    self._routes.clear()
                self._routes[raw_path] = self._find(raw_path)
            found = self._routes[raw_path]
            return None if found is None else (self._served[found[0]], found[1])

    def _find(self, raw_path: str) -> tuple[str, str] | None:
        segments = raw_path.split("/")[2:]  # "", "c", then the name's segments and the rest
        for cut in range(len(segments), 0, -1):
            name = _plain("/".join(unquote(s) for s in segments[:cut]))
            if name in self._served:
                return name, "/" + "/".join(segments[cut:])
        return None


def _plain(name: str) -> str:
    return name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name


def _clash(name: str, one: Path, other: Path) -> CatalogError:
    return CatalogError(
        f"two cassettes would both be served as {name!r}: {one} and {other}; serve their "
        "folders instead (each cassette is then named by its path below the folder) or "
        "rename one",
        path=str(other),
    )
