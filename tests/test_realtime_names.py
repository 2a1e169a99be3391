"""The realtime views and builders speak the providers' public event protocols as the installed
SDKs define them (issue 21, point 5): every event name the OpenAI Realtime view reads is a
``type`` of ``openai.types.realtime`` (or of ``openai.types.beta.realtime`` for the beta
names), every field the Gemini Live view reads is a field of google-genai's
``LiveServerMessage``, and every server event the builders write validates against the SDK's
own models, strictly (google-genai's forbid unknown fields).
"""

import inspect
import typing

import pydantic
import pytest
from google.genai import types as genai_types
from openai.types import realtime as ga
from openai.types.beta import realtime as beta
from openai.types.realtime import RealtimeServerEvent

from pytest_toolnexus import build
from pytest_toolnexus._providers import openai_realtime

TURNS = [
    build.RealtimeTurn(text="Hi there!"),
    build.RealtimeTurn(audio=[b"\x00\x01", b"\x02\x03"], transcript="Hello you"),
    build.RealtimeTurn(tool_calls=[build.ToolCall("weather", {"city": "Paris"})]),
    build.RealtimeTurn(text="It is sunny."),
]


def event_types(module):
    """Every ``type`` literal of the event models a types module exports."""
    found = set()
    for _, cls in inspect.getmembers(module, inspect.isclass):
        field = getattr(cls, "model_fields", {}).get("type")
        if field is not None:
            found.update(a for a in typing.get_args(field.annotation) if isinstance(a, str))
    return found


def test_the_openai_realtime_view_reads_event_names_the_sdk_defines():
    ga_names, beta_names = event_types(ga), event_types(beta)
    read = openai_realtime._TEXT | openai_realtime._AUDIO | openai_realtime._ITEMS
    read |= {
        "response.created",
        "response.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "session.created",
        "session.updated",
        "error",
    }
    assert read - ga_names == {
        "response.text.delta",
        "response.audio.delta",
        "response.audio_transcript.delta",
    }
    assert read - ga_names <= beta_names


def server_events(interaction):
    return [f["data"] for f in interaction.response.body.frames if f["from"] == "server"]


def test_every_built_openai_event_validates_as_the_sdks_server_event():
    adapter = pydantic.TypeAdapter(RealtimeServerEvent)
    events = server_events(build.openai_realtime(TURNS, session_update=True))
    parsed = [adapter.validate_python(event) for event in events]
    assert [p.type for p in parsed] == [e["type"] for e in events]
    done = [p for p in parsed if p.type == "response.done"]
    assert [p.response.status for p in done] == ["completed"] * 4
    assert done[2].response.output[0].name == "weather"


def test_every_built_gemini_message_validates_as_the_sdks_live_server_message():
    messages = server_events(build.gemini_live(TURNS, model="gemini-live-2.5-flash"))
    parsed = [genai_types.LiveServerMessage.model_validate(m) for m in messages]
    assert parsed[0].setup_complete is not None
    audio = [
        part.inline_data.data
        for m in parsed
        if m.server_content and m.server_content.model_turn
        for part in m.server_content.model_turn.parts
        if part.inline_data
    ]
    assert audio == [b"\x00\x01", b"\x02\x03"]
    assert [m.tool_call.function_calls[0].args for m in parsed if m.tool_call] == [
        {"city": "Paris"}
    ]


@pytest.mark.parametrize("spelling", ["camel", "snake"])
def test_the_fields_the_gemini_live_view_reads_are_live_server_message_fields(spelling):
    # One message holding every field the view reads, in either spelling: google-genai's
    # models forbid unknown fields, so a misspelt name fails here.
    camel = {
        "serverContent": {
            "modelTurn": {
                "parts": [
                    {"text": "a", "thought": True},
                    {"inlineData": {"mimeType": "audio/pcm", "data": "AAE="}},
                    {"functionCall": {"id": "c", "name": "f", "args": {}}},
                ]
            },
            "outputTranscription": {"text": "a"},
            "turnComplete": True,
            "turnCompleteReason": "NEED_MORE_INPUT",
            "interrupted": False,
        },
        "toolCall": {"functionCalls": [{"id": "c", "name": "f", "args": {}}]},
        "usageMetadata": {"promptTokenCount": 1, "responseTokenCount": 2, "totalTokenCount": 3},
    }
    snake = {
        "server_content": {
            "model_turn": {"parts": [{"inline_data": {"mime_type": "audio/pcm", "data": "AAE="}}]},
            "output_transcription": {"text": "a"},
            "turn_complete": True,
            "turn_complete_reason": "NEED_MORE_INPUT",
        },
        "tool_call": {"function_calls": [{"name": "f", "args": {}}]},
        "usage_metadata": {"prompt_token_count": 1, "response_token_count": 2},
    }
    message = genai_types.LiveServerMessage.model_validate(camel if spelling == "camel" else snake)
    assert message.server_content.turn_complete is True
    assert message.tool_call.function_calls[0].name == "f"
