"""The state of one replayed WebSocket session, shared by its sync and async connections.

:class:`Playback` holds the :class:`~.script.Script`, the clock and what has happened: which
client frames were sent and when (each is the anchor of the server frames that follow it in the
recording), which server frames were read, and who closed. It decides when the next server
frame is due, checks each client frame against the one expected, and keeps the log of frames
both ways with their times. The connections in :mod:`.replay` only wait and hand over.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Final, Literal

from pytest_toolnexus._seam.duplex import DuplexClosed, Message
from pytest_toolnexus._seam.errors import CassetteMissError
from pytest_toolnexus._timing.clock import Clock

from .expect import FrameMatcher, shown
from .log import FrameLog
from .script import HANDSHAKE, Script, ServerFrame

__all__ = ["END", "WAIT", "Due", "Playback"]

WAIT: Final = "wait"
"""The next server frame answers a client frame not sent yet."""
END: Final = "end"
"""The recording has no further server frame."""


@dataclass(slots=True)
class Due:
    """The next server frame and the clock time it is due at (made for every frame: not
    frozen, which would cost a third of the time to hand a frame over)."""

    frame: ServerFrame
    at: float


class Playback:
    """One replayed session: ``started`` is the clock time its handshake was sent."""

    def __init__(
        self,
        script: Script,
        clock: Clock,
        matcher: FrameMatcher,
        started: float,
        log: FrameLog,
        misses: list[CassetteMissError],
    ) -> None:
        self.script = script
        self.clock = clock
        self.matcher = matcher
        self.started = started
        self.log = log
        self._misses = misses
        self._lock = threading.RLock()
        self.changed = threading.Condition(self._lock)
        self._per_ms = 1000.0 * clock.speed  # recorded ms per second of this clock
        self._anchors: list[float | None] = [None] * len(script.client)
        self._waiting = 0  # threads waiting on ``changed``
        self.sent = 0
        self.read = 0
        self._last_due = started
        self._lateness = 0.0  # how much later than recorded the client's last frame counted
        self.closed: DuplexClosed | None = None

    def _ms(self) -> float:
        return (self.clock.now() - self.started) * 1000.0

    def next_due(self) -> Due | Literal["wait", "end"]:
        """The next server frame and when it is due, or :data:`WAIT` / :data:`END`."""
        with self._lock:
            server = self.script.server
            read = self.read
            if read >= len(server):
                return END
            frame = server[read]
            anchor = frame.anchor
            base = self.started if anchor == HANDSHAKE else self._anchors[anchor]
            if base is None:
                return WAIT
            at = base + frame.offset / self._per_ms
            return Due(frame, at if at > self._last_due else self._last_due)

    def closed_error(self) -> DuplexClosed:
        """A new error for the close, for one raise: the same one raised again and again would
        gather every frame it passed through, and keep them (and their session) alive."""
        closed = self.closed
        assert closed is not None
        return DuplexClosed(closed.code, closed.reason, by=closed.by)

    def take(self, due: Due) -> Message:
        """Hand over the due server frame now; a close frame or the recorded drop raises
        :class:`DuplexClosed` instead."""
        with self._lock:
            if self.closed is not None:
                raise self.closed_error()
            self.read += 1
            self._last_due = due.at
            frame = due.frame
            if self._waiting:
                self.changed.notify_all()
            code = frame.close_code
            if code is not None:
                reason = frame.frame.reason if frame.frame is not None else ""
                self.log.add("server", self._ms(), None, code=code, reason=reason)
                self.closed = DuplexClosed(code, reason, by="server")
                raise self.closed_error()
            assert frame.frame is not None
            message = frame.frame.message
            assert message is not None
            self.log.add("server", self._ms(), message)
            return message

    def wait_change(self, timeout: float) -> bool:
        """Wait, up to ``timeout`` real seconds, for another thread to send, read or close
        while nothing is due and the session is open; False when that time ran out."""
        with self._lock:
            if self.closed is not None or isinstance(self.next_due(), Due):
                return True
            self._waiting += 1
            try:
                return self.changed.wait(timeout)
            finally:
                self._waiting -= 1

    def wait_while(self, due: Due | Literal["wait", "end"], timeout: float) -> None:
        """Wait, up to ``timeout`` real seconds, while ``due`` is still what is due next and
        the session is open: another thread's send, read or close ends the wait at once."""
        with self._lock:
            if self.closed is not None or self.next_due() != due:
                return
            self._waiting += 1
            try:
                self.changed.wait(timeout)
            finally:
                self._waiting -= 1

    def send(self, message: Message) -> None:
        """Check a client frame against the one expected next and note when it was sent;
        raises :class:`CassetteMissError` (kept for the end of the test too) on a mismatch."""
        with self.changed:
            if self.closed is not None:
                raise self.closed_error()
            number = self.sent
            client = self.script.client
            expected = client[number] if number < len(client) else None
            lines: list[str] = []
            paths: list[str] = []
            if expected is not None:
                lines, paths = self.matcher.differences(expected, message)
            if expected is None or lines:
                miss = self.matcher.miss(message, expected, number, lines, paths)
                self._misses.append(miss)
                raise miss
            self._anchor(number)
            self.sent += 1
            self.log.add("client", self._ms(), message)
            self.changed.notify_all()

    def _anchor(self, number: int) -> None:
        """Client frame ``number`` is sent now: it counts as sent at the later of now and the
        moment it was sent in the recording, moved by how late the client was before. A
        client on the virtual clock spends no time between a frame it reads and the one it
        sends, which the recorded client did: without the floor every answer would come
        early by that time. A client later than the floor moves every later answer with it."""
        recorded = self.started + self.script.client[number].t / 1000.0 / self.clock.speed
        base = max(self.clock.now(), recorded + self._lateness)
        self._anchors[number] = base
        self._lateness = base - recorded

    def close(self, code: int, reason: str) -> None:
        """The client closes: the close frame the recording expects here is sent (the server
        frames anchored on it, its answering close among them, become due); a client closing
        earlier than it did in the recording leaves the rest unsent."""
        with self.changed:
            if self.closed is not None:
                return
            number = self.sent
            client = self.script.client
            if number < len(client) and client[number].kind == "close":
                self._anchor(number)
                self.sent += 1
            self.log.add("client", self._ms(), None, code=code, reason=reason)
            self.closed = DuplexClosed(code, reason, by="client")
            self.changed.notify_all()

    def leftovers(self) -> list[str]:
        """What the client left of the recording: client frames it never sent, and server
        frames (not a close, nor the recorded drop) it never read."""
        with self.changed:
            unsent = [f for f in self.script.client[self.sent :] if f.kind != "close"]
            unread = [
                f
                for f in self.script.server[self.read :]
                if f.frame is not None and f.frame.kind != "close"
            ]
        found = []
        if unsent:
            found.append(
                f"{len(unsent)} recorded client frame(s) were never sent (the first: "
                f"{shown(unsent[0].message, self.matcher.mask, 80)} at {unsent[0].t:.1f} ms)"
            )
        if unread:
            first = unread[0].frame
            assert first is not None
            found.append(
                f"{len(unread)} recorded server frame(s) were never read (the first: "
                f"{shown(first.message, self.matcher.mask, 80)} at {first.t:.1f} ms)"
            )
        return found
