"""An MCP client over streamable HTTP, recorded and replayed (issue 16, item 3).

The ``mcp`` SDK's client sends JSON-RPC over POST with no stream flag; the server answers a
tool call with ``text/event-stream``: a progress notification 50 ms apart for each step,
then the result. The cassette must keep each event with its time, and a replay with the
server stopped must return the recorded result and deliver each event at its recorded time
on the virtual clock.
"""

import asyncio
import socket
import time

import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from pytest_toolnexus import load_cassette, use_cassette
from pytest_toolnexus._store.cassette import SseBody
from tests.support.mcp_server import McpServer
from tests.support.realtime import wall

STEPS = 3
GAP = 0.05


async def call_count(url, clock):
    """Run the tool through the SDK; returns the result text and ``(progress, clock())`` per
    notification as the client's callback saw it."""
    seen = []

    async def progress(value, total, message):
        seen.append((value, clock()))

    async with (
        streamable_http_client(url) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        before_call = clock()
        result = await session.call_tool("count", {"n": STEPS}, progress_callback=progress)
    return result.content[0].text, seen, before_call


@pytest.fixture
def recorded(tmp_path):
    """Record one tool call against a live server, then stop the server."""
    cassette = tmp_path / "mcp.msgpack"
    with McpServer(gap=GAP) as server, use_cassette(cassette, record="all"):
        live = asyncio.run(call_count(server.url, wall))
    with socket.socket() as probe:  # the server is gone: nothing listens there any more
        host, port = server.url.split("//")[1].split("/")[0].split(":")
        assert probe.connect_ex((host, int(port))) != 0
    return cassette, server, live


def _tool_call(interactions):
    calls = [
        (n, i)
        for n, i in enumerate(interactions)
        if isinstance(getattr(i.request.body, "value", None), dict)
        and i.request.body.value.get("method") == "tools/call"
    ]
    assert len(calls) == 1
    return calls[0]


def test_an_mcp_tool_call_keeps_its_progress_timing_on_record(recorded):
    cassette, server, (text, seen, before_call) = recorded

    assert text == f"counted {STEPS}"
    assert [value for value, _ in seen] == [1.0, 2.0, 3.0]
    _, call = _tool_call(load_cassette(cassette).interactions)
    body = call.response.body
    assert call.response.headers["content-type"].startswith("text/event-stream")
    assert isinstance(body, SseBody)
    events = body.events
    methods = [e["data"].get("method") for e in events]
    assert methods == ["notifications/progress"] * STEPS + [None]
    assert events[-1]["data"]["result"]["content"][0]["text"] == text
    # Each notification's stamp lies between the server's send (measured from the tool's start,
    # after the request was sent) and the client's callback (measured from before the call).
    (started,) = server.started_at
    for stamp, sent, (_, called) in zip(
        [e["t"] for e in events[:STEPS]], server.progress_at, seen, strict=True
    ):
        assert sent - started <= stamp / 1000 <= called - before_call


def test_an_mcp_tool_call_replays_with_the_server_stopped_at_its_recorded_times(recorded):
    cassette, _, (text, _, _) = recorded
    _, call = _tool_call(load_cassette(cassette).interactions)
    stamps = [e["t"] for e in call.response.body.events]

    with use_cassette(cassette) as session:  # replay only: the virtual clock, no network
        replayed, seen, _ = asyncio.run(call_count("http://" + _origin(call), time.monotonic))

    assert replayed == text
    assert [value for value, _ in seen] == [1.0, 2.0, 3.0]
    (sent,) = [
        r for r in session.requests if isinstance(r.body, dict) and r.body["method"] == "tools/call"
    ]
    # Each event reached the client at its recorded offset from the request, on the clock.
    delivered = [round((at - sent.sent_at) * 1000, 3) for at in sent.deliveries]
    assert delivered == pytest.approx(stamps, abs=0.002)


def _origin(interaction):
    return interaction.request.url.split("//", 1)[1]
