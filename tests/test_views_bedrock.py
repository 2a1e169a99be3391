"""The Bedrock Converse view: tool use streamed as partial JSON, and error frames."""

import json

from pytest_toolnexus._store.cassette import (
    EventStreamBody,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    frame_doc,
)
from pytest_toolnexus._store.eventstream import Frame, Header, encode
from pytest_toolnexus.views import view

URL = (
    "https://bedrock-runtime.us-east-1.amazonaws.com/model/amazon.nova-lite-v1%3A0/converse-stream"
)


def event(t_ms, name, payload, message_type="event"):
    headers = [Header(":message-type", "string", message_type)]
    if message_type == "event":
        headers.insert(0, Header(":event-type", "string", name))
    else:
        headers.insert(0, Header(":exception-type", "string", name))
    raw = encode(Frame(tuple(headers), json.dumps(payload, separators=(",", ":")).encode()))
    return frame_doc(t_ms, raw)


def answer(*frames):
    return Interaction(
        RecordedRequest("POST", URL),
        RecordedResponse(200, body=EventStreamBody(list(frames)), t_end=900.0),
    )


def test_a_streamed_tool_call_is_gathered_with_its_arguments_as_json():
    result = view(
        answer(
            event(100, "messageStart", {"role": "assistant"}),
            event(150, "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Let"}}),
            event(200, "contentBlockStop", {"contentBlockIndex": 0}),
            event(
                250,
                "contentBlockStart",
                {
                    "contentBlockIndex": 1,
                    "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "weather"}},
                },
            ),
            event(
                300,
                "contentBlockDelta",
                {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"city":'}}},
            ),
            event(
                350,
                "contentBlockDelta",
                {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '"Oslo"}'}}},
            ),
            event(400, "messageStop", {"stopReason": "tool_use"}),
            event(
                450, "metadata", {"usage": {"inputTokens": 9, "outputTokens": 4, "totalTokens": 13}}
            ),
        )
    )

    assert result.text == "Let"
    assert result.deltas == ((0.15, "Let"),)
    assert [(c.id, c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("tooluse_1", "weather", {"city": "Oslo"})
    ]
    assert (result.finish_reason, result.raw_finish_reason) == ("tool_calls", "tool_use")
    assert (result.usage.input_tokens, result.usage.total_tokens) == (9, 13)
    assert result.model == "amazon.nova-lite-v1:0"


def test_an_exception_frame_is_the_views_error_naming_it():
    broken = answer(
        event(100, "messageStart", {"role": "assistant"}),
        event(150, "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Let"}}),
        event(200, "throttlingException", {"message": "Too many tokens"}, "exception"),
    )

    result = view(broken)

    assert result.error == "throttlingException: Too many tokens"
    assert result.text == "Let"
