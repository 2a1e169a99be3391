"""The http bridge: any httpx or httpx2 client becomes a caller of the seam.

One class serves both libraries and both flavours. It only translates: the library request
becomes a :class:`TransportRequest`, the seam answers, and the :class:`TransportResponse`
becomes a library response whose byte stream yields each chunk when the seam yields it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any, Final

from pytest_toolnexus._seam.bodies import (
    body_may_ask_stream,
    decode_body,
    wants_stream,
    wire_body,
    wire_content,
    wire_headers,
)
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


_KEPT: Final = 256
"""How many header sets a :class:`_Translation` keeps, each way, before it starts again."""

# A tuple made once: an ``X | Y`` written in an isinstance call builds a union at every call.
_STREAMS: Final = (ByteStream, AsyncByteStream)


class _Translation:
    """Library requests into seam requests and seam answers into library responses, for one
    bridge. The header sets a client sends again and again (its requests' headers are the same
    but for the length) and a replayed interaction's answer headers are each translated once
    and kept (up to ``_KEPT`` of each): both are immutable, so a kept one serves every
    request alike."""

    def __init__(self) -> None:
        self._seam_headers: dict[tuple[tuple[bytes, bytes], ...], Headers] = {}
        # By the identity of the answer's Headers (kept alive here, so the id stays its own),
        # with what else the header bytes follow from: see wire_headers.
        self._library_headers: dict[int, tuple[Headers, tuple[Any, ...], Any]] = {}

    def seam_headers(self, raw: list[tuple[bytes, bytes]]) -> Headers:
        # The raw bytes read as latin-1, so that a recorded request goes out with exactly the
        # header bytes the client gave (names in lower case, as httpx gives them).
        key = tuple(raw)
        headers = self._seam_headers.get(key)
        if headers is None:
            headers = Headers.from_checked_pairs(
                [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in raw]
            )
            if len(self._seam_headers) >= _KEPT:
                self._seam_headers.clear()
            self._seam_headers[key] = headers
        return headers

    def seam_request(self, lib_request: Any, content: bytes) -> TransportRequest:
        headers = self.seam_headers(lib_request.headers.raw)
        url = str(lib_request.url)
        timeout = lib_request.extensions.get("timeout", {}).get("read")
        if body_may_ask_stream(content):
            body = decode_body(headers, content)
            return TransportRequest(
                method=lib_request.method,
                url=url,
                headers=headers,
                body=body,
                stream=wants_stream(url, headers, body),
                content=content,
                timeout=timeout,
            )
        # No "stream": true in the bytes, so the body cannot ask for a stream: it is parsed
        # only if something reads it (a replay that matches by the bytes does not).
        return TransportRequest.from_wire(
            lib_request.method,
            url,
            headers,
            content,
            parse=decode_body,
            stream=wants_stream(url, headers, None),
            timeout=timeout,
        )

    def library_response(self, lib: ModuleType, request: Any, response: TransportResponse) -> Any:
        """The library response for a seam answer: a byte stream (sync or async, as the seam
        gave it) pulled chunk by chunk, or the whole body."""
        body = response.body
        if isinstance(body, _STREAMS):
            stream = (
                _SyncPull(body, lib, request)
                if isinstance(body, ByteStream)
                else _AsyncPull(body, lib, request)
            )
            headers = response.headers.without("content-length")
            return lib.Response(
                response.status, headers=headers.wire_pairs(), stream=stream, request=request
            )
        if "content-encoding" in response.headers:
            # Decoded by the library as it reads, as a live answer would be.
            pairs, content = wire_body(response, request.method)
            return lib.Response(
                response.status, headers=wire_pairs(pairs), content=content, request=request
            )
        content = wire_content(response, request.method)
        headers = self.library_headers(lib, response, request.method, content)
        return _compat.read_response(lib, response.status, headers, content, request)

    def library_headers(
        self, lib: ModuleType, response: TransportResponse, method: str, content: bytes
    ) -> Any:
        """The library's Headers for a whole answer with ``content``, made once for each
        answer's headers (a new copy goes into each response)."""
        seam = response.headers
        given = (lib, response.status, method, len(content), isinstance(response.body, bytes))
        kept = self._library_headers.get(id(seam))
        if kept is not None and kept[0] is seam and kept[1] == given:
            return kept[2]
        made = lib.Headers(wire_pairs(wire_headers(response, method, content)))
        if len(self._library_headers) >= _KEPT:
            self._library_headers.clear()
        self._library_headers[id(seam)] = (seam, given, made)
        return made


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
        self._translation = _Translation()

    def handle_request(self, request: Any) -> Any:
        if self._transport is None:
            raise TypeError(
                "this HTTPBridge has only an async_transport, and a sync client sent "
                f"{request.method} {request.url}; pass transport= as well"
            )
        lib = _compat.library_of(request)
        seam_request = self._translation.seam_request(request, request.read())
        try:
            response = call(self._transport, seam_request)
        except TransportError as exc:
            raise _compat.to_library_error(lib, exc, request) from exc
        return self._translation.library_response(lib, request, response)

    async def handle_async_request(self, request: Any) -> Any:
        if self._async_transport is None:
            raise TypeError(
                "this HTTPBridge has only a sync transport, and an async client sent "
                f"{request.method} {request.url}; pass async_transport= as well"
            )
        lib = _compat.library_of(request)
        seam_request = self._translation.seam_request(request, await request.aread())
        try:
            response = await acall(self._async_transport, seam_request)
        except TransportError as exc:
            raise _compat.to_library_error(lib, exc, request) from exc
        return self._translation.library_response(lib, request, response)

    def close(self) -> None:
        close = getattr(self._transport, "close", None)
        if callable(close):
            close()

    async def aclose(self) -> None:
        aclose = getattr(self._async_owner, "aclose", None)
        if callable(aclose):
            await aclose()
