"""The texts a stream spells across its pieces, for the secret scan.

A model that streams a key token by token stores it in pieces: 19 content deltas, an ``sk-``
in one event and the rest in the next, 14 NDJSON lines. No piece holds the key; joined, they
do. So each stored stream (SSE events, NDJSON lines, event stream frames, a timed JSON array)
is read as *threads*, each the concatenation, in order, of one kind of string across the
pieces:

- the raw data: every piece whose data is text rather than JSON (``data: sk-``), or a bare
  number, ``true``, ``false`` or ``null`` (``data: 4821``: a token of digits), as its JSON
  text, which the recorder stores it as only when that is the text sent;
- one thread per place inside the JSON payloads, named by the event name and the path of
  the string leaf (``['choices'][0]['delta']['content']``,
  ``['delta']['partial_json']``, ``['message']['content']``, ...). These are the wire paths
  of what a provider view joins into its ``text`` and each tool call's ``arguments``, in
  every dialect, so the view's text and arguments are read along the way, and a stream no
  view knows is read the same.

Building the threads is one walk of the stream, and each thread keeps the offset where each
part starts, so a hit in the joined text is mapped back to the pieces it spans by bisection:
the scan stays linear in the size of the stream.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pytest_toolnexus._store.bodies import (
    EventStreamBody,
    JsonBody,
    NdjsonBody,
    SseBody,
    WebSocketBody,
)

__all__ = ["PIECES", "Thread", "threads"]

# A tuple made once: an ``X | Y`` written in an isinstance call builds a union at every call.
_BARE: Final = (bool, int, float)

PIECES = "\x00pieces\x00"
"""Where a thread's name takes its piece range (``response.body.events[3..21]...``)."""


@dataclass(slots=True)
class Thread:
    """One string place read across a stream's pieces: its parts, in order, and the index
    of the piece each came from."""

    where: str
    """How a message names the place, with :data:`PIECES` where the piece range goes."""
    parts: list[str] = field(default_factory=list)
    pieces: list[int] = field(default_factory=list)
    _starts: list[int] = field(default_factory=list)
    _length: int = 0

    def add(self, piece: int, text: str) -> None:
        if text:
            self.parts.append(text)
            self.pieces.append(piece)
            self._starts.append(self._length)
            self._length += len(text)

    def text(self) -> str:
        return "".join(self.parts)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The first and one past the last part that the characters ``start:end`` of
        :meth:`text` fall in."""
        first = bisect.bisect_right(self._starts, start) - 1
        last = bisect.bisect_left(self._starts, end)
        return first, last

    def named(self, first: int, last: int) -> str:
        """:attr:`where` with the pieces of parts ``first:last`` filled in."""
        low, high = self.pieces[first], self.pieces[last - 1]
        return self.where.replace(PIECES, f"[{low}..{high}]", 1)


_SCALARS = (int, float, bytes, type(None))
"""What a payload holds that is no text and holds none (``bool`` is an ``int``)."""


def _string_leaves(
    value: Any, named: dict[tuple[str, type, Any], str]
) -> Iterator[tuple[str, str]]:
    """``(path, text)`` for every string value inside a JSON value (map keys are not
    threads: a key is a name, not a piece of streamed text). Iterative, so a payload nested
    past the recursion limit is walked too. ``named`` keeps each path made, by its parent's
    and the key (with the key's type: ``1`` and ``True`` name different places), since every
    piece of a stream repeats the same few."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            yield where, item
            continue
        # Mapping last, and never asked of a number: an ABC's isinstance is slow, and a
        # stored payload is dicts, lists and scalars.
        if isinstance(item, dict):
            children = list(item.items())
        elif isinstance(item, list):
            children = list(enumerate(item))
        elif isinstance(item, _SCALARS) or not isinstance(item, Mapping):
            continue
        else:
            children = list(item.items())
        for key, child in reversed(children):
            if isinstance(child, _SCALARS):
                continue
            place = (where, type(key), key)
            path = named.get(place)
            if path is None:
                path = named[place] = f"{where}[{key!r}]"
            stack.append((path, child))


def _payloads(body: object) -> tuple[str, str, Sequence[Any]] | None:
    """What a stream's pieces are called, the key of their JSON payload, and the pieces."""
    if isinstance(body, SseBody):
        return "events", "data", body.events
    if isinstance(body, NdjsonBody):
        return "lines", "value", body.lines
    if isinstance(body, EventStreamBody):
        return "frames", "payload", body.frames
    if isinstance(body, WebSocketBody):
        return "frames", "data", body.frames
    if isinstance(body, JsonBody) and body.times is not None and isinstance(body.value, list):
        return "value", "", body.value
    return None


def threads(body: object, path: str) -> list[Thread]:
    """The threads of a stored stream body at ``path`` (``response.body``) that hold parts
    from more than one piece; empty for a body that is not a stream."""
    found = _payloads(body)
    if found is None:
        return []
    plural, key, pieces = found
    raw = Thread(f"{path}.{plural}{PIECES} (the data joined)")
    by_place: dict[tuple[object, str], Thread] = {}
    named: dict[tuple[str, type, Any], str] = {}
    for index, piece in enumerate(pieces):
        if not key:  # a timed JSON array: each element is the payload
            payload, name = piece, None
        elif isinstance(piece, Mapping):
            name = piece.get("event")
            if key not in piece:
                text = piece.get("text")
                if isinstance(text, str):
                    raw.add(index, text)
                continue
            payload = piece[key]
        else:
            continue
        if isinstance(payload, str):
            raw.add(index, payload)
            continue
        if payload is None or isinstance(payload, _BARE):
            raw.add(index, json.dumps(payload))
            continue
        for where, text in _string_leaves(payload, named):
            place = (name, where)
            thread = by_place.get(place)
            if thread is None:
                inside = f"['{key}']" if key else ""
                thread = by_place[place] = Thread(
                    f"{path}.{plural}{PIECES}{inside}{where} (joined)"
                )
            thread.add(index, text)
    return [t for t in (raw, *by_place.values()) if len(set(t.pieces)) > 1]
