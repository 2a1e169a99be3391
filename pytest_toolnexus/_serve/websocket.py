"""A WebSocket session served: a client's upgrade to a served cassette, answered with the
session the cassette recorded, frame by frame, in real time.

The handshake is matched by the cassette's session as in pytest (a ``GET`` to the recorded
``ws://`` or ``wss://`` URL, each recording played once), through the same WebSocket side
(:mod:`pytest_toolnexus._realtime.hub`) that serves the Python clients, so the faults, the
causal release and the frame matching are the ones a Python test gets. Only the clock differs:
the server's is real time divided by ``--speed`` (a foreign process cannot share the virtual
clock), so each server frame goes out at its recorded offset from the client frame that
preceded it in the recording, counted from when this client sent that frame.

Two tasks serve a connection: one reads the client's frames and checks each against the one
the recording expects, the other writes the server's frames as they fall due. A client frame
the recording does not expect is a miss: it is logged and kept for the control API's report,
and the connection is closed with :data:`MISS_CLOSE_CODE`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Final

from aiohttp import WSMsgType, web
from multidict import CIMultiDict

from pytest_toolnexus._realtime.hub import realtime_of
from pytest_toolnexus._realtime.replay import AsyncReplayedConnection
from pytest_toolnexus._safety.redact import redact_url
from pytest_toolnexus._seam.duplex import (
    ABNORMAL,
    AsyncDuplexConnection,
    DuplexClosed,
    DuplexRefused,
    Handshake,
)
from pytest_toolnexus._seam.errors import (
    CassetteFormatError,
    CassetteMissError,
    ReplayError,
    TransportError,
)
from pytest_toolnexus._seam.headers import Headers

from .answer import HOP, addressed, cut, log, miss_response
from .catalog import Catalog
from .sockets import opened

__all__ = [
    "MISS_CLOSE_CODE",
    "accept",
    "answer_websocket",
    "client_handshake",
    "refusal",
    "relay",
]

MISS_CLOSE_CODE: Final = 4490
"""The close code of a connection whose client sent a frame the recording does not expect (a
code of the range 4000 to 4999 that RFC 6455 leaves to applications, so no library gives it a
meaning or reconnects on it; 490 is the HTTP status of a miss here)."""

_REASON_BYTES: Final = 123
"""The most a close frame's reason may hold, in UTF-8 bytes (RFC 6455, 5.5.1)."""

# Headers of this one connection's upgrade, which the server makes afresh for each client.
_CONNECTION_ONLY: Final = frozenset(
    (
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-extensions",
        "sec-websocket-accept",
    )
)


def client_handshake(request: web.Request, url: str) -> Handshake:
    """The seam's handshake for a client's upgrade, addressed to the recorded ``url``."""
    pairs = [
        (k.lower(), v)
        for k, v in request.headers.items()
        if k.lower() not in HOP
        and k.lower() not in _CONNECTION_ONLY
        and not k.lower().startswith("x-toolnexus-")
    ]
    offered = request.headers.get("sec-websocket-protocol", "")
    subprotocols = tuple(p.strip() for p in offered.split(",") if p.strip())
    return Handshake(url, Headers(pairs), subprotocols)


async def _refuse_live(handshake: Handshake) -> AsyncDuplexConnection:
    # A served cassette replays only, so its session never opens a connection of its own.
    raise AssertionError(f"serve opened no connection, yet {handshake.url} was to be opened")


async def answer_websocket(catalog: Catalog, request: web.Request) -> web.StreamResponse:
    """The recorded session a client's upgrade asks for, served to it, or the answer that
    says why it cannot be: a miss (status 490), or the refusal the recording (or a fault)
    gives."""
    found = addressed(catalog, request)
    if isinstance(found, web.Response):
        return found
    served, url = found
    hub = realtime_of(served.session)
    # The lists as they are now: a reset while the connection is open starts new ones, which
    # this connection's misses and leftovers do not belong in.
    misses, leftovers = served.misses, served.websocket_leftovers
    try:
        connection = await hub.aconnect(client_handshake(request, url), _refuse_live)
    except CassetteMissError as miss:
        served.missed(miss)
        return miss_response("miss", str(miss), served.name)
    except DuplexRefused as refused:
        log.info(
            "GET %s: the handshake is refused with HTTP %s, as asked", refused.url, refused.status
        )
        return refusal(refused)
    except (CassetteFormatError, ReplayError) as exc:
        misses.append(str(exc))
        kind = "damaged" if isinstance(exc, CassetteFormatError) else "replay"
        return miss_response(kind, str(exc), served.name)
    except TransportError as exc:
        # The handshake failed when it was recorded (or a fault makes it fail): the
        # connection breaks now, as it broke then.
        log.info("GET %s: %s, as recorded: closing the connection", redact_url(url), exc)
        cut(request)
        raise web.HTTPServiceUnavailable() from None  # never sent: the transport is gone
    assert isinstance(connection, AsyncReplayedConnection)
    try:
        ws = await accept(request, connection)
        if ws is not None:
            await relay(ws, connection, request, redact_url(url), lambda m: misses.append(str(m)))
    finally:
        await connection.close(1001, "")  # nothing if it is closed already
        leftovers += hub.release(connection.playback)
    return ws if ws is not None else web.Response(status=499)


def refusal(refused: DuplexRefused) -> web.Response:
    """The answer to a client whose handshake is refused: the status, headers and body."""
    headers = CIMultiDict((k, v) for k, v in refused.headers.multi_items() if k.lower() not in HOP)
    return web.Response(status=refused.status, headers=headers, body=refused.body)


async def accept(
    request: web.Request, connection: AsyncDuplexConnection
) -> web.WebSocketResponse | None:
    """Complete the client's upgrade as ``connection``'s handshake was answered: its
    subprotocol, and its headers but those of the one connection. None when the client is
    gone already (it gave up waiting for the handshake)."""
    accepted = connection.accepted
    ws = web.WebSocketResponse(
        protocols=(accepted.subprotocol,) if accepted.subprotocol else (),
        max_msg_size=0,  # what the recording holds is sent, however large
    )
    for name, value in accepted.headers.multi_items():
        if name.lower() not in HOP and not name.lower().startswith("sec-websocket-"):
            ws.headers.add(name, value)
    try:
        await ws.prepare(request)
    except ConnectionError:
        log.info("GET %s: the client left before the handshake was answered", request.path)
        return None
    opened(request, ws)
    return ws


async def relay(
    ws: web.WebSocketResponse,
    connection: AsyncDuplexConnection,
    request: web.Request,
    url: str,
    missed: Callable[[CassetteMissError], None] | None = None,
) -> None:
    """Carry frames between the client's ``ws`` and ``connection`` (a replay, or a recording
    of the upstream's) both ways until either side closes. ``url`` (redacted) is for the log;
    ``missed`` is told of a client frame the recording does not expect (a replay's)."""
    writing = asyncio.ensure_future(_server_frames(ws, connection, request, url))
    try:
        await _client_frames(ws, connection, missed)
        await writing
    finally:
        writing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await writing


async def _client_frames(
    ws: web.WebSocketResponse,
    connection: AsyncDuplexConnection,
    missed: Callable[[CassetteMissError], None] | None,
) -> None:
    """Hand each client frame on until the client closes (its code and reason handed on too),
    goes away, or sends a frame the recording does not expect."""
    while True:
        message = await ws.receive()
        if message.type in (WSMsgType.TEXT, WSMsgType.BINARY):
            try:
                await connection.send(message.data)
            except DuplexClosed:
                return  # the server's side closed first; its close frame is on its way
            except CassetteMissError as miss:
                if missed is None:
                    raise
                missed(miss)
                log.warning("%s", miss)
                reason = f"toolnexus: a frame the recording does not expect; see {_REPORT}"
                await connection.close(MISS_CLOSE_CODE, reason)
                await ws.close(code=MISS_CLOSE_CODE, message=_clipped(reason))
                return
        elif message.type == WSMsgType.CLOSE:
            reason = message.extra if isinstance(message.extra, str) else ""
            await connection.close(_sendable(message.data, ws.close_code), reason)
            return
        elif message.type in (WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
            # The server's side is closing it, or the client went away without a close frame:
            # the other side hears it as going away (1006 may not be sent).
            await connection.close(1001, "")
            return


_REPORT: Final = "GET /_toolnexus/report"


def _sendable(code: object, fallback: int | None) -> int:
    """The close code to hand on for one the client sent: 1000 for none (1005), since a
    close frame may not carry 1005, 1006 or 1015."""
    found = code if isinstance(code, int) and code else fallback
    if found is None or found in (1005, 1006, 1015):
        return 1000
    return found


async def _server_frames(
    ws: web.WebSocketResponse,
    connection: AsyncDuplexConnection,
    request: web.Request,
    url: str,
) -> None:
    """Write each server frame as the replay releases it, then the recorded close: a close
    frame with its code and reason, or, for a connection that dropped (1006), the TCP
    connection cut without one."""
    while True:
        try:
            message = await connection.recv()
        except DuplexClosed as closed:
            if closed.by == "client":
                return
            if closed.code == ABNORMAL:
                log.info("GET %s: the connection dropped here, as recorded: cutting it", url)
                cut(request)
                return
            await ws.close(code=_sendable(closed.code, None), message=_clipped(closed.reason))
            return
        try:
            if isinstance(message, str):
                await ws.send_str(message)
            else:
                await ws.send_bytes(message)
        except ConnectionError:
            return  # the client went away; the replay counts what it was sent


def _clipped(reason: str) -> bytes:
    """A close reason as a close frame can carry it: at most 123 bytes of whole characters."""
    encoded = reason.encode("utf-8")
    if len(encoded) <= _REASON_BYTES:
        return encoded
    return encoded[:_REASON_BYTES].decode("utf-8", "ignore").encode("utf-8")
