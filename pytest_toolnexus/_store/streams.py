"""Stream framing: SSE events and NDJSON lines, parsed incrementally and encoded back.

The parsers take chunks as they arrive and hand back each complete unit at once, so a recorder
can stamp every event with the moment its last byte arrived. Decoding is incremental, so a
multi-byte UTF-8 character split across two chunks is joined, not mangled.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from pytest_toolnexus._seam.depth import MAX_DEPTH

_NEWLINE = re.compile(r"\r\n|\r|\n")

__all__ = [
    "NdjsonSplitter",
    "SseEvent",
    "SseParser",
    "encode_sse_event",
    "parse_json_text",
    "parse_piece_text",
    "storable",
]

# A tuple made once: an ``X | Y`` written in an isinstance call builds a union at every call.
_SCALARS: Final = (bool, int, float)


def _split_lf(text: str) -> list[str]:
    return text.split("\n")


def parse_json_text(text: str) -> tuple[bool, Any]:
    """``(True, value)`` when ``text`` is one JSON document whose numbers msgpack can carry,
    nested no deeper than :data:`MAX_DEPTH`."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        # Not JSON, or (up to Python 3.11, from a caller deep in its stack) nested deeper
        # than the C decoder may go: kept as the text it is.
        return False, None
    if not storable(value):
        return False, None
    return True, value


def parse_piece_text(text: str) -> tuple[bool, Any]:
    """:func:`parse_json_text` for one piece of a stream (an SSE event's data, an NDJSON
    line), except that a piece that is a bare number, ``true``, ``false`` or ``null`` is kept
    as its text unless its compact JSON is that text: a model streaming plain text sends
    tokens such as ``1e5``, ``007`` or `` 42``, which the value would spell otherwise, and
    the secret scan reads a stream's pieces joined by their exact text."""
    ok, value = parse_json_text(text)
    bare = value is None or isinstance(value, _SCALARS)
    if ok and bare and json.dumps(value) != text:
        return False, None
    return ok, value


def storable(value: Any) -> bool:
    """True when msgpack can store ``value`` and it encodes back to JSON: string keys, 64-bit
    integers, finite floats (``1e400`` parses to infinity, which is not JSON: kept as text),
    and no more than :data:`MAX_DEPTH` containers one in another. Walks level by level, so
    the answer is the same on every Python and from any depth of the caller's stack."""
    level = [value]
    depth = 0  # containers one in another above ``below``
    while level:
        below: list[Any] = []
        nested = False
        for item in level:
            if isinstance(item, str) or item is None:
                continue
            if isinstance(item, dict):
                if not all(isinstance(key, str) for key in item):
                    return False
                nested = True
                below += item.values()
            elif isinstance(item, list):
                nested = True
                below += item
            elif isinstance(item, int):  # bool included, always in range
                if not -(2**63) <= item < 2**64:
                    return False
            elif not isinstance(item, float) or not math.isfinite(item):
                return False
        if nested:
            depth += 1
            if depth > MAX_DEPTH:
                return False
        level = below
    return True


@dataclass(slots=True)
class SseEvent:
    """One server-sent event, as the SSE spec frames it.

    ``data`` is the joined ``data:`` lines (``None`` when the event had none). ``comments``
    keeps every ``:`` line that came before the event's terminating blank line.
    """

    event: str | None = None
    data: str | None = None
    id: str | None = None
    retry: int | None = None
    comments: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return (
            self.event is None
            and self.data is None
            and self.id is None
            and self.retry is None
            and not self.comments
        )


_FIELDS: Final = frozenset({"data", "event", "id", "retry"})


class _Lines:
    """The lines of a text that arrives in pieces, each handed back once its end is in.

    Each piece is split once, and the pieces of a line that spans many are kept apart until
    its end arrives and then joined once: a line of any length costs time linear in it
    (searching the whole unended line again for each piece, as ``buffer += text`` and a split
    of the buffer do, makes one huge SSE event quadratic).
    """

    def __init__(self, split: Callable[[str], list[str]]) -> None:
        self._split = split
        self._pending: list[str] = []

    def feed(self, text: str) -> list[str]:
        if "\n" not in text and "\r" not in text:
            # No line ends here: a piece of a long line, kept as it is. Looking for the two
            # characters is a fast scan, where splitting is a regular expression's walk.
            if text:
                self._pending.append(text)
            return []
        *lines, rest = self._split(text)
        if not lines:
            if rest:
                self._pending.append(rest)
            return []
        if self._pending:
            lines[0] = "".join([*self._pending, lines[0]])
        self._pending = [rest] if rest else []
        return lines

    def rest(self) -> str:
        """The text after the last line end, taken out."""
        rest = "".join(self._pending)
        self._pending = []
        return rest


class SseParser:
    """Incremental ``text/event-stream`` parser (WHATWG SSE framing).

    ``feed(chunk)`` returns the events completed by that chunk. ``finish()`` returns whatever
    text came after the last complete event, which the spec says to drop; a recorder keeps it.
    ``dropped`` counts the lines whose field name is not an SSE field, which the spec ignores:
    a body with any is not an event stream whatever its content type says (a JSON error sent
    under ``text/event-stream``), and events alone would lose those lines.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lines = _Lines(_NEWLINE.split)
        self._current = SseEvent()
        self._data: list[str] = []  # the current event's data lines, joined when it ends
        self._first = True
        self._after_cr = False
        self.dropped = 0
        self._strict = codecs.getincrementaldecoder("utf-8")("strict")
        self.lossy = False
        """Whether the stream held bytes that are not UTF-8 (each became U+FFFD in events)."""

    def feed(self, chunk: bytes) -> list[SseEvent]:
        if not self.lossy:
            # A strict decoder beside the forgiving one: a character split across chunks is
            # fine, a byte that no UTF-8 holds is not.
            try:
                self._strict.decode(chunk)
            except UnicodeDecodeError:
                self.lossy = True
        text = self._decoder.decode(chunk)
        if self._first and text:
            if text.startswith("\ufeff"):
                text = text[1:]
            self._first = False
        return self._consume(text)

    def _consume(self, text: str) -> list[SseEvent]:
        if not text:
            return []
        # A CR that ended the previous chunk already ended its line; an LF starting this
        # chunk is the second half of that CRLF, not a blank line.
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        self._after_cr = text.endswith("\r")
        events: list[SseEvent] = []
        for line in self._lines.feed(text):
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: str) -> SseEvent | None:
        current = self._current
        if line == "":
            self._current = SseEvent()
            self._end_data(current)
            return None if current.empty else current
        if line.startswith(":"):
            current.comments.append(line[1:].removeprefix(" "))
            return None
        name, sep, value = line.partition(":")
        if sep:
            value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            current.event = value
        elif name == "id" and "\0" not in value:
            current.id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            current.retry = int(value)
        elif name not in _FIELDS:
            self.dropped += 1
        return None

    def finish(self) -> str:
        """The raw text of an unterminated final event, or ``""``."""
        if not self.lossy:
            try:
                self._strict.decode(b"", final=True)
            except UnicodeDecodeError:
                self.lossy = True  # the stream ended inside a character
        tail = self._lines.rest() + self._decoder.decode(b"", final=True)
        pending = self._current
        self._end_data(pending)
        self._current = SseEvent()
        self._after_cr = False
        if not tail and pending.empty:
            return ""
        return _render_partial(pending) + tail

    def _end_data(self, event: SseEvent) -> None:
        """Gives ``event`` its data lines, joined once (joining them line by line as they came
        would copy a many-line event's data once per line)."""
        if self._data:
            event.data = "\n".join(self._data)
            self._data = []


def _render_partial(event: SseEvent) -> str:
    return encode_sse_event(event)[:-1].decode() if not event.empty else ""


def encode_sse_event(event: SseEvent) -> bytes:
    """The wire form of one event, ending with its blank line."""
    lines: list[str] = []
    lines.extend(f": {comment}" if comment else ":" for comment in event.comments)
    if event.event is not None:
        lines.append(f"event: {event.event}")
    if event.id is not None:
        lines.append(f"id: {event.id}")
    if event.retry is not None:
        lines.append(f"retry: {event.retry}")
    if event.data is not None:
        lines.extend(f"data: {part}" for part in event.data.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


class NdjsonSplitter:
    """Incremental splitter of newline-delimited text into complete lines."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._strict = codecs.getincrementaldecoder("utf-8")("strict")
        self._lines = _Lines(_split_lf)
        self.lossy = False
        """Whether the stream held bytes that are not UTF-8 (each became U+FFFD in lines)."""

    def feed(self, chunk: bytes) -> list[str]:
        if not self.lossy:
            try:
                self._strict.decode(chunk)
            except UnicodeDecodeError:
                self.lossy = True
        return [line.removesuffix("\r") for line in self._lines.feed(self._decoder.decode(chunk))]

    def finish(self) -> str:
        """Text after the last newline, or ``""``."""
        if not self.lossy:
            try:
                self._strict.decode(b"", final=True)
            except UnicodeDecodeError:
                self.lossy = True
        return self._lines.rest() + self._decoder.decode(b"", final=True)
