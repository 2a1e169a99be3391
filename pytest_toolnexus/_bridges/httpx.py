"""The http bridge: any httpx or httpx2 client becomes a caller of the seam.

One class serves both libraries and both flavours. It only translates: the library request
becomes a :class:`TransportRequest`, the seam answers, and the :class:`TransportResponse`
becomes a library response whose byte stream yields each chunk when the seam yields it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

from pytest_toolnexus._seam.bodies import decode_body, wants_stream, wire_body
from pytest_toolnexus._seam.errors import TransportError, expected_error
from pytest_toolnexus._seam.headers import Headers, wire_pairs
from pytest_toolnexus._seam.transport import (
    AsyncByteStream,
    AsyncTransport,
    ByteStream,
    DualTransport,
    Transport,
    TransportRequest,
    TransportResponse,
    acall,
    async_side,
    call,
)

from . import compat as _compat

__all__ = ["HTTPBridge"]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error


class _SyncPull(_compat.SyncStreamBase):
    """A library byte stream that pulls from a seam ByteStream, one chunk at a time."""

    def __init__(self, stream: ByteStream, lib: ModuleType, request: Any) -> None:
        self._stream = stream
        self._lib = lib
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._stream
        except TransportError as exc:
            raise _compat.to_library_error(self._lib, exc, self._request) from exc

    def close(self) -> None:
        self._stream.close()


class _AsyncPull(_compat.AsyncStreamBase):
    """The async mirror of :class:`_SyncPull`."""

    def __init__(self, stream: AsyncByteStream, lib: ModuleType, request: Any) -> None:
        self._stream = stream
        self._lib = lib
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                yield chunk
        except TransportError as exc:
            raise _compat.to_library_error(self._lib, exc, self._request) from exc

    async def aclose(self) -> None:
        await self._stream.aclose()


def _seam_request(lib_request: Any, content: bytes) -> TransportRequest:
    # The raw bytes read as latin-1, so that a recorded request goes out with exactly the
    # header bytes the client gave (names in lower case, as httpx gives them).
    raw = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in lib_request.headers.raw]
    headers = Headers.from_checked_pairs(raw)
    url = str(lib_request.url)
    body = decode_body(headers, content)
    timeout = lib_request.extensions.get("timeout", {}).get("read")
    return TransportRequest(
        method=lib_request.method,
        url=url,
        headers=headers,
        body=body,
        stream=wants_stream(url, headers, body),
        content=content,
        timeout=timeout,
    )


def _library_response(lib: ModuleType, request: Any, response: TransportResponse) -> Any:
    """The library response for a seam answer: a byte stream (sync or async, as the seam gave
    it) pulled chunk by chunk, or the whole body."""
    body = response.body
    if isinstance(body, ByteStream | AsyncByteStream):
        stream = (
            _SyncPull(body, lib, request)
            if isinstance(body, ByteStream)
            else _AsyncPull(body, lib, request)
        )
        headers = response.headers.without("content-length")
        return lib.Response(
            response.status, headers=headers.wire_pairs(), stream=stream, request=request
        )
    pairs, content = wire_body(response, request.method)
    return lib.Response(
        response.status, headers=wire_pairs(pairs), content=content, request=request
    )


class HTTPBridge(_compat.SyncTransportBase, _compat.AsyncTransportBase):
    """An httpx/httpx2 transport that serves every request from a seam Transport.

    >>> client = httpx2.Client(transport=HTTPBridge(my_transport))

    Give ``transport`` for sync clients and ``async_transport`` for async ones. A
    :class:`~pytest_toolnexus.DualTransport` (``LiveTransport``, ``ModelTransport``, a
    cassette's ``transport``) given as ``transport`` serves async clients too, through its
    ``acall``. The response streams chunk by chunk as the seam yields; nothing is buffered.
    """

    def __init__(
        self,
        transport: Transport | DualTransport | None = None,
        *,
        async_transport: AsyncTransport | None = None,
    ) -> None:
        if transport is None and async_transport is None:
            raise TypeError("HTTPBridge needs a transport=, an async_transport=, or both")
        self._transport = transport
        self._async_transport = (
            async_transport if async_transport is not None else async_side(transport)
        )
        # What an async client's aclose() closes: the async transport, or the dual one.
        self._async_owner: object = async_transport if async_transport is not None else transport

    def handle_request(self, request: Any) -> Any:
        if self._transport is None:
            raise TypeError(
                "this HTTPBridge has only an async_transport, and a sync client sent "
                f"{request.method} {request.url}; pass transport= as well"
            )
        lib = _compat.library_of(request)
        seam_request = _seam_request(request, request.read())
        try:
            response = call(self._transport, seam_request)
        except TransportError as exc:
            raise _compat.to_library_error(lib, exc, request) from exc
        return _library_response(lib, request, response)

    async def handle_async_request(self, request: Any) -> Any:
        if self._async_transport is None:
            raise TypeError(
                "this HTTPBridge has only a sync transport, and an async client sent "
                f"{request.method} {request.url}; pass async_transport= as well"
            )
        lib = _compat.library_of(request)
        seam_request = _seam_request(request, await request.aread())
        try:
            response = await acall(self._async_transport, seam_request)
        except TransportError as exc:
            raise _compat.to_library_error(lib, exc, request) from exc
        return _library_response(lib, request, response)

    def close(self) -> None:
        close = getattr(self._transport, "close", None)
        if callable(close):
            close()

    async def aclose(self) -> None:
        aclose = getattr(self._async_owner, "aclose", None)
        if callable(aclose):
            await aclose()
