"""Storing what was sent and answered: a request, a whole body, and a streamed body as it comes.

:class:`BodyRecorder` builds the stored body of a streamed response from chunks as they
arrive (SSE events, NDJSON lines, AWS event stream frames, the elements of a JSON array, or
timed chunks); :func:`fixed_body` stores a body that arrived whole and
:func:`recorded_request` a request. The recording transports (:mod:`._record`) and the
vcrpy importer use them.
"""

from __future__ import annotations

from pytest_toolnexus._providers import ends_stream
from pytest_toolnexus._seam.bodies import encode_json, is_json_type
from pytest_toolnexus._seam.codings import decoded
from pytest_toolnexus._seam.duplex import unpack_frame
from pytest_toolnexus._seam.errors import expected_error
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.stream_kind import media_type, stream_kind
from pytest_toolnexus._seam.transport import JSONValue, RequestBody, TransportRequest
from pytest_toolnexus._store.cassette import (
    Body,
    BytesBody,
    ChunksBody,
    EmptyBody,
    EventStreamBody,
    JsonBody,
    NdjsonBody,
    RecordedRequest,
    SseBody,
    TextBody,
    WebSocketBody,
    frame_doc,
    sse_event_doc,
)
from pytest_toolnexus._store.eventstream import EventStreamError, FrameSplitter
from pytest_toolnexus._store.json_array import JsonArraySplitter
from pytest_toolnexus._store.streams import (
    NdjsonSplitter,
    SseParser,
    parse_json_text,
    parse_piece_text,
    storable,
)
from pytest_toolnexus._store.ws_frames import frame_doc as ws_frame_doc

__all__ = ["BodyRecorder", "fixed_body", "recorded_request"]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error


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

    def __init__(self, headers: Headers, *, asked: bool = True, frames: bool = False) -> None:
        kind = None if frames else stream_kind(headers.get("content-type", ""))
        # ``frames``: the chunks are a WebSocket session's frames, packed by the duplex seam.
        self._ws = frames
        self._headers = headers
        self._asked = asked
        self._sse: SseParser | None = SseParser() if kind == "sse" else None
        self._ndjson: NdjsonSplitter | None = NdjsonSplitter() if kind == "ndjson" else None
        self._frames: FrameSplitter | None = FrameSplitter() if kind == "eventstream" else None
        self._broken = False
        self._whole = (
            not frames
            and kind is None
            and is_json_type(media_type(headers.get("content-type", "")))
        )
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
        if self._ws:
            # Each frame is one chunk, kept in ``_raw`` with its time; it is read into its
            # stored form at the end (:meth:`_ws_body`), off the path that hands it over.
            return 1 if chunk else 0
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

    def _ws_body(self) -> Body:
        """The frames as stored, each read from its packed chunk; a chunk that cannot be
        read keeps the body as timed raw chunks, :attr:`problem` saying why."""
        frames = []
        try:
            for t_ms, chunk in self._raw:
                sender, message, code, reason = unpack_frame(chunk)
                frames.append(ws_frame_doc(t_ms, sender, message, code=code, reason=reason))
        except Exception as exc:
            self.problem = f"{type(exc).__name__} while parsing the stream: {exc}"[:300]
            return self._raw_body()
        return WebSocketBody(frames)

    def finish(self) -> Body:
        if self.problem is not None:
            return self._raw_body()
        if self._ws:
            return self._ws_body()
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
    ok, value = parse_piece_text(line) if line.strip() else (False, None)
    return {"t": round(t_ms, 3), "value": value} if ok else {"t": round(t_ms, 3), "text": line}
