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
- each event offset stored in the cassette lies between the moment the emulator began to write
  that event and the moment the recorder handed it to the client (``check_recorded_offsets``);
- the recording run itself streamed: the SDK saw each delta after the emulator wrote it and no
  later than this machine's jitter allows (``check_recorded_incrementally``);
- in virtual replay the SDK sees each delta at its recorded offset (``time.monotonic()`` is the
  virtual clock there) within 1 ms.

Real time is read with :func:`tests.support.realtime.wall`, on the clock the emulator stamps
and a recording session reads (checked below). What holds on any machine is checked exactly:
nothing reaches the client before it was written, stored offsets are bracketed by what the
emulator and the session saw. Lateness is bounded by how late a plain sleep was during the
recording (``Recording.baseline``); a recording later than that is made again, up to three in
all (``record``). The recordings here are short (a fraction of a second), too short for a check
that a virtual replay did not sleep them: ``test_timing_sdks`` makes that check on recordings
of several seconds.

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
from typing import Any

import anthropic
import httpx2
import ollama
import openai
import pytest

from pytest_toolnexus import (
    CassetteSession,
    LiveTransport,
    assert_attempts,
    assert_waits,
    load_cassette,
    use_cassette,
)
from pytest_toolnexus._store.cassette import JsonBody, NdjsonBody, SseBody
from tests.support.emulator import Emulator, ResponseRecord
from tests.support.realtime import (
    LatenessWatch,
    allowance,
    paced,
    sleep_lateness,
    typical_allowance,
    wall,
)

EVENTS = 5
DELAY = 0.04
EMITTED_SPREAD = DELAY * (EVENTS - 1)
VIRTUAL_TOLERANCE = 0.001  # SDK-level arrival vs recorded offset, virtual replay
RECORD_ATTEMPTS = 3
ROUNDING = 1e-6  # stored offsets keep microseconds

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

    ``arrivals`` are the seconds from ``started`` (a ``time.monotonic()`` reading just before
    the streaming call) to each content delta reaching the SDK caller; ``durations`` the
    seconds each call took, in order.
    """

    result: Any
    arrivals: list[float] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    started: float = 0.0
    """When the call began, on the emulator's clock (``wall``): see :func:`on_wall`."""


def on_wall(reading: float) -> float:
    """A ``time.monotonic()`` reading taken outside a virtual clock, on ``wall``'s clock.

    The two are one kernel clock, but once a virtual clock has run ahead in this process,
    ``time.monotonic()`` reads it plus what the clock ran ahead (docs/timing.md, "At the edges
    of a test"): the difference is constant outside a clock, so it is read now and taken off.
    """
    return wall() - (time.monotonic() - reading)


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
    deliveries: list[list[float]]
    """When each piece of each answer reached the client, on the same clock."""
    baseline: float
    """How late a plain sleep woke at worst, just before and during the recording."""
    typical: float
    """How late a plain sleep woke typically (the median) during the recording."""


class Late(AssertionError):
    """The recording was later than this machine's jitter allowed: record it again."""


def send_times(session: CassetteSession) -> tuple[list[float], list[list[float]]]:
    """The monotonic time each request of a recording session was sent, and each piece of its
    answer reached the client.

    A recording session runs on the real clock, whose ``now()`` is the real
    ``time.perf_counter``: the clock the emulator's stamps are read on (checked below). The
    recordings pass their own live transport: a session that builds its default one does so
    after noting the first request's ``sent_at`` (0.1-0.3 s for an ``httpx.Client`` on a busy
    machine), so that ``sent_at`` would precede the real send by that much.
    """
    origin = session.clock.now() - session.elapsed
    sends = [origin + sent.sent_at for sent in session.requests]
    deliveries = [[origin + at for at in sent.deliveries] for sent in session.requests]
    return sends, deliveries


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


def record_once(path, scenario: Scenario, prepare, emulator_options) -> Recording:
    with Emulator(events=EVENTS, delay=DELAY, **emulator_options) as emu:
        warm_up(emu, path.parent, lambda session: scenario(session, emu.base_url))
        if prepare is not None:
            prepare(emu)
        before = sleep_lateness([DELAY])
        start = wall()
        with (
            LatenessWatch() as watch,
            LiveTransport() as live,
            use_cassette(path, record="once", live=live) as session,
        ):
            assert session.timing == "virtual"
            run = scenario(session, emu.base_url)
            sends, deliveries = send_times(session)
        seconds = wall() - start
        assert emu.wait_idle()
        responses = emu.responses
        base_url = emu.base_url
    assert not emu.running
    assert session.written
    assert all(not r.aborted for r in responses)
    baseline = max(before, watch.worst)
    return Recording(
        path, run, responses, base_url, seconds, sends, deliveries, baseline, watch.typical
    )


def check_recording(recording: Recording) -> None:
    check_recorded_offsets(recording)
    if recording.run.arrivals:
        check_recorded_incrementally(recording)


def record(tmp_path, scenario: Scenario, *, prepare=None, **emulator_options) -> Recording:
    """Step 1 and 2: record ``scenario`` against a live emulator, then stop the emulator, and
    check the recording (``check_recorded_offsets``; for a stream, whose run notes arrivals,
    ``check_recorded_incrementally``).

    Every check but lateness fails at once. A recording later than this machine's jitter
    allowed (:class:`Late`) is made again, up to ``RECORD_ATTEMPTS`` in all.
    """
    reports = []
    for attempt in range(RECORD_ATTEMPTS):
        path = tmp_path / f"x{attempt}.msgpack"
        assert not path.exists()
        recording = record_once(path, scenario, prepare, emulator_options)
        try:
            check_recording(recording)
        except Late as late:
            reports.append(f"recording {attempt + 1}: {late}")
            continue
        return recording
    pytest.fail("every recording was late:\n" + "\n".join(reports))


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


def check_on_one_clock() -> None:
    """The emulator's stamps (``wall``), the session's real clock (``time.perf_counter``) and
    the SDK timings of a recording run (``time.monotonic``, taken to ``wall`` by
    :func:`on_wall`) are the one kernel clock."""
    implementations = {
        time.get_clock_info(name).implementation for name in ("monotonic", "perf_counter")
    }
    assert implementations == {"clock_gettime(CLOCK_MONOTONIC)"}, implementations


def check_recorded_offsets(recording: Recording) -> None:
    """Every stored offset is bracketed by what the emulator and the session saw, and every
    event reached the client promptly after the emulator wrote it.

    A stored offset counts from the recorder's start, which lies between the session noting the
    send and the emulator having read the request. The event was in the recorder's hands no
    earlier than the emulator began to write it, and no later than the session noted it
    delivered. So, on any machine::

        event.started_at - received_at  <=  offset  <=  delivery - sent_at

    How long after its write the event reached the client is the machine's scheduling: at most
    :func:`allowance` of the worst sleep lateness during the recording, and in the median at most
    :func:`typical_allowance` of the median; beyond that the recording is :class:`Late`.
    """
    check_on_one_clock()
    cassette = load_cassette(recording.path)
    assert len(cassette.interactions) == len(recording.responses) == len(recording.sends)
    allowed = allowance(recording.baseline)
    typical = typical_allowance(recording.typical)
    for interaction, sent, sent_at, deliveries in zip(
        cassette.interactions,
        recording.responses,
        recording.sends,
        recording.deliveries,
        strict=True,
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
        assert len(deliveries) == len(stored), "one delivery per stored item"
        where = f"interaction {sent.request_index}"
        outside = [
            (number, event.name, round(event.started_at - sent.received_at, 4), offset)
            for number, (offset, event, delivered) in enumerate(
                zip(stored, sent.events, deliveries, strict=True)
            )
            if not event.started_at - sent.received_at - ROUNDING
            <= offset
            <= delivered - sent_at + ROUNDING
        ]
        assert outside == [], (
            f"{where}: stored offsets before the emulator wrote the event or after the client "
            f"had it ((number, event, written from, stored), seconds): {outside}"
        )
        # From the start of the write to the client: never negative (checked above).
        lags = [
            delivered - event.started_at
            for event, delivered in zip(sent.events, deliveries, strict=True)
        ]
        late = [
            (number, event.name, round(lag * 1000, 1))
            for number, (event, lag) in enumerate(zip(sent.events, lags, strict=True))
            if lag > allowed
        ]
        if late:
            raise Late(
                f"{where}: events reached the client more than {allowed * 1000:.0f} ms after "
                f"the emulator wrote them ((number, event, ms)): {late}"
            )
        if sent.streamed and statistics.median(lags) > typical:
            raise Late(
                f"{where}: events reached the client {statistics.median(lags) * 1000:.1f} ms "
                f"after the emulator wrote them in the median, over {typical * 1000:.1f} ms"
            )


def delta_offsets(recording: Recording, interaction: int = 0) -> list[float]:
    """The stored offsets, in seconds, of the content-delta events of one interaction."""
    response = load_cassette(recording.path).interactions[interaction].response
    sent = recording.responses[interaction]
    items = stored_items(response)
    return [
        item["t"] / 1000 for item, ev in zip(items, sent.events, strict=True) if ev.kind == "delta"
    ]


def check_recorded_incrementally(recording: Recording, interaction: int = 0) -> None:
    """While recording, the SDK saw each delta after the emulator began to write it, and no
    later than this machine's jitter allows (a buffered stream would hand the first delta over
    ``EMITTED_SPREAD`` late)."""
    deltas = [e for e in recording.responses[interaction].events if e.kind == "delta"]
    assert len(deltas) == EVENTS
    emitted = deltas[-1].sent_at - deltas[0].sent_at
    assert emitted >= 0.95 * EMITTED_SPREAD
    run = recording.run
    assert len(run.arrivals) == EVENTS
    assert run.arrivals == sorted(run.arrivals)
    seen = [run.started + arrival for arrival in run.arrivals]
    early = [
        n for n, (at, delta) in enumerate(zip(seen, deltas, strict=True)) if at < delta.started_at
    ]
    assert early == [], f"the SDK saw deltas {early} before the emulator wrote them"
    allowed = allowance(recording.baseline)
    late = [
        (n, round((at - delta.sent_at) * 1000, 1))
        for n, (at, delta) in enumerate(zip(seen, deltas, strict=True))
        if at - delta.sent_at > allowed
    ]
    if late:
        raise Late(
            f"the SDK saw deltas more than {allowed * 1000:.0f} ms after the emulator wrote "
            f"them while recording ((number, ms)): {late}"
        )


def check_virtual_arrivals(run: Run, expected: list[float]) -> None:
    assert run.arrivals == pytest.approx(expected, abs=VIRTUAL_TOLERANCE)


def check_streaming_case(recording: Recording, scenario: Scenario, monkeypatch) -> Run:
    run, session, _ = replay(recording, scenario, monkeypatch)
    assert run.result == recording.run.result
    check_virtual_arrivals(run, delta_offsets(recording))
    (sent,) = session.requests
    assert len(sent.deliveries) == len(recording.responses[0].events)
    return run


def check_fixed_case(recording: Recording, scenario: Scenario, monkeypatch) -> Run:
    """A non-streaming case: each call takes, on the virtual clock, its recorded time."""
    held_back = DELAY * (EVENTS - 1)
    for duration in recording.run.durations:
        assert duration >= held_back - 0.005  # the emulator held the body back that long
    run, _, _ = replay(recording, scenario, monkeypatch)
    assert run.result == recording.run.result
    ends = [i.response.t_end / 1000 for i in load_cassette(recording.path).interactions]
    assert run.durations == pytest.approx(ends, abs=VIRTUAL_TOLERANCE)
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
    return Run(result, arrivals, started=on_wall(start))


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

    # Never before its recorded offset (the replay really waits), and no later than this
    # machine's sleeps are late (each delta is released on its own, not with the rest).
    def run():
        run, session, seconds = replay(recording, openai_chat_stream, monkeypatch, timing="real")
        return run.arrivals, (run, session, seconds)

    run, session, seconds = paced(run, expected, gaps=[DELAY], what="delta")
    assert session.timing == "real"
    assert run.result == recording.run.result
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
    return Run(result, arrivals, started=on_wall(start))


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
    return Run(result, arrivals, started=on_wall(start))


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
    return Run(result, arrivals, started=on_wall(start))


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
    return Run(result, arrivals, started=on_wall(start))


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
    cassette = load_cassette(recording.path)
    assert [i.response.status for i in cassette.interactions] == [429, 200]
    assert cassette.interactions[0].response.headers.get("retry-after") == "1"

    run, session, _ = replay(recording, openai_retried, monkeypatch)
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

    run, session, _ = replay(recording, openai_retried, monkeypatch)
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
    return Run(result, arrivals, started=on_wall(start))


async def record_async_once(path) -> Recording:
    """:func:`record_once` for ``async_openai_chat_stream``, through an async session."""
    with Emulator(events=EVENTS, delay=DELAY) as emu:
        emu.configure(delay=0)  # warm up, as ``warm_up`` does for the sync cases
        async with CassetteSession(path.parent / "warm-up.msgpack", record="all") as session:
            await async_openai_chat_stream(session, emu.base_url)
        assert emu.wait_idle()
        emu.configure(delay=DELAY)
        emu.clear()
        before = sleep_lateness([DELAY])
        start = wall()
        with LatenessWatch() as watch:
            async with (
                LiveTransport() as live,
                CassetteSession(path, record="once", async_live=live) as session,
            ):
                run = await async_openai_chat_stream(session, emu.base_url)
                sends, deliveries = send_times(session)
        seconds = wall() - start
        assert emu.wait_idle()
        responses = emu.responses
        base_url = emu.base_url
    assert session.written
    baseline = max(before, watch.worst)
    return Recording(
        path, run, responses, base_url, seconds, sends, deliveries, baseline, watch.typical
    )


@pytest.mark.anyio
async def test_async_openai_chat_streaming(tmp_path, monkeypatch):
    reports = []
    for attempt in range(RECORD_ATTEMPTS):
        recording = await record_async_once(tmp_path / f"x{attempt}.msgpack")
        try:
            check_recording(recording)
        except Late as late:
            reports.append(f"recording {attempt + 1}: {late}")
            continue
        break
    else:
        pytest.fail("every recording was late:\n" + "\n".join(reports))
    recorded = recording.run
    assert recorded.result["finish_reason"] == "stop"
    assert recorded.result["usage"]["completion_tokens"] == EVENTS

    with no_network(monkeypatch):
        async with CassetteSession(recording.path, record="none", on_unused="error") as session:
            replayed = await async_openai_chat_stream(session, recording.base_url)
    assert replayed.result == recorded.result
    check_virtual_arrivals(replayed, delta_offsets(recording))
    (sent,) = session.requests
    assert sent.replayed
