"""A JSON array read as it arrives: each top-level element as soon as its last byte is in.

Gemini's ``:streamGenerateContent`` without ``alt=sse`` streams one JSON array, an element
per chunk of the answer. The splitter scans bytes (every structural character of JSON is
ASCII, and no byte of a multi-byte UTF-8 character is), so a chunk may end anywhere, inside a
string or a character included. It only finds where elements end; whether the whole is JSON
is for the caller to check once the body is in.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["JsonArraySplitter"]

_STRUCTURE: Final = re.compile(rb'[\[\]{}",]')
_IN_STRING: Final = re.compile(rb'["\\]')
_SPACE: Final = b" \t\r\n"


class JsonArraySplitter:
    """Finds the top-level elements of a JSON array in chunks fed as they arrive.

    ``feed`` returns how many elements that chunk completed. ``broken`` turns true when the
    body does not start as an array (or its brackets do not nest), after which nothing more
    is counted.
    """

    def __init__(self) -> None:
        self._depth = 0  # 0 before the opening bracket, 1 between elements
        self._in_string = False
        self._escaped = False
        self._pending = False  # an element started and has not ended yet
        self._started = False
        self.closed = False
        """Whether the array's closing bracket has arrived."""
        self.broken = False
        self.count = 0
        """The elements completed so far."""

    def feed(self, chunk: bytes) -> int:
        if self.broken:
            return 0
        before = self.count
        position = 0
        size = len(chunk)
        while position < size and not self.broken:
            if self._in_string:
                position = self._string(chunk, position)
                continue
            if not self._started:
                position = self._opening(chunk, position)
                continue
            found = _STRUCTURE.search(chunk, position)
            stop = size if found is None else found.start()
            if self._depth == 1 and not self._pending and chunk[position:stop].strip(_SPACE):
                self._pending = True  # a scalar element (a number, true, null) began
            if found is None:
                break
            self._structural(chunk[stop])
            position = stop + 1
        return self.count - before

    def _opening(self, chunk: bytes, position: int) -> int:
        rest = chunk[position:].lstrip(_SPACE)
        if not rest:
            return len(chunk)
        if self.closed or rest[:1] != b"[":
            self.broken = True
            return len(chunk)
        self._started = True
        self._depth = 1
        return len(chunk) - len(rest) + 1

    def _string(self, chunk: bytes, position: int) -> int:
        if self._escaped:
            self._escaped = False
            return position + 1
        found = _IN_STRING.search(chunk, position)
        if found is None:
            return len(chunk)
        if chunk[found.start()] == ord("\\"):
            self._escaped = True
        else:
            self._in_string = False
            if self._depth == 1:
                self._end_element()  # a string element
        return found.start() + 1

    def _structural(self, byte: int) -> None:
        if self.closed:
            self.broken = True  # something after the closing bracket
            return
        if byte == ord('"'):
            self._in_string = True
            self._pending = True
        elif byte in (ord("{"), ord("[")):
            self._depth += 1
            self._pending = True
        elif byte in (ord("}"), ord("]")):
            if self._depth == 1:
                if byte == ord("}"):
                    self.broken = True
                    return
                if self._pending:
                    self._end_element()
                self.closed = True
                self._depth = 0
                return
            self._depth -= 1
            if self._depth == 1:
                self._end_element()  # an object or array element
        elif byte == ord(",") and self._depth == 1 and self._pending:
            self._end_element()  # a scalar element ends at its comma

    def _end_element(self) -> None:
        if self._pending:
            self.count += 1
        self._pending = False
