"""The loopback LLM emulator speaks the real wire formats of the official SDKs.

Every test talks to a live emulator on 127.0.0.1 through the unmodified ``openai``,
``anthropic`` and ``ollama`` clients (or plain ``httpx`` for raw wire checks).

Timing tests read real time with :func:`tests.support.realtime.wall`, the emulator's own
clock. Nothing reaches the client before the emulator began to write it (exact), and nothing
is later than this machine's sleeps are late right now (``paced``).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest

from tests.support.emulator import CREATED, OLLAMA_CREATED_AT, WORDS, Emulator, ResponseRecord
from tests.support.realtime import paced, wall

USER_HI = [{"role": "user", "content": "Say hi"}]
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather", "parameters": WEATHER_SCHEMA},
    }
]
ANTHROPIC_TOOLS = [
    {"name": "get_weather", "description": "Weather", "input_schema": WEATHER_SCHEMA}
]


@pytest.fixture
def emu():
    with Emulator() as emulator:
        yield emulator


@pytest.fixture
def oai(emu):
    with openai.OpenAI(api_key="test-key", base_url=emu.base_url + "/v1", max_retries=0) as client:
        yield client


@pytest.fixture
def claude(emu):
    with anthropic.Anthropic(api_key="test-key", base_url=emu.base_url, max_retries=0) as client:
        yield client


@pytest.fixture
def llama(emu):
    with ollama.Client(host=emu.base_url) as client:
        yield client


def assert_word_reply(text: str, count: int = 5) -> None:
    words = text.split(" ")
    assert len(words) == count
    assert all(word in WORDS for word in words)


# --------------------------------------------------------------------------- openai chat


def test_openai_chat_non_streaming(emu, oai):
    completion = oai.chat.completions.create(model="gpt-test", messages=USER_HI)

    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.created == CREATED
    assert completion.model == "gpt-test"
    choice = completion.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert_word_reply(choice.message.content)
    assert completion.usage.completion_tokens == 5
    total = completion.usage.prompt_tokens + completion.usage.completion_tokens
    assert completion.usage.total_tokens == total

    (request,) = emu.requests
    assert (request.method, request.path, request.query) == ("POST", "/v1/chat/completions", "")
    assert request.body["messages"] == USER_HI
    assert request.header("authorization") == "Bearer test-key"
    assert request.received_at <= wall()
    assert emu.wait_idle()  # the client can finish reading before the server logs its write
    (record,) = emu.responses
    assert (record.status, record.streamed, record.gzip) == (200, False, False)
    assert ("Content-Length", str(len(record.body))) in record.headers
    assert not any(key.lower() == "date" for key, _ in record.headers)

    again = oai.chat.completions.create(model="gpt-test", messages=USER_HI)
    assert again.model_dump() == completion.model_dump()
    assert emu.wait_idle()
    first, second = emu.responses
    assert first.body == second.body


def test_openai_chat_streaming_text_with_usage(emu, oai):
    emu.events = 3
    stream = oai.chat.completions.create(
        model="gpt-test",
        messages=USER_HI,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)

    assert {chunk.object for chunk in chunks} == {"chat.completion.chunk"}
    assert {chunk.id for chunk in chunks} == {chunks[0].id}
    assert {(chunk.model, chunk.created) for chunk in chunks} == {("gpt-test", CREATED)}
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert_word_reply(text, 3)
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == 3

    # The same conversation gives the same text, streamed or not.
    whole = oai.chat.completions.create(model="gpt-test", messages=USER_HI)
    assert whole.choices[0].message.content == text

    emu.wait_idle()
    record = emu.streams[0]
    assert ("Transfer-Encoding", "chunked") in record.headers
    assert [event.kind for event in record.events] == ["frame"] + ["delta"] * 3 + ["frame"] * 3
    assert record.events[-1].data == b"data: [DONE]\n\n"
    assert len(record.event_times) == len(record.offsets) == 7
    assert record.offsets == sorted(record.offsets)
    assert record.offsets[0] >= 0


def test_openai_chat_tool_call_then_tool_result(emu, oai):
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    chunks = list(
        oai.chat.completions.create(
            model="gpt-test", messages=messages, tools=CHAT_TOOLS, stream=True
        )
    )

    calls = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or []]
    head = calls[0]
    assert head.id.startswith("call_")
    assert (head.type, head.function.name, head.function.arguments) == (
        "function",
        "get_weather",
        "",
    )
    argument_pieces = [call.function.arguments for call in calls[1:]]
    assert len(argument_pieces) == 5
    arguments = json.loads("".join(argument_pieces))
    assert set(arguments) == {"city", "days"}
    assert isinstance(arguments["city"], str)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"

    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": head.id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps(arguments)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": head.id, "content": "sunny, 21 C"},
    ]
    answer = oai.chat.completions.create(model="gpt-test", messages=messages, tools=CHAT_TOOLS)
    assert answer.choices[0].finish_reason == "stop"
    assert "sunny, 21 C" in answer.choices[0].message.content
    assert not answer.choices[0].message.tool_calls


# --------------------------------------------------------------------------- openai responses


def test_openai_responses_streaming(emu, oai):
    with oai.responses.stream(model="gpt-resp", input="Say hi") as stream:
        events = list(stream)
        final = stream.get_final_response()

    types = [event.type for event in events]
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 5,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
    assert_word_reply("".join(deltas))
    assert final.status == "completed"
    assert final.id.startswith("resp_")
    assert final.model == "gpt-resp"
    assert final.output_text == "".join(deltas)
    assert final.usage.output_tokens == 5

    emu.wait_idle()
    names = [event.name for event in emu.streams[0].events]
    assert names == types  # the SSE `event:` lines
    whole = oai.responses.create(model="gpt-resp", input="Say hi")
    assert whole.output_text == final.output_text


# --------------------------------------------------------------------------- anthropic


def test_anthropic_messages_streaming_text(emu, claude):
    with claude.messages.stream(model="claude-test", max_tokens=64, messages=USER_HI) as stream:
        deltas = list(stream.text_stream)
        final = stream.get_final_message()

    assert len(deltas) == 5
    assert_word_reply("".join(deltas))
    assert final.content[0].text == "".join(deltas)
    assert (final.model, final.stop_reason, final.usage.output_tokens) == (
        "claude-test",
        "end_turn",
        5,
    )
    assert final.id.startswith("msg_")

    emu.wait_idle()
    assert [event.name for event in emu.streams[0].events] == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * 5,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert ("request-id", dict(emu.streams[0].headers)["x-request-id"]) in emu.streams[0].headers


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "json"])
def test_anthropic_tool_use_then_tool_result(emu, claude, streaming):
    def ask(messages):
        kwargs = {
            "model": "claude-test",
            "max_tokens": 64,
            "messages": messages,
            "tools": ANTHROPIC_TOOLS,
        }
        if not streaming:
            return claude.messages.create(**kwargs)
        with claude.messages.stream(**kwargs) as stream:
            return stream.get_final_message()

    messages = [{"role": "user", "content": "Weather in Paris?"}]
    first = ask(messages)
    assert first.stop_reason == "tool_use"
    (tool_use,) = first.content
    assert (tool_use.type, tool_use.name) == ("tool_use", "get_weather")
    assert tool_use.id.startswith("toolu_")
    assert set(tool_use.input) == {"city", "days"}

    messages += [
        {"role": "assistant", "content": [tool_use.model_dump(exclude_none=True)]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": tool_use.id, "content": "sunny, 21 C"}
            ],
        },
    ]
    second = ask(messages)
    assert second.stop_reason == "end_turn"
    assert second.content[0].type == "text"
    assert "sunny, 21 C" in second.content[0].text

    emu.wait_idle()
    assert [record.streamed for record in emu.responses] == [streaming, streaming]
    if streaming:
        deltas = [e.data for e in emu.responses[0].events if e.kind == "delta"]
        assert all(b'"type":"input_json_delta"' in data for data in deltas)


# --------------------------------------------------------------------------- ollama


def test_ollama_chat_streaming(emu, llama):
    parts = list(llama.chat(model="llama-test", messages=USER_HI, stream=True))

    assert [part.done for part in parts] == [False] * 5 + [True]
    assert_word_reply("".join(part.message.content for part in parts))
    final = parts[-1]
    assert (final.done_reason, final.eval_count, final.model) == ("stop", 5, "llama-test")
    assert final.created_at == OLLAMA_CREATED_AT

    emu.wait_idle()
    record = emu.streams[0]
    assert ("Content-Type", "application/x-ndjson") in record.headers
    assert all(event.data.endswith(b"\n") for event in record.events)
    assert len(record.events) == 6


def test_ollama_chat_non_streaming(emu, llama):
    response = llama.chat(model="llama-test", messages=USER_HI)

    assert response.done is True
    assert response.message.role == "assistant"
    assert_word_reply(response.message.content)
    assert emu.requests[0].body["stream"] is False
    assert not emu.responses[0].streamed


def test_ollama_streams_by_default(emu):
    body = {"model": "llama-test", "messages": USER_HI}  # no "stream" field
    reply = httpx.post(emu.base_url + "/api/chat", json=body)

    assert reply.headers["content-type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in reply.text.splitlines()]
    assert [line["done"] for line in lines] == [False] * 5 + [True]


# --------------------------------------------------------------------------- gzip


@dataclass
class Streamed:
    """One streamed chat completion as the client read it. Times are seconds from the moment
    the emulator had the request."""

    stream: Any
    text: str
    record: ResponseRecord
    arrivals: list[float]
    """When each content delta reached the client."""
    written: list[float]
    """When the emulator began to write each content delta."""


def stream_deltas(emu, oai):
    """Stream one chat completion (forgetting earlier ones): the arrivals, and a Streamed."""
    emu.clear()
    stream = oai.chat.completions.create(model="gpt-test", messages=USER_HI, stream=True)
    seen, text = [], ""
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            seen.append(wall())
            text += chunk.choices[0].delta.content
    assert emu.wait_idle()  # the client can finish reading before the server logs its write
    (record,) = emu.streams
    origin = record.received_at
    written = [event.started_at - origin for event in record.events if event.kind == "delta"]
    streamed = Streamed(stream, text, record, [t - origin for t in seen], written)
    return streamed.arrivals, streamed


def test_gzip_openai_streaming_is_still_incremental(emu, oai):
    # Each delta reaches the client once written, not when the gzip stream ends.
    emu.configure(gzip=True, delay=0.03)

    streamed = paced(
        lambda: stream_deltas(emu, oai), lambda s: s.written, gaps=[0.03], what="delta"
    )

    assert streamed.stream.response.headers["content-encoding"] == "gzip"
    assert_word_reply(streamed.text)
    assert streamed.record.gzip
    with httpx.stream(
        "POST", emu.base_url + "/v1/chat/completions", json={"messages": USER_HI, "stream": True}
    ) as raw:
        assert next(raw.iter_raw()).startswith(b"\x1f\x8b")  # gzip magic


# --------------------------------------------------------------------------- failures


def test_fail_next_429_then_success_with_retry(emu):
    emu.fail_next(429, retry_after="0")
    with openai.OpenAI(api_key="test-key", base_url=emu.base_url + "/v1", max_retries=1) as client:
        completion = client.chat.completions.create(model="gpt-test", messages=USER_HI)

    assert_word_reply(completion.choices[0].message.content)
    assert len(emu.requests) == 2
    assert [record.status for record in emu.responses] == [429, 200]
    assert ("Retry-After", "0") in emu.responses[0].headers
    assert [r.header("x-stainless-retry-count") for r in emu.requests] == ["0", "1"]
    assert emu.pending_failures == []


def test_fail_next_error_bodies_are_provider_shaped(emu, oai, claude):
    emu.fail_next(429, retry_after="0", path="/v1/messages")
    emu.fail_next(429, retry_after="0", path="/v1/chat/completions")

    with pytest.raises(openai.RateLimitError) as openai_error:
        oai.chat.completions.create(model="gpt-test", messages=USER_HI)
    assert set(openai_error.value.body) >= {"message", "type", "code"}

    with pytest.raises(anthropic.RateLimitError) as anthropic_error:
        claude.messages.create(model="claude-test", max_tokens=64, messages=USER_HI)
    assert anthropic_error.value.body["type"] == "error"
    assert anthropic_error.value.body["error"]["type"] == "rate_limit_error"

    emu.fail_next(502, retry_after=None, body="<html><h1>502 Bad Gateway</h1></html>", times=2)
    for _ in range(2):
        with pytest.raises(openai.InternalServerError) as gateway_error:
            oai.chat.completions.create(model="gpt-test", messages=USER_HI)
        assert gateway_error.value.response.headers["content-type"].startswith("text/html")
    assert "retry-after" not in gateway_error.value.response.headers
    assert oai.chat.completions.create(model="gpt-test", messages=USER_HI).choices
    assert [record.status for record in emu.responses] == [429, 429, 502, 502, 200]


def test_unknown_path_and_method(emu):
    missing = httpx.post(emu.base_url + "/v1/embeddings", json={})
    assert missing.status_code == 404
    assert "message" in missing.json()["error"]
    wrong_method = httpx.get(emu.base_url + "/v1/chat/completions?x=1")
    assert wrong_method.status_code == 405
    assert emu.requests[1].params == [("x", "1")]


# --------------------------------------------------------------------------- timing


def test_deltas_arrive_incrementally(emu, oai):
    emu.configure(events=5, delay=0.05)

    # No delta reached the client before the server began to write it, and none later than
    # this machine's sleeps are late right now.
    streamed = paced(
        lambda: stream_deltas(emu, oai), lambda s: s.written, gaps=[0.05], what="delta"
    )

    assert len(streamed.arrivals) == 5
    # The server waits the delay between deltas: from one write's end to the next one's start.
    deltas = [event for event in streamed.record.events if event.kind == "delta"]
    gaps = [later.started_at - earlier.sent_at for earlier, later in itertools.pairwise(deltas)]
    assert min(gaps) >= 0.045
    offsets = streamed.record.delta_offsets
    assert offsets[-1] - offsets[0] >= 0.19


def test_first_event_delay(emu, claude):
    emu.first_event_delay = 0.1

    # The headers go out at once and the first event after the delay, no later than this
    # machine's sleeps are late right now; the client sees the first text no sooner.
    def run():
        emu.clear()
        sent = wall()
        with claude.messages.stream(model="claude-test", max_tokens=64, messages=USER_HI) as stream:
            first = next(iter(stream.text_stream))
            first_seen = wall()
        assert emu.wait_idle()
        (record,) = emu.streams
        origin = record.received_at
        assert sent <= origin
        times = [record.headers_sent_at, record.events[0].started_at]
        return [t - origin for t in times], (first, first_seen - origin)

    # From the emulator having the request: headers sent, first event written.
    first, first_seen = paced(run, [0.0, 0.1], gaps=[0.1], what="header or event")

    assert first
    assert first_seen >= 0.1


def test_stop_closes_connections_and_keeps_base_url():
    emu = Emulator().start()
    base_url = emu.base_url
    with openai.OpenAI(api_key="test-key", base_url=base_url + "/v1", max_retries=0) as client:
        assert client.chat.completions.create(model="gpt-test", messages=USER_HI).choices
        emu.stop()  # the client still holds a keep-alive connection
        assert not emu.running
        assert emu.base_url == base_url
        with pytest.raises(openai.APIConnectionError):
            client.chat.completions.create(model="gpt-test", messages=USER_HI)
    assert len(emu.requests) == 1
