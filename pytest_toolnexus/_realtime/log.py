"""What passed on one WebSocket connection, both ways, with its times: the record a test
reads back (``cassette.websockets``), the same whether the session was recorded or replayed.

Times are those of the session's clock (virtual time on replay): each frame's ``t`` is in ms
since the connection's handshake was sent, as the cassette stores it and ``show`` draws it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_toolnexus._seam.duplex import Message, Sender

__all__ = ["FrameLog", "Passed", "WebSocketFrame", "WebSocketLog"]


def _json_of(message: Message | None) -> Any:
    """The JSON object or array a text or binary message holds (Gemini Live sends its JSON as
    binary frames), or None."""
    if message is None:
        return None
    head = message.lstrip()[:1]
    if head not in ("{", "[", b"{", b"["):
        return None
    try:
        value = json.loads(message)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict | list) else None


@dataclass(frozen=True, slots=True)
class WebSocketFrame:
    """One frame that passed: who sent it (``"client"`` or ``"server"``), when (``t``, ms since
    the handshake was sent, on the session's clock), the message (``str`` for a text frame,
    ``bytes`` for a binary one, None for a close frame), and a close frame's code and reason
    (1006 for a connection that dropped without one)."""

    sender: Sender
    t: float
    message: Message | None
    code: int | None = None
    reason: str = ""

    @property
    def kind(self) -> Literal["text", "binary", "close"]:
        """``"text"``, ``"binary"`` or ``"close"``."""
        if self.message is None:
            return "close"
        return "text" if isinstance(self.message, str) else "binary"

    @property
    def data(self) -> Any:
        """The JSON object or array the message holds, parsed (None for any other message)."""
        return _json_of(self.message)

    @property
    def event(self) -> str | None:
        """The event's name: OpenAI Realtime's ``type``, or for a JSON object without one the
        first key (Gemini Live's ``setupComplete``, ``serverContent``, ``toolCall``); None for
        a frame that is not a JSON object."""
        data = self.data
        if not isinstance(data, dict) or not data:
            return None
        kind = data.get("type")
        if isinstance(kind, str):
            return kind
        return str(next(iter(data)))


Passed = WebSocketFrame
"""The name the recorder and the replay use for one frame that passed."""


_Entry = tuple[Sender, float, Message | None, int | None, str]


@dataclass
class WebSocketLog:
    """The frames of one connection, in the order they passed, both ways.

    ``url`` is the handshake's (redacted), ``replayed`` says whether the cassette answered it,
    ``opened_at`` is when the handshake was sent, in seconds since the session started (as
    ``cassette.requests[i].sent_at``), and ``faults`` what each injected fault did to it.

    A frame is noted as a plain tuple as it passes (replay and recording note one per frame,
    on the path that hands it over), and becomes a :class:`WebSocketFrame` when
    :attr:`frames` is read.
    """

    url: str
    replayed: bool
    opened_at: float = 0.0
    faults: list[str] = field(default_factory=list)
    _entries: list[_Entry] = field(default_factory=list, init=False, repr=False)
    _built: list[WebSocketFrame] = field(default_factory=list, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def add(
        self,
        sender: Sender,
        t: float,
        message: Message | None,
        *,
        code: int | None = None,
        reason: str = "",
    ) -> None:
        """Note a frame that passed (the recorder and the replay call this)."""
        # list.append is atomic: the frames of two threads never tear, and keep their order.
        self._entries.append((sender, t, message, code, reason))

    @property
    def frames(self) -> list[WebSocketFrame]:
        """Every frame that passed, both ways, in order."""
        with self._lock:
            built, entries = self._built, self._entries
            # Kept to the microsecond, as a cassette keeps times: the clock's readings are
            # large numbers, and their difference carries float noise below that.
            built += [
                WebSocketFrame(sender, round(t, 3), message, code, reason)
                for sender, t, message, code, reason in entries[len(built) : len(entries)]
            ]
            return list(built)

    @property
    def sent(self) -> list[WebSocketFrame]:
        """The frames the client sent, its close frame included."""
        return [f for f in self.frames if f.sender == "client"]

    @property
    def received(self) -> list[WebSocketFrame]:
        """The frames delivered to the client, a close from the server (or the drop) last."""
        return [f for f in self.frames if f.sender == "server"]

    @property
    def closed(self) -> WebSocketFrame | None:
        """The close frame that ended the connection (either side's, the drop's 1006 too),
        or None while it is open."""
        return next((f for f in self.frames if f.kind == "close"), None)

    def events(self, *names: str) -> list[WebSocketFrame]:
        """The server's messages whose :attr:`~WebSocketFrame.event` is one of ``names`` (every
        message the server sent when none is given), in the order they reached the client."""
        return [
            f
            for f in self.frames
            if f.sender == "server" and f.message is not None and (not names or f.event in names)
        ]

    def arrivals(self, *names: str) -> list[float]:
        """When each of :meth:`events` reached the client, in seconds since the handshake was
        sent: what :func:`~pytest_toolnexus.assert_incremental` takes."""
        return [f.t / 1000.0 for f in self.events(*names)]


FrameLog = WebSocketLog
"""The name the recorder and the replay use for a connection's log."""
