"""A replayed response is reported as never read to the end only where the client left data it
would have read, and the report names the interaction.

An MCP client over streamable HTTP behaves normally when it closes a POST's event stream once
the JSON-RPC response it waited for has come, and when it closes a 202 with no body unread: a
session recorded and replayed through the ``mcp`` SDK is quiet. A client that stops before the
response it waited for is reported, with the interaction's place in the cassette, the JSON-RPC
method and how much of the stream it read.
"""

import pytest

# Imported once here, so that pytester's in-process runs find them loaded.
from mcp.client.session import ClientSession  # noqa: F401

from pytest_toolnexus import build
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._session.sent import SentRequest
from pytest_toolnexus._session.unread import left_unread
from pytest_toolnexus._store.cassette import (
    EmptyBody,
    Interaction,
    JsonBody,
    RecordedRequest,
    RecordedResponse,
    SseBody,
)
from tests.support.mcp_server import McpServer

QUIET = ("-p", "no:randomly", "-p", "no:hypothesispytest", "-p", "no:cacheprovider")

SDK_PROJECT = """
import asyncio
import os

import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client


@pytest.mark.cassette
def test_a_tool_call():
    async def call():
        async with streamable_http_client(os.environ["MCP_HTTP_URL"]) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                result = await session.call_tool("count", {"n": 3})
                return result.content[0].text

    assert asyncio.run(call()) == "counted 3"
"""


def test_an_mcp_session_over_streamable_http_replays_without_a_report(pytester, monkeypatch):
    # Given an MCP session (initialize, the initialized notification's 202, a tool call with
    # progress, a listing) recorded through the SDK, and the server gone
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_mcp=SDK_PROJECT)
    with McpServer(gap=0.01) as server:
        monkeypatch.setenv("MCP_HTTP_URL", server.url)
        pytester.runpytest(*QUIET, "--cassette-record=once").assert_outcomes(passed=1)

    # When it replays, with unread responses made errors
    result = pytester.runpytest(*QUIET, "--cassette-unused=fail")

    # Then nothing is reported: the client read everything it waits for
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*never read to the end*")


URL = "http://mcp.test/mcp"
JSON = Headers([("content-type", "application/json")])
CALL = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {"name": "count", "arguments": {"n": 2}},
}


def progress(step):
    return {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 7, "progress": step},
    }


EVENTS = [
    {"t": 10.0, "event": "message", "data": progress(1)},
    {"t": 20.0, "event": "message", "data": progress(2)},
    {"t": 30.0, "event": "message", "data": {"jsonrpc": "2.0", "id": 7, "result": {}}},
    # sent after the response: not the client's to read
    {
        "t": 40.0,
        "event": "message",
        "data": {"jsonrpc": "2.0", "method": "notifications/message", "params": {}},
    },
]


def tool_call(events=EVENTS, body=CALL):
    return Interaction(
        RecordedRequest("POST", URL, JSON, JsonBody(body)),
        RecordedResponse(
            200,
            Headers([("content-type", "text/event-stream")]),
            SseBody(events),
            t_headers=5.0,
            t_end=45.0,
        ),
    )


RAW_PROJECT = f"""
import json

import httpx
import pytest

CALL = {CALL!r}


def read_until(stop):
    with httpx.Client() as client, client.stream("POST", "{URL}", json=CALL) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and stop(json.loads(line[6:])):
                return


@pytest.mark.cassette("mcp.msgpack")
def test_until_the_response():
    read_until(lambda message: message.get("id") == 7)


@pytest.mark.cassette("mcp.msgpack")
def test_after_the_first_progress():
    read_until(lambda message: True)
"""


@pytest.fixture
def raw(pytester):
    pytester.makepyfile(test_raw=RAW_PROJECT)
    build.build_cassette(pytester.path / "cassettes" / "test_raw" / "mcp.msgpack", [tool_call()])
    return pytester


def test_a_client_that_stops_at_its_json_rpc_response_is_not_reported(raw):
    result = raw.runpytest(*QUIET, "--cassette-unused=fail", "-k", "until_the_response")

    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*never read to the end*")


def test_a_client_that_stops_before_its_response_is_reported_with_the_interaction(raw):
    result = raw.runpytest(*QUIET, "-k", "after_the_first_progress")

    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*UnusedInteractionsWarning: test_raw.py::test_after_the_first_progress: 1 replayed "
            f"response(s) were never read to the end: #0 POST {URL} (JSON-RPC tools/call): "
            "1 of 4 events read"
        ]
    )


def sent(read, body=CALL):
    return SentRequest(
        "POST",
        URL,
        0.0,
        replayed=True,
        interaction=0,
        status=200,
        body=body,
        deliveries=[0.01 * n for n in range(read)],
    )


@pytest.mark.parametrize(
    ("interaction", "read", "left"),
    [
        (tool_call(), 3, None),  # the JSON-RPC response came
        (tool_call(), 2, "2 of 4 events read"),
        (tool_call(body={**CALL, "id": 8}), 3, "3 of 4 events read"),  # another request's
        (tool_call([*EVENTS[:3], {"t": 40.0, "comments": ["ping"]}]), 3, None),
        (tool_call([*EVENTS[:2], {"t": 40.0, "event": "ping", "data": {"type": "ping"}}]), 2, None),
        (tool_call([*EVENTS[:2], {"t": 40.0, "comments": ["keep-alive"]}]), 2, None),
        (tool_call(EVENTS[:1] + [{"t": 40.0, "data": ""}] * 2), 1, None),
        (
            Interaction(
                RecordedRequest("POST", URL, Headers(), JsonBody(CALL)),
                RecordedResponse(202, Headers(), EmptyBody()),
            ),
            0,
            None,
        ),
    ],
    ids=[
        "answered",
        "before-the-answer",
        "another-id",
        "comment-after",
        "ping-after",
        "keep-alive-after",
        "empty-events-after",
        "202-with-no-body",
    ],
)
def test_what_counts_as_left_unread(interaction, read, left):
    assert left_unread(sent(read, interaction.request.body.value), interaction) == left
