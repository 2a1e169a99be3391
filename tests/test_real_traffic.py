"""Verified against real traffic: the unmodified official SDKs, recorded against a loopback
emulator that streams with a real cadence, then replayed with the server stopped.

Every case follows the same three steps:

1. record with the real SDK through ``use_cassette(path, record="once")`` (real time) while the
   emulator sends one content delta every ``DELAY`` seconds;
2. stop the emulator;
3. replay with ``use_cassette(path, record="none")`` on the virtual clock (and once on the
   real clock), with ``socket.socket.connect`` refusing every connection.

and checks that

- the SDK-level results (text, tool calls, usage, finish and stop reasons, in fact every parsed
  object) are identical in the recording run and in the replay;
- each event offset stored in the cassette matches the moment the emulator flushed that event,
  once the request's trip to the emulator is taken out (``check_recorded_offsets``);
- the recording run itself streamed: the SDK saw the deltas spread over time as they were sent;
- in virtual replay the SDK sees each delta at its recorded offset (``time.monotonic()`` is the
  virtual clock there) within 1 ms, and the whole replay takes well under a second of wall time.

Wall time is read with ``wall``, bound at import, which the virtual clock does not patch.
Each recording is preceded by an undelayed warm-up exchange (see ``warm_up``) and passes its
own ``LiveTransport`` (see ``send_times``).
"""

import contextlib
import json
import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter as wall
from typing import Any

import anthropic
import httpx2
import ollama
import openai
import pytest

from pytest_toolnexus import (
    AsyncLiveTransport,
    CassetteSession,
    LiveTransport,
    assert_attempts,
    assert_waits,
    load_cassette,
    use_cassette,
)
from pytest_toolnexus._cassette import JsonBody, NdjsonBody, SseBody
from tests.support.emulator import Emulator, ResponseRecord

EVENTS = 5
DELAY = 0.04
EMITTED_SPREAD = DELAY * (EVENTS - 1)
# Live recording vs the emulator's flush times. Each event: under DELAY, so a stored time is
# nearer its own event's flush than any other delta's; the median of a stream: tight. (Single
# events reach a client thread up to ~30 ms late on a loaded 2-core machine.)
OFFSET_TOLERANCE = 0.035
MEDIAN_OFFSET_TOLERANCE = 0.010
MIN_RECORDED_SPREAD = 0.6  # of the emitted spread, as seen by the SDK while recording
VIRTUAL_TOLERANCE = 0.001  # SDK-level arrival vs recorded offset, virtual replay
VIRTUAL_WALL_LIMIT = 0.5  # seconds of wall time for a whole virtual replay
REAL_LATE_TOLERANCE = 0.06  # how late an event may reach the SDK in a real-time replay

MESSAGES = [{"role": "user", "content": "Say something short."}]
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The forecast for a city.",
            "parameters": WEATHER_PARAMETERS,
        },
    }
]
ANTHROPIC_TOOLS = [
    {
        "name": "get_weather",
        "description": "The forecast for a city.",
        "input_schema": WEATHER_PARAMETERS,
    }
]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@dataclass
class Run:
    """What the code under test saw: comparable SDK results, and timings on ``time.monotonic``.

    ``arrivals`` are the seconds from just before the (streaming) call to each content delta
    reaching the SDK caller; ``durations`` the seconds each call took, in order.
    """

    result: Any
    arrivals: list[float] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)


Scenario = Callable[[CassetteSession, str], Run]


@dataclass
class Recording:
    path: Any
    run: Run
    responses: list[ResponseRecord]
    base_url: str
    wall_seconds: float
    sends: list[float]
    """When each recorded request was sent, on the process's monotonic clock."""


def send_times(session: CassetteSession) -> list[float]:
    """The monotonic time each request of a recording session was sent.

    A recording session runs on the real clock, whose ``now()`` is ``time.perf_counter``:
    the clock the emulator's ``time.monotonic`` stamps are read on (checked below). The
    recordings pass their own live transport: a session that builds its default one does so
    after noting the first request's ``sent_at`` (0.1-0.3 s for an ``httpx.Client`` on a busy
    machine), so that ``sent_at`` would precede the real send by that much.
    """
    origin = session.clock.now() - session.elapsed
    return [origin + sent.sent_at for sent in session.requests]


# -- the three steps --------------------------------------------------------------------------


def warm_up(emu: Emulator, tmp_path, exchange) -> None:
    """Run the exchange once, undelayed, through a throwaway cassette, then forget it.

    The recorder stamps each event when the client pulls it (it never reads ahead of the
    client), so the SDK's one-off costs on first use in a process (building its pydantic
    models: 50-250 ms for the Responses and Anthropic stream events) would show up in the
    stored offsets of the first recording. Warming up keeps this test about the library.
    """
    emu.configure(delay=0)
    with use_cassette(tmp_path / "warm-up.msgpack", record="all") as session:
        exchange(session)
    assert emu.wait_idle()
    emu.configure(delay=DELAY)
    emu.clear()


def record(tmp_path, scenario: Scenario, *, prepare=None, **emulator_options) -> Recording:
    """Step 1 and 2: record ``scenario`` against a live emulator, then stop the emulator."""
    path = tmp_path / "x.msgpack"
    assert not path.exists()
    with Emulator(events=EVENTS, delay=DELAY, **emulator_options) as emu:
        warm_up(emu, tmp_path, lambda session: scenario(session, emu.base_url))
        if prepare is not None:
            prepare(emu)
        start = wall()
        with LiveTransport() as live, use_cassette(path, record="once", live=live) as session:
            assert session.timing == "virtual"
            run = scenario(session, emu.base_url)
            sends = send_times(session)
        seconds = wall() - start
        assert emu.wait_idle()
        responses = emu.responses
        base_url = emu.base_url
    assert not emu.running
    assert session.written
    assert all(not r.aborted for r in responses)
    return Recording(path, run, responses, base_url, seconds, sends)


@contextlib.contextmanager
def no_network(monkeypatch):
    """Any attempt to connect a socket fails the test (the emulator is stopped anyway)."""

    def refuse(self, address, *args):
        raise AssertionError(f"replay tried to open a connection to {address!r}")

    with monkeypatch.context() as patch:
        patch.setattr(socket.socket, "connect", refuse)
        patch.setattr(socket.socket, "connect_ex", refuse)
        yield


def replay(recording: Recording, scenario: Scenario, monkeypatch, *, timing="virtual"):
    """Step 3: replay with the server stopped and sockets refused; returns the run, the
    session and the wall time it took."""
    with no_network(monkeypatch):
        start = wall()
        with use_cassette(
            recording.path, record="none", timing=timing, on_unused="error"
        ) as session:
            run = scenario(session, recording.base_url)
        seconds = wall() - start
    assert all(sent.replayed for sent in session.requests)
    assert not session.written
    return run, session, seconds


# -- checks -----------------------------------------------------------------------------------


def stored_items(response) -> list:
    body = response.body
    if isinstance(body, SseBody):
        return list(body.events)
    if isinstance(body, NdjsonBody):
        return list(body.lines)
    raise AssertionError(f"expected a stored stream, found {type(body).__name__}")


def check_recorded_offsets(recording: Recording) -> None:
    """Every stored offset matches the moment the emulator flushed the same event.

    A stored offset counts from the moment the client sent the request, the emulator's
    ``offsets`` from the moment it had read it; the two differ by the request's trip, which on
    a loaded machine (a fresh connection, a new server thread) alone can exceed 20 ms. So both
    are put on the one monotonic clock they were read on: send time + stored offset is when the
    event reached the client, which must be within ``OFFSET_TOLERANCE`` of the emulator's flush.
    """
    same_clock = {time.get_clock_info(n).implementation for n in ("monotonic", "perf_counter")}
    assert len(same_clock) == 1, same_clock
    cassette = load_cassette(recording.path)
    assert len(cassette.interactions) == len(recording.responses) == len(recording.sends)
    for interaction, sent, sent_at in zip(
        cassette.interactions, recording.responses, recording.sends, strict=True
    ):
        response = interaction.response
        assert response is not None
        assert response.status == sent.status
        assert sent_at <= sent.received_at
        if sent.streamed:
            # Every event the emulator sent was stored. (``complete`` may be False: the sync
            # OpenAI SDK closes the stream at ``[DONE]``, before reading the end of the body.)
            items = stored_items(response)
            assert len(items) == len(sent.events), "one stored item per event sent"
            stored = [item["t"] / 1000 for item in items]
        else:
            assert response.complete
            assert len(sent.events) == 1
            stored = [response.t_end / 1000]
        # Stored offset minus the emulator's is the request's trip to the emulator, plus how
        # long the event took to reach the client. The emulator stamps an event once its write
        # returned, so the client may see it a little before that stamp (the server thread
        # can be preempted in between): the window is two-sided, and narrower than DELAY.
        trip = sent.received_at - sent_at
        lags = []
        for number, (offset, flushed, event) in enumerate(
            zip(stored, sent.offsets, sent.events, strict=True)
        ):
            lag = offset - trip - flushed  # == sent_at + offset - event.sent_at
            lags.append(abs(lag))
            assert abs(lag) <= OFFSET_TOLERANCE, (
                f"interaction {sent.request_index} event {number} ({event.name}) is stored at "
                f"{offset * 1000:.1f} ms, flushed at {flushed * 1000:.1f} ms after a trip of "
                f"{trip * 1000:.1f} ms: it reached the client {lag * 1000:.1f} ms after it left"
            )
        if sent.streamed:
            assert statistics.median(lags) <= MEDIAN_OFFSET_TOLERANCE, lags


def delta_offsets(recording: Recording, interaction: int = 0) -> list[float]:
    """The stored offsets, in seconds, of the content-delta events of one interaction."""
    response = load_cassette(recording.path).interactions[interaction].response
    sent = recording.responses[interaction]
    items = stored_items(response)
    return [
        item["t"] / 1000 for item, ev in zip(items, sent.events, strict=True) if ev.kind == "delta"
    ]


def check_recorded_incrementally(recording: Recording, interaction: int = 0) -> None:
    """While recording, the SDK saw the deltas spread out as the emulator sent them."""
    flushed = recording.responses[interaction].delta_offsets
    assert len(flushed) == EVENTS
    emitted = flushed[-1] - flushed[0]
    assert emitted >= 0.95 * EMITTED_SPREAD
    arrivals = recording.run.arrivals
    assert len(arrivals) == EVENTS
    assert arrivals == sorted(arrivals)
    assert arrivals[-1] - arrivals[0] >= MIN_RECORDED_SPREAD * emitted, (
        f"the SDK saw the deltas within {arrivals[-1] - arrivals[0]:.3f} s while recording, "
        f"the emulator sent them over {emitted:.3f} s"
    )


def check_virtual_arrivals(run: Run, expected: list[float]) -> None:
    assert run.arrivals == pytest.approx(expected, abs=VIRTUAL_TOLERANCE)


def check_streaming_case(recording: Recording, scenario: Scenario, monkeypatch) -> Run:
    check_recorded_offsets(recording)
    check_recorded_incrementally(recording)
    run, session, seconds = replay(recording, scenario, monkeypatch)
    assert run.result == recording.run.result
    check_virtual_arrivals(run, delta_offsets(recording))
    assert seconds < VIRTUAL_WALL_LIMIT
    (sent,) = session.requests
    assert len(sent.deliveries) == len(recording.responses[0].events)
    return run


def check_fixed_case(recording: Recording, scenario: Scenario, monkeypatch) -> Run:
    """A non-streaming case: each call takes, on the virtual clock, its recorded time."""
    check_recorded_offsets(recording)
    held_back = DELAY * (EVENTS - 1)
    for duration in recording.run.durations:
        assert duration >= held_back - 0.005  # the emulator held the body back that long
    run, _, seconds = replay(recording, scenario, monkeypatch)
    assert run.result == recording.run.result
    ends = [i.response.t_end / 1000 for i in load_cassette(recording.path).interactions]
    assert run.durations == pytest.approx(ends, abs=VIRTUAL_TOLERANCE)
    assert seconds < VIRTUAL_WALL_LIMIT
    return run


# -- clients ----------------------------------------------------------------------------------


def openai_client(session, base_url, **options):
    return openai.OpenAI(
        api_key="sk-test",
        base_url=base_url + "/v1",
        max_retries=options.pop("max_retries", 0),
        http_client=httpx2.Client(transport=session.http_transport()),
        **options,
    )


def anthropic_client(session, base_url):
    return anthropic.Anthropic(
        api_key="sk-ant-test",
        base_url=base_url,
        max_retries=0,
        http_client=httpx2.Client(transport=session.http_transport()),
    )


def ollama_client(session, base_url):
    return ollama.Client(host=base_url, transport=session.http_transport())


# -- OpenAI chat completions -----------------------------------------------------------------


def openai_chat_fixed(session, base_url):
    with openai_client(session, base_url) as client:
        start = time.monotonic()
        completion = client.chat.completions.create(model="gpt-emulated", messages=MESSAGES)
        duration = time.monotonic() - start
    choice = completion.choices[0]
    result = {
        "text": choice.message.content,
        "finish_reason": choice.finish_reason,
        "usage": completion.usage.model_dump(),
        "dump": completion.model_dump(),
    }
    return Run(result, durations=[duration])


def test_openai_chat_non_streaming(tmp_path, monkeypatch):
    recording = record(tmp_path, openai_chat_fixed)
    result = recording.run.result
    assert len(result["text"].split()) == EVENTS
    assert result["finish_reason"] == "stop"
    assert result["usage"]["completion_tokens"] == EVENTS
    assert not recording.responses[0].streamed
    check_fixed_case(recording, openai_chat_fixed, monkeypatch)
    assert isinstance(load_cassette(recording.path).interactions[0].response.body, JsonBody)


def openai_chat_stream(session, base_url):
    chunks, text, arrivals = [], [], []
    finish = usage = None
    with openai_client(session, base_url) as client:
        start = time.monotonic()
        stream = client.chat.completions.create(
            model="gpt-emulated",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
        for chunk in stream:
            chunks.append(chunk.model_dump())
            if chunk.usage is not None:
                usage = chunk.usage.model_dump()
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            if choice.delta.content:
                arrivals.append(time.monotonic() - start)
                text.append(choice.delta.content)
            finish = choice.finish_reason or finish
    result = {"text": "".join(text), "finish_reason": finish, "usage": usage, "chunks": chunks}
    return Run(result, arrivals)


def test_openai_chat_streaming_text_with_usage(tmp_path, monkeypatch):
    recording = record(tmp_path, openai_chat_stream)
    result = recording.run.result
    assert len(result["text"].split()) == EVENTS
    assert result["finish_reason"] == "stop"
    assert result["usage"]["completion_tokens"] == EVENTS
    assert result["usage"]["total_tokens"] == (
        result["usage"]["prompt_tokens"] + result["usage"]["completion_tokens"]
    )
    check_streaming_case(recording, openai_chat_stream, monkeypatch)


def test_openai_chat_streaming_replayed_in_real_time(tmp_path, monkeypatch):
    recording = record(tmp_path, openai_chat_stream)
    expected = delta_offsets(recording)
    run, session, seconds = replay(recording, openai_chat_stream, monkeypatch, timing="real")
    assert session.timing == "real"
    assert run.result == recording.run.result
    assert len(run.arrivals) == len(expected)
    for number, (arrived, due) in enumerate(zip(run.arrivals, expected, strict=True)):
        # Never before its recorded offset (the replay really waits), and not much after it
        # (each delta is released on its own, not with the rest of the stream).
        assert due - 0.001 <= arrived <= due + REAL_LATE_TOLERANCE, (
            f"delta {number} reached the SDK at {arrived:.4f} s, recorded at {due:.4f} s"
        )
    assert seconds >= expected[-1]


def openai_chat_tool_stream(session, base_url):
    chunks, arrivals, arguments = [], [], []
    names, ids = [], []
    finish = None
    with openai_client(session, base_url) as client:
        start = time.monotonic()
        stream = client.chat.completions.create(
            model="gpt-emulated",
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=OPENAI_TOOLS,
            stream=True,
        )
        for chunk in stream:
            chunks.append(chunk.model_dump())
            choice = chunk.choices[0]
            for call in choice.delta.tool_calls or []:
                if call.id:
                    ids.append(call.id)
                if call.function and call.function.name:
                    names.append(call.function.name)
                if call.function and call.function.arguments:
                    arrivals.append(time.monotonic() - start)
                    arguments.append(call.function.arguments)
            finish = choice.finish_reason or finish
    result = {
        "names": names,
        "ids": ids,
        "arguments": "".join(arguments),
        "finish_reason": finish,
        "chunks": chunks,
    }
    return Run(result, arrivals)


def test_openai_chat_streaming_tool_call(tmp_path, monkeypatch):
    recording = record(tmp_path, openai_chat_tool_stream)
    result = recording.run.result
    assert result["names"] == ["get_weather"]
    assert len(result["ids"]) == 1
    assert result["finish_reason"] == "tool_calls"
    arguments = json.loads(result["arguments"])
    assert set(arguments) == {"city", "days"}
    assert arguments["days"] == 3
    check_streaming_case(recording, openai_chat_tool_stream, monkeypatch)


# -- OpenAI Responses ------------------------------------------------------------------------


def openai_responses_stream(session, base_url):
    events, text, arrivals = [], [], []
    final = None
    with openai_client(session, base_url) as client:
        start = time.monotonic()
        stream = client.responses.create(
            model="gpt-emulated", instructions="Be brief.", input="Say something.", stream=True
        )
        for event in stream:
            events.append(event.model_dump())
            if event.type == "response.output_text.delta":
                arrivals.append(time.monotonic() - start)
                text.append(event.delta)
            elif event.type == "response.completed":
                final = event.response
    assert final is not None
    result = {
        "text": "".join(text),
        "output_text": final.output_text,
        "status": final.status,
        "usage": final.usage.model_dump(),
        "event_types": [e["type"] for e in events],
        "events": events,
    }
    return Run(result, arrivals)


def test_openai_responses_streaming(tmp_path, monkeypatch):
    recording = record(tmp_path, openai_responses_stream)
    result = recording.run.result
    assert result["text"] == result["output_text"]
    assert len(result["text"].split()) == EVENTS
    assert result["status"] == "completed"
    assert result["usage"]["output_tokens"] == EVENTS
    assert result["event_types"][0] == "response.created"
    assert result["event_types"][-1] == "response.completed"
    check_streaming_case(recording, openai_responses_stream, monkeypatch)


# -- Anthropic Messages ----------------------------------------------------------------------


def anthropic_stream(session, base_url):
    events, text, arrivals = [], [], []
    with anthropic_client(session, base_url) as client:
        start = time.monotonic()
        with client.messages.stream(
            model="claude-emulated", max_tokens=64, messages=MESSAGES
        ) as stream:
            for event in stream:
                events.append(event.model_dump())
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    arrivals.append(time.monotonic() - start)
                    text.append(event.delta.text)
            final = stream.get_final_message()
    result = {
        "text": "".join(text),
        "final_text": final.content[0].text,
        "stop_reason": final.stop_reason,
        "usage": final.usage.model_dump(),
        "events": events,
    }
    return Run(result, arrivals)


def test_anthropic_messages_streaming_text(tmp_path, monkeypatch):
    recording = record(tmp_path, anthropic_stream)
    result = recording.run.result
    assert result["text"] == result["final_text"]
    assert len(result["text"].split()) == EVENTS
    assert result["stop_reason"] == "end_turn"
    assert result["usage"]["output_tokens"] == EVENTS
    assert result["usage"]["input_tokens"] > 0
    check_streaming_case(recording, anthropic_stream, monkeypatch)


def anthropic_tool_turns(session, base_url):
    durations = []
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Paris?"}]
    with anthropic_client(session, base_url) as client:
        start = time.monotonic()
        first = client.messages.create(
            model="claude-emulated", max_tokens=64, tools=ANTHROPIC_TOOLS, messages=messages
        )
        durations.append(time.monotonic() - start)
        (use,) = [block for block in first.content if block.type == "tool_use"]
        messages += [
            {"role": "assistant", "content": [block.model_dump() for block in first.content]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use.id, "content": "sunny, 21 C"}
                ],
            },
        ]
        start = time.monotonic()
        second = client.messages.create(
            model="claude-emulated", max_tokens=64, tools=ANTHROPIC_TOOLS, messages=messages
        )
        durations.append(time.monotonic() - start)
    result = {
        "tool": {"id": use.id, "name": use.name, "input": use.input},
        "first_stop_reason": first.stop_reason,
        "first_usage": first.usage.model_dump(),
        "text": second.content[0].text,
        "second_stop_reason": second.stop_reason,
        "second_usage": second.usage.model_dump(),
        "dumps": [first.model_dump(), second.model_dump()],
    }
    return Run(result, durations=durations)


def test_anthropic_messages_tool_use_then_tool_result(tmp_path, monkeypatch):
    recording = record(tmp_path, anthropic_tool_turns)
    result = recording.run.result
    assert result["tool"]["name"] == "get_weather"
    assert result["tool"]["id"].startswith("toolu_")
    assert set(result["tool"]["input"]) == {"city", "days"}
    assert result["first_stop_reason"] == "tool_use"
    assert result["text"] == "The tool returned sunny, 21 C."
    assert result["second_stop_reason"] == "end_turn"
    assert result["second_usage"]["input_tokens"] > result["first_usage"]["input_tokens"]
    assert len(recording.responses) == 2
    # The second request really carried the tool result.
    cassette = load_cassette(recording.path)
    sent = cassette.interactions[1].request.body.value
    assert sent["messages"][-1]["content"][0]["type"] == "tool_result"
    assert sent["messages"][-1]["content"][0]["tool_use_id"] == result["tool"]["id"]
    check_fixed_case(recording, anthropic_tool_turns, monkeypatch)


# -- Ollama /api/chat ------------------------------------------------------------------------


def ollama_stream(session, base_url):
    parts, text, arrivals = [], [], []
    client = ollama_client(session, base_url)
    try:
        start = time.monotonic()
        for part in client.chat(model="llama-emulated", messages=MESSAGES, stream=True):
            parts.append(part.model_dump())
            if part.message.content:
                arrivals.append(time.monotonic() - start)
                text.append(part.message.content)
    finally:
        client.close()
    last = parts[-1]
    result = {
        "text": "".join(text),
        "done": last["done"],
        "done_reason": last["done_reason"],
        "eval_count": last["eval_count"],
        "prompt_eval_count": last["prompt_eval_count"],
        "parts": parts,
    }
    return Run(result, arrivals)


def test_ollama_chat_ndjson_streaming(tmp_path, monkeypatch):
    recording = record(tmp_path, ollama_stream)
    result = recording.run.result
    assert len(result["text"].split()) == EVENTS
    assert result["done"] is True
    assert result["done_reason"] == "stop"
    assert result["eval_count"] == EVENTS
    assert result["prompt_eval_count"] > 0
    body = load_cassette(recording.path).interactions[0].response.body
    assert isinstance(body, NdjsonBody)
    assert len(body.lines) == EVENTS + 1
    check_streaming_case(recording, ollama_stream, monkeypatch)


def ollama_fixed(session, base_url):
    client = ollama_client(session, base_url)
    try:
        start = time.monotonic()
        reply = client.chat(model="llama-emulated", messages=MESSAGES, stream=False)
        duration = time.monotonic() - start
    finally:
        client.close()
    result = {
        "text": reply.message.content,
        "done_reason": reply.done_reason,
        "eval_count": reply.eval_count,
        "dump": reply.model_dump(),
    }
    return Run(result, durations=[duration])


def test_ollama_chat_non_streaming(tmp_path, monkeypatch):
    recording = record(tmp_path, ollama_fixed)
    result = recording.run.result
    assert len(result["text"].split()) == EVENTS
    assert result["done_reason"] == "stop"
    assert result["eval_count"] == EVENTS
    check_fixed_case(recording, ollama_fixed, monkeypatch)


# -- gzip-encoded responses ------------------------------------------------------------------


def check_stored_decoded(recording: Recording, body_type) -> None:
    assert all(r.gzip for r in recording.responses), "the emulator sent gzip"
    response = load_cassette(recording.path).interactions[0].response
    assert "content-encoding" not in response.headers
    assert isinstance(response.body, body_type)


def test_gzip_streaming(tmp_path, monkeypatch):
    recording = record(tmp_path, openai_chat_stream, gzip=True)
    result = recording.run.result
    assert len(result["text"].split()) == EVENTS
    assert result["usage"]["completion_tokens"] == EVENTS
    check_stored_decoded(recording, SseBody)
    check_streaming_case(recording, openai_chat_stream, monkeypatch)


def test_gzip_non_streaming(tmp_path, monkeypatch):
    recording = record(tmp_path, openai_chat_fixed, gzip=True)
    assert len(recording.run.result["text"].split()) == EVENTS
    check_stored_decoded(recording, JsonBody)
    check_fixed_case(recording, openai_chat_fixed, monkeypatch)


# -- 429 with Retry-After, then success ------------------------------------------------------


def openai_retried(session, base_url):
    with openai_client(session, base_url, max_retries=2) as client:
        start = time.monotonic()
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-emulated", messages=MESSAGES
        )
        duration = time.monotonic() - start
    completion = raw.parse()
    result = {
        "text": completion.choices[0].message.content,
        "finish_reason": completion.choices[0].finish_reason,
        "retries_taken": raw.retries_taken,
        "dump": completion.model_dump(),
    }
    return Run(result, durations=[duration])


def test_429_with_retry_after_then_success(tmp_path, monkeypatch):
    recording = record(
        tmp_path, openai_retried, prepare=lambda emu: emu.fail_next(429, retry_after="1")
    )
    result = recording.run.result
    assert result["retries_taken"] == 1
    assert result["finish_reason"] == "stop"
    assert [r.status for r in recording.responses] == [429, 200]
    assert ("Retry-After", "1") in recording.responses[0].headers
    # Live, the SDK really waited the second it was told to.
    assert recording.run.durations[0] >= 1.0 + DELAY * (EVENTS - 1)
    assert recording.wall_seconds >= 1.0
    check_recorded_offsets(recording)
    cassette = load_cassette(recording.path)
    assert [i.response.status for i in cassette.interactions] == [429, 200]
    assert cassette.interactions[0].response.headers.get("retry-after") == "1"

    run, session, seconds = replay(recording, openai_retried, monkeypatch)
    assert seconds < 0.2
    assert run.result == result
    assert_attempts(session, 2)
    assert_waits(session, [1.0], tolerance=0.01)
    assert [sleep.duration for sleep in session.sleeps] == [1.0]
    assert [sent.status for sent in session.requests] == [429, 200]
    assert session.requests[0].retry_after == "1"
    # On the virtual clock the call took the recorded answers plus the wait, and nothing more.
    ends = sum(i.response.t_end for i in cassette.interactions) / 1000
    assert run.durations[0] == pytest.approx(1.0 + ends, abs=VIRTUAL_TOLERANCE)


def test_two_429s_then_success_waits_before_each_retry(tmp_path, monkeypatch):
    recording = record(
        tmp_path,
        openai_retried,
        prepare=lambda emu: emu.fail_next(429, retry_after="0.5", times=2),
    )
    assert recording.run.result["retries_taken"] == 2
    assert [r.status for r in recording.responses] == [429, 429, 200]
    assert recording.run.durations[0] >= 2 * 0.5 + DELAY * (EVENTS - 1)
    check_recorded_offsets(recording)

    run, session, seconds = replay(recording, openai_retried, monkeypatch)
    assert seconds < 0.2
    assert run.result == recording.run.result
    assert_attempts(session, 3)
    assert [sleep.duration for sleep in session.sleeps] == [0.5, 0.5]
    # What the waits really were on the virtual clock: from each 429's end to the next send.
    ends = [i.response.t_end / 1000 for i in load_cassette(recording.path).interactions]
    sent = [r.sent_at for r in session.requests]
    assert sent[1] - (sent[0] + ends[0]) == pytest.approx(0.5, abs=VIRTUAL_TOLERANCE)
    assert sent[2] - (sent[1] + ends[1]) == pytest.approx(0.5, abs=VIRTUAL_TOLERANCE)
    # The bug: assert_waits reads 0.5 s, then 1.0 s.
    assert_waits(session, [0.5, 0.5], tolerance=0.01)


# -- async ------------------------------------------------------------------------------------


async def async_openai_chat_stream(session, base_url):
    chunks, text, arrivals = [], [], []
    finish = usage = None
    async with openai.AsyncOpenAI(
        api_key="sk-test",
        base_url=base_url + "/v1",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=session.http_transport()),
    ) as client:
        start = time.monotonic()
        stream = await client.chat.completions.create(
            model="gpt-emulated",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in stream:
            chunks.append(chunk.model_dump())
            if chunk.usage is not None:
                usage = chunk.usage.model_dump()
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            if choice.delta.content:
                arrivals.append(time.monotonic() - start)
                text.append(choice.delta.content)
            finish = choice.finish_reason or finish
    result = {"text": "".join(text), "finish_reason": finish, "usage": usage, "chunks": chunks}
    return Run(result, arrivals)


@pytest.mark.anyio
async def test_async_openai_chat_streaming(tmp_path, monkeypatch):
    path = tmp_path / "x.msgpack"
    with Emulator(events=EVENTS, delay=DELAY) as emu:
        emu.configure(delay=0)  # warm up, as ``warm_up`` does for the sync cases
        async with CassetteSession(tmp_path / "warm-up.msgpack", record="all") as session:
            await async_openai_chat_stream(session, emu.base_url)
        assert emu.wait_idle()
        emu.configure(delay=DELAY)
        emu.clear()
        start = wall()
        async with (
            AsyncLiveTransport() as live,
            CassetteSession(path, record="once", async_live=live) as session,
        ):
            recorded = await async_openai_chat_stream(session, emu.base_url)
            sends = send_times(session)
        record_seconds = wall() - start
        assert emu.wait_idle()
        responses = emu.responses
        base_url = emu.base_url
    recording = Recording(path, recorded, responses, base_url, record_seconds, sends)
    assert session.written
    assert recorded.result["finish_reason"] == "stop"
    assert recorded.result["usage"]["completion_tokens"] == EVENTS
    check_recorded_offsets(recording)
    check_recorded_incrementally(recording)

    with no_network(monkeypatch):
        start = wall()
        async with CassetteSession(path, record="none", on_unused="error") as session:
            replayed = await async_openai_chat_stream(session, base_url)
        seconds = wall() - start
    assert replayed.result == recorded.result
    check_virtual_arrivals(replayed, delta_offsets(recording))
    assert seconds < VIRTUAL_WALL_LIMIT
    (sent,) = session.requests
    assert sent.replayed
