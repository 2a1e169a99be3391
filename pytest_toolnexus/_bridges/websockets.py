"""The websockets library and the duplex seam, both ways.

:class:`LiveConnection` and :class:`AsyncLiveConnection` are the seam's view of a real
connection the library opened (what a recording tees). :class:`Connection` and
:class:`AsyncConnection` are the library's view of a seam connection: what the patched
``connect`` hands the code under test, with the methods the SDKs use (``send``, ``recv`` with
``decode`` and ``timeout``, ``close``, iteration, the context manager, ``response``,
``subprotocol``, ``close_code``) and the library's own ``ConnectionClosedOK`` and
``ConnectionClosedError``, so that openai and google-genai read a replayed close as they read a
live one.
"""

from __future__ import annotations

import http
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from websockets.datastructures import Headers as WsHeaders
from websockets.exceptions import (
    ConnectionClosed,
    ConnectionClosedError,
    ConnectionClosedOK,
    InvalidStatus,
)
from websockets.frames import Close
from websockets.http11 import Response

if TYPE_CHECKING:
    # Not imported at run time: importing one client module from the patch of the other would
    # run that one's import watch while this module is half made.
    from websockets.asyncio.client import ClientConnection as AsyncClientConnection
    from websockets.sync.client import ClientConnection

from pytest_toolnexus._seam.duplex import (
    ABNORMAL,
    Accepted,
    AsyncDuplexConnection,
    DuplexClosed,
    DuplexConnection,
    DuplexRefused,
    Message,
)
from pytest_toolnexus._seam.headers import Headers

__all__ = [
    "AsyncConnection",
    "AsyncLiveConnection",
    "Connection",
    "LiveConnection",
    "closed_error",
    "headers_of",
    "refused_error",
]

_OK_CODES = (1000, 1001)


def headers_of(given: object) -> Headers:
    """The headers a client passed to ``connect`` (``additional_headers``: a mapping, pairs,
    or the library's ``Headers``), as the seam's."""
    if given is None:
        return Headers()
    if isinstance(given, WsHeaders):
        return Headers(list(given.raw_items()))
    if isinstance(given, Mapping):
        return Headers([(str(k), str(v)) for k, v in given.items()])
    if isinstance(given, Iterable):
        return Headers([(str(k), str(v)) for k, v in given])
    raise TypeError(f"additional_headers must be a mapping or pairs, got {type(given).__name__}")


def _accepted_of(response: Response | None, subprotocol: str | None) -> Accepted:
    if response is None:
        return Accepted(subprotocol=subprotocol)
    return Accepted(response.status_code, Headers(list(response.headers.raw_items())), subprotocol)


def _seam_closed(exc: ConnectionClosed) -> DuplexClosed:
    if exc.rcvd is None and exc.sent is None:
        return DuplexClosed(ABNORMAL, by="server")
    if exc.rcvd is not None and (exc.sent is None or exc.rcvd_then_sent):
        return DuplexClosed(exc.rcvd.code, exc.rcvd.reason, by="server")
    assert exc.sent is not None
    return DuplexClosed(exc.sent.code, exc.sent.reason, by="client")


def closed_error(closed: DuplexClosed) -> ConnectionClosed:
    """The library's exception for a seam connection closed as ``closed`` says."""
    if closed.code == ABNORMAL:
        return ConnectionClosedError(None, None)
    frame = Close(closed.code, closed.reason)
    by_server = closed.by == "server"
    kind = ConnectionClosedOK if closed.code in _OK_CODES else ConnectionClosedError
    return kind(frame, frame, by_server)


def refused_error(refused: DuplexRefused) -> InvalidStatus:
    """The library's exception for a handshake the server refused: ``InvalidStatus``, whose
    ``response`` holds the status, the headers and the body."""
    try:
        phrase = http.HTTPStatus(refused.status).phrase
    except ValueError:
        phrase = ""
    headers = WsHeaders(refused.headers.multi_items())
    return InvalidStatus(Response(refused.status, phrase, headers, refused.body))


def seam_refusal(url: str, exc: InvalidStatus) -> DuplexRefused:
    """The seam's error for a handshake the live server refused, from the library's: the
    status, headers and body of its answer, which the session records as the answer it was."""
    response = exc.response
    headers = Headers(list(response.headers.raw_items()))
    return DuplexRefused(url, response.status_code, headers, bytes(response.body or b""))


class LiveConnection:
    """A real sync connection of the library, as a seam ``DuplexConnection``."""

    def __init__(self, connection: ClientConnection) -> None:
        self._connection = connection
        self._accepted = _accepted_of(connection.response, connection.subprotocol)

    @property
    def accepted(self) -> Accepted:
        return self._accepted

    def send(self, message: Message) -> None:
        try:
            self._connection.send(message)
        except ConnectionClosed as exc:
            raise _seam_closed(exc) from exc

    def recv(self, timeout: float | None = None) -> Message:
        try:
            return self._connection.recv(timeout)
        except ConnectionClosed as exc:
            raise _seam_closed(exc) from exc

    def close(self, code: int = 1000, reason: str = "") -> None:
        self._connection.close(code, reason)


class AsyncLiveConnection:
    """A real asyncio connection of the library, as a seam ``AsyncDuplexConnection``."""

    def __init__(self, connection: AsyncClientConnection) -> None:
        self._connection = connection
        self._accepted = _accepted_of(connection.response, connection.subprotocol)

    @property
    def accepted(self) -> Accepted:
        return self._accepted

    async def send(self, message: Message) -> None:
        try:
            await self._connection.send(message)
        except ConnectionClosed as exc:
            raise _seam_closed(exc) from exc

    async def recv(self) -> Message:
        try:
            return await self._connection.recv()
        except ConnectionClosed as exc:
            raise _seam_closed(exc) from exc

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self._connection.close(code, reason)


def _outgoing(message: Any, text: bool | None) -> Message:
    """What ``send`` was given, as one message (fragments joined)."""
    if isinstance(message, str):
        return message.encode() if text is False else message
    if isinstance(message, bytes | bytearray | memoryview):
        data = bytes(message)
        return data.decode() if text else data
    if isinstance(message, Iterable):
        parts = list(message)
        if all(isinstance(p, str) for p in parts):
            return _outgoing("".join(parts), text)
        return _outgoing(b"".join(bytes(p) for p in parts), text)
    raise TypeError(f"data must be str, bytes or an iterable of them, got {type(message).__name__}")


def _incoming(message: Message, decode: bool | None) -> Message:
    if decode is False and isinstance(message, str):
        return message.encode()
    if decode is True and isinstance(message, bytes):
        return message.decode()
    return message


class _Facade:
    """What the sync and async facades share: the handshake's answer and the close state."""

    def __init__(self, accepted: Accepted) -> None:
        self._accepted = accepted
        self._closed: DuplexClosed | None = None
        self.response = Response(
            accepted.status, "Switching Protocols", WsHeaders(accepted.headers.multi_items())
        )
        self.subprotocol = accepted.subprotocol

    @property
    def close_code(self) -> int | None:
        return None if self._closed is None else self._closed.code

    @property
    def close_reason(self) -> str | None:
        return None if self._closed is None else self._closed.reason

    def _raise(self, closed: DuplexClosed) -> ConnectionClosed:
        self._closed = self._closed or closed
        return closed_error(self._closed)


class Connection(_Facade):
    """A seam connection as the library's sync ``ClientConnection``."""

    def __init__(self, duplex: DuplexConnection) -> None:
        super().__init__(duplex.accepted)
        self._duplex = duplex

    def send(self, message: Any, text: bool | None = None) -> None:
        if self._closed is not None:
            raise closed_error(self._closed)
        try:
            self._duplex.send(_outgoing(message, text))
        except DuplexClosed as closed:
            raise self._raise(closed) from None

    def recv(self, timeout: float | None = None, decode: bool | None = None) -> Message:
        try:
            return _incoming(self._duplex.recv(timeout), decode)
        except DuplexClosed as closed:
            raise self._raise(closed) from None

    def __iter__(self) -> Iterator[Message]:
        try:
            while True:
                yield self.recv()
        except ConnectionClosedOK:
            return

    def close(self, code: int = 1000, reason: str = "") -> None:
        if self._closed is None:
            self._closed = DuplexClosed(code, reason, by="client")
            self._duplex.close(code, reason)

    def ping(self, data: Any = None, ack_on_close: bool = False) -> Any:
        import threading

        pong = threading.Event()
        pong.set()
        return pong

    def pong(self, data: Any = b"") -> None:
        return None

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncConnection(_Facade):
    """A seam connection as the library's asyncio ``ClientConnection``."""

    def __init__(self, duplex: AsyncDuplexConnection) -> None:
        super().__init__(duplex.accepted)
        self._duplex = duplex

    async def send(self, message: Any, text: bool | None = None) -> None:
        if self._closed is not None:
            raise closed_error(self._closed)
        try:
            await self._duplex.send(_outgoing(message, text))
        except DuplexClosed as closed:
            raise self._raise(closed) from None

    async def recv(self, decode: bool | None = None) -> Message:
        try:
            return _incoming(await self._duplex.recv(), decode)
        except DuplexClosed as closed:
            raise self._raise(closed) from None

    async def __aiter__(self) -> AsyncIterator[Message]:
        try:
            while True:
                yield await self.recv()
        except ConnectionClosedOK:
            return

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self._closed is None:
            self._closed = DuplexClosed(code, reason, by="client")
            await self._duplex.close(code, reason)

    async def wait_closed(self) -> None:
        return None

    async def ping(self, data: Any = None) -> Any:
        import asyncio

        pong: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        pong.set_result(0.0)
        return pong

    async def pong(self, data: Any = b"") -> None:
        return None

    async def __aenter__(self) -> AsyncConnection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
