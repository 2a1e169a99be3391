"""The aiohttp bridge: an aiohttp ``ClientSession`` becomes a caller of the async seam.

The bridge is a client middleware (aiohttp 3.12 and later), the last one in the chain, so it
sees each request exactly as aiohttp would put it on the wire, after the session's defaults,
cookies, auth, query and JSON encoding, redirects and the user's own middlewares, and before
any connection is opened. It only translates: the :class:`aiohttp.ClientRequest` becomes a
:class:`TransportRequest`, the seam answers, and the answer becomes a real
:class:`aiohttp.ClientResponse` whose ``content`` pulls one chunk from the seam each time the
client waits for data, so ``resp.content`` iteration, ``iter_chunked``, ``iter_any``,
``readline``, ``read()``, ``json()`` and ``text()`` see every chunk when the seam yields it.

:class:`AiohttpLive` is the other direction, what a recording sends through: the request goes
on to aiohttp's own handler, and the live answer's body is handed to the seam as it arrives.

aiohttp is imported by this module; import it only once aiohttp is in use.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any, Final

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy

from pytest_toolnexus._seam.bodies import (
    decode_body,
    keeps_content_length,
    received,
    wants_stream,
    wire_body,
)
from pytest_toolnexus._seam.errors import (
    ConnectError,
    ConnectTimeout,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    TransportCancelled,
    TransportError,
    expected_error,
)
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.served import is_sending, sending
from pytest_toolnexus._seam.stream_kind import hands_on_stream
from pytest_toolnexus._seam.transport import (
    AsyncByteStream,
    AsyncTransport,
    TransportRequest,
    TransportResponse,
    acall,
)

__all__ = ["AiohttpBridge", "AiohttpLive", "seam_error"]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error

Handler = Callable[[aiohttp.ClientRequest], Awaitable[aiohttp.ClientResponse]]

# What the live transport sends: the request aiohttp built, and the handler that sends it.
_PENDING: ContextVar[tuple[aiohttp.ClientRequest, Handler] | None] = ContextVar(
    "pytest_toolnexus_aiohttp_pending", default=None
)
# Headers describing the wire form of a body aiohttp has already decoded.
_WIRE_HEADERS: Final = ("content-encoding", "content-length", "transfer-encoding")


class _Protocol:
    """What a :class:`aiohttp.StreamReader` asks of its protocol, with no connection under it."""

    connected = True
    _reading_paused = False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self, resume_parser: bool = True) -> None:
        pass


class _SeamReader(aiohttp.StreamReader):
    """A response body that pulls the next chunk from the seam whenever a reader waits.

    aiohttp's readers all wait through ``_wait``; here that wait is the pull, so nothing is
    read ahead of the client and each chunk is fed in at the moment the seam yields it.
    """

    def __init__(
        self,
        stream: AsyncByteStream | None,
        loop: asyncio.AbstractEventLoop,
        to_error: Callable[[TransportError], BaseException],
    ) -> None:
        super().__init__(_Protocol(), 2**16, loop=loop)  # type: ignore[arg-type]
        self._seam = stream
        self._chunks: AsyncIterator[bytes] | None = None if stream is None else aiter(stream)
        self._to_error = to_error
        self._pulling = False
        self._closing: set[asyncio.Task[None]] = set()
        if stream is None:
            self.feed_eof()

    async def _wait(self, func_name: str) -> None:
        if self._pulling:
            raise RuntimeError(
                f"{func_name}() called while another coroutine is already waiting for incoming data"
            )
        if self._chunks is None:
            self.feed_eof()
            return
        self._pulling = True
        try:
            chunk = await anext(self._chunks)
        except StopAsyncIteration:
            self._chunks = None
            self.feed_eof()
            return
        except TransportError as exc:
            self._chunks = None
            error = self._to_error(exc)
            super().set_exception(error)
            raise error from exc
        finally:
            self._pulling = False
        if chunk:
            self.feed_data(chunk)

    def set_exception(self, exc: BaseException, *cause: BaseException) -> None:
        # aiohttp closes a response by setting an exception on its content: a stream not yet
        # read to its end is closed then, which releases a live connection under it.
        super().set_exception(exc, *cause)
        if self._chunks is not None and self._seam is not None:
            self._chunks = None
            task = self._loop.create_task(self._seam.aclose())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)


def library_error(exc: TransportError, request: aiohttp.ClientRequest) -> BaseException:
    """The aiohttp exception an SDK expects for a seam error (what a live failure raises)."""
    message = str(exc) or exc.kind
    if isinstance(exc, ConnectError):
        return aiohttp.ClientConnectorError(request.connection_key, OSError(message))
    if isinstance(exc, ConnectTimeout):
        return aiohttp.ConnectionTimeoutError(message)
    if isinstance(exc, ReadTimeout):
        return aiohttp.SocketTimeoutError(message)
    if isinstance(exc, RemoteProtocolError):
        return aiohttp.ServerDisconnectedError(message)
    if isinstance(exc, ReadError | TransportCancelled):
        return aiohttp.ClientPayloadError(message)
    return aiohttp.ClientConnectionError(message)


def seam_error(exc: BaseException) -> TransportError:
    """The seam error for an aiohttp exception, so a recording keeps the failure's kind."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return ConnectTimeout(message)
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return ReadTimeout(message)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ConnectError(message)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return RemoteProtocolError(message)
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ClientOSError):
        return ReadError(message)
    return TransportError(f"{type(exc).__name__}: {message}")


async def _request_body(request: aiohttp.ClientRequest) -> bytes:
    body = request.body
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    return await body.as_bytes()


async def seam_request(request: aiohttp.ClientRequest) -> TransportRequest:
    """The seam request for what aiohttp is about to send."""
    headers = Headers(list(request.headers.items()))
    content = await _request_body(request)
    url = str(request.url)
    body = decode_body(headers, content)
    return TransportRequest(
        method=request.method,
        url=url,
        headers=headers,
        body=body,
        stream=wants_stream(url, headers, body),
        content=content,
    )


class _NoWriter:
    """The stream writer of a request that was never written to a socket."""

    output_size = 0


_RESPONSE_ARGS: dict[type, frozenset[str]] = {}


def _response_args(cls: type) -> frozenset[str]:
    names = _RESPONSE_ARGS.get(cls)
    if names is None:
        names = frozenset(inspect.signature(cls).parameters)
        _RESPONSE_ARGS[cls] = names
    return names


def client_response(
    request: aiohttp.ClientRequest,
    status: int,
    headers: list[tuple[str, str]],
    content: aiohttp.StreamReader,
) -> aiohttp.ClientResponse:
    """A started :class:`aiohttp.ClientResponse` (of the session's response class) with no
    connection under it, as ``ClientResponse.start`` leaves one."""
    cls = request.response_class
    assert cls is not None
    kwargs: dict[str, Any] = {
        "writer": None,
        "continue100": None,
        "timer": request._timer,
        "request_info": request.request_info,
        "traces": request._traces,
        "loop": request.loop,
        "session": request._session,
    }
    if "stream_writer" in _response_args(cls):
        kwargs["stream_writer"] = _NoWriter()
    response = cls(request.method, request.original_url, **kwargs)
    response._closed = False
    response.version = aiohttp.HttpVersion11
    response.status = status
    response.reason = _reason(status)
    pairs = CIMultiDict(headers)
    response._headers = CIMultiDictProxy(pairs)
    response._raw_headers = tuple((k.encode("latin-1"), v.encode("latin-1")) for k, v in headers)
    response.content = content
    content.on_eof(response._response_eof)
    cookies = pairs.getall("set-cookie", ())
    if cookies:
        response._raw_cookie_headers = tuple(cookies)
    return response


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


class AiohttpBridge:
    """An aiohttp client middleware that serves every request from a seam transport.

    >>> session = aiohttp.ClientSession(middlewares=(AiohttpBridge(my_async_transport),))

    A request marked as already being sent live (:func:`~pytest_toolnexus._seam.served.sending`)
    goes on to the handler untouched, as does one for which ``passes(url)`` is true.
    """

    def __init__(
        self, transport: AsyncTransport, *, passes: Callable[[str], bool] | None = None
    ) -> None:
        self._transport = transport
        self._passes = passes

    async def __call__(
        self, request: aiohttp.ClientRequest, handler: Handler
    ) -> aiohttp.ClientResponse:
        if is_sending() or (self._passes is not None and self._passes(str(request.url))):
            return await handler(request)
        seam = await seam_request(request)
        token = _PENDING.set((request, handler))
        try:
            response = await acall(self._transport, seam)
        except TransportError as exc:
            raise library_error(exc, request) from exc
        finally:
            _PENDING.reset(token)

        def to_error(exc: TransportError) -> BaseException:
            return library_error(exc, request)

        loop = request.loop
        if isinstance(response.body, AsyncByteStream):
            pairs = response.headers.without("content-length").multi_items()
            reader = _SeamReader(response.body, loop, to_error)
        else:
            pairs, data = wire_body(response, request.method)
            reader = _SeamReader(_once(data) if data else None, loop, to_error)
        return client_response(request, response.status, pairs, reader)


def _once(data: bytes) -> AsyncByteStream:
    async def chunks() -> AsyncIterator[bytes]:
        yield data

    return AsyncByteStream(chunks())


class AiohttpLive:
    """The async seam transport a recording sends through: the pending aiohttp request goes
    on to aiohttp's own handler, and its answer comes back with the body as a stream."""

    async def __call__(self, request: TransportRequest) -> TransportResponse:
        pending = _PENDING.get()
        if pending is None:
            raise RuntimeError(
                f"AiohttpLive sends only what the aiohttp bridge is serving; {request.method} "
                f"{request.url} did not come through it"
            )
        lib_request, handler = pending
        try:
            with sending(request.url):
                lib_response = await handler(lib_request)
        except aiohttp.ClientError as exc:
            raise seam_error(exc) from exc
        headers = Headers(list(lib_response.headers.items()))
        streams = hands_on_stream(
            headers,
            method=lib_request.method,
            status=lib_response.status,
            asked=request.stream,
            bridged=True,
            incremental=True,
        )
        if keeps_content_length(lib_request.method, lib_response.status):
            headers = headers.without("transfer-encoding")
        else:
            headers = headers.without(*_WIRE_HEADERS)
        if streams:

            async def aclose() -> None:
                lib_response.release()

            return TransportResponse(
                lib_response.status,
                headers,
                AsyncByteStream(_live_chunks(lib_response), aclose=aclose),
            )
        try:
            content = b"".join([chunk async for chunk in _live_chunks(lib_response)])
        finally:
            lib_response.release()
        return received(lib_response.status, headers, content)


async def _live_chunks(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.content.iter_any():
            yield chunk
    except aiohttp.ClientError as exc:
        raise seam_error(exc) from exc
    finally:
        response.release()
