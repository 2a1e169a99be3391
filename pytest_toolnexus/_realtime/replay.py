"""Replayed WebSocket connections, sync and async: no socket, the server frames released on
the session's clock as :class:`~.playback.Playback` says they are due.

On the virtual clock nothing sleeps: a ``recv`` moves the clock to the next frame's due time.
An async ``recv`` waiting for a frame that answers a client frame not yet sent waits for that
send (another task makes it), and the clock lets other tasks run first, so a send due earlier
is made before a later frame is released. A sync ``recv`` in that state, with no other thread
to send, would wait for ever: after a short real wait it raises :class:`ReplayError` saying
which frame it waits for.
"""

from __future__ import annotations

import math
from typing import Final

import anyio

from pytest_toolnexus._seam.duplex import Accepted, Message
from pytest_toolnexus._seam.errors import ReplayError, expected_error
from pytest_toolnexus._timing.clock import RealClock
from pytest_toolnexus._timing.virtual import VirtualClock

from .playback import END, WAIT, Due, Playback

__all__ = ["AsyncReplayedConnection", "ReplayedConnection"]

__tracebackhide__ = expected_error

PATIENCE: Final = 2.0
"""Real seconds a sync ``recv`` waits for another thread to send what the next frame
answers, or to close, before it says that nothing can come."""


def _stuck(playback: Playback, due: str) -> ReplayError:
    if due == END:
        what = (
            "the recording has no further server frame: the client read them all, and the "
            "session was closed there when it was recorded"
        )
    elif playback.script.server[playback.read].offset == math.inf:
        what = f"the server sends nothing more (fault {playback.script.cut})"
    else:
        server = playback.script.server[playback.read]
        anchor = playback.script.client[server.anchor]
        what = (
            f"the next server frame (recorded at {server.t:.1f} ms) answers client frame "
            f"#{server.anchor} (recorded at {anchor.t:.1f} ms), which the client has not sent"
        )
    return ReplayError(
        f"recv() on the replayed WebSocket {playback.log.url} would wait for ever: {what}. "
        "Send what the recording expects first, or close the connection."
    )


class ReplayedConnection:
    """A sync replayed connection (the duplex seam's ``DuplexConnection``)."""

    def __init__(self, playback: Playback, accepted: Accepted) -> None:
        self._playback = playback
        self._accepted = accepted

    @property
    def accepted(self) -> Accepted:
        return self._accepted

    @property
    def playback(self) -> Playback:
        return self._playback

    def send(self, message: Message) -> None:
        self._playback.send(message)

    def recv(self, timeout: float | None = None) -> Message:
        playback = self._playback
        clock = playback.clock
        if isinstance(clock, RealClock):
            return self._recv_real(clock, timeout)
        while True:
            due = playback.next_due()
            if playback.closed is not None and not isinstance(due, Due):
                raise playback.closed_error()
            if isinstance(due, Due):
                if timeout is not None and due.at > clock.now() + timeout:
                    clock.wait_until(clock.now() + timeout)
                    raise TimeoutError("timed out while waiting for a message")
                clock.wait_until(due.at)
                return playback.take(due)
            if timeout is not None:
                clock.wait_until(clock.now() + timeout)
                raise TimeoutError("timed out while waiting for a message")
            # Another thread may send, or close, meanwhile: look again when it does.
            if not playback.wait_change(PATIENCE):
                raise _stuck(playback, due)

    def _recv_real(self, clock: RealClock, timeout: float | None) -> Message:
        """:meth:`recv` on real time: each wait ends at once when another thread sends, reads
        or closes meanwhile, so a close is not heard only after a long recorded gap."""
        playback = self._playback
        deadline = math.inf if timeout is None else clock.now() + timeout
        while True:
            due = playback.next_due()
            if playback.closed is not None:
                raise playback.closed_error()  # as take() would, without the wait
            at = due.at if isinstance(due, Due) else math.inf
            now = clock.now()
            if at <= now:
                assert isinstance(due, Due)
                return playback.take(due)
            if deadline <= now:
                raise TimeoutError("timed out while waiting for a message")
            if at == math.inf and deadline == math.inf:
                # Nothing due until another thread sends, or closes: look again when it does.
                if isinstance(due, Due):  # a frame held back for ever
                    playback.wait_while(due, PATIENCE)
                    if playback.closed is None and playback.next_due() == due:
                        raise _stuck(playback, WAIT)
                elif not playback.wait_change(PATIENCE):
                    raise _stuck(playback, due)
                continue
            playback.wait_while(due, min(at, deadline) - now)

    def close(self, code: int = 1000, reason: str = "") -> None:
        self._playback.close(code, reason)


class AsyncReplayedConnection:
    """An async replayed connection (the duplex seam's ``AsyncDuplexConnection``)."""

    def __init__(self, playback: Playback, accepted: Accepted) -> None:
        self._playback = playback
        self._accepted = accepted
        self._changed: anyio.Event | None = None

    @property
    def accepted(self) -> Accepted:
        return self._accepted

    @property
    def playback(self) -> Playback:
        return self._playback

    def _notify(self) -> None:
        event, self._changed = self._changed, None
        if event is not None:
            event.set()

    async def send(self, message: Message) -> None:
        self._playback.send(message)
        self._notify()
        await anyio.lowlevel.checkpoint()

    async def recv(self) -> Message:
        playback = self._playback
        clock = playback.clock
        virtual = isinstance(clock, VirtualClock)
        real = isinstance(clock, RealClock)
        while True:
            due = playback.next_due()
            if playback.closed is not None and not isinstance(due, Due):
                raise playback.closed_error()
            if not isinstance(due, Due):
                await self._change()  # the frame it answers is not sent yet
                continue
            if real:
                if playback.closed is not None:
                    raise playback.closed_error()  # as take() would, without the wait
                remaining = due.at - clock.now()
                if remaining > 0:
                    # A send or a close meanwhile ends the wait: a connection closed in a
                    # long recorded gap (or a stall) does not wait it out.
                    await self._change(remaining)
                    continue
                return playback.take(due)
            # Nothing else can come first: hand it over without a trip round the loop.
            if not (virtual and clock.advance_alone(due.at)):  # type: ignore[attr-defined]
                await clock.await_until(due.at)
                if playback.next_due() != due:
                    continue  # a close came while it waited
            return playback.take(due)

    async def _change(self, timeout: float | None = None) -> None:
        """Wait until this connection sends or closes, or ``timeout`` real seconds pass."""
        if self._changed is None:
            self._changed = anyio.Event()
        changed = self._changed
        if timeout is None:
            await changed.wait()
            return
        with anyio.move_on_after(timeout):
            await changed.wait()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self._playback.close(code, reason)
        self._notify()
        await anyio.lowlevel.checkpoint()
