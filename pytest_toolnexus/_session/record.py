"""Recording: a transport that tees a live transport's answers into interactions.

Every chunk reaches the client the moment it arrives; a copy is parsed into SSE events, NDJSON
lines or timed chunks, each stamped with its arrival in ms from the moment the request was sent.
Nothing is drained ahead of the client, so recording never changes what the client sees.
Each request's progress, and the interaction it made, go to its
:class:`~pytest_toolnexus._session.observer.Observer`.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from typing import cast

from pytest_toolnexus._seam.duplex import is_upgrade
from pytest_toolnexus._seam.errors import TransportCancelled, TransportError, expected_error
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.served import sending
from pytest_toolnexus._seam.transport import (
    AsyncByteStream,
    AsyncTransport,
    ByteStream,
    DualTransport,
    Pushed,
    Transport,
    TransportRequest,
    TransportResponse,
    acall,
    call,
)
from pytest_toolnexus._store.cassette import (
    Interaction,
    RecordedError,
    RecordedResponse,
)
from pytest_toolnexus._timing.clock import real_monotonic

from .observer import NO_OBSERVER, Observer
from .record_body import BodyRecorder, fixed_body, recorded_request

__all__ = [
    "BodyRecorder",
    "RecordingTransport",
    "fixed_body",
    "recorded_request",
]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error


class _Recording:
    """One interaction in flight: it is handed to ``observer.recorded`` exactly once, when it
    ends, and leaves ``inflight`` then.

    ``observer`` is also told of each stored piece as it completes (with the real monotonic
    time), of the end when the client read the whole answer, and of a stream it could not parse.
    """

    def __init__(
        self,
        request: TransportRequest,
        observer: Observer,
        inflight: _Inflight,
    ) -> None:
        self._observer = observer
        self._pieces = 0
        self.request = recorded_request(request)
        self._inflight = inflight
        self._start = real_monotonic()
        self._lock = threading.Lock()
        self._done = False
        self._status = 0
        self._headers = Headers()
        self._t_headers = 0.0
        self._body: BodyRecorder | None = None
        self._asked = request.stream

    def elapsed(self) -> float:
        return (real_monotonic() - self._start) * 1000.0

    def _emit(self, interaction: Interaction) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._inflight.left(self)
        response = interaction.response
        if response is not None and response.complete and response.error is None:
            self._observer.ended()
        self._observer.recorded(interaction)

    def failed(self, exc: BaseException) -> None:
        self._emit(Interaction(self.request, error=_error_of(exc, self.elapsed())))

    def answered(self, response: TransportResponse) -> None:
        self._status = response.status
        self._headers = response.headers
        self._t_headers = self.elapsed()
        body = response.body
        if isinstance(body, ByteStream | AsyncByteStream):
            # What follows a 101 to a WebSocket is its frames, as the duplex seam packs them.
            duplex = is_upgrade(response.status, response.headers)
            self._body = BodyRecorder(response.headers, asked=self._asked, frames=duplex)
            return
        if isinstance(body, Pushed):
            raise TransportError("recording needs a pull stream; the live transport pushed")
        self._observer.delivered(0, real_monotonic())
        self._emit(
            Interaction(
                self.request,
                RecordedResponse(
                    self._status,
                    self._headers,
                    fixed_body(self._headers, body),
                    self._t_headers,
                    self._t_headers,
                ),
            )
        )

    def chunk(self, data: bytes) -> None:
        assert self._body is not None
        completed = self._body.feed(data, self.elapsed())
        if completed:
            at = real_monotonic()
            for _ in range(completed):
                self._observer.delivered(self._pieces, at)
                self._pieces += 1

    def ended(self, *, complete: bool, error: BaseException | None = None) -> None:
        if self._done or self._body is None:
            return
        if not complete and error is None and self._body.reached_end_marker():
            complete = True
        t_end = self.elapsed()
        body = self._body.finish()
        if self._body.problem is not None:
            self._observer.problem(
                f"{self.request.method} {self.request.url}: {self._body.problem}; the client "
                "read the stream as sent, and the cassette keeps it as timed raw chunks"
            )
        self._emit(
            Interaction(
                self.request,
                RecordedResponse(
                    self._status,
                    self._headers,
                    body,
                    self._t_headers,
                    t_end,
                    None if error is None else _error_of(error, t_end),
                    complete,
                ),
            )
        )


class _Inflight:
    """The recordings that have started and not yet been handed over."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[int, _Recording] = {}

    def start(self, request: TransportRequest, observer: Observer) -> _Recording:
        recording = _Recording(request, observer, self)
        with self._lock:
            self._open[id(recording)] = recording
        return recording

    def left(self, recording: _Recording) -> None:
        """``recording`` has ended and been handed over."""
        with self._lock:
            self._open.pop(id(recording), None)

    def finish_all(self) -> int:
        with self._lock:
            pending = list(self._open.values())
        for recording in pending:
            recording.ended(complete=False)
        return len(pending)


def _error_of(exc: BaseException, t_ms: float) -> RecordedError:
    kind = exc.kind if isinstance(exc, TransportError) else "TransportError"
    message = str(exc) if isinstance(exc, TransportError) else f"{type(exc).__name__}: {exc}"
    return RecordedError(kind, message, t_ms)


class RecordingTransport:
    """A seam transport, sync and async (a
    :class:`~pytest_toolnexus._seam.transport.DualTransport`), that sends through ``live`` and
    hands each finished interaction to its :class:`Observer`, while the client reads every
    chunk as it arrives. Calling it sends through ``live`` from sync code; ``acall`` sends
    through ``live``'s async side (``live.acall``, or ``live`` itself when it is an async
    callable).

    An interaction is finished when its stream ends, fails, or is closed by the client (then it
    is marked incomplete). The observer is told of each piece delivered, of the end when the
    client has read the whole answer, of the interaction (exactly once per request) and of a
    stream that could not be parsed. ``observer`` here serves every call; a call may pass its
    own instead (a session does, to know which request an interaction belongs to).
    """

    def __init__(
        self,
        live: Transport | AsyncTransport | DualTransport,
        observer: Observer = NO_OBSERVER,
    ) -> None:
        self._live = live
        self._observer = observer
        self._inflight = _Inflight()

    def prepare(self, *, asynchronous: bool = False) -> None:
        """Make the live transport's own client now, if it makes one (a
        :class:`~pytest_toolnexus.LiveTransport`): whoever times a request, this recorder or
        the session that sends through it, calls this before it reads the clock."""
        from pytest_toolnexus._bridges.live import LiveTransport  # httpx: recording only

        if isinstance(self._live, LiveTransport):
            self._live.prepare(asynchronous=asynchronous)

    def finish_pending(self) -> int:
        """Save every stream still open as incomplete; returns how many there were."""
        return self._inflight.finish_all()

    def _start(self, request: TransportRequest, observer: Observer | None) -> _Recording:
        return self._inflight.start(request, self._observer if observer is None else observer)

    def __call__(
        self,
        request: TransportRequest,
        *,
        observer: Observer | None = None,
    ) -> TransportResponse:
        self.prepare()  # the client is made before the request is timed
        recording = self._start(request, observer)
        try:
            with sending(request.url):  # the patched clients and the tripwire let it by
                response = call(cast(Transport, self._live), request)
        except Exception as exc:
            recording.failed(exc)
            raise
        return _teed(recording, response)

    async def acall(
        self,
        request: TransportRequest,
        *,
        observer: Observer | None = None,
    ) -> TransportResponse:
        self.prepare(asynchronous=True)
        recording = self._start(request, observer)
        try:
            with sending(request.url):
                response = await acall(cast(AsyncTransport, self._live), request)
        except Exception as exc:
            recording.failed(exc)
            raise
        return _teed(recording, response)


def _teed(recording: _Recording, response: TransportResponse) -> TransportResponse:
    """``response``, its stream (sync or async) teed into ``recording``."""
    recording.answered(response)
    body = response.body
    if isinstance(body, ByteStream):

        def abandon() -> None:
            try:
                recording.ended(complete=False)
            finally:
                body.close()

        teed: ByteStream | AsyncByteStream = ByteStream(_tee(body, recording), close=abandon)
    elif isinstance(body, AsyncByteStream):

        async def aabandon() -> None:
            try:
                recording.ended(complete=False)
            finally:
                await body.aclose()

        teed = AsyncByteStream(_atee(body, recording), aclose=aabandon)
    else:
        return response
    return TransportResponse(response.status, response.headers, teed)


def _tee(stream: ByteStream, recording: _Recording) -> Iterator[bytes]:
    try:
        for chunk in stream:
            recording.chunk(chunk)
            yield chunk
    except (GeneratorExit, TransportCancelled):
        # The client let go (closed or cancelled): the rest of the stream was never seen.
        recording.ended(complete=False)
        raise
    except Exception as exc:
        recording.ended(complete=True, error=exc)
        raise
    else:
        recording.ended(complete=True)
    finally:
        stream.close()


async def _atee(stream: AsyncByteStream, recording: _Recording) -> AsyncIterator[bytes]:
    try:
        async for chunk in stream:
            recording.chunk(chunk)
            yield chunk
    except (GeneratorExit, TransportCancelled):
        recording.ended(complete=False)
        raise
    except Exception as exc:
        recording.ended(complete=True, error=exc)
        raise
    else:
        recording.ended(complete=True)
    finally:
        await stream.aclose()
