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

import anyio
from aiohttp import WSMsgType, web
from multidict import CIMultiDict

from pytest_toolnexus._realtime.hub import realtime_of
from pytest_toolnexus._safety.redact import redact_url
from pytest_toolnexus._seam.duplex import (
    ABNORMAL,
    AsyncDuplexConnection,
    DuplexClosed,
    DuplexRefused,
    Handshake,
)
from pytest_toolnexus._seam.errors import CassetteFormatError, CassetteMissError, ReplayError
from pytest_toolnexus._seam.headers import Headers

from .answer import HOP, addressed, log, miss_response
from .catalog import Catalog

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
    anyio.Event()  # anyio's asyncio backend loaded now, before any frame's time counts
    hub = served.realtime = realtime_of(served.session)
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
        served.misses.append(str(exc))
        kind = "damaged" if isinstance(exc, CassetteFormatError) else "not_a_websocket"
        return miss_response(kind, str(exc), served.name)
    ws = await accept(request, connection)
    await relay(ws, connection, request, redact_url(url), served.missed)
    return ws


def refusal(refused: DuplexRefused) -> web.Response:
    """The answer to a client whose handshake is refused: the status, headers and body."""
    headers = CIMultiDict((k, v) for k, v in refused.headers.multi_items() if k.lower() not in HOP)
    return web.Response(status=refused.status, headers=headers, body=refused.body)


async def accept(request: web.Request, connection: AsyncDuplexConnection) -> web.WebSocketResponse:
    """Complete the client's upgrade as ``connection``'s handshake was answered: its
    subprotocol, and its headers but those of the one connection."""
    accepted = connection.accepted
    ws = web.WebSocketResponse(
        protocols=(accepted.subprotocol,) if accepted.subprotocol else (),
        max_msg_size=0,  # what the recording holds is sent, however large
    )
    for name, value in accepted.headers.multi_items():
        if name.lower() not in HOP and not name.lower().startswith("sec-websocket-"):
            ws.headers.add(name, value)
    await ws.prepare(request)
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
    """Hand each client frame to the replay until the client closes, or sends a frame the
    recording does not expect."""
    async for message in ws:
        if message.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
            continue  # an error on the connection: aiohttp ends the iteration next
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
    # The client closed (or went away): the replay notes its close frame at this time.
    await connection.close(ws.close_code or ABNORMAL, "")


_REPORT: Final = "GET /_toolnexus/report"


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
                transport = request.transport
                if transport is not None:
                    transport.abort()
                return
            await ws.close(code=closed.code, message=_clipped(closed.reason))
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
