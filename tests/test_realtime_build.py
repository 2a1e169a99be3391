"""Built realtime sessions (issue 21, point 5): ``build.openai_realtime`` and
``build.gemini_live`` write sessions nobody recorded, which the real SDKs replay offline
(``client.realtime.connect``, sync and async, and ``client.aio.live.connect``) with every
event at the time the builder gave it, on the virtual clock; a client that answers late sees
the answer move with it, and a client that sends what the session does not expect misses.
"""

import asyncio
import base64
import time

import pytest
from google import genai
from google.genai import types
from openai import AsyncOpenAI, OpenAI

from pytest_toolnexus import (
    CassetteMissError,
    UnusedInteractionsWarning,
    build,
    load_cassette,
    use_cassette,
)
from pytest_toolnexus._realtime.hub import realtime_of
from pytest_toolnexus.views import view

CADENCE = build.Cadence(ttft=0.4, gap=0.03, headers=0.12)
AUDIO = [bytes([n]) * 32 for n in range(3)]
WEATHER = build.ToolCall("weather", {"city": "Paris"}, id="call_weather")
USER = {"type": "message", "role": "user"}


@pytest.fixture
def anyio_backend():
    return "asyncio"  # the SDKs' own realtime code runs on asyncio


def said(text):
    return {**USER, "content": [{"type": "input_text", "text": text}]}


def openai_session():
    return build.openai_realtime(
        [
            build.RealtimeTurn(text="Hi there!"),
            build.RealtimeTurn(audio=AUDIO, transcript="Hello you", asks=["response.create"]),
            build.RealtimeTurn(tool_calls=[WEATHER]),
            build.RealtimeTurn(text="It is sunny in Paris."),
        ],
        session_update=True,
        cadence=CADENCE,
    )


def server_times(path):
    """Each server frame's built time, in seconds since the handshake was sent."""
    frames = load_cassette(path).interactions[0].response.body.frames
    return [f["t"] / 1000 for f in frames if f["from"] == "server"]


def content_of(events):
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    audio = b"".join(
        base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta"
    )
    transcript = "".join(
        e.delta for e in events if e.type == "response.output_audio_transcript.delta"
    )
    calls = [
        (e.call_id, e.name, e.arguments)
        for e in events
        if e.type == "response.function_call_arguments.done"
    ]
    return text, audio, transcript, calls


EXPECTED = (
    "Hi there!It is sunny in Paris.",
    b"".join(AUDIO),
    "Hello you",
    [("call_weather", "weather", '{"city":"Paris"}')],
)


def until(events, connection, last):
    for event in connection:
        events.append((time.monotonic(), event))
        if event.type == last:
            return


def test_a_built_openai_session_replays_through_the_sync_sdk_at_its_built_times(tmp_path):
    path = tmp_path / "realtime.msgpack"
    build.build_cassette(path, [openai_session()])
    client = OpenAI(api_key="test-key")
    got = []

    with use_cassette(path) as cassette:
        start = time.monotonic()
        with client.realtime.connect(model="gpt-realtime") as connection:
            connection.session.update(session={"type": "realtime", "instructions": "be brief"})
            until(got, connection, "session.updated")
            connection.conversation.item.create(item=said("Say hi"))
            connection.response.create()
            until(got, connection, "response.done")
            connection.response.create(response={"output_modalities": ["audio"]})
            until(got, connection, "response.done")
            connection.conversation.item.create(item=said("Weather in Paris?"))
            connection.response.create()
            until(got, connection, "response.done")
            connection.conversation.item.create(
                item={"type": "function_call_output", "call_id": "call_weather", "output": "21"}
            )
            connection.response.create()
            until(got, connection, "response.done")

    events = [event for _, event in got]
    assert content_of(events) == EXPECTED
    assert events[0].type == "session.created"
    assert events[0].session.model == "gpt-realtime"
    # Each event reached the client at the very time the builder gave it (virtual clock).
    assert [at - start for at, _ in got] == pytest.approx(server_times(path), abs=1e-9)
    (log,) = realtime_of(cassette).connections
    assert log.replayed
    assert [p.t / 1000 for p in log.received] == pytest.approx(server_times(path), abs=1e-9)
    # The handle's view of the session that answered the handshake reads what the SDK read.
    answer = cassette.view(0)
    assert answer.provider == "openai-realtime"
    assert answer.text == EXPECTED[0][:9] + EXPECTED[2] + EXPECTED[0][9:]
    # The content events keep the cadence: ttft after the client's ask, then one per gap.
    text = [at - start for at, e in got if e.type == "response.output_text.delta"][:2]
    asked = CADENCE.headers  # the first turn is asked for as soon as the session is open
    assert text == pytest.approx([asked + 0.4, asked + 0.43], abs=1e-9)


@pytest.mark.anyio
async def test_a_built_openai_session_replays_through_the_async_sdk_and_moves_with_a_late_client(
    tmp_path,
):
    path = tmp_path / "realtime.msgpack"
    build.build_cassette(path, [openai_session()])
    client = AsyncOpenAI(api_key="test-key")
    got = []

    async def until_async(connection, last):
        async for event in connection:
            got.append((time.monotonic(), event))
            if event.type == last:
                return

    async with use_cassette(path) as cassette:
        start = time.monotonic()
        async with client.realtime.connect(model="gpt-realtime") as connection:
            await connection.session.update(session={"type": "realtime"})
            await until_async(connection, "session.updated")
            await connection.conversation.item.create(item=said("Say hi"))
            await connection.response.create()
            await until_async(connection, "response.done")
            await connection.response.create(response={"output_modalities": ["audio"]})
            await until_async(connection, "response.done")
            await connection.conversation.item.create(item=said("Weather in Paris?"))
            await connection.response.create()
            await until_async(connection, "response.done")
            before_late = len(got)
            await asyncio.sleep(1.5)  # the client runs its tool for 1.5 s (virtual)
            await connection.conversation.item.create(
                item={"type": "function_call_output", "call_id": "call_weather", "output": "21"}
            )
            await connection.response.create()
            await until_async(connection, "response.done")

    events = [event for _, event in got]
    assert content_of(events) == EXPECTED
    built = server_times(path)
    arrived = [at - start for at, _ in got]
    # On time until the client was late, then every answer 1.5 s later than built.
    assert arrived[:before_late] == pytest.approx(built[:before_late], abs=1e-9)
    assert arrived[before_late:] == pytest.approx([t + 1.5 for t in built[before_late:]], abs=1e-9)
    assert realtime_of(cassette).connections[0].replayed


def test_a_client_frame_the_built_session_does_not_expect_is_a_miss(tmp_path):
    path = tmp_path / "realtime.msgpack"
    build.build_cassette(path, [openai_session()])
    client = OpenAI(api_key="test-key")

    def run():
        with use_cassette(path), client.realtime.connect(model="gpt-realtime") as connection:
            connection.response.create()  # the session expects a session.update first

    with (
        pytest.warns(UnusedInteractionsWarning, match="never sent"),
        pytest.raises(CassetteMissError) as caught,
    ):
        run()

    message = str(caught.value)
    assert "client frame #0" in message
    assert '"type":"session.update"' in message
    assert "response.create" in message


def live_session():
    return build.gemini_live(
        [
            build.RealtimeTurn(text="Hi there!"),
            build.RealtimeTurn(tool_calls=[WEATHER]),
            build.RealtimeTurn(audio=AUDIO, transcript="It is sunny."),
        ],
        model="gemini-live-2.5-flash",
        cadence=CADENCE,
    )


@pytest.mark.anyio
async def test_a_built_gemini_live_session_replays_through_google_genai(tmp_path):
    path = tmp_path / "live.msgpack"
    build.build_cassette(path, [live_session()])
    client = genai.Client(api_key="test-key")
    got = []

    async def turn(session):
        async for message in session.receive():
            got.append((time.monotonic(), message))

    async with use_cassette(path) as cassette:
        start = time.monotonic()
        async with client.aio.live.connect(
            model="gemini-live-2.5-flash", config={"response_modalities": ["AUDIO"]}
        ) as session:
            await session.send_client_content(
                turns={"role": "user", "parts": [{"text": "Say hi"}]}, turn_complete=True
            )
            await turn(session)
            await session.send_client_content(
                turns={"role": "user", "parts": [{"text": "Weather in Paris?"}]},
                turn_complete=True,
            )
            async for message in session.receive():
                got.append((time.monotonic(), message))
                if message.tool_call:
                    break
            call = got[-1][1].tool_call.function_calls[0]
            answer = types.FunctionResponse(id=call.id, name=call.name, response={"t": 21})
            await session.send_tool_response(function_responses=[answer])
            await turn(session)

    messages = [m for _, m in got]
    assert (call.id, call.name, call.args) == ("call_weather", "weather", {"city": "Paris"})
    assert "".join(m.text or "" for m in messages) == "Hi there!"
    assert b"".join(m.data or b"" for m in messages) == b"".join(AUDIO)
    transcript = [
        m.server_content.output_transcription.text
        for m in messages
        if m.server_content and m.server_content.output_transcription
    ]
    assert "".join(transcript) == "It is sunny."
    assert messages[-1].server_content.turn_complete
    # setupComplete is read by connect() itself, before the test sees a message.
    assert [at - start for at, _ in got] == pytest.approx(server_times(path)[1:], abs=1e-9)
    assert realtime_of(cassette).connections[0].replayed


def test_the_views_read_the_built_sessions_as_the_sdks_do():
    answer = view(openai_session())
    assert answer.provider == "openai-realtime"
    assert answer.text == "Hi there!Hello youIt is sunny in Paris."
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == EXPECTED[3]
    assert answer.model == "gpt-realtime"
    assert answer.finish_reason == "stop"
    assert b"".join(chunk for _, chunk in answer.extra["audio"]) == b"".join(AUDIO)
    turns = answer.extra["turns"]
    assert [t.finish_reason for t in turns] == ["stop", "stop", "tool_calls", "stop"]

    live = view(live_session())
    assert live.provider == "gemini-live"
    assert live.model == "gemini-live-2.5-flash"
    assert live.text == "Hi there!It is sunny."
    assert [(c.id, c.name, c.arguments) for c in live.tool_calls] == EXPECTED[3]
    assert [t.finish_reason for t in live.extra["turns"]] == ["stop", "tool_calls", "stop"]


def pinned_session(path):
    ask = {"type": "conversation.item.create", "item": {"role": "user", "content": [{}]}}
    build.build_cassette(
        path,
        [build.openai_realtime([build.RealtimeTurn(text="Hi!", asks=[ask, "response.create"])])],
    )


def test_a_pattern_matches_what_the_frame_holds_at_its_own_paths(tmp_path):
    path = tmp_path / "pinned.msgpack"
    pinned_session(path)
    client = OpenAI(api_key="test-key")

    with use_cassette(path), client.realtime.connect(model="gpt-realtime") as connection:
        # More keys than the pattern names, in the item and in its one content part.
        connection.conversation.item.create(item=said("Say hi"))
        connection.response.create(response={"output_modalities": ["text"]})
        text = ""
        for event in connection:
            if event.type == "response.output_text.delta":
                text += event.delta
            if event.type == "response.done":
                break
    assert text == "Hi!"


@pytest.mark.parametrize(
    ("item", "path"),
    [
        ({"type": "message", "role": "assistant", "content": [{}]}, "item.role"),
        ({"type": "message", "content": [{}]}, "item"),  # a key the pattern names is missing
        ({**said("a"), "content": [{}, {}]}, "item.content"),  # lists of another length
    ],
    ids=["other-value", "missing-key", "longer-list"],
)
def test_a_frame_that_differs_at_a_pattern_path_is_a_miss_naming_it(tmp_path, item, path):
    file = tmp_path / "pinned.msgpack"
    pinned_session(file)
    client = OpenAI(api_key="test-key")

    def run():
        with use_cassette(file), client.realtime.connect(model="gpt-realtime") as connection:
            connection.conversation.item.create(item=item)

    with (
        pytest.warns(UnusedInteractionsWarning, match="never sent"),
        pytest.raises(CassetteMissError) as caught,
    ):
        run()
    message = str(caught.value)
    assert "client frame #0" in message
    assert "expected a frame holding (a built pattern, at 50.0 ms)" in message
    assert path in message
    assert "RealtimeTurn's asks" in message


@pytest.mark.parametrize(
    "frame",
    [
        {"t": 1.0, "from": "server", "kind": "text", "data": {"type": "x"}, "pattern": True},
        {"t": 1.0, "from": "client", "kind": "text", "data": {"type": "x"}, "pattern": "yes"},
    ],
    ids=["on-a-server-frame", "not-a-boolean"],
)
def test_a_pattern_flag_is_a_boolean_on_client_frames_only(tmp_path, frame):
    from pytest_toolnexus._store.bodies import MalformedCassette
    from pytest_toolnexus._store.ws_frames import frames_of

    with pytest.raises(MalformedCassette, match="'pattern' must be a boolean"):
        list(frames_of([frame]))
