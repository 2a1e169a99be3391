"""``use_cassette``: a cassette in plain Python (scripts, notebooks, ``unittest``), with what
the pytest marker gives a test.

It takes every option the ``cassette`` marker takes, checked by the same code, and, while the
block runs, serves every client the marker serves: the httpx and httpx2 clients the code
builds itself, aiohttp, urllib3 (requests, botocore), with the network tripwire armed around
them and the clock installed, all through one :class:`~.install.Installation` that takes
everything off, newest first, however the block ends. At the end it reports as the marker
does traffic that went around the cassette and (with ``unused=``) interactions never played.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from pytest_toolnexus._plugin.expiry import CassetteExpiredWarning, expiry
from pytest_toolnexus._plugin.settings import CassetteOptions, layer
from pytest_toolnexus._plugin.shared import UnservedTrafficWarning
from pytest_toolnexus._safety.tripwire import Unserved
from pytest_toolnexus._seam.errors import (
    CassetteError,
    CassetteSymlinkWarning,
    NetworkBlockedError,
)
from pytest_toolnexus._seam.transport import AsyncTransport, DualTransport, Transport
from pytest_toolnexus._session.interruption import interruption
from pytest_toolnexus._session.modes import RecordMode, TimingMode
from pytest_toolnexus._session.session import CassetteSession
from pytest_toolnexus._store.cassette import Cassette, Interaction, load_cassette
from pytest_toolnexus._store.place import link_message, link_out, project_root

from .install import Installation
from .serving import serve_clients

__all__ = ["PlainCassette", "use_cassette"]

_ON_UNUSED: Final = {"warn": "warn", "fail": "error", "ignore": "ignore"}
_WHERE: Final = "use_cassette"
_LINKS_SAID: Final[set[Path]] = set()
"""The cassettes leading out of the project this process has warned of: outside pytest the
process is the run, and each is said once in it."""


class PlainCassette(CassetteSession):
    """A :class:`CassetteSession` that, once started, serves every client of the process.

    Made by :func:`use_cassette`; ``with`` (or ``async with``) starts and closes it, and so do
    :meth:`start` and :meth:`close` called by hand. ``patch_clients=False`` serves only the
    clients handed :meth:`http_transport` (or :attr:`transport`), arming no tripwire.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        options: CassetteOptions,
        patch_clients: bool = True,
        **session: Any,
    ) -> None:
        self._options = options
        self._patch_clients = patch_clients
        self._unserved = Unserved()
        self._serving: Installation | None = None
        self._ended_by: BaseException | None = None
        super().__init__(
            path,
            record=options.record,
            **options.session_arguments(),
            on_unused=session.pop("on_unused", _ON_UNUSED[options.unused]),
            **session,
        )

    def start(self, installation: Installation | None = None) -> CassetteSession:
        """Serve every client (unless ``patch_clients=False``) and install the clock."""
        if installation is not None or not self._patch_clients or self._serving is not None:
            return super().start(installation)
        serving = Installation(self._owner())
        serving.open()
        try:
            serve_clients(
                serving,
                self,
                cassette=str(self.path),
                allow_hosts=self._options.allow_hosts,
                on_unserved="warn" if self._options.unserved == "warn" else "fail",
                unserved=self._unserved,
            )
            super().start(serving)
        except BaseException:
            serving.close()
            raise
        self._serving = serving
        return self

    def close(self) -> None:
        """Take every patch off, write what was recorded, and report (see :meth:`finish`)."""
        self.finish(self._ended_by)

    def finish(self, error: BaseException | None) -> None:
        """Close, knowing that the block ended with ``error`` (None when it did not): a
        recording whose block failed is not written unless ``record_on_error=True``, and a
        miss or unserved connection that ``error`` does not show is raised (or warned of)."""
        serving, self._serving = self._serving, None
        try:
            if serving is not None:
                serving.close()
        finally:
            self._keep_or_discard(error)
            super().close()
        if error is None:
            self._report()

    def _keep_or_discard(self, error: BaseException | None) -> None:
        # Failed: left by an error that is not an interruption (that one keeps the recording
        # beside the cassette), or with traffic around the recorder while that fails.
        failed = (error is not None and interruption(error) is None) or (
            bool(self._unserved.messages) and self._options.unserved != "warn"
        )
        if (
            failed
            and not self._options.record_on_error
            and not self.replay_only
            and any(not sent.replayed for sent in self.requests)
        ):
            self.discard_recording()

    def _report(self) -> None:
        """What the marker reports after a test that passed."""
        if self._unserved.messages:
            text = "\n\n".join(self._unserved.messages.values())
            if self._options.unserved == "warn":
                warnings.warn(UnservedTrafficWarning(text), stacklevel=4)
            else:
                raise NetworkBlockedError(text)

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        self._ended_by = error
        super().__exit__(kind, error, traceback)

    async def __aexit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        self._ended_by = error
        await super().__aexit__(kind, error, traceback)


def _expired_mode(path: Path, options: CassetteOptions) -> RecordMode:
    """The record mode once ``max_age`` is checked: ``all`` to record an expired cassette again
    when ``on_expired="rerecord"``; raises for ``"fail"``, warns for ``"warn"``."""
    if options.max_age is None or options.record == "all" or not path.exists():
        return options.record
    try:
        meta = dict(load_cassette(path).meta)
    except CassetteError:
        return options.record  # the session reports an unreadable file, with its fix
    found = expiry(str(path), meta, options.max_age, options.on_expired, may_record=True)
    if found is None:
        return options.record
    if found.action == "fail":
        raise CassetteError(found.message, path=str(path))
    warnings.warn(CassetteExpiredWarning(found.message), stacklevel=3)
    return "all" if found.action == "rerecord" else options.record


def use_cassette(
    path: str | os.PathLike[str],
    *,
    record: RecordMode = "none",
    timing: TimingMode = "virtual",
    patch_clients: bool = True,
    live: Transport | DualTransport | None = None,
    async_live: AsyncTransport | None = None,
    redact: Callable[[Interaction], Interaction | None] | None = None,
    before_write: Callable[[Cassette], None] | None = None,
    clock_modules: Iterable[Any] = (),
    **options: Any,
) -> PlainCassette:
    """Open a cassette outside pytest; use it in a ``with`` (or ``async with``) block.

    >>> with use_cassette("tests/cassettes/chat.msgpack", record="once") as cassette:
    ...     answer = openai.OpenAI().chat.completions.create(...)

    ``options`` are those of the ``cassette`` marker (docs/pytest.md), checked the same way,
    except ``name``: the path names the file. While the block runs every client the marker
    serves is served, and a connection around the cassette is refused (or, recording with
    ``unserved="warn"``, let through and warned of at the end); ``patch_clients=False`` serves
    only clients handed ``cassette.http_transport()``. With ``timing="virtual"`` (the default)
    and a replay-only cassette the virtual clock is installed for the block. A block that
    raises while recording writes nothing unless ``record_on_error=True``. A path inside the
    current project that leads out of it through a symlink gives a
    :class:`~pytest_toolnexus.CassetteSymlinkWarning`, once per cassette in the process.
    """
    if "name" in options:
        raise TypeError(
            f"{_WHERE}: name= is the marker's; use_cassette's first argument is the cassette's path"
        )
    on_unused = options.pop("on_unused", None)  # the session's spelling of unused=
    values: Mapping[str, Any] = {"record": record, "timing": timing, **options}
    chosen = layer(CassetteOptions(), values, _WHERE)
    chosen = layer(chosen, {"record": _expired_mode(Path(path), chosen)}, _WHERE)
    session: dict[str, Any] = {
        "live": live,
        "async_live": async_live,
        "redact": redact,
        "before_write": before_write,
        "clock_modules": tuple(clock_modules),
    }
    if on_unused is not None:
        session["on_unused"] = on_unused
    cassette = PlainCassette(path, options=chosen, patch_clients=patch_clients, **session)
    found = link_out(cassette.path, project_root())
    if found is not None and found.path not in _LINKS_SAID:
        message = link_message(found, records=not cassette.replay_only)
        warnings.warn(CassetteSymlinkWarning(message), stacklevel=2)
        _LINKS_SAID.add(found.path)
    return cassette
