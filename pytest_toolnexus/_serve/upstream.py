"""The live side of ``pytest-toolnexus record``: each request sent on to the upstream through
one aiohttp client, and its answer handed back as a byte stream the moment it arrives.

Why not the session's own live client (httpx, :class:`~pytest_toolnexus.LiveTransport`): the
proxy's answer starts only once the upstream's does, so whatever its client spends on a
request comes before the client's first byte. httpx's async client spends some 2 to 3 ms of a
loaded two-core machine per request (its pure-Python HTTP/1.1 parser, and a cancel scope per
socket operation for its timeouts), which put the proxy's first byte 7.5 ms behind a direct
request (benchmark 11c); aiohttp's client parses in C on the event loop the proxy's server
already runs, and is already loaded. The recording itself is the session's, as in pytest: this
is only the transport it records through.

The request goes on as the client sent it: its own headers and none of aiohttp's
(``user-agent``, ``accept``, ``accept-encoding``), its body's bytes as they came. The answer's
body is decoded (gzip, deflate, br), since the cassette stores it decoded and the proxy frames
it afresh. No timeout but the connection's: the client waiting on the proxy has its own. An
``HTTPS_PROXY`` (``HTTP_PROXY``, ``NO_PROXY``) in the environment is read once, when the proxy
starts, not on each request as aiohttp's ``trust_env`` does (on a worker thread, twice a
request, with ``~/.netrc`` as well: a client's own ``authorization`` is what goes upstream).
"""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator
from typing import Final
from urllib.parse import urlsplit

import aiohttp

from pytest_toolnexus._bridges.aiohttp import seam_error
from pytest_toolnexus._bridges.aiohttp_ws import AioLiveConnection, seam_refusal
from pytest_toolnexus._seam.bodies import keeps_content_length
from pytest_toolnexus._seam.duplex import AsyncDuplexConnection, Handshake
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import AsyncByteStream, TransportRequest, TransportResponse

__all__ = ["Upstream", "environment_proxy"]

CONNECT_TIMEOUT: Final = 30.0
"""Seconds to open a connection to the upstream before the request fails (``ConnectTimeout``,
recorded as such)."""

# Headers aiohttp adds to a request that does not carry them: the proxy forwards the client's.
_AUTO: Final = frozenset(("User-Agent", "Accept", "Accept-Encoding", "Content-Type"))
# Headers that describe the wire form of a body handed on decoded.
_WIRE: Final = ("content-encoding", "content-length", "transfer-encoding")


class Upstream:
    """An async seam transport that sends every request to ``upstream`` (the origin it
    forwards to) through one aiohttp client session, made with :meth:`open` inside the running
    loop before the first request is timed."""

    def __init__(self, upstream: str) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._proxy = environment_proxy(upstream)

    async def open(self) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT)
        self._session = aiohttp.ClientSession(
            timeout=timeout, auto_decompress=True, skip_auto_headers=_AUTO, trust_env=False
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __call__(self, request: TransportRequest) -> TransportResponse:
        if self._session is None:
            raise RuntimeError("Upstream.open() must be awaited before the first request")
        if request.cancel is not None:
            request.cancel.raise_if_cancelled()
        try:
            response = await self._session.request(
                request.method,
                request.url,
                headers=request.headers.multi_items(),
                data=_content(request),
                allow_redirects=False,
                proxy=self._proxy,
            )
        except aiohttp.ClientError as exc:
            raise seam_error(exc) from exc
        except TimeoutError as exc:  # the connect timeout, as aiohttp raises it
            raise seam_error(aiohttp.ConnectionTimeoutError(str(exc))) from exc
        headers = Headers(
            [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in response.raw_headers]
        )
        if keeps_content_length(request.method, response.status):
            headers = headers.without("content-encoding", "transfer-encoding")
        else:
            headers = headers.without(*_WIRE)

        async def aclose() -> None:
            response.release()

        return TransportResponse(
            response.status,
            headers,
            AsyncByteStream(_chunks(response, request), aclose=aclose),
        )

    acall = __call__

    async def websocket(self, handshake: Handshake) -> AsyncDuplexConnection:
        """Open the WebSocket ``handshake`` asks for on the upstream (the duplex seam's
        opener): the client's own headers and subprotocols, no limit on a message's size. A
        handshake the upstream refuses raises :class:`DuplexRefused` with its status."""
        if self._session is None:
            raise RuntimeError("Upstream.open() must be awaited before the first request")
        try:
            ws = await self._session.ws_connect(
                handshake.url,
                headers=handshake.headers.without("sec-websocket-protocol").multi_items(),
                protocols=handshake.subprotocols,
                proxy=self._proxy,
                max_msg_size=0,
            )
        except aiohttp.WSServerHandshakeError as exc:
            if exc.status == 101:  # accepted, then failed aiohttp's checks (Sec-WebSocket-Accept)
                raise seam_error(exc) from exc
            raise seam_refusal(handshake.url, exc) from None
        except aiohttp.ClientError as exc:
            raise seam_error(exc) from exc
        except TimeoutError as exc:
            raise seam_error(aiohttp.ConnectionTimeoutError(str(exc))) from exc
        return AioLiveConnection(ws)


def environment_proxy(upstream: str) -> str | None:
    """The proxy the environment names for ``upstream`` (``HTTPS_PROXY`` for an https://
    one, ...), or None when there is none or ``NO_PROXY`` leaves its host out."""
    split = urlsplit(upstream)
    proxy = urllib.request.getproxies().get(split.scheme)
    if proxy is None or (split.hostname and urllib.request.proxy_bypass(split.hostname)):
        return None
    return proxy


def _content(request: TransportRequest) -> bytes | None:
    if request.content is not None:
        return request.content
    if isinstance(request.body, bytes):
        return request.body
    return None


async def _chunks(
    response: aiohttp.ClientResponse, request: TransportRequest
) -> AsyncIterator[bytes]:
    """The answer's body as it arrives, each chunk handed on at once; a failure in it is the
    seam's error of its kind."""
    try:
        async for chunk in response.content.iter_any():
            if request.cancel is not None:
                request.cancel.raise_if_cancelled()
            yield chunk
    except aiohttp.ClientError as exc:
        raise seam_error(exc) from exc
    finally:
        response.release()
