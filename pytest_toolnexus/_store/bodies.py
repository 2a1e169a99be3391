"""The body types of a cassette, and how each is stored in a document and read back from one.

A body is kept parsed (a JSON value, text, bytes, or one stored map per stream event, line,
chunk or frame) and turned into wire bytes only when it is replayed. The records and the file
that hold these bodies are in :mod:`cassette`; the format is specified in
docs/cassette-format.md, and the two must change together.

Why one module of over 400 lines: :func:`body_from_doc` reads back every kind that the types
here write with ``to_doc``, and the stream types check their stored maps in ``pieces`` with the
same few helpers (:func:`checked_time`, :func:`checked_str`, one compact JSON encoder); split by
kind, the writer and the reader of one stored shape would sit in two modules and drift. The
event-stream frame maps (:func:`frame_doc`, :func:`frame_of`) are the part to move out first if
this module grows.
"""

from __future__ import annotations

import json
import reprlib
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, TypeAlias

from pytest_toolnexus._safety.mask import masked_repr
from pytest_toolnexus._seam.depth import MAX_DEPTH, TOO_DEEP, deeper_than, may_nest_deeper
from pytest_toolnexus._seam.transport import JSONValue

from .eventstream import HEADER_TYPES, EventStreamError, Frame, Header, decode, encode
from .streams import SseEvent, encode_sse_event, parse_json_text, parse_piece_text

__all__ = [
    "MAX_TIME_MS",
    "AnyBody",
    "Body",
    "BytesBody",
    "ChunksBody",
    "EmptyBody",
    "EventStreamBody",
    "JsonBody",
    "MalformedCassette",
    "NdjsonBody",
    "SseBody",
    "StreamBody",
    "TextBody",
    "WebSocketBody",
    "body_from_doc",
    "brief",
    "checked_str",
    "checked_time",
    "checked_url",
    "frame_doc",
    "frame_of",
    "rounded_ms",
    "sse_event_doc",
    "sse_event_of",
]


class MalformedCassette(Exception):
    """Raised inside the codec; the caller turns it into a CassetteFormatError naming the file."""


# The latest time a stored event may have, in ms (about 31 years): a later one, or infinity,
# is damage, and no clock could wait for it.
MAX_TIME_MS: Final = 1e12
# A tuple made once: an ``X | Y`` written in an isinstance call builds a union at every call.
_NUMBERS: Final = (int, float)

_BRIEF: Final = reprlib.Repr()
_BRIEF.maxlevel = 3
_BRIEF.maxstring = 40
_BRIEF.maxother = 40


def brief(value: object) -> str:
    """A short ``repr`` for an error message, safe for a value nested any depth."""
    return _BRIEF.repr(value)


def rounded_ms(value: float) -> float:
    """A time in ms as it is stored: rounded to the microsecond."""
    return round(float(value), 3)


# allow_nan=False: NaN and Infinity are not JSON, and a recording never stores them (such a
# payload is kept as text), so meeting one means the file was damaged. One encoder for all:
# ``json.dumps`` with options builds a new one per call, which a long stream pays per event.
_COMPACT: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _c_compact() -> Callable[[Any, int], list[str]] | None:
    """CPython's C encoder with ``_COMPACT``'s settings, made once. ``JSONEncoder.encode``
    makes a new one on every call, about a third of the cost of encoding a stream event.
    No circularity markers: a decoded cassette is a tree, and a dict shared between calls
    would keep the ids an encoding that failed halfway left in it."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        encoder: Callable[[Any, int], list[str]] = make(
            None,
            _COMPACT.default,
            json.encoder.encode_basestring,
            None,
            ":",
            ",",
            False,
            False,
            False,
        )
        if "".join(encoder({"a": [1, 2.5, None, "é"]}, 0)) != '{"a":[1,2.5,null,"é"]}':
            return None
    except (TypeError, ValueError):  # a signature this does not know
        return None
    return encoder


_C_COMPACT: Final = _c_compact()


def _json_line(value: JSONValue) -> str:
    """``value`` as compact JSON. Raises :class:`MalformedCassette` when it nests deeper than
    ``MAX_DEPTH``, on every Python: the C encoder alone stops at 3.11's recursion limit less
    the caller's stack, at about 1,500 levels on 3.12 and 10,000 on 3.13."""
    try:
        text = _COMPACT.encode(value) if _C_COMPACT is None else "".join(_C_COMPACT(value, 0))
    except RecursionError:
        if deeper_than(value):
            raise MalformedCassette(TOO_DEEP) from None
        raise
    # A value nested deeper than the limit has more opening brackets than the limit.
    if len(text) > MAX_DEPTH and may_nest_deeper(text) and deeper_than(value):
        raise MalformedCassette(TOO_DEEP)
    return text


# ---------------------------------------------------------------------------------------------
# Bodies


@dataclass(frozen=True, slots=True)
class EmptyBody:
    """No body at all."""

    kind: ClassVar[str] = "empty"

    def to_doc(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def content(self) -> bytes:
        return b""


@dataclass(frozen=True, slots=True)
class AnyBody:
    """In a request only: any body matches. Built cassettes use it, since what a client
    sends around the messages (options, defaults) is not theirs to predict."""

    kind: ClassVar[str] = "any"

    def to_doc(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def content(self) -> bytes:
        return b""


@masked_repr
@dataclass(frozen=True, slots=True)
class JsonBody:
    """A JSON document, stored as its value.

    ``times`` is set for a JSON array that arrived element by element (Gemini's
    ``:streamGenerateContent`` without ``alt=sse``): the arrival of each element, in ms, so
    that replay sends each one at its time. An array that arrived in one piece has none.
    """

    value: JSONValue
    times: tuple[float, ...] | None = None
    kind: ClassVar[str] = "json"

    def to_doc(self) -> dict[str, Any]:
        if self.times is None:
            return {"kind": self.kind, "value": self.value}
        return {"kind": self.kind, "value": self.value, "times": list(self.times)}

    def content(self) -> bytes:
        return _json_line(self.value).encode()

    def pieces(self) -> Iterator[tuple[float, bytes]]:
        """The elements of a timed array, each at its time: ``[`` goes with the first and
        ``]`` with the last, so the pieces join to exactly :meth:`content`."""
        items = self.value if isinstance(self.value, list) else []
        times = _element_times(items, self.times or ())
        final = len(items) - 1
        for index, (item, t) in enumerate(zip(items, times, strict=True)):
            text = ("[" if index == 0 else ",") + _json_line(item) + ("]" if index == final else "")
            yield t, text.encode()


def _element_times(items: Sequence[Any], times: Sequence[object]) -> list[float]:
    """The arrival of each element of a timed JSON array, checked (one time per element, at
    least one element) and each raised to the one before it."""
    if len(items) != len(times) or not items:
        raise MalformedCassette(
            f"a timed json body has {len(times)} time(s) for {len(items)} array element(s)"
        )
    checked: list[float] = []
    last = 0.0
    for t in times:
        last = checked_time(t, last)
        checked.append(last)
    return checked


@masked_repr
@dataclass(frozen=True, slots=True)
class TextBody:
    """A body that is UTF-8 text but not JSON (an HTML error page, plain text)."""

    text: str
    kind: ClassVar[str] = "text"

    def to_doc(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text}

    def content(self) -> bytes:
        return self.text.encode()


@masked_repr
@dataclass(frozen=True, slots=True)
class BytesBody:
    """A body that is not text, kept byte for byte."""

    data: bytes
    kind: ClassVar[str] = "bytes"

    def to_doc(self) -> dict[str, Any]:
        return {"kind": self.kind, "data": self.data}

    def content(self) -> bytes:
        return self.data


class _Pieces:
    """What the stream bodies share: their bytes are their pieces joined."""

    __slots__ = ()

    def pieces(self) -> Iterator[tuple[float, bytes]]:
        """Each piece's wire bytes with its arrival in ms, checked as it is read."""
        raise NotImplementedError

    def content(self) -> bytes:
        return b"".join(piece for _, piece in self.pieces())


@masked_repr
@dataclass(frozen=True, slots=True)
class SseBody(_Pieces):
    """A ``text/event-stream``: one stored map per event, each with its arrival ``t`` in ms.

    Events are kept as stored and turned into wire bytes only when replayed, so loading a
    large stream costs no parsing.
    """

    events: Sequence[Mapping[str, Any]]
    tail: str = ""
    kind: ClassVar[str] = "sse"

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": self.kind, "events": list(self.events)}
        if self.tail:
            doc["tail"] = self.tail
        return doc

    def pieces(self) -> Iterator[tuple[float, bytes]]:
        last = 0.0
        for raw in self.events:
            if not isinstance(raw, Mapping):
                raise MalformedCassette(f"an SSE event must be a map, found {type(raw).__name__}")
            t = raw.get("t")
            # A float in order is what a recording stores; anything else takes the full check.
            if type(t) is float and last <= t <= MAX_TIME_MS:  # noqa: SIM108
                last = t
            else:
                last = checked_time(t, last)
            if len(raw) == 2 and "data" in raw:
                # The common event, {"t", "data"}: its wire form without the general path.
                # Compact JSON holds no line break, so it is one data line.
                yield last, b"data: " + _json_line(raw["data"]).encode() + b"\n\n"
            else:
                yield last, encode_sse_event(sse_event_of(raw))
        if self.tail:
            yield last, self.tail.encode()


def sse_event_of(raw: Mapping[str, Any]) -> SseEvent:
    """The :class:`SseEvent` a stored event map describes."""
    if not isinstance(raw, Mapping):
        raise MalformedCassette(f"an SSE event must be a map, found {type(raw).__name__}")
    data: str | None
    if "data" in raw:
        data = _json_line(raw["data"])
    elif "text" in raw:
        data = checked_str(raw["text"], "SSE event text")
    else:
        data = None
    comments = raw.get("comments", [])
    if not isinstance(comments, list) or not all(isinstance(c, str) for c in comments):
        raise MalformedCassette("SSE event comments must be a list of strings")
    retry = raw.get("retry")
    if retry is not None and (isinstance(retry, bool) or not isinstance(retry, int)):
        raise MalformedCassette("SSE event retry must be an integer")
    return SseEvent(
        event=_opt_str(raw.get("event"), "SSE event name"),
        data=data,
        id=_opt_str(raw.get("id"), "SSE event id"),
        retry=retry,
        comments=list(comments),
    )


def sse_event_doc(t_ms: float, event: SseEvent, parse: bool = True) -> dict[str, Any]:
    """The stored map for one event that arrived ``t_ms`` after the request was sent."""
    doc: dict[str, Any] = {"t": rounded_ms(t_ms)}
    if event.event is not None:
        doc["event"] = event.event
    if event.id is not None:
        doc["id"] = event.id
    if event.retry is not None:
        doc["retry"] = event.retry
    if event.data is not None:
        ok, value = parse_piece_text(event.data) if parse else (False, None)
        if ok:
            doc["data"] = value
        else:
            doc["text"] = event.data
    if event.comments:
        doc["comments"] = list(event.comments)
    return doc


@masked_repr
@dataclass(frozen=True, slots=True)
class NdjsonBody(_Pieces):
    """Newline-delimited JSON: one stored map per line, each with its arrival ``t`` in ms."""

    lines: Sequence[Mapping[str, Any]]
    tail: str = ""
    kind: ClassVar[str] = "ndjson"

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": self.kind, "lines": list(self.lines)}
        if self.tail:
            doc["tail"] = self.tail
        return doc

    def pieces(self) -> Iterator[tuple[float, bytes]]:
        last = 0.0
        for raw in self.lines:
            if not isinstance(raw, Mapping):
                raise MalformedCassette("an NDJSON line must be a map")
            last = checked_time(raw.get("t"), last)
            if "value" in raw:
                text = _json_line(raw["value"])
            else:
                text = checked_str(raw.get("text"), "NDJSON line text")
            yield last, (text + "\n").encode()
        if self.tail:
            yield last, self.tail.encode()


@masked_repr
@dataclass(frozen=True, slots=True)
class ChunksBody(_Pieces):
    """Any other stream: byte chunks, each with its arrival ``t`` in ms."""

    chunks: Sequence[Mapping[str, Any]]
    kind: ClassVar[str] = "chunks"

    def to_doc(self) -> dict[str, Any]:
        return {"kind": self.kind, "chunks": list(self.chunks)}

    def pieces(self) -> Iterator[tuple[float, bytes]]:
        last = 0.0
        for raw in self.chunks:
            if not isinstance(raw, Mapping):
                raise MalformedCassette("a stream chunk must be a map")
            last = checked_time(raw.get("t"), last)
            data = raw.get("data")
            if not isinstance(data, bytes):
                raise MalformedCassette("a stream chunk's data must be binary")
            yield last, data


@masked_repr
@dataclass(frozen=True, slots=True)
class EventStreamBody(_Pieces):
    """An AWS event stream (``application/vnd.amazon.eventstream``, Amazon Bedrock's
    streaming answers): one stored map per frame, with its arrival ``t`` in ms, its headers
    decoded and its payload parsed where it is JSON. Replay encodes each frame again, byte for
    byte, CRCs included. ``tail`` is what came after the last whole frame."""

    frames: Sequence[Mapping[str, Any]]
    tail: bytes = b""
    kind: ClassVar[str] = "eventstream"

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": self.kind, "frames": list(self.frames)}
        if self.tail:
            doc["tail"] = self.tail
        return doc

    def pieces(self) -> Iterator[tuple[float, bytes]]:
        last = 0.0
        for raw in self.frames:
            if not isinstance(raw, Mapping):
                raise MalformedCassette("an event stream frame must be a map")
            last = checked_time(raw.get("t"), last)
            try:
                yield last, encode(frame_of(raw))
            except EventStreamError as exc:
                raise MalformedCassette(f"an event stream frame cannot be encoded: {exc}") from exc
        if self.tail:
            yield last, self.tail


def frame_doc(t_ms: float, raw: bytes) -> dict[str, Any]:
    """The stored map for one frame (its wire bytes, checked) that arrived at ``t_ms``. The
    payload is stored parsed only when encoding the value gives back the very bytes."""
    frame = decode(raw)
    doc: dict[str, Any] = {
        "t": rounded_ms(t_ms),
        "headers": [[h.name, h.type, h.value] for h in frame.headers],
    }
    payload = frame.payload
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        doc["data"] = payload
        return doc
    ok, value = parse_json_text(text) if text else (False, None)
    if ok and _json_line(value).encode() == payload:
        doc["payload"] = value
    else:
        doc["text"] = text
    return doc


def frame_of(raw: Mapping[str, Any]) -> Frame:
    """The :class:`Frame` a stored frame map describes."""
    headers = raw.get("headers", [])
    if not isinstance(headers, list):
        raise MalformedCassette("an event stream frame's headers must be a list")
    decoded: list[Header] = []
    for item in headers:
        if not isinstance(item, list) or len(item) != 3:
            raise MalformedCassette("a frame header must be a [name, type, value] triple")
        name, kind, value = item
        if not isinstance(name, str) or kind not in HEADER_TYPES:
            raise MalformedCassette(f"a frame header has a bad name or type: {name!r}, {kind!r}")
        decoded.append(Header(name, kind, value))
    if "payload" in raw:
        payload = _json_line(raw["payload"]).encode()
    elif "text" in raw:
        payload = checked_str(raw["text"], "a frame's text payload").encode()
    else:
        data = raw.get("data", b"")
        if not isinstance(data, bytes):
            raise MalformedCassette("a frame's data payload must be binary")
        payload = data
    return Frame(tuple(decoded), payload)


@masked_repr
@dataclass(frozen=True, slots=True)
class WebSocketBody:
    """The frames of a WebSocket session, as the body of the answer to its handshake: one
    stored map per frame, both directions, each with its ``t`` in ms since the handshake was
    sent (their shape is :mod:`.ws_frames`'s). It is no byte stream: the realtime replay hands
    the frames to the client as messages, so :meth:`content` is empty."""

    frames: Sequence[Mapping[str, Any]]
    kind: ClassVar[str] = "websocket"

    def to_doc(self) -> dict[str, Any]:
        return {"kind": self.kind, "frames": list(self.frames)}

    def content(self) -> bytes:
        return b""


Body: TypeAlias = (
    EmptyBody
    | AnyBody
    | JsonBody
    | TextBody
    | BytesBody
    | SseBody
    | NdjsonBody
    | ChunksBody
    | EventStreamBody
    | WebSocketBody
)
StreamBody: TypeAlias = SseBody | NdjsonBody | ChunksBody | EventStreamBody


def checked_time(t: object, floor: float = 0.0) -> float:
    """A stored time ``t`` in ms, raised to ``floor`` (the previous piece's) if earlier.

    Raises :class:`MalformedCassette` when it is not a number from 0 to :data:`MAX_TIME_MS`.
    """
    if isinstance(t, bool) or not isinstance(t, _NUMBERS) or not 0 <= t <= MAX_TIME_MS:
        raise MalformedCassette(
            f"an event time 't' must be a number of ms from 0 to {MAX_TIME_MS:.0e}, "
            f"found {brief(t)}"
        )
    return max(float(t), floor)


def checked_str(value: object, what: str) -> str:
    """``value``, which must be a string; ``what`` names it in the :class:`MalformedCassette`."""
    if not isinstance(value, str):
        raise MalformedCassette(f"{what} must be a string, found {type(value).__name__}")
    return value


def checked_url(value: object) -> str:
    """``value``, which must be an absolute URL: a scheme and a host (``""``, ``/v1/x``,
    ``host/x`` and ``http://`` are damage, which no recording makes and no client can send)."""
    url = checked_str(value, "a request url")
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError:  # a broken IPv6 literal: the matching rules name it
        return url
    if not parts.scheme or not host:
        raise MalformedCassette(
            f"a request url must be an absolute URL with a scheme and a host, found {brief(url)}"
        )
    return url


def _opt_str(value: object, what: str) -> str | None:
    return None if value is None else checked_str(value, what)


def body_from_doc(doc: object, *, timed: bool) -> Body:
    """Decode a stored body map. ``timed`` allows the stream kinds (responses only)."""
    if not isinstance(doc, Mapping):
        raise MalformedCassette(f"a body must be a map, found {type(doc).__name__}")
    kind = doc.get("kind")
    if kind == "empty":
        return EmptyBody()
    if kind == "any" and not timed:
        return AnyBody()
    if kind == "json":
        if "value" not in doc:
            raise MalformedCassette("a json body has no 'value'")
        times = doc.get("times")
        if times is None:
            return JsonBody(doc["value"])
        value = doc["value"]
        if not timed or not isinstance(times, list) or not isinstance(value, list):
            raise MalformedCassette(
                "a json body's 'times' must be a list, in a response whose value is an array"
            )
        _element_times(value, times)
        return JsonBody(value, tuple(float(t) for t in times))
    if kind == "text":
        return TextBody(checked_str(doc.get("text"), "a text body"))
    if kind == "bytes":
        data = doc.get("data")
        if not isinstance(data, bytes):
            raise MalformedCassette("a bytes body's data must be binary")
        return BytesBody(data)
    if timed and kind in ("sse", "ndjson", "chunks"):
        key = {"sse": "events", "ndjson": "lines", "chunks": "chunks"}[kind]
        items = doc.get(key)
        if not isinstance(items, list):
            raise MalformedCassette(f"an {kind} body's '{key}' must be a list")
        tail = doc.get("tail", "")
        if not isinstance(tail, str):
            raise MalformedCassette(f"an {kind} body's tail must be a string")
        if kind == "sse":
            return SseBody(items, tail)
        if kind == "ndjson":
            return NdjsonBody(items, tail)
        return ChunksBody(items)
    if timed and kind == "eventstream":
        frames = doc.get("frames")
        if not isinstance(frames, list):
            raise MalformedCassette("an eventstream body's 'frames' must be a list")
        tail = doc.get("tail", b"")
        if not isinstance(tail, bytes):
            raise MalformedCassette("an eventstream body's tail must be binary")
        return EventStreamBody(frames, tail)
    if timed and kind == "websocket":
        frames = doc.get("frames")
        if not isinstance(frames, list):
            raise MalformedCassette("a websocket body's 'frames' must be a list")
        return WebSocketBody(frames)
    raise MalformedCassette(f"unknown body kind {brief(kind)}")
