"""Recording WebSocket connections, sync and async: a live connection whose every frame, both
ways, is teed into the session's recorder the moment it passes, never delayed.

The session records the handshake as a request whose answer is a 101 with a byte stream
(:func:`~pytest_toolnexus._seam.duplex.is_upgrade`): :class:`Tee` is that stream's producer.
Each frame is packed as one chunk and pulled through the recorder at once, so the recorder
stamps it with its time as it does an event of a stream. When the connection ends the stream
ends (a drop without a close frame ends it with an error, stored at its time), and the
session keeps the interaction.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator

from pytest_toolnexus._seam.duplex import (
    ABNORMAL,
    Accepted,
    AsyncDuplexConnection,
    DuplexClosed,
    DuplexConnection,
    Message,
    Sender,
    pack_frame,
)
from pytest_toolnexus._seam.errors import RemoteProtocolError
from pytest_toolnexus._timing.clock import Clock

from .log import FrameLog

__all__ = ["AsyncRecordingConnection", "RecordingConnection", "Tee"]


class Tee:
    """The frames of one live connection as the recorder's byte stream: each frame pushed is
    pulled through the recorder before the next one is pushed."""

    def __init__(self) -> None:
        self._queue: deque[bytes] = deque()
        self._error: BaseException | None = None
        self._done = False

    def push(self, chunk: bytes) -> None:
        self._queue.append(chunk)

    def end(self, error: BaseException | None = None) -> None:
        self._error = error
        self._done = True

    def _next(self) -> bytes | None:
        if self._queue:
            return self._queue.popleft()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return None

    def chunks(self) -> Iterator[bytes]:
        while (chunk := self._next()) is not None:
            yield chunk

    async def achunks(self) -> AsyncIterator[bytes]:
        while (chunk := self._next()) is not None:
            yield chunk


def _dropped(closed: DuplexClosed) -> RemoteProtocolError:
    return RemoteProtocolError(
        f"the WebSocket connection dropped without a close frame (code {closed.code})"
    )


class _Teeing:
    """What the sync and async recorders share: the tee, the log and the clock."""

    def __init__(self, tee: Tee, log: FrameLog, clock: Clock, started: float) -> None:
        self._tee = tee
        self.log = log
        self._clock = clock
        self._started = started
        self._lock = threading.Lock()
        self.ended = False

    def _ms(self) -> float:
        return (self._clock.now() - self._started) * 1000.0

    def _frame(
        self, sender: Sender, message: Message | None, code: int | None = None, reason: str = ""
    ) -> bytes | None:
        if self.ended:
            return None
        self.log.add(sender, self._ms(), message, code=code, reason=reason)
        chunk = pack_frame(sender, message, code, reason)
        self._tee.push(chunk)
        return chunk

    def _closing(self, closed: DuplexClosed) -> None:
        """The live side ended with ``closed``: a close frame from the server, or a drop."""
        if closed.code == ABNORMAL:
            self.log.add("server", self._ms(), None, code=ABNORMAL)
            self._tee.end(_dropped(closed))
        elif closed.by == "server":
            self._frame("server", None, closed.code, closed.reason)
            self._tee.end()
        else:
            self._tee.end()


class RecordingConnection(_Teeing):
    """A sync live connection, teed into the recorder through ``pull`` (the recorder's
    iterator over :class:`Tee`'s stream)."""

    def __init__(
        self,
        live: DuplexConnection,
        tee: Tee,
        pull: Iterator[bytes],
        log: FrameLog,
        clock: Clock,
        started: float,
    ) -> None:
        super().__init__(tee, log, clock, started)
        self._live = live
        self._pull = pull

    @property
    def accepted(self) -> Accepted:
        return self._live.accepted

    def _pass(self) -> None:
        # A drop raises here once the recorder stored it; the client hears it from the live side.
        # (try, not contextlib.suppress: this runs for every frame, and costs nothing here.)
        try:
            next(self._pull, None)
        except RemoteProtocolError:
            return

    def _finish(self) -> None:
        self.ended = True
        try:
            for _ in self._pull:
                pass
        except RemoteProtocolError:
            pass

    def send(self, message: Message) -> None:
        self._live.send(message)
        with self._lock:
            if self._frame("client", message) is not None:
                self._pass()

    def recv(self, timeout: float | None = None) -> Message:
        try:
            message = self._live.recv(timeout)
        except DuplexClosed as closed:
            with self._lock:
                if not self.ended:
                    self._closing(closed)
                    self._finish()
            raise
        with self._lock:
            if self._frame("server", message) is not None:
                self._pass()
        return message

    def close(self, code: int = 1000, reason: str = "") -> None:
        with self._lock:
            if not self.ended and self._frame("client", None, code, reason) is not None:
                self._pass()
        try:
            self._live.close(code, reason)
        finally:
            with self._lock:
                if not self.ended:
                    self._tee.end()
                    self._finish()


class AsyncRecordingConnection(_Teeing):
    """The async mirror of :class:`RecordingConnection`."""

    def __init__(
        self,
        live: AsyncDuplexConnection,
        tee: Tee,
        pull: AsyncIterator[bytes],
        log: FrameLog,
        clock: Clock,
        started: float,
    ) -> None:
        super().__init__(tee, log, clock, started)
        self._live = live
        self._pull = pull

    @property
    def accepted(self) -> Accepted:
        return self._live.accepted

    async def _pass(self) -> None:
        try:
            await anext(self._pull, None)
        except RemoteProtocolError:
            return

    async def _finish(self) -> None:
        self.ended = True
        try:
            async for _ in self._pull:
                pass
        except RemoteProtocolError:
            pass

    async def send(self, message: Message) -> None:
        await self._live.send(message)
        if self._frame("client", message) is not None:
            await self._pass()

    async def recv(self) -> Message:
        try:
            message = await self._live.recv()
        except DuplexClosed as closed:
            if not self.ended:
                self._closing(closed)
                await self._finish()
            raise
        if self._frame("server", message) is not None:
            await self._pass()
        return message

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if not self.ended and self._frame("client", None, code, reason) is not None:
            await self._pass()
        try:
            await self._live.close(code, reason)
        finally:
            if not self.ended:
                self._tee.end()
                await self._finish()
