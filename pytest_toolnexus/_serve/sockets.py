"""The WebSockets a server (``serve`` or ``record``) has open, closed with 1001 ("going away")
when it shuts down, as a server that stops says so, rather than cut without a close frame."""

from __future__ import annotations

import asyncio
import weakref
from typing import Final

from aiohttp import WSCloseCode, web

__all__ = ["close_at_shutdown", "opened"]

_OPEN: Final = web.AppKey("toolnexus_websockets", weakref.WeakSet[web.WebSocketResponse])


def close_at_shutdown(app: web.Application) -> None:
    """Keep ``app``'s open WebSockets, and close them when it shuts down."""
    app[_OPEN] = weakref.WeakSet()
    app.on_shutdown.append(_close_all)


def opened(request: web.Request, ws: web.WebSocketResponse) -> None:
    """Note a WebSocket ``request``'s application has just opened."""
    sockets = request.app.get(_OPEN)
    if sockets is not None:
        sockets.add(ws)


async def _close_all(app: web.Application) -> None:
    sockets = app[_OPEN]
    closing = [
        ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")
        for ws in list(sockets)
        if not ws.closed
    ]
    await asyncio.gather(*closing, return_exceptions=True)
