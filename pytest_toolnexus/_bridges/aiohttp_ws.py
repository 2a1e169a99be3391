"""aiohttp's WebSockets (``ClientSession.ws_connect``) and the duplex seam, both ways.

:class:`AioLiveConnection` is the seam's view of a real ``ClientWebSocketResponse`` (what a
recording tees); :class:`AioConnection` is aiohttp's view of a seam connection, with the
methods clients use: ``send_str``, ``send_bytes``, ``send_json``, ``receive`` (an
``aiohttp.WSMessage``), ``receive_str``, ``receive_bytes``, ``receive_json``, iteration,
``close``, ``closed``, ``close_code``, ``protocol``. A close from the server reads as aiohttp's
own ``CLOSE`` message, then ``CLOSED``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# From the submodules: the patch runs when aiohttp.client is made, before aiohttp itself is.
from aiohttp.client_exceptions import WSServerHandshakeError
from aiohttp.client_reqrep import RequestInfo
from aiohttp.client_ws import ClientWebSocketResponse
from aiohttp.http_websocket import WSMessage, WSMsgType
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from pytest_toolnexus._seam.duplex import (
    ABNORMAL,
    Accepted,
    AsyncDuplexConnection,
    DuplexClosed,
    DuplexRefused,
    Message,
)
from pytest_toolnexus._seam.headers import Headers

__all__ = ["AioConnection", "AioLiveConnection", "headers_of", "refused_error", "seam_refusal"]

_CLOSING = (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR)


def headers_of(given: object) -> Headers:
    """The headers given to ``ws_connect`` (a mapping, a multidict, or pairs) as the seam's."""
    if given is None:
        return Headers()
    if isinstance(given, Mapping):
        items = given.items()
        return Headers([(str(k), str(v)) for k, v in items])
    if isinstance(given, Iterable):
        return Headers([(str(k), str(v)) for k, v in given])
    raise TypeError(f"headers must be a mapping or pairs, got {type(given).__name__}")


def refused_error(refused: DuplexRefused) -> WSServerHandshakeError:
    """aiohttp's exception for a handshake the server refused, as ``ws_connect`` raises it
    (the request's headers left out: they hold the credentials)."""
    url = URL(refused.url)
    info = RequestInfo(url, "GET", CIMultiDictProxy(CIMultiDict()), url)
    headers = CIMultiDictProxy(CIMultiDict(refused.headers.multi_items()))
    return WSServerHandshakeError(
        info, (), message="Invalid response status", status=refused.status, headers=headers
    )


def seam_refusal(url: str, exc: WSServerHandshakeError) -> DuplexRefused:
    """The seam's error for a handshake the live server refused (a status other than 101),
    from aiohttp's, which keeps the answer's status and headers but not its body (nor the
    headers that framed it)."""
    headers = Headers(list((exc.headers or {}).items()))
    framing = ("content-length", "content-encoding", "transfer-encoding")
    return DuplexRefused(url, exc.status, headers.without(*framing))


class AioLiveConnection:
    """A real aiohttp WebSocket, as a seam ``AsyncDuplexConnection``."""

    def __init__(self, ws: ClientWebSocketResponse) -> None:
        self._ws = ws
        response = getattr(ws, "_response", None)  # aiohttp keeps the handshake's answer here
        headers = Headers(list(response.headers.items())) if response is not None else Headers()
        status = response.status if response is not None else 101
        self._accepted = Accepted(status, headers, ws.protocol)
        self._closing = False

    @property
    def accepted(self) -> Accepted:
        return self._accepted

    async def send(self, message: Message) -> None:
        if self._ws.closed:
            raise DuplexClosed(
                self._ws.close_code or ABNORMAL, by="client" if self._closing else "server"
            )
        if isinstance(message, str):
            await self._ws.send_str(message)
        else:
            await self._ws.send_bytes(message)

    async def recv(self) -> Message:
        message = await self._ws.receive()
        if message.type == WSMsgType.TEXT:
            return str(message.data)
        if message.type == WSMsgType.BINARY:
            return bytes(message.data)
        if message.type == WSMsgType.CLOSE and not self._closing:
            reason = message.extra if isinstance(message.extra, str) else ""
            # A close frame with no code reads as 0 in aiohttp; the protocol's name for it is 1005.
            raise DuplexClosed(int(message.data) or 1005, reason, by="server")
        code = self._ws.close_code
        if message.type == WSMsgType.ERROR or code is None:
            raise DuplexClosed(ABNORMAL, by="server")
        raise DuplexClosed(code, by="client" if self._closing else "server")

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self._closing = True
        await self._ws.close(code=code, message=reason.encode())


class AioConnection:
    """A seam connection as aiohttp's ``ClientWebSocketResponse``."""

    def __init__(self, duplex: AsyncDuplexConnection) -> None:
        self._duplex = duplex
        self._closed: DuplexClosed | None = None
        self._told = False
        self.protocol = duplex.accepted.subprotocol

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def close_code(self) -> int | None:
        return None if self._closed is None else self._closed.code

    def exception(self) -> BaseException | None:
        return None

    async def send_str(self, data: str, compress: int | None = None) -> None:
        await self._send(data)

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None:
        await self._send(bytes(data))

    async def send_json(
        self, data: Any, compress: int | None = None, *, dumps: Callable[[Any], str] = json.dumps
    ) -> None:
        await self._send(dumps(data))

    async def _send(self, message: Message) -> None:
        if self._closed is not None:
            raise ConnectionResetError("Cannot write to closing transport")
        try:
            await self._duplex.send(message)
        except DuplexClosed as closed:
            self._closed = closed
            raise ConnectionResetError("Cannot write to closing transport") from None

    async def receive(self, timeout: float | None = None) -> WSMessage:
        if self._closed is not None:
            if not self._told and self._closed.by == "server":
                self._told = True
                return WSMessage(WSMsgType.CLOSE, self._closed.code, self._closed.reason)
            return WSMessage(WSMsgType.CLOSED, None, None)
        try:
            message = await self._duplex.recv()
        except DuplexClosed as closed:
            self._closed = closed
            return await self.receive()
        if isinstance(message, str):
            return WSMessage(WSMsgType.TEXT, message, None)
        return WSMessage(WSMsgType.BINARY, message, None)

    async def receive_str(self, *, timeout: float | None = None) -> str:
        message = await self.receive(timeout)
        if message.type != WSMsgType.TEXT:
            raise TypeError(f"Received message {message.type}:{message.data!r} is not str")
        return str(message.data)

    async def receive_bytes(self, *, timeout: float | None = None) -> bytes:
        message = await self.receive(timeout)
        if message.type != WSMsgType.BINARY:
            raise TypeError(f"Received message {message.type}:{message.data!r} is not bytes")
        return bytes(message.data)

    async def receive_json(
        self, *, loads: Callable[[str], Any] = json.loads, timeout: float | None = None
    ) -> Any:
        return loads(await self.receive_str(timeout=timeout))

    def __aiter__(self) -> AioConnection:
        return self

    async def __anext__(self) -> WSMessage:
        message = await self.receive()
        if message.type in _CLOSING:
            raise StopAsyncIteration
        return message

    async def close(self, *, code: int = 1000, message: bytes = b"") -> bool:
        if self._closed is not None:
            return False
        self._closed = DuplexClosed(code, message.decode(errors="replace"), by="client")
        await self._duplex.close(code, message.decode(errors="replace"))
        return True

    async def ping(self, message: bytes = b"") -> None:
        return None

    async def pong(self, message: bytes = b"") -> None:
        return None

    async def __aenter__(self) -> AioConnection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
