"""The frames of a WebSocket session as a cassette stores them, and read back.

A stored frame is a map: ``t`` (ms since the handshake was sent), ``from`` (``"client"`` or
``"server"``), ``kind`` (``"text"``, ``"binary"`` or ``"close"``) and its content. A text
frame whose text is a JSON object or array is stored parsed (``data`` a map or an array)
when it is sent again as the very text received (compact, or ``spaced`` as Python writes
JSON); any other text as the text (``data`` a str); a binary frame as its bytes (``data`` bin); a
close frame as its ``code`` and ``reason``. A client text frame stored parsed may be a
``pattern`` (the builder writes them): it matches any JSON frame that holds what it holds.
docs/cassette-format.md specifies the shape; the
body that holds the frames is :class:`~pytest_toolnexus._store.bodies.WebSocketBody`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from .bodies import MalformedCassette, brief, checked_str, checked_time, rounded_ms

__all__ = ["SENDERS", "Frame", "Sender", "frame_doc", "frames_of", "message_of"]

Sender = Literal["client", "server"]
SENDERS: Final = ("client", "server")
_KINDS: Final = ("text", "binary", "close")


@dataclass(frozen=True, slots=True)
class Frame:
    """One stored frame, checked: ``message`` is what the socket carried (``str`` for a text
    frame, ``bytes`` for a binary one, None for a close); ``value`` the parsed JSON of a text
    frame stored parsed (None otherwise)."""

    t: float
    sender: Sender
    kind: Literal["text", "binary", "close"]
    message: str | bytes | None
    value: Any = None
    code: int | None = None
    reason: str = ""
    pattern: bool = False
    """A client frame that matches any JSON frame holding at least what ``value`` holds
    (each key of a map, recursively, with an equal value)."""


def message_of(value: Any, *, spaced: bool = False) -> str:
    """The text a stored JSON value is sent as: compact, as JavaScript's ``JSON.stringify``
    writes it, or ``spaced`` as Python's ``json.dumps`` does by default."""
    if spaced:
        return json.dumps(value, allow_nan=False)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def frame_doc(
    t_ms: float,
    sender: Sender,
    message: str | bytes | None,
    *,
    code: int | None = None,
    reason: str = "",
) -> dict[str, Any]:
    """The stored map for one frame that ``sender`` sent at ``t_ms``: a text ``message``
    (parsed when it is a JSON object or array), a binary one, or, with ``message`` None, a
    close frame with its ``code`` and ``reason``."""
    doc: dict[str, Any] = {"t": rounded_ms(t_ms), "from": sender}
    if message is None:
        doc["kind"] = "close"
        if code is not None:
            doc["code"] = code
        if reason:
            doc["reason"] = reason
        return doc
    if isinstance(message, bytes | bytearray | memoryview):
        doc["kind"] = "binary"
        doc["data"] = bytes(message)
        return doc
    doc["kind"] = "text"
    doc["data"] = message
    stripped = message.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            value = json.loads(message)
        except (ValueError, RecursionError):
            return doc
        if isinstance(value, dict | list):
            # Stored parsed only when it is sent again as the very text received.
            if message_of(value) == message:
                doc["data"] = value
            elif message_of(value, spaced=True) == message:
                doc["data"] = value
                doc["spaced"] = True
    return doc


def _frame(raw: object, floor: float) -> Frame:
    if not isinstance(raw, Mapping):
        raise MalformedCassette("a websocket frame must be a map")
    t = checked_time(raw.get("t"), floor)
    sender = raw.get("from")
    if sender not in SENDERS:
        raise MalformedCassette(
            f"a websocket frame's 'from' must be 'client' or 'server', found {brief(sender)}"
        )
    kind = raw.get("kind")
    if kind not in _KINDS:
        raise MalformedCassette(
            f"a websocket frame's kind must be text, binary or close, found {brief(kind)}"
        )
    data = raw.get("data")
    if kind == "close":
        code = raw.get("code")
        if code is not None and (
            isinstance(code, bool) or not isinstance(code, int) or not 1000 <= code <= 4999
        ):
            raise MalformedCassette(f"a close frame's code must be 1000-4999, found {brief(code)}")
        reason = checked_str(raw.get("reason", ""), "a close frame's reason")
        return Frame(t, sender, "close", None, code=code, reason=reason)
    if kind == "binary":
        if not isinstance(data, bytes):
            raise MalformedCassette("a binary websocket frame's data must be binary")
        return Frame(t, sender, "binary", data)
    if isinstance(data, str):
        return Frame(t, sender, "text", data)
    if isinstance(data, dict | list):
        spaced = raw.get("spaced", False)
        if not isinstance(spaced, bool):
            raise MalformedCassette("a websocket frame's 'spaced' must be a boolean")
        pattern = raw.get("pattern", False)
        if not isinstance(pattern, bool) or (pattern and sender != "client"):
            raise MalformedCassette(
                "a websocket frame's 'pattern' must be a boolean, and true on client frames only"
            )
        try:
            message = message_of(data, spaced=spaced)
            return Frame(t, sender, "text", message, value=data, pattern=pattern)
        except (TypeError, ValueError, RecursionError) as exc:
            raise MalformedCassette(
                f"a websocket text frame's data does not encode as JSON ({type(exc).__name__})"
            ) from exc
    raise MalformedCassette(
        f"a text websocket frame's data must be a string, a map or an array, found {brief(data)}"
    )


def frames_of(frames: Sequence[object]) -> Iterator[Frame]:
    """Each stored frame, checked, in order; times never go backwards (a frame stamped before
    the one before it counts as sent with it). Raises :class:`MalformedCassette` at the first
    damaged one."""
    last = 0.0
    for index, raw in enumerate(frames):
        try:
            frame = _frame(raw, last)
        except MalformedCassette as exc:
            raise MalformedCassette(f"websocket frame {index}: {exc}") from exc
        last = frame.t
        yield frame
