"""A client's WebSocket carried on to the upstream by ``pytest-toolnexus record``, and recorded.

The handshake goes to the upstream through the recording session's WebSocket side
(:mod:`pytest_toolnexus._realtime.hub`), as a Python client's does in pytest: the session
records the handshake with its credentials redacted, then tees every frame both ways with its
time, and the cassette is written through the same redaction and secret scan when the proxy
stops. The proxy only carries the frames between the client and the upstream
(:func:`.websocket.relay`), each handed on the moment it comes.
"""

from __future__ import annotations

from aiohttp import web

from pytest_toolnexus._realtime.hub import realtime_of
from pytest_toolnexus._safety.redact import redact_url
from pytest_toolnexus._seam.duplex import DuplexRefused
from pytest_toolnexus._seam.errors import TransportError
from pytest_toolnexus._session.session import CassetteSession

from .answer import upstream_failed
from .upstream import Upstream
from .websocket import accept, client_handshake, refusal, relay

__all__ = ["record_websocket"]


async def record_websocket(
    session: CassetteSession, live: Upstream, request: web.Request, url: str
) -> web.StreamResponse:
    """Open the WebSocket the client asks for on the upstream (``url``, its ``ws://`` or
    ``wss://`` address there), record it through ``session``, and carry its frames until either
    side closes. A handshake the upstream refuses is answered with its status."""
    try:
        connection = await realtime_of(session).aconnect(
            client_handshake(request, url), live.websocket
        )
    except DuplexRefused as refused:
        return refusal(refused)
    except TransportError as exc:
        return upstream_failed(request, url, exc)
    try:
        ws = await accept(request, connection)
        if ws is not None:
            await relay(ws, connection, request, redact_url(url))
    finally:
        # The upstream's side closed too, whatever ended this one (nothing if it is already).
        await connection.close(1001, "")
    return ws if ws is not None else web.Response(status=499)
