"""One owner for everything a cassette patches process-wide, and one way to take it all off.

A cassette in use replaces objects that every thread of the process shares: the time functions
(the virtual clock, or the watch on sleeps), the httpx and httpx2 transports, the aiohttp and
urllib3 bridges with their import watches, and the socket functions (the network tripwire).
They all go on through one :class:`Installation`:

- opening it claims the process, so a second installation is refused, naming both owners,
  before anything is changed;
- each patch's undo is registered (on a ``contextlib.ExitStack``) the moment the patch is in,
  so whatever fails next (a later patch, the test, a teardown step, ``KeyboardInterrupt``, a
  ``CancelledError``) leaves nothing behind;
- closing runs every undo in reverse order, each one even when an earlier one raised, and
  gives up the claim last.

One installation at a time is the rule, rather than undos that tolerate any order: two
sessions can then never be undone out of order (from two threads, say), because the second is
never installed; and the error says which cassette holds the process.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Callable
from typing import Final, ParamSpec

from pytest_toolnexus._seam.errors import AlreadyInstalledError, SessionClosedError

__all__ = ["AlreadyInstalledError", "Installation", "SessionClosedError", "State", "installed"]

P = ParamSpec("P")
Undo = Callable[[], object]


class State(enum.Enum):
    """Where a session or an installation is in its life: it opens once and closes once."""

    CREATED = "created"
    OPEN = "open"
    CLOSED = "closed"


class Installation:
    """The process-wide patches of one owner (a cassette session, a test), taken off together.

    ``owner`` names it in the error another installation gets while this one is open. Open it
    (or enter it with ``with``), :meth:`add` each patch, and :meth:`close` it; it cannot be
    opened again once closed.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.state = State.CREATED
        self._undo = contextlib.ExitStack()

    def open(self) -> Installation:
        """Claim the process for this owner. Raises :class:`AlreadyInstalledError`, changing
        nothing, while another installation is open."""
        if self.state is State.CLOSED:
            raise SessionClosedError(
                f"cannot install {self.owner} again: it was installed once and taken off, and "
                "an installation serves one block (one test). Start a new session."
            )
        if self.state is State.OPEN:
            return self
        with _lock:
            holder = _holder[0]
            if holder is not None:
                raise AlreadyInstalledError(
                    f"cannot install {self.owner}: {holder.owner} is installed in this process "
                    "already. Cassettes do not nest: one patches the clock, the HTTP clients "
                    "and the sockets of the whole process, so one at a time can be installed. "
                    "End the block "
                    "or test that uses the first one (a module- or session-scoped fixture that "
                    "enters use_cassette holds it for every test in its scope), or hand one of "
                    "them to its clients explicitly (httpx.Client(transport="
                    "session.http_transport())) without starting it."
                )
            _holder[0] = self
        self.state = State.OPEN
        return self

    def add(self, install: Callable[P, Undo], /, *args: P.args, **kwargs: P.kwargs) -> Undo:
        """Run ``install(*args, **kwargs)``, which patches something and returns its undo, and
        register that undo at once. Returns the undo (callers that take the patch off early
        must be given one that is safe to call twice)."""
        if self.state is not State.OPEN:
            raise RuntimeError(
                f"cannot add a patch to the installation of {self.owner}: it is "
                f"{self.state.value}, not open. Open it first, and add nothing after closing it."
            )
        undo = install(*args, **kwargs)
        self._undo.callback(undo)
        return undo

    def part(self, owner: str) -> Installation:
        """An installation for a part of this one's patches (the virtual clock of a session,
        say) that can come off before the rest: it is open at once, under this installation's
        claim on the process, and this installation closes it if nothing closed it before."""
        if self.state is not State.OPEN:
            raise RuntimeError(
                f"cannot add {owner} to the installation of {self.owner}: it is "
                f"{self.state.value}, not open."
            )
        part = Installation(f"{owner} of {self.owner}")
        part.state = State.OPEN  # under this installation's claim: it claims nothing itself
        self._undo.callback(part.close)
        return part

    def close(self) -> None:
        """Take off everything added, newest first, each undo even when an earlier one
        raised (the last error is raised at the end, the others chained to it); then give up
        the claim on the process. Closing twice does nothing."""
        if self.state is not State.OPEN:
            self.state = State.CLOSED
            return
        self.state = State.CLOSED
        try:
            self._undo.close()
        finally:
            with _lock:
                if _holder[0] is self:
                    _holder[0] = None

    def __enter__(self) -> Installation:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Installation of {self.owner}: {self.state.value}>"


def installed() -> str | None:
    """The owner of the installation open in this process, or None."""
    with _lock:
        holder = _holder[0]
    return None if holder is None else holder.owner


_lock: Final = threading.Lock()
_holder: list[Installation | None] = [None]
"""The one installation open in this process, if any."""
