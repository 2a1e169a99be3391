"""The ``mcp`` SDK's legacy SSE transport (``mcp.client.sse.sse_client``), recorded and
replayed with the server stopped.

Over this transport the client opens one long GET ``/sse`` and POSTs each message to the
endpoint it announces; the server's answers and notifications all come back on the GET. The
recording keeps that stream with each event's time, from the GET.

Replaying it needs two things of the replay (issue 16, point 3): the stream must not run ahead
of the POSTs its events answer (the virtual clock moves on only once no other task is ready to
run), and a stream the client closed while it was recorded stays open, as the live server kept
it, until the recorded moment the client closed it.
"""

import asyncio
import time

import pytest
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client

from pytest_toolnexus import load_cassette, use_cassette
from pytest_toolnexus._store.cassette import SseBody
from tests.support.mcp_server import McpServer
from tests.support.realtime import wall

STEPS = 3
GAP = 0.05


async def call_count(url, clock):
    """List the tools, then run ``count``: the result text, the progress values with the
    client's ``clock()`` reading for each, and a reading taken before the GET."""
    seen = []

    async def progress(value, total, message):
        seen.append((value, clock()))

    before = clock()
    async with sse_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        await session.list_tools()
        result = await session.call_tool("count", {"n": STEPS}, progress_callback=progress)
    return result.content[0].text, seen, before


@pytest.fixture
def recorded(tmp_path):
    """One session over SSE recorded against a live server, which is then stopped."""
    cassette = tmp_path / "mcp-sse.msgpack"
    with McpServer(gap=GAP, transport="sse") as server, use_cassette(cassette, record="all"):
        live = asyncio.run(call_count(server.url, wall))
    return cassette, server, live


def test_the_sse_stream_of_an_mcp_session_keeps_each_progress_events_time(recorded):
    cassette, server, (text, seen, before) = recorded

    assert text == f"counted {STEPS}"
    interactions = load_cassette(cassette).interactions
    (stream,) = [i for i in interactions if i.request.method == "GET"]
    posts = [i for i in interactions if i.request.method == "POST"]
    assert len(posts) == 4  # initialize, notifications/initialized, tools/list, tools/call
    body = stream.response.body
    assert isinstance(body, SseBody)
    assert body.events[0]["event"] == "endpoint"
    data = [e["data"] for e in body.events[1:]]
    progress = [
        n + 1
        for n, d in enumerate(data)
        if isinstance(d, dict) and d.get("method") == "notifications/progress"
    ]
    assert len(progress) == STEPS
    assert data[-1]["result"]["content"][0]["text"] == text
    # Stamps count from the GET, which went out after ``before`` and reached the server at
    # ``received_at``: each progress stamp lies between the server's send and the callback.
    received_at = server.received_at("GET", "/sse")
    for n, sent, (_, called) in zip(progress, server.progress_at, seen, strict=True):
        assert sent - received_at <= body.events[n]["t"] / 1000 <= called - before


def test_an_mcp_session_over_sse_replays_with_the_server_stopped(recorded):
    cassette, server, (text, _, _) = recorded
    (stream,) = [i for i in load_cassette(cassette).interactions if i.request.method == "GET"]
    stored = [
        e["t"] / 1000
        for e in stream.response.body.events
        if isinstance(e.get("data"), dict) and e["data"].get("method") == "notifications/progress"
    ]

    with use_cassette(cassette) as session:
        replayed, seen, before = asyncio.run(call_count(server.url, time.monotonic))
        sleeps = list(session.clock.sleeps)

    assert replayed == text
    assert [value for value, _ in seen] == [float(n) for n in range(1, STEPS + 1)]
    # Each progress callback ran at its event's stored time on the virtual clock, counted from
    # the GET (which went out at ``before``: nothing waited in between).
    for (_, called), t in zip(seen, stored, strict=True):
        assert called - before == pytest.approx(t, abs=1e-6)
    assert sleeps == []  # the client made no wait of its own for the clock to stand in for
    # Every recorded POST was answered from the cassette.
    assert all(r.replayed for r in session.requests)
