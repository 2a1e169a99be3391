"""``pytest-toolnexus record``: a recording proxy that makes a cassette from any client.

A client points its base URL at the proxy; each request goes on to ``--upstream`` with the
path and query it was sent with, through a recording
:class:`~pytest_toolnexus._session.session.CassetteSession` (record mode ``all``) that sends
through :class:`~.upstream.Upstream` (aiohttp's client), whose recorder tees the answer: each
piece goes back to the client the moment it arrives, and a copy is stamped and parsed as in
pytest. On SIGINT or SIGTERM the session writes the cassette
through the gate pytest writes through: redaction, the secret scan, then an atomic replace.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from aiohttp import web

from pytest_toolnexus._seam.errors import CassetteError, TransportError
from pytest_toolnexus._session.session import CassetteSession

from .answer import asks_websocket, respond, seam_request, upstream_failed
from .app import TLSFilesError, listen, log_to, server_tls
from .sockets import close_at_shutdown
from .upstream import Upstream

__all__ = ["proxy_app", "record"]


def proxy_app(session: CassetteSession, live: Upstream, upstream: str) -> web.Application:
    """The application that forwards every request to ``upstream`` through ``live``, recorded
    by ``session``: HTTP requests, and WebSocket sessions frame by frame."""
    base = upstream.rstrip("/")
    transport = session.async_transport_for(live)

    async def handle(request: web.Request) -> web.StreamResponse:
        url = base + request.raw_path
        if asks_websocket(request):
            # Imported with the first WebSocket: a proxy of HTTP calls never loads it.
            from .recorded_websocket import record_websocket

            return await record_websocket(session, live, request, "ws" + url[4:])
        asked = seam_request(request, url, await request.read(), stream=True)
        try:
            response = await transport(asked)
        except TransportError as exc:
            return upstream_failed(request, url, exc)
        return await respond(request, response, url)

    app = web.Application(client_max_size=1 << 30)
    close_at_shutdown(app)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def record(
    upstream: str,
    out: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    url_file: Path | None = None,
    allow_secrets: Iterable[str] = (),
    tls: tuple[Path, Path] | None = None,
    stdout: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """The ``record`` command: 0 once the cassette is written (or nothing was sent), 1 when
    the write is refused (a secret the scan found, say), 2 when it cannot start. ``tls`` (a
    certificate chain and its key) makes it answer its clients over HTTPS and WSS."""
    log_to(err)
    try:
        context = None if tls is None else server_tls(*tls)
    except TLSFilesError as exc:
        print(f"error: {exc}", file=err)
        return 2
    if not upstream.startswith(("http://", "https://")):
        print(f"error: --upstream {upstream!r} must be an http:// or https:// URL", file=err)
        return 2
    try:
        session = CassetteSession(
            out, record="all", timing="real", on_unused="ignore", allow_secrets=allow_secrets
        )
    except CassetteError as exc:
        print(f"error: {exc}", file=err)
        return 2

    async def main() -> None:
        live = Upstream(upstream)
        await live.open()  # its client is made before any request is timed
        try:
            app = proxy_app(session, live, upstream)
            await listen(app, host=host, port=port, url_file=url_file, out=stdout, tls=context)
        finally:
            try:
                await session.aclose()
            finally:
                await live.aclose()

    try:
        asyncio.run(main())
    except CassetteError as exc:  # the gate refused the write (a secret): nothing was written
        print(f"error: {out} was not written: {exc}", file=err)
        return 1
    except OSError as exc:
        print(f"error: cannot listen on {host}:{port}: {exc}", file=err)
        return 2
    count = len(session.recorded)
    if session.written:
        print(f"recorded {count} interaction(s) into {out}", file=err)
    else:
        print(f"nothing was recorded; {out} was not written", file=err)
    return 0
