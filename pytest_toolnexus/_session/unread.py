"""What a client left unread of a replayed response, when it is something it would have read.

A client that closes a response before its last piece is not always wrong. An MCP client over
streamable HTTP closes a POST's event stream once the JSON-RPC response it waited for has come;
a client closes a 202 with no body unread; and what remains may be only keep-alives (SSE
comments, empty events, ``ping``). None of those is reported. What is: a response the client
stopped reading while data remained that it would have read, named by its place in the cassette
and a short label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_toolnexus._store.cassette import (
    ChunksBody,
    EmptyBody,
    EventStreamBody,
    Interaction,
    JsonBody,
    NdjsonBody,
    SseBody,
    WebSocketBody,
)

from .sent import SentRequest

__all__ = ["describe_unread", "left_unread"]


def _keep_alive(event: Mapping[str, Any]) -> bool:
    """An event that carries nothing a client reads: a comment, an empty event, a ping."""
    data = event.get("data", event.get("text"))
    if data in (None, ""):
        return True
    if event.get("event") == "ping":
        return True
    return isinstance(data, Mapping) and data.get("type") == "ping"


def _rpc_ids(body: object) -> set[Any]:
    """The ids of the JSON-RPC requests in a request body (one, or a batch)."""
    calls = body if isinstance(body, list) else [body]
    return {
        call["id"]
        for call in calls
        if isinstance(call, Mapping) and call.get("jsonrpc") == "2.0" and "id" in call
    }


def _rpc_method(body: object) -> str | None:
    if isinstance(body, Mapping) and body.get("jsonrpc") == "2.0":
        method = body.get("method")
        return method if isinstance(method, str) else None
    return None


def _answered(ids: set[Any], events: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the events delivered hold a JSON-RPC response for each request id."""
    if not ids:
        return False
    seen = set()
    for event in events:
        data = event.get("data")
        replies = data if isinstance(data, list) else [data]
        for reply in replies:
            if isinstance(reply, Mapping) and ("result" in reply or "error" in reply):
                seen.add(reply.get("id"))
    return ids <= seen


def left_unread(sent: SentRequest, interaction: Interaction) -> str | None:
    """What the client left unread of ``interaction``'s response ("2 of 5 events read") when
    that is data it would have read; None when nothing such remains."""
    response = interaction.response
    if response is None or isinstance(response.body, EmptyBody | WebSocketBody):
        return None  # a WebSocket session's frames are the realtime replay's to report
    body = response.body
    read = len(sent.deliveries)
    if isinstance(body, SseBody):
        events = [e for e in body.events if isinstance(e, Mapping)]
        if _answered(_rpc_ids(sent.body), events[:read]):
            return None  # the JSON-RPC response it waited for came: the rest is not its
        rest = events[read:]
        if all(_keep_alive(e) for e in rest) and not body.tail.strip():
            return None
        return f"{min(read, len(events))} of {len(events)} events read"
    if isinstance(body, NdjsonBody | ChunksBody | EventStreamBody):
        total = sum(1 for _ in body.pieces())
    elif isinstance(body, JsonBody) and body.times is not None:
        total = len(body.times)
    else:
        total = 1  # a whole body: one piece
    if read >= total:
        return None
    return f"{read} of {total} pieces read"


def describe_unread(sent: SentRequest, unread: str) -> str:
    """``#2 POST https://host/mcp (JSON-RPC tools/call): 1 of 4 events read``."""
    where = f"#{sent.interaction} " if sent.interaction is not None else ""
    method = _rpc_method(sent.body)
    label = f" (JSON-RPC {method})" if method is not None else ""
    return f"{where}{sent.method} {sent.url}{label}: {unread}"
