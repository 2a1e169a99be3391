"""The cassette store: format version 1, in msgpack, with safe loads and atomic writes.

This module knows the file format and nothing of how interactions are recorded or replayed.
The format is specified in docs/cassette-format.md; keep the two in step.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import reprlib
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final, TypeAlias

import msgpack

from pytest_toolnexus._safety.mask import masked_repr
from pytest_toolnexus._seam.errors import (
    CassetteFormatError,
    CassetteNotFoundError,
    CassetteVersionError,
)
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import JSONValue

from .eventstream import HEADER_TYPES, EventStreamError, Frame, Header, decode, encode
from .sniff import looks_like
from .streams import SseEvent, encode_sse_event, parse_json_text

__all__ = [
    "FORMAT",
    "VERSION",
    "AnyBody",
    "Body",
    "BytesBody",
    "Cassette",
    "ChunksBody",
    "EmptyBody",
    "EventStreamBody",
    "Interaction",
    "JsonBody",
    "MalformedCassette",
    "NdjsonBody",
    "RecordedError",
    "RecordedRequest",
    "RecordedResponse",
    "SseBody",
    "TextBody",
    "brief",
    "damage_reason",
    "load_cassette",
]

FORMAT: Final = "pytest-toolnexus-cassette"
VERSION: Final = 1


class MalformedCassette(Exception):
    """Raised inside the codec; the caller turns it into a CassetteFormatError naming the file."""


# The latest time a stored event may have, in ms (about 31 years): a later one, or infinity,
# is damage, and no clock could wait for it.
MAX_TIME_MS: Final = 1e12
# The latest recording start ``meta.clock_epoch`` may give, in Unix seconds (the year 5138):
# virtual replay starts its wall clock there, and dates past the year 9999 cannot be made.
MAX_EPOCH: Final = 1e11

_BRIEF: Final = reprlib.Repr()
_BRIEF.maxlevel = 3
_BRIEF.maxstring = 40
_BRIEF.maxother = 40


def brief(value: object) -> str:
    """A short ``repr`` for an error message, safe for a value nested any depth."""
    return _BRIEF.repr(value)


def _ms(value: float) -> float:
    return round(float(value), 3)


# allow_nan=False: NaN and Infinity are not JSON, and a recording never stores them (such a
# payload is kept as text), so meeting one means the file was damaged. One encoder for all:
# ``json.dumps`` with options builds a new one per call, which a long stream pays per event.
_COMPACT: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _json_line(value: JSONValue) -> str:
    return _COMPACT.encode(value)


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
        times = self.times or ()
        if len(items) != len(times) or not items:
            raise MalformedCassette(
                f"a timed json body has {len(times)} time(s) for {len(items)} array element(s)"
            )
        last = 0.0
        final = len(items) - 1
        for index, (item, t) in enumerate(zip(items, times, strict=True)):
            last = _time({"t": t}, last)
            text = ("[" if index == 0 else ",") + _json_line(item) + ("]" if index == final else "")
            yield last, text.encode()


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


@masked_repr
@dataclass(frozen=True, slots=True)
class SseBody:
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
            last = _time(raw, last)
            if len(raw) == 2 and "data" in raw:
                # The common event, {"t", "data"}: its wire form without the general path.
                # Compact JSON holds no line break, so it is one data line.
                yield last, b"data: " + _json_line(raw["data"]).encode() + b"\n\n"
            else:
                yield last, encode_sse_event(sse_event_of(raw))
        if self.tail:
            yield last, self.tail.encode()

    def content(self) -> bytes:
        return b"".join(piece for _, piece in self.pieces())


def sse_event_of(raw: Mapping[str, Any]) -> SseEvent:
    """The :class:`SseEvent` a stored event map describes."""
    if not isinstance(raw, Mapping):
        raise MalformedCassette(f"an SSE event must be a map, found {type(raw).__name__}")
    data: str | None
    if "data" in raw:
        data = _json_line(raw["data"])
    elif "text" in raw:
        data = _str(raw["text"], "SSE event text")
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
    doc: dict[str, Any] = {"t": _ms(t_ms)}
    if event.event is not None:
        doc["event"] = event.event
    if event.id is not None:
        doc["id"] = event.id
    if event.retry is not None:
        doc["retry"] = event.retry
    if event.data is not None:
        ok, value = parse_json_text(event.data) if parse else (False, None)
        if ok:
            doc["data"] = value
        else:
            doc["text"] = event.data
    if event.comments:
        doc["comments"] = list(event.comments)
    return doc


@masked_repr
@dataclass(frozen=True, slots=True)
class NdjsonBody:
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
            last = _time(raw, last)
            if "value" in raw:
                text = _json_line(raw["value"])
            else:
                text = _str(raw.get("text"), "NDJSON line text")
            yield last, (text + "\n").encode()
        if self.tail:
            yield last, self.tail.encode()

    def content(self) -> bytes:
        return b"".join(piece for _, piece in self.pieces())


@masked_repr
@dataclass(frozen=True, slots=True)
class ChunksBody:
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
            last = _time(raw, last)
            data = raw.get("data")
            if not isinstance(data, bytes):
                raise MalformedCassette("a stream chunk's data must be binary")
            yield last, data

    def content(self) -> bytes:
        return b"".join(piece for _, piece in self.pieces())


@masked_repr
@dataclass(frozen=True, slots=True)
class EventStreamBody:
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
            last = _time(raw, last)
            try:
                yield last, encode(frame_of(raw))
            except EventStreamError as exc:
                raise MalformedCassette(f"an event stream frame cannot be encoded: {exc}") from exc
        if self.tail:
            yield last, self.tail

    def content(self) -> bytes:
        return b"".join(piece for _, piece in self.pieces())


def frame_doc(t_ms: float, raw: bytes) -> dict[str, Any]:
    """The stored map for one frame (its wire bytes, checked) that arrived at ``t_ms``. The
    payload is stored parsed only when encoding the value gives back the very bytes."""
    frame = decode(raw)
    doc: dict[str, Any] = {
        "t": _ms(t_ms),
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
        payload = _str(raw["text"], "a frame's text payload").encode()
    else:
        data = raw.get("data", b"")
        if not isinstance(data, bytes):
            raise MalformedCassette("a frame's data payload must be binary")
        payload = data
    return Frame(tuple(decoded), payload)


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
)
StreamBody: TypeAlias = SseBody | NdjsonBody | ChunksBody | EventStreamBody


def _time(raw: Mapping[str, Any], floor: float) -> float:
    t = raw.get("t")
    if isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t <= MAX_TIME_MS:
        raise MalformedCassette(
            f"an event time 't' must be a number of ms from 0 to {MAX_TIME_MS:.0e}, "
            f"found {brief(t)}"
        )
    return max(float(t), floor)


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise MalformedCassette(f"{what} must be a string, found {type(value).__name__}")
    return value


def _opt_str(value: object, what: str) -> str | None:
    return None if value is None else _str(value, what)


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
        if len(times) != len(value) or not value:
            raise MalformedCassette(
                f"a json body has {len(times)} time(s) for {len(value)} array element(s)"
            )
        last = 0.0
        for t in times:
            last = _time({"t": t}, last)
        return JsonBody(value, tuple(float(t) for t in times))
    if kind == "text":
        return TextBody(_str(doc.get("text"), "a text body"))
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
    raise MalformedCassette(f"unknown body kind {brief(kind)}")


# ---------------------------------------------------------------------------------------------
# Interactions


@masked_repr
@dataclass(frozen=True, slots=True)
class RecordedError:
    """A transport failure: its kind (a :class:`TransportError` name), message and time."""

    kind: str
    message: str
    t: float

    def to_doc(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "t": _ms(self.t)}

    @classmethod
    def from_doc(cls, doc: object) -> RecordedError:
        if not isinstance(doc, Mapping):
            raise MalformedCassette("an error must be a map")
        t = doc.get("t", 0.0)
        return cls(
            _str(doc.get("kind"), "an error kind"),
            _str(doc.get("message", ""), "an error message"),
            _time({"t": t}, 0.0),
        )


@masked_repr
@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request as recorded: the body parsed, the headers after redaction."""

    method: str
    url: str
    headers: Headers = field(default_factory=Headers)
    body: Body = field(default_factory=EmptyBody)

    def to_doc(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "url": self.url,
            "headers": [list(pair) for pair in self.headers.multi_items()],
            "body": self.body.to_doc(),
        }

    @classmethod
    def from_doc(cls, doc: object) -> RecordedRequest:
        if not isinstance(doc, Mapping):
            raise MalformedCassette("a request must be a map")
        return cls(
            method=_str(doc.get("method"), "a request method"),
            url=_str(doc.get("url"), "a request url"),
            headers=_headers_from(doc.get("headers", [])),
            body=body_from_doc(doc.get("body", {"kind": "empty"}), timed=False),
        )


@masked_repr
@dataclass(frozen=True, slots=True)
class RecordedResponse:
    """A response as recorded, with its timing in ms from the moment the request was sent.

    ``t_headers`` is when the status and headers arrived, ``t_end`` when the body ended (or was
    abandoned). ``error`` is a transport failure that cut the body short. ``complete`` is false
    when the client closed or cancelled the stream before its end, so the rest was never seen.
    """

    status: int
    headers: Headers = field(default_factory=Headers)
    body: Body = field(default_factory=EmptyBody)
    t_headers: float = 0.0
    t_end: float = 0.0
    error: RecordedError | None = None
    complete: bool = True

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "status": self.status,
            "headers": [list(pair) for pair in self.headers.multi_items()],
            "t_headers": _ms(self.t_headers),
            "t_end": _ms(self.t_end),
            "body": self.body.to_doc(),
        }
        if self.error is not None:
            doc["error"] = self.error.to_doc()
        if not self.complete:
            doc["complete"] = False
        return doc

    @classmethod
    def from_doc(cls, doc: object) -> RecordedResponse:
        if not isinstance(doc, Mapping):
            raise MalformedCassette("a response must be a map")
        status = doc.get("status")
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
            raise MalformedCassette(f"a response status must be 100-599, found {brief(status)}")
        complete = doc.get("complete", True)
        if not isinstance(complete, bool):
            raise MalformedCassette("a response's 'complete' must be a boolean")
        error = doc.get("error")
        return cls(
            status=status,
            headers=_headers_from(doc.get("headers", [])),
            body=body_from_doc(doc.get("body", {"kind": "empty"}), timed=True),
            t_headers=_time({"t": doc.get("t_headers", 0.0)}, 0.0),
            t_end=_time({"t": doc.get("t_end", 0.0)}, 0.0),
            error=None if error is None else RecordedError.from_doc(error),
            complete=complete,
        )


_LIST_TYPE: Final = frozenset({list})


def _headers_from(doc: object) -> Headers:
    if not isinstance(doc, list):
        raise MalformedCassette("headers must be a list of [name, value] pairs")
    # Checked in C where possible: this runs twice for every interaction loaded.
    try:
        if not set(map(type, doc)) <= _LIST_TYPE:
            raise TypeError
        pairs = [(name, value) for name, value in doc]
        "".join([name for name, _ in pairs])
        "".join([value for _, value in pairs])
    except (TypeError, ValueError):
        raise MalformedCassette("each header must be a [name, value] pair of strings") from None
    return Headers.from_checked_pairs(pairs)


@masked_repr
@dataclass(frozen=True, slots=True)
class Interaction:
    """One request and what came of it: a response, or a transport error before any response."""

    request: RecordedRequest
    response: RecordedResponse | None = None
    error: RecordedError | None = None

    def __post_init__(self) -> None:
        if (self.response is None) == (self.error is None):
            raise ValueError("an Interaction has exactly one of response= and error=")

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"request": self.request.to_doc()}
        if self.response is not None:
            doc["response"] = self.response.to_doc()
        if self.error is not None:
            doc["error"] = self.error.to_doc()
        return doc

    @classmethod
    def from_doc(cls, doc: object) -> Interaction:
        if not isinstance(doc, Mapping):
            raise MalformedCassette("an interaction must be a map")
        response = doc.get("response")
        error = doc.get("error")
        if (response is None) == (error is None):
            raise MalformedCassette("an interaction needs exactly one of 'response' and 'error'")
        return cls(
            request=RecordedRequest.from_doc(doc.get("request")),
            response=None if response is None else RecordedResponse.from_doc(response),
            error=None if error is None else RecordedError.from_doc(error),
        )


# ---------------------------------------------------------------------------------------------
# Files


def _reject_ext(code: int, data: bytes) -> Any:
    raise MalformedCassette(f"msgpack extension type {code} is not part of the cassette format")


@masked_repr
@dataclass(slots=True)
class Cassette:
    """An ordered list of interactions plus metadata, tied to a file path."""

    path: Path
    interactions: list[Interaction] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        """This cassette encoded as it is, neither redacted nor scanned (:meth:`save` does
        both before it writes). The same cassette always encodes to the same bytes."""
        doc = {
            "format": FORMAT,
            "version": VERSION,
            "meta": self.meta,
            "interactions": [i.to_doc() for i in self.interactions],
        }
        try:
            packed: bytes = msgpack.packb(doc, use_bin_type=True, datetime=False)
        except (TypeError, ValueError, OverflowError) as exc:
            raise CassetteFormatError(
                f"cannot write cassette {self.path}: {exc}", path=str(self.path)
            ) from exc
        return packed

    def validate(self) -> None:
        """Check every part that loading leaves for later (stream events, lines and chunks).

        Raises :class:`CassetteFormatError` naming the file and the interaction.
        """
        for index, interaction in enumerate(self.interactions):
            response = interaction.response
            if response is None:
                continue
            body = response.body
            try:
                if isinstance(body, SseBody | NdjsonBody | ChunksBody | EventStreamBody):
                    for _ in body.pieces():
                        pass
            except (MalformedCassette, TypeError, ValueError, RecursionError) as exc:
                raise CassetteFormatError(
                    f"cassette {self.path} is corrupt at interaction {index}: {damage_reason(exc)}",
                    path=str(self.path),
                ) from exc

    def save(self, *, allow_secrets: Iterable[str] = (), unsafe_verbatim: bool = False) -> None:
        """Redact, scan for secrets, then write atomically (a temp file beside the target,
        fsync, then ``os.replace``).

        Credential headers and query values become ``REDACTED`` and account-identifier keys are
        masked in what is written (this object is left as it is). A string that still looks
        like a secret raises :class:`SecretFoundError` naming where it sits, and nothing is
        written; ``allow_secrets`` lists exact values that are known fakes.
        ``unsafe_verbatim=True`` writes the interactions exactly as they are, neither redacted
        nor scanned: for a fixture that must hold a secret on purpose, never for a recording.
        """
        if unsafe_verbatim:
            data = self.to_bytes()
        else:
            # Imported here: the gate reads the body types this module defines.
            from pytest_toolnexus._safety.gate import safe_bytes

            data = safe_bytes(self, allow_secrets=allow_secrets)
        write_atomic(self.path, data)

    @classmethod
    def from_bytes(cls, data: bytes, path: Path) -> Cassette:
        where = str(path)
        if not data:
            raise CassetteFormatError(
                f"cassette {where} is empty (0 bytes); delete it and record again",
                path=where,
            )
        collecting = gc.isenabled()
        # A long stream unpacks into hundreds of thousands of containers; pausing the cyclic
        # collector while they are built halves the load time (msgpack's own advice).
        gc.disable()
        try:
            return cls._from_bytes(data, path, where)
        finally:
            if collecting:
                gc.enable()

    @classmethod
    def _from_bytes(cls, data: bytes, path: Path, where: str) -> Cassette:
        try:
            doc = msgpack.unpackb(
                data,
                raw=False,
                strict_map_key=True,
                ext_hook=_reject_ext,
                use_list=True,
                timestamp=0,
                max_ext_len=0,
            )
        except MalformedCassette as exc:
            raise CassetteFormatError(f"cassette {where} is corrupt: {exc}", path=where) from exc
        except msgpack.ExtraData as exc:
            seen = looks_like(data)
            raise CassetteFormatError(
                f"{where} is not a pytest-toolnexus cassette: {seen}"
                if seen
                else f"cassette {where} has trailing bytes after the document; it is corrupt",
                path=where,
            ) from exc
        except (ValueError, msgpack.UnpackException, TypeError, RecursionError) as exc:
            seen = looks_like(data)
            if seen:
                raise CassetteFormatError(
                    f"{where} is not a pytest-toolnexus cassette: {seen}", path=where
                ) from exc
            if "max_ext_len" in str(exc):
                raise CassetteFormatError(
                    f"cassette {where} is corrupt: it holds a msgpack extension type (such as "
                    "a timestamp), which is not part of the cassette format",
                    path=where,
                ) from exc
            raise CassetteFormatError(
                f"cassette {where} is truncated or not msgpack ({type(exc).__name__}: "
                f"{str(exc)[:120]}); restore it from version control or record it again",
                path=where,
            ) from exc
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            seen = looks_like(data)
            if seen and not isinstance(doc, dict):
                raise CassetteFormatError(
                    f"{where} is not a pytest-toolnexus cassette: {seen}", path=where
                )
            raise CassetteFormatError(
                f"{where} is not a pytest-toolnexus cassette (no format marker "
                f"{FORMAT!r}); is it a file from another tool?",
                path=where,
            )
        version = doc.get("version")
        if isinstance(version, bool) or not isinstance(version, int):
            raise CassetteFormatError(f"cassette {where} has no valid format version", path=where)
        if version > VERSION:
            raise CassetteVersionError(
                f"cassette {where} uses format version {version}, and this pytest-toolnexus "
                f"reads version {VERSION} at most; upgrade pytest-toolnexus",
                path=where,
            )
        if version < 1:
            raise CassetteFormatError(
                f"cassette {where} has format version {version}, which never existed",
                path=where,
            )
        meta = doc.get("meta", {})
        raw = doc.get("interactions")
        if not isinstance(meta, dict) or not isinstance(raw, list):
            raise CassetteFormatError(
                f"cassette {where} is corrupt: 'meta' must be a map and 'interactions' a list",
                path=where,
            )
        epoch = meta.get("clock_epoch")
        if epoch is not None and (
            isinstance(epoch, bool)
            or not isinstance(epoch, int | float)
            or not 0 <= epoch <= MAX_EPOCH
        ):
            raise CassetteFormatError(
                f"cassette {where} is corrupt: meta 'clock_epoch' must be a Unix time in seconds "
                f"from 0 to {MAX_EPOCH:.0e}, found {brief(epoch)}",
                path=where,
            )
        interactions: list[Interaction] = []
        for index, item in enumerate(raw):
            try:
                interactions.append(Interaction.from_doc(item))
            except (MalformedCassette, ValueError, TypeError, RecursionError) as exc:
                raise CassetteFormatError(
                    f"cassette {where} is corrupt at interaction {index}: {damage_reason(exc)}",
                    path=where,
                ) from exc
        return cls(path=path, interactions=interactions, meta=meta)


def damage_reason(exc: BaseException) -> str:
    """What went wrong, in words: the codec's own sentence, or the error a damaged value raised."""
    if isinstance(exc, MalformedCassette):
        return str(exc)
    if isinstance(exc, RecursionError):
        return "a value is nested deeper than Python's recursion limit"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def load_cassette(path: str | os.PathLike[str], *, validate: bool = False) -> Cassette:
    """Read and validate a cassette file.

    Raises :class:`CassetteNotFoundError` when it does not exist, :class:`CassetteVersionError`
    when it is newer than this library, and :class:`CassetteFormatError` when it is empty,
    truncated, corrupt or not a cassette. A broken file is never read as an empty cassette.
    Stream events are checked when replayed; ``validate=True`` checks them now.
    """
    target = Path(path)
    try:
        data = target.read_bytes()
    except FileNotFoundError as exc:
        raise CassetteNotFoundError(f"cassette {target} does not exist", path=str(target)) from exc
    except IsADirectoryError as exc:
        raise CassetteFormatError(
            f"cassette path {target} is a directory", path=str(target)
        ) from exc
    cassette = Cassette.from_bytes(data, target)
    if validate:
        cassette.validate()
    return cassette


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    # os.open with 0o666 lets the umask decide the mode, as for any file the user creates.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
