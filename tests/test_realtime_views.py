"""Provider views of realtime WebSocket sessions (issue 21, point 5): an OpenAI Realtime session
and a Gemini Live session read into the view shape the HTTP views give (text, tool calls with
their arguments as a JSON string, deltas with their times), each turn with its own view.

A session recorded from the fake Realtime server is read with the times its frames were
stamped; hand-written sessions cover the beta event names, Gemini's binary JSON frames and
snake_case, a barge-in, errors and a body no client could read.
"""

import base64
import json

import pytest
from openai import OpenAI

from pytest_toolnexus import load_cassette, use_cassette
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._store.cassette import (
    EmptyBody,
    Interaction,
    JsonBody,
    RecordedRequest,
    RecordedResponse,
    WebSocketBody,
)
from pytest_toolnexus._store.ws_frames import frame_doc
from pytest_toolnexus.views import ViewError, provider_of, view
from tests.support import fake_realtime

OPENAI_URL = "wss://api.openai.com/v1/realtime?model=gpt-realtime"
LIVE_URL = (
    "wss://generativelanguage.googleapis.com/ws/"
    "google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
)


def session(url, frames, status=101):
    request = RecordedRequest("GET", url, Headers(), EmptyBody())
    response = RecordedResponse(
        status, Headers([("Upgrade", "websocket")]), WebSocketBody(frames), 5.0, 900.0
    )
    return Interaction(request, response)


def server(t, value, *, binary=False):
    text = json.dumps(value, separators=(",", ":"))
    return frame_doc(t, "server", text.encode() if binary else text)


def client(t, value):
    return frame_doc(t, "client", json.dumps(value, separators=(",", ":")))


def test_the_realtime_dialects_are_named_by_their_handshake_urls():
    assert provider_of(OPENAI_URL) == "openai-realtime"
    assert provider_of("ws://127.0.0.1:8080/v1/realtime?model=gpt-realtime") == "openai-realtime"
    assert provider_of(LIVE_URL) == "gemini-live"
    vertex = (
        "wss://us-central1-aiplatform.googleapis.com/ws/"
        "google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent"
    )
    assert provider_of(vertex) == "gemini-live"
    # The realtime API's HTTP routes are no session.
    assert provider_of("https://api.openai.com/v1/realtime/client_secrets") != "openai-realtime"


def test_a_recorded_openai_realtime_session_reads_with_its_recorded_times(tmp_path):
    path = tmp_path / "recorded.msgpack"
    port, stop = fake_realtime.start()
    try:
        client_ = OpenAI(api_key="test-key", base_url=f"http://127.0.0.1:{port}/v1")
        with (
            use_cassette(path, record="once"),
            client_.realtime.connect(model="gpt-realtime") as connection,
        ):
            connection.session.update(session={"type": "realtime", "instructions": "be brief"})
            for step in ("Say hi", "audio", "What is the weather in Paris?"):
                if step == "audio":
                    connection.response.create(response={"output_modalities": ["audio"]})
                else:
                    connection.conversation.item.create(
                        item={
                            "type": "message",
                            "role": "user",
                            "content": [{"type": "input_text", "text": step}],
                        }
                    )
                    connection.response.create()
                for event in connection:
                    if event.type == "response.done":
                        break
    finally:
        stop()
    (interaction,) = load_cassette(path).interactions
    frames = interaction.response.body.frames

    answer = view(interaction)

    assert answer.provider == "openai-realtime"
    assert answer.model == "gpt-realtime"  # from session.created
    assert answer.text == "Hi there! Hello there"
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == [
        ("call_1", "weather", '{"city":"Paris"}')
    ]
    turns = answer.extra["turns"]
    assert [t.text for t in turns] == ["Hi there! ", "Hello there", ""]
    assert [t.finish_reason for t in turns] == ["stop", "stop", "tool_calls"]
    assert answer.finish_reason == "tool_calls"
    audio = b"".join(chunk for _, chunk in turns[1].extra["audio"])
    assert audio == b"".join(fake_realtime.AUDIO)
    # Each delta carries the time its frame was stamped, in seconds since the handshake.
    stamped = [
        (f["t"] / 1000, f["data"]["delta"])
        for f in frames
        if f["from"] == "server"
        and f["data"]["type"]
        in ("response.output_text.delta", "response.output_audio_transcript.delta")
    ]
    assert list(answer.deltas) == stamped
    assert [t for t, _ in answer.deltas] == sorted(t for t, _ in answer.deltas)
    # A turn was asked for by the client frame just before its response.created.
    creates = [f["t"] / 1000 for f in frames if f["from"] == "client"]
    assert turns[0].extra["asked_at"] == creates[2]  # update, item, response.create


BETA = [
    server(10.0, {"type": "session.created", "session": {"model": "gpt-4o-realtime-preview"}}),
    client(11.0, {"type": "response.create"}),
    server(20.0, {"type": "response.created", "response": {"id": "resp_1"}}),
    server(30.0, {"type": "response.text.delta", "response_id": "resp_1", "delta": "Hel"}),
    server(35.0, {"type": "response.text.delta", "response_id": "resp_1", "delta": "lo"}),
    server(
        40.0,
        {
            "type": "response.done",
            "response": {
                "id": "resp_1",
                "status": "incomplete",
                "status_details": {"type": "incomplete", "reason": "max_output_tokens"},
                "usage": {"input_tokens": 7, "output_tokens": 2, "total_tokens": 9},
            },
        },
    ),
    client(50.0, {"type": "response.create"}),
    server(60.0, {"type": "response.created", "response": {"id": "resp_2"}}),
    server(
        61.0,
        {
            "type": "response.audio.delta",
            "response_id": "resp_2",
            "delta": base64.b64encode(b"\x01\x02").decode(),
        },
    ),
    server(
        62.0, {"type": "response.audio_transcript.delta", "response_id": "resp_2", "delta": "Hi"}
    ),
    server(
        70.0,
        {
            "type": "response.done",
            "response": {
                "id": "resp_2",
                "status": "cancelled",
                "status_details": {"type": "cancelled", "reason": "turn_detected"},
            },
        },
    ),
]


def test_the_beta_event_names_read_as_the_ga_ones():
    answer = view(session(OPENAI_URL, BETA))

    assert answer.text == "HelloHi"
    assert answer.deltas == ((0.03, "Hel"), (0.035, "lo"), (0.062, "Hi"))
    assert answer.model == "gpt-4o-realtime-preview"
    first, second = answer.extra["turns"]
    assert (first.finish_reason, first.raw_finish_reason) == ("length", "max_output_tokens")
    assert first.usage.total_tokens == 9
    assert second.raw_finish_reason == "cancelled"  # a barge-in cut it off
    assert second.extra["audio"] == ((0.061, b"\x01\x02"),)
    assert second.extra["asked_at"] == 0.05
    assert answer.finish_reason == "cancelled"
    assert answer.usage.total_tokens == 9  # the one turn that said


def test_an_error_event_and_a_failed_response_are_the_views_error():
    frames = [
        client(1.0, {"type": "response.create"}),
        server(
            2.0,
            {
                "type": "error",
                "event_id": "event_1",
                "error": {"type": "invalid_request_error", "message": "Unknown parameter"},
            },
        ),
    ]
    assert view(session(OPENAI_URL, frames)).error == "Unknown parameter"

    failed = {
        "type": "response.done",
        "response": {
            "id": "resp_1",
            "status": "failed",
            "status_details": {"type": "failed", "error": {"type": "server_error"}},
        },
    }
    answer = view(session(OPENAI_URL, [server(3.0, failed)]))
    assert answer.error == "the response failed: server_error"
    assert answer.extra["turns"][0].raw_finish_reason == "failed"


LIVE = [
    client(1.0, {"setup": {"model": "models/gemini-live-2.5-flash"}}),
    server(40.0, {"setupComplete": {}}, binary=True),
    client(41.0, {"client_content": {"turn_complete": True}}),
    server(
        90.0,
        {"serverContent": {"modelTurn": {"parts": [{"text": "thinking...", "thought": True}]}}},
        binary=True,
    ),
    server(100.0, {"serverContent": {"modelTurn": {"parts": [{"text": "Hi "}]}}}, binary=True),
    server(
        120.0,
        {
            "server_content": {
                "model_turn": {
                    "parts": [
                        {
                            "inline_data": {
                                "mime_type": "audio/pcm;rate=24000",
                                "data": base64.b64encode(b"pcm").decode(),
                            }
                        }
                    ]
                },
                "output_transcription": {"text": "there"},
            }
        },
    ),
    server(
        130.0,
        {
            "serverContent": {"turnComplete": True},
            "usageMetadata": {
                "promptTokenCount": 5,
                "responseTokenCount": 3,
                "totalTokenCount": 8,
            },
        },
        binary=True,
    ),
    client(200.0, {"client_content": {"turn_complete": True}}),
    server(
        260.0,
        {"toolCall": {"functionCalls": [{"name": "weather", "args": {"city": "Paris"}}]}},
    ),
    client(300.0, {"tool_response": {"function_responses": []}}),
    server(310.0, {"serverContent": {"modelTurn": {"parts": [{"text": "Sun"}]}}}),
    server(320.0, {"serverContent": {"interrupted": True}}),
]


def test_a_gemini_live_session_reads_turn_by_turn():
    answer = view(session(LIVE_URL, LIVE))

    assert answer.provider == "gemini-live"
    assert answer.model == "gemini-live-2.5-flash"  # from the client's setup
    assert answer.text == "Hi thereSun"
    assert answer.deltas == ((0.1, "Hi "), (0.12, "there"), (0.31, "Sun"))
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == [
        (None, "weather", '{"city":"Paris"}')  # Gemini sent no id: none is invented
    ]
    first, second, third = answer.extra["turns"]
    assert (first.finish_reason, first.raw_finish_reason) == ("stop", "turnComplete")
    assert first.extra["reasoning"] == "thinking..."
    assert first.extra["audio"] == ((0.12, b"pcm"),)
    assert first.usage.total_tokens == 8
    assert first.extra["asked_at"] == 0.041
    assert second.finish_reason == "tool_calls"
    assert second.extra["asked_at"] == 0.2
    assert third.raw_finish_reason == "interrupted"
    assert answer.finish_reason == "interrupted"


def test_a_session_no_client_could_read_is_a_view_error():
    bad_audio = [
        server(1.0, {"type": "response.output_audio.delta", "response_id": "r", "delta": "!!"}),
    ]
    with pytest.raises(ViewError, match="the openai-realtime answer does not parse"):
        view(session(OPENAI_URL, bad_audio))

    parts = [server(1.0, {"serverContent": {"modelTurn": {"parts": "not a list"}}})]
    with pytest.raises(ViewError, match="the gemini-live answer does not parse"):
        view(session(LIVE_URL, parts))


def test_only_the_realtime_dialects_read_sessions_and_only_sessions():
    # A WebSocket session to an HTTP dialect's path, and an HTTP answer to a realtime path.
    chat = session("wss://example.test/v1/responses/resp_1", BETA)
    with pytest.raises(ViewError, match="no provider view reads the WebSocket session"):
        view(chat)
    http = Interaction(
        RecordedRequest("GET", "https://example.test/v1/realtime", Headers(), EmptyBody()),
        RecordedResponse(200, Headers(), JsonBody({"ok": True}), 1.0, 2.0),
    )
    with pytest.raises(ViewError, match="no provider view reads the answer"):
        view(http)
