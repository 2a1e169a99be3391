"""The live default transport: the seam over a real httpx (or httpx2) connection.

With nothing installed this is what runs, and it puts exactly the bytes on the wire that a plain
``httpx.Client`` would: a parsed body is encoded by httpx itself (``json=``), and a request that
already carries encoded ``content`` is sent byte for byte.
"""

from __future__ import annotations

import inspect
import os
import ssl
import threading
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

import httpx

from pytest_toolnexus._seam.bodies import keeps_content_length, received
from pytest_toolnexus._seam.errors import TransportCancelled, TransportError, expected_error
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.stream_kind import hands_on_stream
from pytest_toolnexus._seam.transport import (
    AsyncByteStream,
    ByteStream,
    TransportRequest,
    TransportResponse,
)

from . import compat as _compat

__all__ = ["LiveTransport"]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error

# Headers that describe the wire form of a body this transport hands over decoded.
_WIRE_HEADERS = ("content-encoding", "content-length", "transfer-encoding")

_tls_lock = threading.Lock()
# (SSL_CERT_FILE, SSL_CERT_DIR) -> the default context made for them
_tls_made: dict[tuple[str | None, str | None], ssl.SSLContext] = {}


def default_tls() -> ssl.SSLContext:
    """The TLS context httpx would make for ``httpx.Client()`` (certifi's bundle, or the
    environment's ``SSL_CERT_FILE``/``SSL_CERT_DIR``), made once per process and per
    certificate source and shared by the clients this transport makes.

    Making one loads the bundle: about 20 ms, which every recording session paid inside its
    first request, so that it landed in the recorded time of the headers and of every piece.
    """
    key = (os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None)
    with _tls_lock:
        context = _tls_made.get(key)
        if context is None:
            context = _tls_made[key] = httpx.create_ssl_context()
        return context


def _timeout_extension(request: TransportRequest) -> dict[str, Any]:
    if request.timeout is None:
        return {}
    value = request.timeout
    return {"timeout": {"connect": value, "read": value, "write": value, "pool": value}}


def _build(lib: ModuleType, request: TransportRequest, client: Any | None) -> Any:
    """The library request for ``request``: via the client when there is one, so that its
    defaults (headers, base URL, cookies) apply exactly as for a direct call."""
    kwargs: dict[str, Any] = {"headers": request.headers.wire_pairs()}
    if request.content is not None:
        kwargs["content"] = request.content
    elif isinstance(request.body, bytes):
        kwargs["content"] = request.body
    elif request.body is not None:
        kwargs["json"] = request.body
    if client is not None:
        if request.timeout is not None:
            kwargs["timeout"] = request.timeout
        return client.build_request(request.method, request.url, **kwargs)
    extensions = _timeout_extension(request)
    return lib.Request(request.method, request.url, extensions=extensions, **kwargs)


def _seam_headers(lib_response: Any) -> Headers:
    # The raw bytes, read as latin-1, so that a value that is not ASCII (``x-name: café`` in
    # UTF-8 or latin-1) goes back to the client byte for byte; names in lower case, as httpx
    # gives them.
    headers = Headers([(k.lower(), v) for k, v in lib_response.headers.raw])
    if keeps_content_length(lib_response.request.method, lib_response.status_code):
        return headers.without("content-encoding", "transfer-encoding")
    return headers.without(*_WIRE_HEADERS)


def _streams(request: TransportRequest, lib_response: Any, exact: bool) -> bool:
    """Whether the answer goes on as a stream: the response decides (see ``_stream_kind``)."""
    headers = Headers([(k.lower(), v) for k, v in lib_response.headers.raw])
    return hands_on_stream(
        headers,
        method=request.method,
        status=lib_response.status_code,
        asked=request.stream,
        bridged=exact,
        incremental=exact,
    )


def _parsed_or_bytes(lib_response: Any, content: bytes, exact: bool) -> TransportResponse:
    headers = _seam_headers(lib_response)
    if exact:
        return TransportResponse(lib_response.status_code, headers, content)
    return received(lib_response.status_code, headers, content)


class _Cancellation:
    """Ties a request's token to an open response: cancelling shuts the socket at once."""

    def __init__(self, request: TransportRequest, lib_response: Any) -> None:
        self.token = request.cancel
        self._unregister = (
            self.token.on_cancel(lambda: _compat.abort_connection(lib_response))
            if self.token is not None
            else None
        )

    def error_for(self, exc: BaseException) -> TransportError:
        if self.token is not None and self.token.cancelled:
            return TransportCancelled(f"request cancelled: {self.token.reason}")
        return _compat.to_seam_error(exc)

    def check(self) -> None:
        if self.token is not None:
            self.token.raise_if_cancelled()

    def release(self) -> None:
        if self._unregister is not None:
            self._unregister()
            self._unregister = None


def _is_async_client(client: Any) -> bool:
    return inspect.iscoroutinefunction(getattr(client, "send", None))


class LiveTransport:
    """A seam transport that talks to the network, sync and async (a
    :class:`~pytest_toolnexus.DualTransport`): call it from sync code, ``await
    transport.acall(request)`` from async code.

    ``LiveTransport()`` owns its clients: a plain ``httpx.Client`` and ``httpx.AsyncClient``,
    each made on the first request of its kind. Pass ``client=`` to send through your own
    client (httpx or httpx2; a sync client serves sync calls, an async one async calls), or
    ``transport=`` to send through an httpx/httpx2 transport directly, as the pytest plugin does
    with a client's original transport (then ``library=`` names the module, httpx or httpx2,
    whose requests that transport takes). A JSON answer is parsed for the seam, with the
    server's bytes as the response's ``content``, which a bridge hands to its client;
    ``exact=True`` hands on the bytes as the body instead.
    """

    def __init__(
        self,
        client: Any | None = None,
        *,
        transport: Any | None = None,
        library: ModuleType | None = None,
        exact: bool = False,
    ) -> None:
        if client is not None and transport is not None:
            raise TypeError("pass client= or transport=, not both")
        # exact: answers read whole are handed on as the server's bytes, not parsed, and a
        # stream type or a body of unannounced length streams though the request did not ask
        # (a patched client reads bytes as they come).
        self._exact = exact
        self._owns_client = client is None and transport is None
        self._lock = threading.Lock()
        self._client: Any | None = None
        self._async_client: Any | None = None
        if client is not None:
            if _is_async_client(client):
                self._async_client = client
            else:
                self._client = client
        self._transport = transport
        target = transport if transport is not None else client
        self._lib = library if library is not None else _compat.library_of(target)

    def _client_for(self, request: TransportRequest, *, asynchronous: bool) -> Any:
        """The client that sends ``request``: the one given, or one of its own made now."""
        client = self._async_client if asynchronous else self._client
        if client is not None:
            return client
        if not self._owns_client:
            given, caller = ("a sync", "async") if asynchronous else ("an async", "sync")
            fix = (
                "call the transport from sync code, or give LiveTransport an async client"
                if asynchronous
                else "await transport.acall(request) instead, or give LiveTransport a sync client"
            )
            raise TypeError(
                f"this LiveTransport sends through {given} client, and {caller} code sent "
                f"{request.method} {request.url}; {fix}"
            )
        return self._own_client(asynchronous)

    def _own_client(self, asynchronous: bool) -> Any:
        """This transport's own client of the kind asked for, made on first use."""
        with self._lock:
            if asynchronous:
                if self._async_client is None:
                    self._async_client = httpx.AsyncClient(verify=default_tls())
                return self._async_client
            if self._client is None:
                self._client = httpx.Client(verify=default_tls())
            return self._client

    def prepare(self, *, asynchronous: bool = False) -> None:
        """Make the client a sync (or async) request will go through now, if this transport
        makes its own, rather than on that first request: a recorder calls this before it
        starts timing a request, so the recorded times are the server's alone."""
        if self._transport is None and self._owns_client:
            self._own_client(asynchronous)

    def __call__(self, request: TransportRequest) -> TransportResponse:
        """Send ``request`` from sync code."""
        if request.cancel is not None:
            request.cancel.raise_if_cancelled()
        lib = self._lib
        client: Any = (
            None if self._transport is not None else self._client_for(request, asynchronous=False)
        )
        lib_request = _build(lib, request, client)
        try:
            if self._transport is not None:
                lib_response = self._transport.handle_request(lib_request)
                lib_response.request = lib_request
            else:
                lib_response = client.send(lib_request, stream=True)
        except lib.TransportError as exc:
            raise _compat.to_seam_error(exc) from exc
        cancellation = _Cancellation(request, lib_response)
        if _streams(request, lib_response, self._exact):
            # Closing a generator that never started skips its ``finally``, so a stream closed
            # unread must release the connection itself.
            def close() -> None:
                cancellation.release()
                lib_response.close()

            return TransportResponse(
                lib_response.status_code,
                _seam_headers(lib_response),
                ByteStream(self._chunks(lib, lib_response, cancellation), close=close),
            )
        try:
            content = b"".join(self._chunks(lib, lib_response, cancellation))
        finally:
            lib_response.close()
        return _parsed_or_bytes(lib_response, content, self._exact)

    async def acall(self, request: TransportRequest) -> TransportResponse:
        """Send ``request`` from async code."""
        if request.cancel is not None:
            request.cancel.raise_if_cancelled()
        lib = self._lib
        client: Any = (
            None if self._transport is not None else self._client_for(request, asynchronous=True)
        )
        lib_request = _build(lib, request, client)
        try:
            if self._transport is not None:
                lib_response = await self._transport.handle_async_request(lib_request)
                lib_response.request = lib_request
            else:
                lib_response = await client.send(lib_request, stream=True)
        except lib.TransportError as exc:
            raise _compat.to_seam_error(exc) from exc
        cancellation = _Cancellation(request, lib_response)
        if _streams(request, lib_response, self._exact):

            async def aclose() -> None:
                cancellation.release()
                await lib_response.aclose()

            return TransportResponse(
                lib_response.status_code,
                _seam_headers(lib_response),
                AsyncByteStream(self._achunks(lib, lib_response, cancellation), aclose=aclose),
            )
        try:
            content = b"".join([c async for c in self._achunks(lib, lib_response, cancellation)])
        finally:
            await lib_response.aclose()
        return _parsed_or_bytes(lib_response, content, self._exact)

    @staticmethod
    def _chunks(lib: ModuleType, lib_response: Any, cancellation: _Cancellation) -> Iterator[bytes]:
        try:
            cancellation.check()
            for chunk in lib_response.iter_bytes():
                cancellation.check()
                yield chunk
            cancellation.check()
        except lib.TransportError as exc:
            raise cancellation.error_for(exc) from exc
        finally:
            cancellation.release()
            lib_response.close()

    @staticmethod
    async def _achunks(
        lib: ModuleType, lib_response: Any, cancellation: _Cancellation
    ) -> AsyncIterator[bytes]:
        try:
            cancellation.check()
            async for chunk in lib_response.aiter_bytes():
                cancellation.check()
                yield chunk
            cancellation.check()
        except lib.TransportError as exc:
            raise cancellation.error_for(exc) from exc
        finally:
            cancellation.release()
            await lib_response.aclose()

    def close(self) -> None:
        """Close the sync client this transport made (never one that was passed in)."""
        if self._owns_client and self._client is not None:
            self._client.close()

    async def aclose(self) -> None:
        """Close the clients this transport made, async and sync (never one passed in)."""
        try:
            if self._owns_client and self._async_client is not None:
                await self._async_client.aclose()
        finally:
            self.close()

    def __enter__(self) -> LiveTransport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> LiveTransport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
