"""Benchmark 4: recorded time replayed as virtual time, through the real openai SDK.

* A recorded one-second stream: 20 chat chunks at t = 50, 100, ..., 1000 ms, replayed inside
  ``use_cassette`` (the virtual clock installed) to ``openai.OpenAI`` over an ``httpx2.Client``
  on ``session.http_transport()``. Each delta's arrival is read with ``time.monotonic()``, which
  the clock serves; wall time is read on the real clock.
* A 429 with ``Retry-After: 2`` then a 200: the SDK sleeps as told, on the virtual clock.
  vcrpy replays the same pair (with ``Retry-After: 1``, to keep the run short) and the SDK
  sleeps for real.
"""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import vcr
from _common import Table, median, ms, now, verdict
from _fixtures import CHAT_URL, MODEL, chat_pairs
from vcr.persisters.filesystem import FilesystemPersister
from vcr.request import Request as VcrRequest
from vcr.serializers import yamlserializer
from vcr.stubs.httpx_stubs import _serialize_response

from pytest_toolnexus import (
    Cassette,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    use_cassette,
)
from pytest_toolnexus._store.cassette import JsonBody, SseBody, sse_event_doc
from pytest_toolnexus._store.streams import SseEvent

EVENTS = 20
STEP_MS = 50.0
GOAL_WALL_MS = 10.0
REPEATS = 15
VCRPY_REPEATS = 2
MESSAGES = [{"role": "user", "content": "Count to twenty, one word per chunk."}]
API_KEY = "bench-key-not-a-secret"
REQUEST_HEADERS = [("content-type", "application/json"), ("accept", "application/json")]


def _chunk(i: int) -> dict[str, Any]:
    delta: dict[str, Any] = {"content": f" {i + 1}"}
    if i == 0:
        delta = {"role": "assistant", "content": "1"}
    return {
        "id": "chatcmpl-AX9vQbRkT3mZ8pL2nC4dE6fG7hJ1",
        "object": "chat.completion.chunk",
        "created": 1732000000,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_0ba0d124f1",
        "choices": [
            {
                "index": 0,
                "delta": delta,
                "logprobs": None,
                "finish_reason": "stop" if i == EVENTS - 1 else None,
            }
        ],
    }


def recorded_offsets() -> list[float]:
    return [STEP_MS * (i + 1) / 1000 for i in range(EVENTS)]


def write_stream_cassette(path: Path) -> None:
    events = [
        sse_event_doc(STEP_MS * (i + 1), SseEvent(data=json.dumps(_chunk(i))))
        for i in range(EVENTS)
    ]
    events.append(sse_event_doc(STEP_MS * EVENTS, SseEvent(data="[DONE]")))
    request = RecordedRequest(
        "POST",
        CHAT_URL,
        Headers(REQUEST_HEADERS),
        JsonBody({"messages": MESSAGES, "model": MODEL, "stream": True}),
    )
    response = RecordedResponse(
        200,
        Headers([("content-type", "text/event-stream; charset=utf-8")]),
        SseBody(events),
        t_headers=40.0,
        t_end=STEP_MS * EVENTS + 1.0,
    )
    Cassette(path, [Interaction(request, response)], {"clock_epoch": 1732000000.0}).save()


def _error_body() -> dict[str, Any]:
    return {
        "error": {
            "message": "Rate limit reached for gpt-4o-mini. Please try again in 2s.",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }


def write_retry_cassette(path: Path, retry_after: str) -> None:
    answer = chat_pairs(1)[0].response
    request = RecordedRequest(
        "POST", CHAT_URL, Headers(REQUEST_HEADERS), JsonBody({"messages": MESSAGES, "model": MODEL})
    )
    limited = RecordedResponse(
        429,
        Headers([("content-type", "application/json"), ("retry-after", retry_after)]),
        JsonBody(_error_body()),
        t_headers=80.0,
        t_end=81.0,
    )
    ok = RecordedResponse(
        200,
        Headers([("content-type", "application/json")]),
        JsonBody(answer),
        t_headers=420.0,
        t_end=421.0,
    )
    Cassette(
        path,
        [Interaction(request, limited), Interaction(request, ok)],
        {"clock_epoch": 1732000000.0},
    ).save()


def write_vcrpy_retry(path: Path, retry_after: str) -> None:
    body = json.dumps({"messages": MESSAGES, "model": MODEL}).encode()
    request = VcrRequest("POST", CHAT_URL, body, dict(REQUEST_HEADERS))
    limited = httpx.Response(429, headers={"retry-after": retry_after}, json=_error_body())
    ok = httpx.Response(200, json=chat_pairs(1)[0].response)
    FilesystemPersister.save_cassette(
        path,
        {
            "requests": [request, request],
            "responses": [
                _serialize_response(limited, limited.read()),
                _serialize_response(ok, ok.read()),
            ],
        },
        serializer=yamlserializer,
    )


def _client(transport: Any, retries: int) -> openai.OpenAI:
    return openai.OpenAI(
        api_key=API_KEY,
        http_client=httpx2.Client(transport=transport),
        max_retries=retries,
    )


def _stream_once(path: Path) -> dict[str, Any]:
    block_start = now()
    with use_cassette(path) as cassette:
        client = _client(cassette.http_transport(), retries=0)
        sent = time.monotonic()  # virtual: the clock is installed
        start = now()
        stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
        arrivals = []
        text = []
        for chunk in stream:
            arrivals.append(time.monotonic() - sent)
            text.append(chunk.choices[0].delta.content or "")
        wall = now() - start
        client.close()
    block = now() - block_start
    assert len(arrivals) == EVENTS, arrivals
    assert "".join(text).split() == [str(i + 1) for i in range(EVENTS)], text
    return {"wall": wall, "block": block, "arrivals": arrivals}


def _wire_chunks() -> list[bytes]:
    chunks = [f"data: {json.dumps(_chunk(i))}\n\n".encode() for i in range(EVENTS)]
    return [*chunks, b"data: [DONE]\n\n"]


def _sdk_floor_once() -> float:
    """The same stream from an httpx2 MockTransport, one chunk per event: what the SDK costs."""
    chunks = _wire_chunks()

    def handler(request: Any) -> Any:
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=iter(chunks)
        )

    client = _client(httpx2.MockTransport(handler), retries=0)
    start = now()
    stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
    count = sum(1 for _ in stream)
    wall = now() - start
    client.close()
    assert count == EVENTS, count
    return wall


def _retry_once(path: Path) -> dict[str, Any]:
    with use_cassette(path) as cassette:
        client = _client(cassette.http_transport(), retries=2)
        before = time.monotonic()
        start = now()
        reply = client.chat.completions.create(model=MODEL, messages=MESSAGES)
        wall = now() - start
        virtual = time.monotonic() - before
        client.close()
        statuses = [r.status for r in cassette.requests]
        sleeps = [s.duration for s in cassette.sleeps]
    assert reply.choices[0].message.content, reply
    assert statuses == [429, 200], statuses
    return {"wall": wall, "virtual": virtual, "sleeps": sleeps}


def _vcrpy_retry_once(path: Path) -> float:
    recorder = vcr.VCR(record_mode="none", match_on=("method", "uri", "body"))
    with recorder.use_cassette(str(path)) as cassette:
        client = _client(httpx2.HTTPTransport(), retries=2)
        start = now()
        reply = client.chat.completions.create(model=MODEL, messages=MESSAGES)
        wall = now() - start
        client.close()
        assert cassette.play_count == 2, cassette.play_count
    assert reply.choices[0].message.content, reply
    return wall


def run(work: Path) -> tuple[list[Table], dict[str, float]]:
    stream_path = work / "stream-1s.msgpack"
    write_stream_cassette(stream_path)
    _stream_once(stream_path)  # warm-up: the SDK builds its models on first use
    _sdk_floor_once()
    gc.collect()
    runs = []
    floors = []
    for _ in range(REPEATS):  # interleaved, so load from other processes falls on both alike
        runs.append(_stream_once(stream_path))
        floors.append(_sdk_floor_once())
    sdk_floor = median(floors)
    wall = median([r["wall"] for r in runs])
    block = median([r["block"] for r in runs])
    arrivals = runs[0]["arrivals"]
    expected = recorded_offsets()
    error = max(
        abs(got - want) for r in runs for got, want in zip(r["arrivals"], expected, strict=True)
    )
    spread = arrivals[-1] - arrivals[0]

    table = Table(
        f"4a. A recorded 1 s stream ({EVENTS} chunks, t = 50 ... 1000 ms) replayed through the "
        f"openai SDK on the virtual clock (median of {REPEATS})",
        ["figure", "value", "goal", ""],
    )
    table.add(
        "virtual time, request sent -> last delta",
        f"{arrivals[-1]:.3f} s",
        "1.000 s",
        verdict(abs(arrivals[-1] - 1.0) < 1e-6),
    )
    table.add(
        "virtual spread, first delta -> last delta",
        f"{spread:.3f} s",
        "0.95-1.0 s",
        verdict(0.95 - 1e-9 <= spread <= 1.0 + 1e-9),
    )
    table.add(
        f"max |arrival offset - recorded offset|, all {EVENTS} deltas x {REPEATS} runs",
        f"{error * 1e3:.3f} ms",
        "0 ms",
        verdict(error < 1e-6),
    )
    table.add(
        "wall time, create() -> last delta",
        f"{ms(wall)} ms",
        f"< {GOAL_WALL_MS:.0f} ms",
        verdict(wall * 1e3 < GOAL_WALL_MS),
    )
    table.add(
        "  as a share of the recorded second",
        f"{wall * 100:.2f} %",
        "< 1 %",
        verdict(wall < 0.01),
    )
    table.add(
        "  the same stream from an httpx2 MockTransport (the SDK's own cost)",
        f"{ms(sdk_floor)} ms",
        "",
        "info",
    )
    table.add(
        "  toolnexus's share (wall time - MockTransport)",
        f"{ms(wall - sdk_floor)} ms",
        "",
        "info",
    )
    table.add(
        "wall time, whole use_cassette block (load, clock, client, stream, close)",
        f"{ms(block)} ms",
        "",
        "info",
    )
    table.note(
        "arrival offsets (s): " + ", ".join(f"{a:.3f}" for a in arrivals[:4]) + ", ..., "
        f"{arrivals[-1]:.3f}"
    )

    retry_path = work / "retry-2s.msgpack"
    write_retry_cassette(retry_path, "2")
    _retry_once(retry_path)
    gc.collect()
    retries = [_retry_once(retry_path) for _ in range(REPEATS)]
    r_wall = median([r["wall"] for r in retries])
    r_virtual = median([r["virtual"] for r in retries])
    sleeps = retries[0]["sleeps"]

    vcr_path = work / "retry-1s.yaml"
    write_vcrpy_retry(vcr_path, "1")
    vcr_wall = median([_vcrpy_retry_once(vcr_path) for _ in range(VCRPY_REPEATS)])

    retry = Table(
        "4b. 429 (Retry-After) then 200, replayed through the openai SDK (max_retries=2)",
        ["replay", "Retry-After", "sleeps seen", "virtual elapsed", "wall time", "goal", ""],
    )
    retry.add(
        f"toolnexus, virtual clock (median of {REPEATS})",
        "2",
        ", ".join(f"{s:.1f} s" for s in sleeps),
        f"{r_virtual:.3f} s",
        f"{ms(r_wall)} ms",
        f"< {GOAL_WALL_MS:.0f} ms",
        verdict(r_wall * 1e3 < GOAL_WALL_MS and sleeps == [2.0]),
    )
    retry.add(
        f"vcrpy (median of {VCRPY_REPEATS})",
        "1",
        "real sleep",
        "",
        f"{ms(vcr_wall)} ms",
        "",
        "info",
    )
    retry.note(
        f"toolnexus waits the advertised 2 s in {r_wall * 1e3:.2f} ms of wall time; vcrpy waits "
        f"the full {vcr_wall:.2f} s for a 1 s Retry-After ({vcr_wall / r_wall:,.0f}x longer "
        "for half the wait)."
    )
    figures = {"stream_wall_ms": wall * 1e3, "arrival_error_ms": error * 1e3}
    return [table, retry], figures


if __name__ == "__main__":
    from _common import run_alone

    run_alone(run)
