"""A loopback MCP server for tests: one tool that reports progress as it goes.

``McpServer`` runs the ``mcp`` SDK's server under uvicorn, in a thread, on a free port of
127.0.0.1, over streamable HTTP (``transport="streamable"``, at ``/mcp``) or the legacy SSE
transport (``transport="sse"``, the client connects to ``/sse``). Its one tool, ``count``,
sleeps ``gap`` seconds before each of ``n`` steps and sends a progress notification after it,
then returns ``"counted n"``.

Times are :func:`tests.support.realtime.wall` readings: ``started_at`` when the tool began,
``progress_at`` just before each notification was sent (no client can have it earlier), and
``received`` the ``(method, path, time)`` of every HTTP request as the app was handed it
(after the client sent it).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any, Literal

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

from tests.support.realtime import wall

__all__ = ["McpServer"]

Transport = Literal["streamable", "sse"]


class McpServer:
    """An MCP server with a progress-reporting ``count`` tool, served by uvicorn in a thread."""

    def __init__(self, *, gap: float, transport: Transport = "streamable") -> None:
        self.started_at: list[float] = []
        self.progress_at: list[float] = []
        self.received: list[tuple[str, str, float]] = []
        mcp = MCPServer("counter")

        @mcp.tool()
        async def count(n: int, ctx: Context) -> str:
            self.started_at.append(wall())
            for step in range(n):
                await asyncio.sleep(gap)
                self.progress_at.append(wall())
                await ctx.report_progress(step + 1, n)
            return f"counted {n}"

        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        origin = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        if transport == "sse":
            app = mcp.sse_app()
            self.url = origin + "/sse"
        else:
            app = mcp.streamable_http_app(stateless_http=True)
            self.url = origin + "/mcp"

        async def noted(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                self.received.append((scope["method"], scope["path"], wall()))
            await app(scope, receive, send)

        self._server = uvicorn.Server(uvicorn.Config(noted, log_level="warning"))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def received_at(self, method: str, path: str) -> float:
        """When the one request of ``method`` to ``path`` reached the app."""
        (at,) = [t for m, p, t in self.received if (m, p) == (method, path)]
        return at

    def __enter__(self) -> McpServer:
        self._thread.start()
        deadline = wall() + 30
        while not self._server.started:
            assert wall() < deadline, "the MCP server did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving and close the socket; nothing listens on the port afterwards."""
        self._server.should_exit = True
        self._thread.join(10)
        self._sock.close()
