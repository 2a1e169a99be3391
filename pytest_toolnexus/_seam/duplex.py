"""The duplex seam: what a WebSocket transport is, beside the request/response seam of
:mod:`.transport`.

A :class:`DuplexTransport` takes a :class:`Handshake` (the URL, the headers, the
subprotocols offered) and returns a :class:`DuplexConnection`: messages go out with ``send``
and come in with ``recv`` (``str`` for a text frame, ``bytes`` for a binary one), and
``close`` ends it. When the other side has closed, ``recv`` and ``send`` raise
:class:`DuplexClosed` with the close code and reason (1006 when the connection dropped
without a close frame); a handshake the server refuses raises :class:`DuplexRefused`. The
async seam mirrors it. A client written to this seam is served by record and replay without
any patching; the websockets bridge turns the library's clients into callers of it.

Recording tees a live connection's frames into the session's recorder as the body of the
handshake's 101 answer: each frame one chunk of a byte stream, packed by :func:`pack_frame`,
so that the recorder stamps each with its time as it does a stream's pieces
(:func:`is_upgrade` tells the recorder so).
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, TypeAlias

from .headers import Headers

__all__ = [
    "ABNORMAL",
    "Accepted",
    "AsyncDuplexConnection",
    "AsyncDuplexTransport",
    "DuplexClosed",
    "DuplexConnection",
    "DuplexRefused",
    "DuplexTransport",
    "Handshake",
    "Message",
    "PackedFrame",
    "Sender",
    "is_upgrade",
    "pack_frame",
    "unpack_frame",
]

Message: TypeAlias = str | bytes
"""One WebSocket message: ``str`` for a text frame, ``bytes`` for a binary one."""

ABNORMAL: Final = 1006
"""The close code of a connection that ended without a close frame."""


@dataclass(frozen=True, slots=True)
class Handshake:
    """What a client asks for when it opens a WebSocket: the ``ws://`` or ``wss://`` URL,
    the headers it adds, and the subprotocols it offers."""

    url: str
    headers: Headers = field(default_factory=Headers)
    subprotocols: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Accepted:
    """The server's answer to a handshake: the status (101), its headers, and the
    subprotocol it chose (None when it chose none)."""

    status: int = 101
    headers: Headers = field(default_factory=Headers)
    subprotocol: str | None = None


class DuplexClosed(Exception):
    """The connection is closed: ``code`` and ``reason`` of the close frame (``ABNORMAL``,
    1006, when there was none), and ``by`` the side that closed it first."""

    def __init__(self, code: int, reason: str = "", *, by: Literal["client", "server"]) -> None:
        super().__init__(f"the WebSocket was closed by the {by} with code {code} {reason}".rstrip())
        self.code = code
        self.reason = reason
        self.by = by


class DuplexRefused(Exception):
    """The server refused the handshake: it answered ``status`` (not 101) with ``headers``
    and ``body``. A bridge raises its library's own error for it (websockets'
    ``InvalidStatus``, aiohttp's ``WSServerHandshakeError``)."""

    def __init__(self, url: str, status: int, headers: Headers, body: bytes = b"") -> None:
        super().__init__(f"the server refused the WebSocket handshake to {url}: HTTP {status}")
        self.url = url
        self.status = status
        self.headers = headers
        self.body = body


class DuplexConnection(Protocol):
    """An open WebSocket, sync."""

    @property
    def accepted(self) -> Accepted: ...

    def send(self, message: Message) -> None: ...

    def recv(self, timeout: float | None = None) -> Message: ...

    def close(self, code: int = 1000, reason: str = "") -> None: ...


class AsyncDuplexConnection(Protocol):
    """An open WebSocket, async."""

    @property
    def accepted(self) -> Accepted: ...

    async def send(self, message: Message) -> None: ...

    async def recv(self) -> Message: ...

    async def close(self, code: int = 1000, reason: str = "") -> None: ...


DuplexTransport: TypeAlias = Callable[[Handshake], DuplexConnection]
"""Opens a connection for a handshake (sync)."""

AsyncDuplexTransport: TypeAlias = Callable[[Handshake], Awaitable[AsyncDuplexConnection]]
"""Opens a connection for a handshake (async)."""


# -- frames as the recorder's pieces --------------------------------------------------------

Sender: TypeAlias = Literal["client", "server"]
PackedFrame: TypeAlias = tuple[Sender, Message | None, int | None, str]
"""A frame as the recorder reads it back: who sent it, the message (None for a close frame),
and a close frame's code and reason."""

_SENDER: Final = {"client": b"C", "server": b"S"}
_TEXT: Final = {"client": b"Ct", "server": b"St"}
_SENDER_OF: Final[dict[int, Sender]] = {ord("C"): "client", ord("S"): "server"}


def pack_frame(
    sender: Sender, message: Message | None, code: int | None = None, reason: str = ""
) -> bytes:
    """One frame as one chunk of a :class:`FrameStream`: a byte for the sender, a byte for the
    kind (``t`` text, ``b`` binary, ``c`` close), then the content (a close frame's code in two
    bytes, 0 for none, then its reason)."""
    if isinstance(message, str):
        return _TEXT[sender] + message.encode("utf-8", "surrogatepass")
    head = _SENDER[sender]
    if message is None:
        return head + b"c" + struct.pack(">H", code or 0) + reason.encode("utf-8")
    return head + b"b" + bytes(message)


def unpack_frame(chunk: bytes) -> PackedFrame:
    """The frame :func:`pack_frame` packed into ``chunk``. Raises ``ValueError`` for a chunk it
    did not make."""
    if len(chunk) < 2 or chunk[0] not in _SENDER_OF:
        raise ValueError("not a packed WebSocket frame")
    sender = _SENDER_OF[chunk[0]]
    kind, rest = chunk[1:2], chunk[2:]
    if kind == b"t":
        return sender, rest.decode("utf-8", "surrogatepass"), None, ""
    if kind == b"b":
        return sender, rest, None, ""
    if kind == b"c" and len(rest) >= 2:
        (code,) = struct.unpack(">H", rest[:2])
        return sender, None, code or None, rest[2:].decode("utf-8", "replace")
    raise ValueError("not a packed WebSocket frame")


def is_upgrade(status: int, headers: Headers) -> bool:
    """Whether a response is a handshake's 101 to a WebSocket: what follows it on the seam is
    the session's frames, each packed by :func:`pack_frame` as one chunk."""
    return status == 101 and headers.get("upgrade", "").lower() == "websocket"
