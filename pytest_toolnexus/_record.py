"""Recording: a transport that tees a live transport's answers into interactions.

Every chunk reaches the client the moment it arrives; a copy is parsed into SSE events, NDJSON
lines or timed chunks, each stamped with its arrival in ms from the moment the request was sent.
Nothing is drained ahead of the client, so recording never changes what the client sees.
Each request's progress, and the interaction it made, go to its
:class:`~pytest_toolnexus._observer.Observer`.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import cast

from ._bodies import encode_json, is_json_type
from ._cassette import (
    Body,
    BytesBody,
    ChunksBody,
    EmptyBody,
    EventStreamBody,
    Interaction,
    JsonBody,
    MalformedCassette,
    NdjsonBody,
    RecordedError,
    RecordedRequest,
    RecordedResponse,
    SseBody,
    TextBody,
    frame_doc,
    sse_event_doc,
)
from ._clock import real_monotonic
from ._codings import decoded
from ._errors import TransportCancelled, TransportError
from ._eventstream import EventStreamError, FrameSplitter
from ._headers import Headers
from ._json_array import JsonArraySplitter
from ._observer import Observer
from ._seam import (
    AsyncByteStream,
    AsyncTransport,
    ByteStream,
    DualTransport,
    JSONValue,
    Pushed,
    RequestBody,
    Transport,
    TransportRequest,
    TransportResponse,
    acall,
    call,
)
from ._stream_kind import media_type, stream_kind
from ._streams import NdjsonSplitter, SseParser, parse_json_text, storable
from .providers import ends_stream

__all__ = [
    "BodyRecorder",
    "RecordingTransport",
    "fixed_body",
    "recorded_request",
]


def fixed_body(headers: Headers, body: JSONValue | bytes) -> Body:
    """The stored form of a body that arrived whole."""
    if not isinstance(body, bytes):
        if storable(body):
            return JsonBody(body)
        return TextBody(encode_json(body).decode())
    if not body:
        return EmptyBody()
    if is_json_type(headers.get("content-type", "")):
        try:
            ok, value = parse_json_text(body.decode())
        except UnicodeDecodeError:
            ok, value = False, None
        if ok:
            return JsonBody(value)
    try:
        return TextBody(body.decode())
    except UnicodeDecodeError:
        return BytesBody(body)


def recorded_request(request: TransportRequest) -> RecordedRequest:
    """The stored form of a request (before redaction). A compressed body is stored
    decoded, so that redaction and the secret scan read it."""
    body: RequestBody = request.body
    stored: Body
    raw = body if isinstance(body, bytes) else request.content if body is None else None
    if raw and "content-encoding" in request.headers:
        headers, plain = decoded(request.headers, raw)
        if plain is not raw:
            return RecordedRequest(request.method, request.url, headers, fixed_body(headers, plain))
    if body is None:
        stored = (
            EmptyBody() if not request.content else fixed_body(request.headers, request.content)
        )
    else:
        stored = fixed_body(request.headers, body)
    return RecordedRequest(request.method, request.url, request.headers, stored)


class BodyRecorder:
    """Builds the stored body of a streamed response from chunks as they arrive.

    The content type decides the pieces: SSE events, NDJSON lines, AWS event stream frames,
    the elements of a JSON array that arrives element by element, or byte chunks. ``asked``
    says whether the request asked for a stream; a body of another type that it did not ask
    for and that arrived in one chunk is stored whole (as text or bytes), not as one chunk.
    """

    def __init__(self, headers: Headers, *, asked: bool = True) -> None:
        kind = stream_kind(headers.get("content-type", ""))
        self._headers = headers
        self._asked = asked
        self._sse: SseParser | None = SseParser() if kind == "sse" else None
        self._ndjson: NdjsonSplitter | None = NdjsonSplitter() if kind == "ndjson" else None
        self._frames: FrameSplitter | None = FrameSplitter() if kind == "eventstream" else None
        self._broken = False
        self._whole = kind is None and is_json_type(media_type(headers.get("content-type", "")))
        self._array: JsonArraySplitter | None = JsonArraySplitter() if self._whole else None
        self._element_times: list[float] = []
        self._array_chunks = 0  # chunks that completed at least one array element
        self._unreported = 0  # elements completed while they were all in one chunk
        self._events: list[dict[str, object]] = []
        self._buffer: list[bytes] = []
        # An event stream's raw chunks too (SSE or AWS), in case it turns out not to be one (or
        # holds bytes that are not UTF-8), and for a recorder that fails on a chunk.
        self._raw: list[tuple[float, bytes]] = []
        self.problem: str | None = None
        """Why the pieces could not be parsed (the body is then kept as timed chunks)."""

    def feed(self, chunk: bytes, t_ms: float) -> int:
        """Take one chunk; returns how many stored pieces (events, lines, chunks) it completed.

        Never raises: a chunk the parser fails on (a payload nested past the interpreter's
        limit, say) turns the body into timed raw chunks, and :attr:`problem` says why. The
        client's stream is never the recorder's to break.
        """
        if chunk:
            self._raw.append((t_ms, chunk))  # references only: the bytes are not copied
        if self.problem is not None:
            return 1 if chunk else 0
        try:
            return self._feed(chunk, t_ms)
        except Exception as exc:
            self.problem = f"{type(exc).__name__} while parsing the stream: {exc}"[:300]
            return 0

    def _feed(self, chunk: bytes, t_ms: float) -> int:
        before = len(self._events)
        if self._sse is not None:
            self._events.extend(sse_event_doc(t_ms, e) for e in self._sse.feed(chunk))
        elif self._ndjson is not None:
            for line in self._ndjson.feed(chunk):
                self._events.append(_ndjson_doc(t_ms, line))
        elif self._frames is not None:
            if not self._broken:
                try:
                    for raw in self._frames.feed(chunk):
                        self._events.append(frame_doc(t_ms, raw))
                except EventStreamError:
                    # Not an event stream after all: kept as its timed chunks.
                    self._broken = True
        elif self._whole:
            self._buffer.append(chunk)
            return self._array_feed(chunk, t_ms)
        elif chunk:
            self._events.append({"t": round(t_ms, 3), "data": chunk})
        return len(self._events) - before

    def _array_feed(self, chunk: bytes, t_ms: float) -> int:
        """Counts the array elements this chunk completed, as pieces once the array has come
        in more than one chunk (an array in one chunk is stored, and replayed, whole)."""
        if self._array is None:
            return 0
        done = self._array.feed(chunk)
        if self._array.broken:
            self._array = None
            return 0
        if not done:
            return 0
        self._element_times.extend([t_ms] * done)
        self._array_chunks += 1
        if self._array_chunks == 1:
            self._unreported = done
            return 0
        reported, self._unreported = done + self._unreported, 0
        return reported

    def _timed_array(self, whole: Body) -> Body:
        """``whole`` with each element's time, when it is an array that came in pieces."""
        array = self._array
        if (
            array is None
            or not array.closed
            or self._array_chunks < 2
            or not isinstance(whole, JsonBody)
            or not isinstance(whole.value, list)
            or len(whole.value) != len(self._element_times)
        ):
            return whole
        return JsonBody(whole.value, tuple(round(t, 3) for t in self._element_times))

    def reached_end_marker(self) -> bool:
        """Whether the last piece so far is a provider dialect's end-of-stream marker (the
        provider layer's ``ends_stream``: ``[DONE]``, ``message_stop``, ``response.completed``,
        an NDJSON line with ``done: true``, ...). A client that closes the body right there
        has read all of it, even though the server had not closed it yet."""
        if self._array is not None and self._array.closed:
            return True
        if not self._events:
            return False
        last = self._events[-1]
        if self._sse is not None:
            name = last.get("event")
            payload = last["data"] if "data" in last else last.get("text")
            return ends_stream(name if isinstance(name, str) else None, payload)
        if self._ndjson is not None:
            return ends_stream(None, last.get("value"))
        return False

    def _raw_body(self) -> ChunksBody:
        return ChunksBody([{"t": round(t, 3), "data": chunk} for t, chunk in self._raw])

    def finish(self) -> Body:
        if self.problem is not None:
            return self._raw_body()
        if self._sse is not None:
            rest = self._sse.finish()
            if self._sse.lossy:
                # Bytes that are not UTF-8 would become U+FFFD in events: keep the bytes.
                return self._raw_body()
            if self._sse.dropped:
                # Not an event stream after all: events would lose the lines a parser drops.
                # Kept as the JSON it is, or as its timed chunks, byte for byte.
                data = b"".join(chunk for _, chunk in self._raw)
                as_json = self._headers.with_value("content-type", "application/json")
                whole = fixed_body(as_json, data)
                if isinstance(whole, JsonBody):
                    return whole
                return self._raw_body()
            return SseBody(self._events, rest)
        if self._ndjson is not None:
            rest = self._ndjson.finish()
            if self._ndjson.lossy:
                # Bytes that are not UTF-8 would become U+FFFD in lines: keep the bytes.
                return self._raw_body()
            return NdjsonBody(self._events, rest)
        if self._frames is not None:
            if self._broken:
                return ChunksBody([{"t": round(t, 3), "data": chunk} for t, chunk in self._raw])
            return EventStreamBody(self._events, self._frames.finish())
        if self._whole:
            return self._timed_array(fixed_body(self._headers, b"".join(self._buffer)))
        if not self._asked and len(self._events) <= 1:
            # Not asked for, and not a stream after all: the readable whole form.
            return fixed_body(self._headers, b"".join(chunk for _, chunk in self._raw))
        return ChunksBody(self._events)


def _ndjson_doc(t_ms: float, line: str) -> dict[str, object]:
    ok, value = parse_json_text(line) if line.strip() else (False, None)
    return {"t": round(t_ms, 3), "value": value} if ok else {"t": round(t_ms, 3), "text": line}


class _Recording:
    """One interaction in flight: it is handed to ``on_record`` exactly once, when it ends.

    ``observer`` is told of each stored piece as it completes (with the real monotonic time),
    of the end when the client read the whole answer, and of a stream it could not parse.
    """

    def __init__(
        self,
        request: TransportRequest,
        observer: Observer,
        on_record: Callable[[Interaction], None],
    ) -> None:
        self._observer = observer
        self._pieces = 0
        self.request = recorded_request(request)
        self._on_record = on_record
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
        response = interaction.response
        if response is not None and response.complete and response.error is None:
            self._observer.ended()
        self._on_record(interaction)

    def failed(self, exc: BaseException) -> None:
        self._emit(Interaction(self.request, error=_error_of(exc, self.elapsed())))

    def answered(self, response: TransportResponse) -> None:
        self._status = response.status
        self._headers = response.headers
        self._t_headers = self.elapsed()
        body = response.body
        if isinstance(body, ByteStream | AsyncByteStream):
            self._body = BodyRecorder(response.headers, asked=self._asked)
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
        def handed_over(interaction: Interaction) -> None:
            with self._lock:
                self._open.pop(id(recording), None)
            observer.recorded(interaction)

        recording = _Recording(request, observer, handed_over)
        with self._lock:
            self._open[id(recording)] = recording
        return recording

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


class _Sinks:
    """The :class:`Observer` of a request sent with none: the recorder's own ``on_record`` and
    ``on_problem`` (either may be None), and nothing else."""

    def __init__(
        self,
        on_record: Callable[[Interaction], None] | None,
        on_problem: Callable[[str], None] | None,
    ) -> None:
        self._on_record = on_record
        self._on_problem = on_problem

    def delivered(self, number: int, at: float) -> None:
        pass

    def ended(self) -> None:
        pass

    def recorded(self, interaction: Interaction) -> None:
        if self._on_record is not None:
            self._on_record(interaction)

    def malformed(self, problem: MalformedCassette) -> Exception | None:
        return None

    def problem(self, text: str) -> None:
        if self._on_problem is not None:
            self._on_problem(text)


class RecordingTransport:
    """A seam transport, sync and async (a :class:`~._seam.DualTransport`), that sends through
    ``live`` and hands each finished interaction to ``on_record``, while the client reads every
    chunk as it arrives. Calling it sends through ``live`` from sync code; ``acall`` sends
    through ``live``'s async side (``live.acall``, or ``live`` itself when it is an async
    callable).

    An interaction is finished when its stream ends, fails, or is closed by the client (then it
    is marked incomplete). ``on_record`` is called exactly once per request, and ``on_problem``
    with a sentence for each stream the recorder could not parse. A call may pass its own
    ``observer`` instead (to know which request an interaction belongs to): it is told of each
    piece delivered, of the end when the client has read the whole answer, of the interaction
    (in place of ``on_record``) and of a stream that could not be parsed (in place of
    ``on_problem``).
    """

    def __init__(
        self,
        live: Transport | AsyncTransport | DualTransport,
        on_record: Callable[[Interaction], None] | None = None,
        on_problem: Callable[[str], None] | None = None,
    ) -> None:
        self._live = live
        self._sinks = _Sinks(on_record, on_problem)
        self._inflight = _Inflight()

    def finish_pending(self) -> int:
        """Save every stream still open as incomplete; returns how many there were."""
        return self._inflight.finish_all()

    def _start(self, request: TransportRequest, observer: Observer | None) -> _Recording:
        return self._inflight.start(request, self._sinks if observer is None else observer)

    def __call__(
        self,
        request: TransportRequest,
        *,
        observer: Observer | None = None,
    ) -> TransportResponse:
        recording = self._start(request, observer)
        try:
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
        recording = self._start(request, observer)
        try:
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
