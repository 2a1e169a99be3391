"""One request to a served cassette: matched by the cassette's session, answered on the wire.

A stream goes out piece by piece, each piece written when the session's clock releases it
(its recorded offset divided by ``--speed``, or at once with ``--timing instant``), so a client
in any language sees the recorded timing. A recorded transport error, and a fault that breaks
the connection, close the connection at their time, as the failure did. A miss is answered
with :data:`MISS_STATUS`, whose JSON body holds the miss message pytest gives.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from aiohttp import web
from multidict import CIMultiDict

from pytest_toolnexus._safety.redact import redact_url
from pytest_toolnexus._seam.bodies import decode_body, wire_body
from pytest_toolnexus._seam.duplex import is_upgrade
from pytest_toolnexus._seam.errors import (
    CassetteFormatError,
    CassetteMissError,
    ReplayError,
    ToolnexusError,
    TransportError,
    WireCheckError,
)
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import AsyncByteStream, TransportRequest, TransportResponse

from .catalog import Catalog, ServedCassette

__all__ = [
    "CASSETTE_HEADER",
    "HOP",
    "MISS_STATUS",
    "addressed",
    "answer",
    "asks_websocket",
    "cut",
    "miss_response",
    "respond",
    "seam_request",
    "upstream_failed",
]

MISS_STATUS: Final = 490
"""The status of an answer no recording gives. No registry assigns 490, so no API and no
client gives it a meaning of its own; it is a 4xx, which no SDK's retry loop retries (openai
and anthropic retry 408, 409, 429 and 500 and up; urllib3, Go's retryablehttp and Google's
retries likewise leave a 4xx other than 429 alone), and the answer also says
``x-should-retry: false``, which the Stainless SDKs read before the status."""

CASSETTE_HEADER: Final = "x-toolnexus-cassette"
ORIGIN_HEADER: Final = "x-toolnexus-origin"

# Headers that describe one connection or one encoding of the body, not the recorded answer:
# the body is stored decoded, and this server frames it afresh.
HOP: Final = frozenset(
    (
        "connection",
        "keep-alive",
        "transfer-encoding",
        "content-encoding",
        "content-length",
        "proxy-connection",
        "upgrade",
        "host",
    )
)

log = logging.getLogger("pytest_toolnexus.serve")


def miss_response(kind: str, message: str, cassette: str | None) -> web.Response:
    """The answer to a request no recording answers, logged as well: the message is the one
    pytest gives, in the error shapes OpenAI's and Anthropic's SDKs read a message from."""
    log.warning("%s", message)
    body: dict[str, Any] = {
        "type": "error",
        "error": {"type": f"toolnexus_{kind}", "message": message, "cassette": cassette},
    }
    return web.json_response(
        body,
        status=MISS_STATUS,
        headers={"x-should-retry": "false", "x-toolnexus-miss": kind},
    )


def upstream_failed(request: web.Request, url: str, exc: TransportError) -> web.Response:
    """The recording proxy's answer to a request the upstream failed (recorded as the failure
    it was): the client hears of it as a gateway would. The URL is shown redacted (a key in its
    query), in the error's text as well."""
    shown = redact_url(url)
    said = f"{shown}: {str(exc).replace(url, shown)}"
    log.warning("%s %s", request.method, said)
    return web.json_response({"error": {"type": "toolnexus_upstream", "message": said}}, status=502)


def seam_request(
    request: web.Request, url: str, content: bytes, *, stream: bool = False
) -> TransportRequest:
    """The seam's request for what a client sent, addressed to ``url``; headers of the
    connection and this server's own (``x-toolnexus-*``) are left out."""
    pairs = [
        (k.lower(), v)
        for k, v in request.headers.items()
        if k.lower() not in HOP and not k.lower().startswith("x-toolnexus-")
    ]
    headers = Headers(pairs)
    return TransportRequest(
        method=request.method,
        url=url,
        headers=headers,
        body=decode_body(headers, content),
        content=content,
        stream=stream,
    )


def asks_websocket(request: web.Request) -> bool:
    """Whether ``request`` asks to open a WebSocket (:mod:`.websocket` answers it)."""
    return request.method == "GET" and request.headers.get("upgrade", "").lower() == "websocket"


def addressed(catalog: Catalog, request: web.Request) -> tuple[ServedCassette, str] | web.Response:
    """The served cassette ``request`` names and the recorded URL it stands for, or the answer
    that says no cassette is named (:data:`MISS_STATUS`)."""
    found = _cassette_of(catalog, request)
    if isinstance(found, str):
        catalog.unrouted.append(found)
        return miss_response("no_cassette", found, None)
    served, target = found
    origin = request.headers.get(ORIGIN_HEADER)
    return served, origin.rstrip("/") + target if origin else served.url_for(target)


async def answer(catalog: Catalog, request: web.Request) -> web.StreamResponse:
    """The served cassette's answer to ``request`` (a path ``/c/<name>/...``, or any path
    with an ``x-toolnexus-cassette`` header)."""
    found = addressed(catalog, request)
    if isinstance(found, web.Response):
        return found
    served, url = found
    asked = seam_request(request, url, await request.read())
    try:
        response = await served.session.async_transport(asked)
    except CassetteMissError as miss:
        served.missed(miss)
        return miss_response("miss", str(miss), served.name)
    except WireCheckError as exc:
        served.misses.append(str(exc))
        return miss_response("wire_check", str(exc), served.name)
    except CassetteFormatError as exc:
        served.misses.append(str(exc))
        return miss_response("damaged", str(exc), served.name)
    except TransportError as exc:
        # A recorded failure (or a fault's) before the headers: the connection breaks now.
        log.info(
            "%s %s: %s, as recorded: closing the connection", request.method, redact_url(url), exc
        )
        cut(request)
        raise web.HTTPServiceUnavailable() from None  # never sent: the transport is gone
    if is_upgrade(response.status, response.headers):
        if isinstance(response.body, AsyncByteStream):
            await response.body.aclose()
        message = (
            f"{request.method} {redact_url(url)}: the recording is a WebSocket session, and this "
            "request did not ask to open a WebSocket. Connect to the ws:// form of this URL with "
            "a WebSocket client. The session now counts as played: POST /_toolnexus/reset "
            "plays it again."
        )
        served.misses.append(message)
        return miss_response("websocket_session", message, served.name)
    return await respond(request, response, url)


async def respond(
    request: web.Request, response: TransportResponse, url: str
) -> web.StreamResponse:
    """Send a seam response on the wire: a byte stream piece by piece as it yields (a
    failure in it breaks the connection, as it broke live), a whole body with its length."""
    body = response.body
    if isinstance(body, AsyncByteStream):
        headers = CIMultiDict(
            (k, v) for k, v in response.headers.multi_items() if k.lower() not in HOP
        )
        return await _stream(request, response.status, headers, body, url)
    pairs, content = wire_body(response, request.method)
    whole = CIMultiDict((k, v) for k, v in pairs if k.lower() not in HOP)
    return web.Response(status=response.status, headers=whole, body=content)


async def _stream(
    request: web.Request,
    status: int,
    headers: CIMultiDict[str],
    body: AsyncByteStream,
    url: str,
) -> web.StreamResponse:
    out = web.StreamResponse(status=status, headers=headers)
    url = redact_url(url)  # only the log shows it
    try:
        await out.prepare(request)
        async for piece in body:
            await out.write(piece)
        await out.write_eof()
    except TransportError as exc:
        log.info(
            "%s %s: %s mid-body, as recorded: closing the connection", request.method, url, exc
        )
        cut(request)
    except ReplayError as exc:
        # The recording's client stopped reading here, so nothing more was recorded: the
        # connection is cut where the recording ends (a client that reads on sees it cut;
        # an SDK stops at its end marker first). Said at info level: most clients never ask.
        log.info("%s %s: %s; closing the connection", request.method, url, exc)
        cut(request)
    except ToolnexusError as exc:
        # A damaged piece: the status is sent, so the connection is cut, and the log says why.
        log.warning("%s %s: %s; closing the connection", request.method, url, exc)
        cut(request)
    except ConnectionError:
        pass  # the client went away; the session counts what it read
    finally:
        await body.aclose()
    return out


def cut(request: web.Request) -> None:
    """Break the client's connection (a failure at its time, as it broke live)."""
    transport = request.transport
    if transport is not None:
        transport.abort()


def _cassette_of(catalog: Catalog, request: web.Request) -> tuple[ServedCassette, str] | str:
    """The cassette a request names and the path and query it asks for there, or why none."""
    raw = request.raw_path
    path, _, query = raw.partition("?")
    named = request.headers.get(CASSETTE_HEADER)
    if named is not None:
        served = catalog.get(named)
        if served is not None:
            return served, raw
        return _unknown(catalog, f"the {CASSETTE_HEADER} header names {named!r}", request)
    if path.startswith("/c/"):
        routed = catalog.route(path)
        if routed is not None:
            served, rest = routed
            return served, rest + ("?" + query if query else "")
        return _unknown(catalog, f"the path {path} names no served cassette", request)
    return _unknown(catalog, "the request names no cassette", request)


def _unknown(catalog: Catalog, why: str, request: web.Request) -> str:
    asked = redact_url(request.raw_path)  # a key in the query reaches no log, body or report
    names = catalog.names()
    shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
    return (
        f"{request.method} {asked}: {why}. This server serves {len(names)} "
        f"cassette(s): {shown or 'none'}. Put the cassette's name first in the path "
        f"(/c/<name>/v1/chat/completions) or send it in the {CASSETTE_HEADER} header; "
        "load another with POST /_toolnexus/load."
    )
