"""Streams the response decides are timed, met as a user meets the plugin (issue 16).

One pytester project holds a test per client: httpx reading a GET event stream by lines, a
POST answered with an event stream though it asked for none, httpx-sse's ``connect_sse``, an
NDJSON stream by GET, a Gemini JSON array streamed without ``alt=sse``, and the clients of the
``mcp`` SDK and of fastmcp calling a tool that sends progress notifications over streamable
HTTP. None of the plain requests says it wants a stream.

The project runs twice: once recording (``--cassette-record=once``) against loopback servers
this test runs, then, with the servers stopped, replaying. Each of its tests writes what it
saw to a file: the texts, each piece's arrival on the virtual clock (``time.monotonic``) and on
the real one (``CLOCK_MONOTONIC``, the same clock in every process on Linux), and
``cassette.requests[...].deliveries``. The assertions compare those with what the servers
sent and when, in a way no load can break: each recorded stamp lies between the moment the
server began writing that piece and the moment the client had it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_toolnexus import load_cassette
from pytest_toolnexus._store.cassette import Interaction, JsonBody, NdjsonBody, SseBody
from tests.support.mcp_server import McpServer
from tests.support.realtime import assert_did_not_sleep
from tests.support.servers import Drip, LoopbackServer, RawRequest

pytest_plugins = ["pytester"]

# Five pieces this far apart span over two seconds: a replay that slept the gaps cannot be
# taken for one slowed by a busy machine (``assert_did_not_sleep``).
GAP = 0.55
PIECES = 5
GEMINI = "/v1beta/models/gemini-2.0-flash:streamGenerateContent"

PROJECT = """
import asyncio
import json
import os
import time

import httpx
import httpx_sse
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

STREAMS = os.environ["STREAMS_URL"]


def wall():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


class Timed:
    \"\"\"What the client saw, each piece at its time since just before the call.\"\"\"

    def __init__(self):
        self.texts, self.virtual, self.real = [], [], []
        self.start, self.before = time.monotonic(), wall()

    def saw(self, text):
        self.virtual.append(time.monotonic() - self.start)
        self.real.append(wall() - self.before)
        self.texts.append(text)


def report(name, cassette, sent, timed, **more):
    seen = {
        "texts": timed.texts,
        "virtual": timed.virtual,
        "real": timed.real,
        "before": timed.before,
        "method": sent.method,
        "replayed": sent.replayed,
        "complete": sent.complete,
        "deliveries": [d - sent.sent_at for d in sent.deliveries],
        "requests": len(cassette.requests),
        **more,
    }
    with open(os.environ["SEEN"], "a") as out:
        out.write(json.dumps({"test": name, **seen}) + "\\n")


def lines(method, path, **kwargs):
    timed = Timed()
    with httpx.Client(timeout=30) as client:
        with client.stream(method, STREAMS + path, **kwargs) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line:
                    timed.saw(line)
    return timed


@pytest.mark.cassette
def test_get_event_stream_by_lines(cassette):
    timed = lines("GET", "/sse")
    report("get_sse", cassette, cassette.requests[0], timed)


@pytest.mark.cassette
def test_post_event_stream_without_a_stream_flag(cassette):
    timed = lines("POST", "/v1/run", json={"task": "go"})
    report("post_sse", cassette, cassette.requests[0], timed)


@pytest.mark.cassette
def test_httpx_sse_connect_sse(cassette):
    timed = Timed()
    with httpx.Client(timeout=30) as client:
        with httpx_sse.connect_sse(client, "GET", STREAMS + "/events") as source:
            for event in source.iter_sse():
                timed.saw(event.data)
    report("connect_sse", cassette, cassette.requests[0], timed)


@pytest.mark.cassette
def test_ndjson_by_get(cassette):
    timed = lines("GET", "/ndjson")
    report("ndjson", cassette, cassette.requests[0], timed)


@pytest.mark.cassette
def test_gemini_json_array_stream(cassette):
    # Each element is one object: the client has element n when the n-th "}" has arrived,
    # however the bytes are cut.
    timed, buffer = Timed(), b""
    with httpx.Client(timeout=30) as client:
        path = os.environ["GEMINI_PATH"]
        with client.stream("POST", STREAMS + path, json={"contents": []}) as response:
            for chunk in response.iter_bytes():
                buffer += chunk
                while buffer.count(b"}") > len(timed.texts):
                    timed.saw(str(len(timed.texts)))
    report("gemini", cassette, cassette.requests[0], timed, body=buffer.decode())


def progress_reporter(timed):
    async def progress(value, total, message):
        timed.saw(str(value))

    return progress


async def count(session, timed):
    result = await session.call_tool("count", {"n": 5}, progress_callback=progress_reporter(timed))
    return result.content[0].text


@pytest.mark.cassette
def test_mcp_streamable_http_progress(cassette):
    async def call():
        async with streamable_http_client(os.environ["MCP_HTTP_URL"]) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                timed = Timed()
                return timed, await count(session, timed)

    timed, text = asyncio.run(call())
    (sent,) = [
        r for r in cassette.requests
        if isinstance(r.body, dict) and r.body.get("method") == "tools/call"
    ]
    report("mcp_http", cassette, sent, timed, result=text)


@pytest.mark.cassette
def test_fastmcp_client_progress(cassette):
    from fastmcp import Client

    async def call():
        async with Client(os.environ["FASTMCP_URL"]) as client:
            timed = Timed()
            result = await client.call_tool(
                "count", {"n": 5}, progress_handler=progress_reporter(timed)
            )
            return timed, result.content[0].text

    timed, text = asyncio.run(call())
    (sent,) = [
        r for r in cassette.requests
        if isinstance(r.body, dict) and r.body.get("method") == "tools/call"
    ]
    report("fastmcp", cassette, sent, timed, result=text)
"""

NAMES = {
    "get_sse": "test_get_event_stream_by_lines",
    "post_sse": "test_post_event_stream_without_a_stream_flag",
    "connect_sse": "test_httpx_sse_connect_sse",
    "ndjson": "test_ndjson_by_get",
    "gemini": "test_gemini_json_array_stream",
    "mcp_http": "test_mcp_streamable_http_progress",
    "fastmcp": "test_fastmcp_client_progress",
}
ROUNDING = 1e-6  # stamps are kept to the microsecond


def _sse(n: int) -> bytes:
    return b'data: {"n":%d}\n\n' % n


DRIPS: dict[str, Callable[[], Drip]] = {
    "/sse": lambda: Drip([_sse(n) for n in range(PIECES)], interval=GAP),
    "/v1/run": lambda: Drip([_sse(n) for n in range(PIECES)], interval=GAP),
    "/events": lambda: Drip([_sse(n) for n in range(PIECES)], interval=GAP),
    "/ndjson": lambda: Drip(
        [b'{"n":%d}\n' % n for n in range(PIECES)],
        interval=GAP,
        headers=[("Content-Type", "application/x-ndjson")],
    ),
    # Gemini without alt=sse: one JSON array, an element per chunk, the bracket with the last.
    GEMINI: lambda: Drip(
        [
            b'[{"n":0}',
            *(b',{"n":%d}' % n for n in range(1, PIECES - 1)),
            b',{"n":%d}]' % (PIECES - 1),
        ],
        interval=GAP,
        headers=[("Content-Type", "application/json; charset=UTF-8")],
    ),
}


class Router:
    """A handler that serves each path from its own :class:`Drip`, made on its first request."""

    def __init__(self) -> None:
        self.drips: dict[str, Drip] = {}

    def __call__(self, request: RawRequest, conn: Any) -> None:
        path = request.target.split("?", 1)[0]
        assert path not in self.drips, f"{path} was requested twice"
        self.drips[path] = DRIPS[path]()
        self.drips[path](request, conn)

    def stop(self) -> None:
        for drip in self.drips.values():
            drip.stop()


@dataclass
class Runs:
    """What each test of the project saw while recording and while replaying, and what the
    servers did."""

    recorded: dict[str, dict[str, Any]]
    replayed: dict[str, dict[str, Any]]
    streams: LoopbackServer
    router: Router
    mcp_http: McpServer
    fastmcp: McpServer
    cassettes: Path

    def interaction(self, case: str, method: str | None = None) -> Interaction:
        """The one interaction of ``case``'s cassette (of ``method``, for MCP)."""
        found = load_cassette(self.cassettes / f"{NAMES[case]}.msgpack").interactions
        if method is not None:
            found = [i for i in found if _rpc_method(i.request.body) == method]
        (interaction,) = found
        return interaction


def _rpc_method(body: Any) -> str | None:
    value = getattr(body, "value", None)
    return value.get("method") if isinstance(value, dict) else None


def _seen(path: Path) -> dict[str, dict[str, Any]]:
    return {entry["test"]: entry for entry in map(json.loads, path.read_text().splitlines())}


def record_then_replay(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Runs:
    """Record the project against the servers, stop them all, then replay it offline."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("GEMINI_PATH", GEMINI)
    pytester.makepyfile(test_streams=PROJECT)
    router = Router()
    with (
        LoopbackServer(router) as streams,
        McpServer(gap=GAP) as mcp_http,
        McpServer(gap=GAP) as fastmcp,
    ):
        monkeypatch.setenv("STREAMS_URL", streams.origin)
        monkeypatch.setenv("MCP_HTTP_URL", mcp_http.url)
        monkeypatch.setenv("FASTMCP_URL", fastmcp.url)
        monkeypatch.setenv("SEEN", str(pytester.path / "recorded.jsonl"))
        _run(pytester, "--cassette-record=once", written=len(NAMES))
    monkeypatch.setenv("SEEN", str(pytester.path / "replayed.jsonl"))
    _run(pytester, written=0)
    return Runs(
        recorded=_seen(pytester.path / "recorded.jsonl"),
        replayed=_seen(pytester.path / "replayed.jsonl"),
        streams=streams,
        router=router,
        mcp_http=mcp_http,
        fastmcp=fastmcp,
        cassettes=pytester.path / "cassettes" / "test_streams",
    )


def _run(pytester: pytest.Pytester, *args: str, written: int) -> None:
    """Run the project's tests in a fresh interpreter; all must pass."""
    result = pytester.runpytest_subprocess("-p", "no:randomly", *args, timeout=300)
    result.assert_outcomes(passed=len(NAMES))
    used, replayed = len(NAMES), len(NAMES) - written
    summary = f"{used} used, {replayed} replayed, {written} recorded, {written} written"
    result.stdout.fnmatch_lines([f"*cassettes: {summary}*"])


def assert_timed(
    case: str,
    stamps: Sequence[float],
    began: Sequence[float],
    since: float,
    live: dict[str, Any],
    again: dict[str, Any],
    delivered: Sequence[int] | None = None,
) -> None:
    """The recorded ``stamps`` (seconds from the request) kept the server's cadence, and the
    replay kept the stamps.

    ``began`` holds when the server began writing each piece and ``since`` a reading at or
    after the request was sent (both on CLOCK_MONOTONIC); ``live`` and ``again`` are what the
    project's test saw recording and replaying; ``delivered`` picks the deliveries that are
    these pieces (default: all of them).
    """
    picked = delivered if delivered is not None else range(len(stamps))
    had = live["real"]  # seconds since a reading just before the request was sent
    assert len(stamps) == len(began) == len(had) == PIECES, case
    # Recording: the request went out between ``before`` and ``since``, so on any machine,
    # however loaded: ``began - since <= stamp <= had``.
    outside = [
        (n, round(b - since, 4), round(t, 4), round(h, 4))
        for n, (b, t, h) in enumerate(zip(began, stamps, had, strict=True))
        if not b - since - ROUNDING <= t <= h + ROUNDING
    ]
    assert outside == [], f"{case}: stamps outside (server began writing, client had it): {outside}"
    # The client had the first piece while the server still held the last one back, seconds
    # later: a recorder that buffered the stream would hand over nothing until the end.
    assert live["before"] + had[0] < began[-1], case
    # Recording handed each piece on as it came: the session saw it delivered at its stamp.
    live_deliveries = [live["deliveries"][n] for n in picked]
    assert all(d >= t - ROUNDING for d, t in zip(live_deliveries, stamps, strict=True)), case

    # Replaying, offline: every piece was delivered at its recorded offset on the clock ...
    assert (live["replayed"], again["replayed"]) == (False, True), case
    assert again["texts"] == live["texts"], case
    assert len(again["deliveries"]) == len(live["deliveries"]), case
    replayed = [again["deliveries"][n] for n in picked]
    assert replayed == pytest.approx(list(stamps), abs=1e-3), case
    # ... the client saw each piece then, on its (virtual) time.monotonic ...
    seen = again["virtual"]
    assert [t - seen[0] for t in seen] == pytest.approx([t - stamps[0] for t in stamps], abs=1e-3)
    # ... and the replay did not sleep the seconds of gaps.
    assert_did_not_sleep(again["real"][-1], stamps[-1], what=f"replaying {case}")


def _drip_case(runs: Runs, case: str, path: str) -> tuple[list[float], Any]:
    """Check one loopback-stream case against its drip; its stamps and the stored body."""
    drip = runs.router.drips[path]
    (request,) = [r for r in runs.streams.requests if r.target.split("?", 1)[0] == path]
    interaction = runs.interaction(case)
    body = interaction.response.body
    if isinstance(body, SseBody):
        stamps = [event["t"] / 1000 for event in body.events]
    elif isinstance(body, NdjsonBody):
        stamps = [line["t"] / 1000 for line in body.lines]
    else:
        assert isinstance(body, JsonBody), (case, body)
        assert body.times is not None, f"{case}: the array was stored without its times"
        stamps = [t / 1000 for t in body.times]
    live, again = runs.recorded[case], runs.replayed[case]
    assert live["complete"]
    assert again["complete"], case
    assert_timed(case, stamps, drip.sent_at, request.received_at, live, again)
    return stamps, body


def test_every_stream_the_response_names_is_recorded_with_its_timing_and_replayed_offline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = record_then_replay(pytester, monkeypatch)

    # Given: each test wrote its cassette, and the plain httpx requests gave no hint of a
    # stream (httpx-sse sends ``Accept: text/event-stream``; Gemini's URL names a stream).
    assert sorted(p.stem for p in runs.cassettes.glob("*.msgpack")) == sorted(NAMES.values())
    plain = [r for r in runs.streams.requests if r.target in ("/sse", "/v1/run", "/ndjson")]
    assert len(plain) == 3
    for request in plain:
        assert b"stream" not in request.body
        assert request.header("accept") == "*/*", request.target

    sse_lines = [f'data: {{"n":{n}}}' for n in range(PIECES)]
    numbers = [{"n": n} for n in range(PIECES)]
    for case, path in (("get_sse", "/sse"), ("post_sse", "/v1/run"), ("connect_sse", "/events")):
        _, body = _drip_case(runs, case, path)
        assert isinstance(body, SseBody), case
        assert [event["data"] for event in body.events] == numbers, case
        texts = runs.recorded[case]["texts"]
        assert texts == (
            sse_lines
            if case != "connect_sse"
            else [json.dumps(n, separators=(",", ":")) for n in numbers]
        )

    _, body = _drip_case(runs, "ndjson", "/ndjson")
    assert isinstance(body, NdjsonBody)
    assert [line["value"] for line in body.lines] == numbers
    assert [json.loads(line) for line in runs.recorded["ndjson"]["texts"]] == numbers

    _, body = _drip_case(runs, "gemini", GEMINI)
    assert isinstance(body, JsonBody)
    assert body.value == numbers
    assert json.loads(runs.recorded["gemini"]["body"]) == numbers
    assert runs.replayed["gemini"]["body"] == runs.recorded["gemini"]["body"]

    _mcp_case(runs, "mcp_http", runs.mcp_http)
    _mcp_case(runs, "fastmcp", runs.fastmcp)


def _mcp_case(runs: Runs, case: str, server: McpServer) -> None:
    """The MCP client's tool call: its progress notifications kept their times."""
    live, again = runs.recorded[case], runs.replayed[case]
    assert live["result"] == again["result"] == f"counted {PIECES}", case
    assert live["texts"] == [str(float(n)) for n in range(1, PIECES + 1)], case
    # Streamable HTTP: the tools/call POST is answered with an event stream, and the tool
    # started after that request was sent.
    interaction = runs.interaction(case, "tools/call")
    assert live["method"] == "POST"
    (started,) = server.started_at
    body = interaction.response.body
    assert interaction.response.headers["content-type"].startswith("text/event-stream")
    assert isinstance(body, SseBody), case
    data = [event["data"] for event in body.events]
    progress = [
        n
        for n, d in enumerate(data)
        if isinstance(d, dict) and d.get("method") == "notifications/progress"
    ]
    assert progress == list(range(PIECES)), data
    assert data[-1]["result"]["content"][0]["text"] == live["result"]
    stamps = [body.events[n]["t"] / 1000 for n in progress]
    assert_timed(case, stamps, server.progress_at, started, live, again, delivered=progress)
