"""Provider views: one shape (ADR 0011) for every provider's answer, streamed or not."""

from pathlib import Path

import httpx2
import openai
import pytest

from pytest_toolnexus import (
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    build,
    load_cassette,
    use_cassette,
)
from pytest_toolnexus._store.cassette import EmptyBody, JsonBody, RecordedError, SseBody
from pytest_toolnexus.views import ViewError, provider_of, view

CASSETTES = Path(__file__).resolve().parent.parent / "cassettes" / "examples"
WEATHER = build.ToolCall("get_weather", {"city": "Paris"}, id="call_1")
CADENCE = build.Cadence(ttft=0.3, gap=0.1, jitter=0.02, seed=3)

BUILDERS = {
    "openai": build.openai_chat,
    "openai-responses": build.openai_responses,
    "anthropic": build.anthropic_messages,
    "gemini": build.gemini,
    "ollama": build.ollama_chat,
}


@pytest.mark.parametrize("provider", BUILDERS)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_text_answers_read_the_same_from_every_provider(provider, stream):
    interaction = BUILDERS[provider]("Hello there, world.", stream=stream, cadence=CADENCE)
    answer = view(interaction)
    assert answer.provider == provider
    assert answer.text == "Hello there, world."
    assert answer.tool_calls == ()
    assert answer.finish_reason == "stop"
    assert answer.usage.input_tokens == 12
    assert answer.usage.total_tokens == answer.usage.input_tokens + answer.usage.output_tokens
    assert answer.model
    assert answer.streamed is stream


@pytest.mark.parametrize("provider", BUILDERS)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_tool_calls_win_the_finish_reason_and_carry_json_string_arguments(provider, stream):
    interaction = BUILDERS[provider]("", tool_calls=[WEATHER], stream=stream, cadence=CADENCE)
    answer = view(interaction)
    assert answer.finish_reason == "tool_calls"
    (call,) = answer.tool_calls
    assert call.name == "get_weather"
    assert isinstance(call.arguments, str)
    assert call.arguments == '{"city":"Paris"}'


@pytest.mark.parametrize("provider", BUILDERS)
def test_stream_deltas_carry_their_arrival_times(provider):
    interaction = BUILDERS[provider]("one two three four", cadence=CADENCE)
    answer = view(interaction)
    assert [text for _, text in answer.deltas] == build.split_text("one two three four")
    assert [t for t, _ in answer.deltas] == pytest.approx([t / 1000 for t in CADENCE.times(4)])


def _answer(url, body, status=200):
    request = RecordedRequest("POST", url, Headers(), EmptyBody())
    return Interaction(request, RecordedResponse(status, Headers(), JsonBody(body), 1.0, 2.0))


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
    ],
)
def test_anthropic_stop_reasons_map_onto_the_shared_vocabulary(reason, expected):
    body = {
        "type": "message",
        "model": "m",
        "content": [{"type": "text", "text": "x"}],
        "stop_reason": reason,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    answer = view(_answer(build.ANTHROPIC_URL, body))
    assert (answer.finish_reason, answer.raw_finish_reason) == (expected, reason)


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
    ],
)
def test_gemini_finish_reasons_map_onto_the_shared_vocabulary(reason, expected):
    body = {
        "candidates": [
            {"content": {"parts": [{"text": "x"}], "role": "model"}, "finishReason": reason}
        ]
    }
    url = f"{build.GEMINI_BASE}/gemini-2.5-flash:generateContent"
    assert view(_answer(url, body)).finish_reason == expected


def test_an_incomplete_responses_answer_finishes_with_length():
    body = {
        "object": "response",
        "model": "m",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "cut"}]}],
        "usage": {"input_tokens": 3, "output_tokens": 9},
    }
    answer = view(_answer(build.OPENAI_RESPONSES_URL, body))
    assert (answer.text, answer.finish_reason) == ("cut", "length")
    assert answer.usage.total_tokens == 12


def test_a_gemini_json_array_stream_reads_as_one_answer():
    parts = [
        {"candidates": [{"content": {"parts": [{"text": t}], "role": "model"}}]}
        for t in ("Hel", "lo")
    ]
    parts[-1]["candidates"][0]["finishReason"] = "STOP"
    url = f"{build.GEMINI_BASE}/gemini-2.5-flash:streamGenerateContent"
    answer = view(_answer(url, parts))
    assert (answer.text, answer.finish_reason, answer.streamed) == ("Hello", "stop", True)


def test_a_gemini_json_array_that_arrived_element_by_element_has_timed_deltas():
    parts = [
        {"candidates": [{"content": {"parts": [{"text": t}], "role": "model"}}]}
        for t in ("Hel", "lo")
    ]
    url = f"{build.GEMINI_BASE}/gemini-2.5-flash:streamGenerateContent"
    request = RecordedRequest("POST", url, Headers(), EmptyBody())
    body = JsonBody(parts, (120.0, 250.5))
    answer = view(Interaction(request, RecordedResponse(200, Headers(), body, 100.0, 260.0)))
    assert answer.deltas == ((0.12, "Hel"), (0.2505, "lo"))


def test_absent_usage_stays_absent_not_zero():
    body = {"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]}
    usage = view(_answer(build.OPENAI_CHAT_URL, body)).usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (None, None, None)


def test_what_is_not_an_answer_raises_a_view_error():
    with pytest.raises(ViewError, match="HTTP 429"):
        view(build.error(429, retry_after="1"))
    with pytest.raises(ViewError, match="no provider view reads"):
        view(_answer("https://example.test/v1/other", {}))
    failed = Interaction(
        RecordedRequest("POST", build.OPENAI_CHAT_URL), error=RecordedError("ConnectError", "x", 1)
    )
    with pytest.raises(ViewError, match="transport error"):
        view(failed)


def _stream(url, events):
    request = RecordedRequest("POST", url)
    headers = Headers([("content-type", "text/event-stream")])
    return Interaction(request, RecordedResponse(200, headers, SseBody(events), 5.0, 900.0))


def _chunk(content, finish=None):
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": finish}
    return {"object": "chat.completion.chunk", "model": "gpt-x", "choices": [choice]}


def test_an_openai_stream_that_carries_an_error_event_gives_a_view_with_the_error():
    # Given a chat stream that sent two deltas, then an error in its data, and no [DONE]
    error = {"message": "The server had an error while processing your request.", "type": "x"}
    events = [
        {"t": 120.0, "data": _chunk("Hel")},
        {"t": 240.0, "data": _chunk("lo")},
        {"t": 610.0, "data": {"error": error}},
    ]

    answer = view(_stream(build.OPENAI_CHAT_URL, events))

    # Then the view says what went wrong, and keeps what arrived before it, at its times
    assert answer.error == "The server had an error while processing your request."
    assert answer.text == "Hello"
    assert answer.deltas == ((0.12, "Hel"), (0.24, "lo"))
    assert answer.finish_reason is None


def test_an_anthropic_event_error_gives_a_view_with_the_error():
    events = [
        {"t": 90.0, "event": "message_start", "data": {"type": "message_start", "message": {}}},
        {
            "t": 100.0,
            "event": "content_block_start",
            "data": {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        },
        {
            "t": 300.0,
            "event": "content_block_delta",
            "data": {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Par"},
            },
        },
        {
            "t": 800.0,
            "event": "error",
            "data": {
                "type": "error",
                "error": {"type": "overloaded_error", "message": "Overloaded"},
            },
        },
    ]

    answer = view(_stream(build.ANTHROPIC_URL, events))

    assert answer.error == "overloaded_error: Overloaded"
    assert answer.text == "Par"
    assert answer.deltas == ((0.3, "Par"),)


def test_an_answer_without_an_error_has_none():
    assert view(build.openai_chat("fine", stream=True)).error is None
    assert view(build.anthropic_messages("fine", stream=True)).error is None


MAGISTRAL = {
    "id": "cmpl-1",
    "object": "chat.completion",
    "model": "magistral-medium-2507",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": [{"type": "text", "text": "2 and 2 make 4."}],
                    },
                    {"type": "text", "text": "The answer is 4."},
                ],
            },
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 30, "total_tokens": 40},
}


def test_a_mistral_answer_of_thinking_and_text_chunks_reads_text_and_reasoning_apart():
    answer = view(_answer("https://api.mistral.ai/v1/chat/completions", MAGISTRAL))

    assert answer.text == "The answer is 4."
    assert answer.extra["reasoning"] == "2 and 2 make 4."
    assert answer.finish_reason == "stop"
    assert answer.model == "magistral-medium-2507"
    assert answer.usage.total_tokens == 40


def test_a_streamed_mistral_answer_of_chunks_has_timed_text_deltas_and_reasoning():
    thinking = [{"type": "thinking", "thinking": [{"type": "text", "text": "Four."}]}]
    events = [
        {"t": 100.0, "data": _chunk(thinking)},
        {"t": 200.0, "data": _chunk([{"type": "text", "text": "It is "}])},
        {"t": 350.0, "data": _chunk([{"type": "text", "text": "4."}], finish="stop")},
        {"t": 360.0, "text": "[DONE]"},
    ]

    answer = view(_stream("https://api.mistral.ai/v1/chat/completions", events))

    assert answer.text == "It is 4."
    assert answer.deltas == ((0.2, "It is "), (0.35, "4."))
    assert answer.extra["reasoning"] == "Four."


def test_a_view_error_cut_short_says_so_with_an_ellipsis():
    body = {"choices": [{"message": {"content": {"note": "x" * 200}}, "finish_reason": "stop"}]}

    with pytest.raises(ViewError) as caught:
        view(_answer(build.OPENAI_CHAT_URL, body))

    message = str(caught.value)
    assert "a text field holds dict {'note': 'xxx" in message
    assert message.endswith("x..., not a string")


@pytest.mark.parametrize(
    ("url", "provider"),
    [
        ("https://api.openai.com/v1/chat/completions", "openai"),
        ("http://127.0.0.1:1/v1/responses", "openai-responses"),
        ("https://api.anthropic.com/v1/messages", "anthropic"),
        (f"{build.GEMINI_BASE}/m:streamGenerateContent?alt=sse", "gemini"),
        ("http://localhost:11434/api/chat", "ollama"),
        ("https://example.test/", None),
    ],
)
def test_the_provider_is_read_from_the_url(url, provider):
    assert provider_of(url) == provider


def test_the_committed_example_recordings_read_as_answers():
    stream = load_cassette(
        CASSETTES / "test_openai_streaming" / "test_deltas_arrive_incrementally.msgpack"
    )
    answer = view(stream.interactions[0])
    assert len(answer.deltas) == 20
    assert answer.finish_reason == "stop"
    assert answer.deltas[-1][0] - answer.deltas[0][0] >= 0.9  # recorded 50 ms apart
    tools = load_cassette(CASSETTES / "test_anthropic_tools" / "test_tool_call_round_trip.msgpack")
    first, second = (view(i) for i in tools.interactions)
    assert first.finish_reason == "tool_calls"
    assert first.tool_calls[0].name == "get_weather"
    assert second.finish_reason == "stop"
    assert second.text


def test_the_handle_views_what_answered_each_request(tmp_path):
    path = tmp_path / "chat.msgpack"
    build.build_cassette(path, [build.openai_chat("Viewed from the handle.", cadence=CADENCE)])
    with use_cassette(path) as cassette:
        client = openai.OpenAI(
            api_key="k", http_client=httpx2.Client(transport=cassette.http_transport())
        )
        streamed = "".join(
            chunk.choices[0].delta.content or ""
            for chunk in client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            if chunk.choices
        )
    answer = cassette.view()
    assert answer.text == streamed == "Viewed from the handle."
    assert [t for t, _ in answer.deltas] == pytest.approx(cassette.requests[0].deliveries[1:5])


def test_check_fails_a_cassette_whose_answer_does_not_parse(tmp_path, capsys):
    from pytest_toolnexus._cli.main import main

    good = tmp_path / "good.msgpack"
    build.build_cassette(good, [build.anthropic_messages("fine")])
    bad = tmp_path / "bad.msgpack"
    events = [{"t": 5.0, "data": {"choices": "not a list"}}]
    request = RecordedRequest("POST", build.OPENAI_CHAT_URL)
    broken = Interaction(request, RecordedResponse(200, Headers(), SseBody(events), 1.0, 5.0))
    build.build_cassette(bad, [broken])

    assert main(["check", str(good)]) == 0
    assert main(["check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"FAIL {bad}: 1 provider answer(s) do not parse" in out
    assert "interaction #0 (openai): the openai answer does not parse" in out
