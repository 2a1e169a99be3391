"""Built cassettes, read by the official SDKs (DESIGN §4, ``pytest_toolnexus.build``).

Each builder's answer is replayed to the SDK it imitates, which must parse it into exactly the
text and tool calls it was built from, with each delta arriving at its ``Cadence`` time on the
virtual clock (to the millisecond). Errors must surface as each SDK's own typed error.
"""

import itertools
import json
import time

import anthropic
import httpx
import httpx2
import ollama
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors

from pytest_toolnexus import (
    CassetteMissError,
    Headers,
    TransportRequest,
    assert_incremental,
    assert_waits,
    build,
    load_cassette,
    use_cassette,
)

TEXT = "The builder's answer, wörd by wörd ✓"
WORDS = build.split_text(TEXT)
CADENCE = build.Cadence(ttft=0.25, gap=0.04, jitter=0.015, seed=7, headers=0.03)
WEATHER = build.ToolCall("get_weather", {"city": "Paris", "unit": "C"})
TIME = build.ToolCall("get_time", '{"zone":"Europe/Paris"}', id="call_fixed_id")
MESSAGES = [{"role": "user", "content": "Weather and time in Paris?"}]
KEY = "test-key-not-a-secret"


def served(tmp_path, *interactions, **options):
    path = tmp_path / "built.msgpack"
    # The virtual clock starts at the cassette's recorded start, so wall times are fixed.
    build.build_cassette(path, interactions, meta={"clock_epoch": 1_767_225_600.0})
    return use_cassette(path, **options)


def cadence_seconds(count, cadence=CADENCE):
    return [t / 1000 for t in cadence.times(count)]


CONTENT_EVENTS = {
    "response.output_text.delta",
    "response.function_call_arguments.delta",
    "content_block_delta",
}


def content_count(built):
    """How many events of a built stream carry content (text or tool-call arguments): those
    are the events that follow the cadence, text first."""
    return sum(1 for e in built.response.body.events if e.get("event") in CONTENT_EVENTS)


def openai_client(cassette, retries=0):
    http = httpx2.Client(transport=cassette.http_transport())
    return openai.OpenAI(api_key=KEY, http_client=http, max_retries=retries)


def anthropic_client(cassette, retries=0):
    http = httpx2.Client(transport=cassette.http_transport())
    return anthropic.Anthropic(api_key=KEY, http_client=http, max_retries=retries)


def gemini_client(cassette):
    http = httpx.Client(transport=cassette.http_transport())
    return genai.Client(api_key=KEY, http_options={"api_version": "v1", "httpx_client": http})


def ollama_client(cassette):
    return ollama.Client(host="http://localhost:11434", transport=cassette.http_transport())


class Clock:
    """Seconds on the (virtual) clock since it was made."""

    def __init__(self):
        self.t0 = time.monotonic()

    def __call__(self):
        return time.monotonic() - self.t0


# -- OpenAI chat completions --------------------------------------------------------------------


def test_openai_chat_stream_is_parsed_into_its_text_word_by_word_on_the_cadence(tmp_path):
    with served(tmp_path, build.openai_chat(TEXT, cadence=CADENCE)) as cassette:
        clock = Clock()
        deltas, times, finish = [], [], None
        for chunk in openai_client(cassette).chat.completions.create(
            model="gpt-4o-mini", messages=MESSAGES, stream=True
        ):
            for choice in chunk.choices:
                if choice.delta.content:
                    deltas.append(choice.delta.content)
                    times.append(clock())
                finish = choice.finish_reason or finish

    assert deltas == WORDS
    assert "".join(deltas) == TEXT
    assert finish == "stop"
    assert_incremental(times, expected=cadence_seconds(len(WORDS)), tolerance=0.001)


def test_openai_chat_stream_carries_tool_call_deltas_that_reassemble(tmp_path):
    built = build.openai_chat(tool_calls=[WEATHER, TIME], cadence=CADENCE)
    with served(tmp_path, built) as cassette:
        calls, finish = {}, None
        for chunk in openai_client(cassette).chat.completions.create(
            model="gpt-4o-mini", messages=MESSAGES, stream=True
        ):
            for choice in chunk.choices:
                for delta in choice.delta.tool_calls or []:
                    call = calls.setdefault(delta.index, {"id": None, "name": "", "args": ""})
                    call["id"] = delta.id or call["id"]
                    call["name"] += (delta.function.name or "") if delta.function else ""
                    call["args"] += (delta.function.arguments or "") if delta.function else ""
                finish = choice.finish_reason or finish

    assert finish == "tool_calls"
    assert [calls[i]["name"] for i in sorted(calls)] == ["get_weather", "get_time"]
    assert json.loads(calls[0]["args"]) == {"city": "Paris", "unit": "C"}
    assert calls[0]["args"] == '{"city":"Paris","unit":"C"}'  # arguments as a JSON string
    assert calls[1]["args"] == '{"zone":"Europe/Paris"}'
    assert calls[0]["id"].startswith("call_")
    assert calls[1]["id"] == "call_fixed_id"


def test_openai_chat_stream_ends_with_usage_when_include_usage_is_asked(tmp_path):
    built = build.openai_chat(TEXT, usage={"input": 21, "output": 9}, cadence=CADENCE)
    with served(tmp_path, built) as cassette:
        chunks = list(
            openai_client(cassette).chat.completions.create(
                model="gpt-4o-mini",
                messages=MESSAGES,
                stream=True,
                stream_options={"include_usage": True},
            )
        )

    usage = chunks[-1].usage
    assert chunks[-1].choices == []
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (21, 9, 30)
    assert all(chunk.usage is None for chunk in chunks[:-1])


def test_openai_chat_stream_without_usage(tmp_path):
    built = build.openai_chat(TEXT, include_usage=False, cadence=CADENCE)
    with served(tmp_path, built) as cassette:
        chunks = list(
            openai_client(cassette).chat.completions.create(
                model="gpt-4o-mini", messages=MESSAGES, stream=True
            )
        )

    assert all(chunk.usage is None for chunk in chunks)
    assert all(chunk.choices for chunk in chunks)


def test_openai_chat_answer_without_streaming(tmp_path):
    built = build.openai_chat(
        TEXT, tool_calls=[WEATHER], stream=False, model="gpt-4.1", cadence=CADENCE
    )
    with served(tmp_path, built) as cassette:
        reply = openai_client(cassette).chat.completions.create(model="gpt-4.1", messages=MESSAGES)
        answered_at = cassette.elapsed

    message = reply.choices[0].message
    assert message.content == TEXT
    assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris", "unit": "C"})
    ]
    assert reply.choices[0].finish_reason == "tool_calls"
    assert reply.model == "gpt-4.1"
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert answered_at == pytest.approx(CADENCE.times(1)[0] / 1000)


# -- OpenAI Responses ---------------------------------------------------------------------------


def test_openai_responses_stream_text_and_function_call(tmp_path):
    built = build.openai_responses(TEXT, tool_calls=[WEATHER], cadence=CADENCE)
    with served(tmp_path, built) as cassette:
        clock = Clock()
        deltas, times, arguments, kinds = [], [], "", []
        for event in openai_client(cassette).responses.create(
            model="gpt-4o-mini", input="Weather in Paris?", stream=True
        ):
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
                times.append(clock())
            elif event.type == "response.function_call_arguments.delta":
                arguments += event.delta
            elif event.type == "response.completed":
                final = event.response

    assert deltas == WORDS
    assert kinds[0] == "response.created"
    assert kinds[-1] == "response.completed"
    assert json.loads(arguments) == {"city": "Paris", "unit": "C"}
    assert final.output_text == TEXT
    (call,) = [item for item in final.output if item.type == "function_call"]
    assert (call.name, json.loads(call.arguments)) == (
        "get_weather",
        {"city": "Paris", "unit": "C"},
    )
    # the deltas of both items share one cadence, text first
    wanted = cadence_seconds(content_count(built))[: len(WORDS)]
    assert_incremental(times, expected=wanted)


def test_openai_responses_answer_without_streaming(tmp_path):
    built = build.openai_responses(TEXT, tool_calls=[TIME], stream=False, cadence=CADENCE)
    with served(tmp_path, built) as cassette:
        reply = openai_client(cassette).responses.create(model="gpt-4o-mini", input="Time?")

    assert reply.output_text == TEXT
    assert reply.status == "completed"
    (call,) = [item for item in reply.output if item.type == "function_call"]
    assert (call.name, call.arguments, call.call_id) == (
        "get_time",
        '{"zone":"Europe/Paris"}',
        "call_fixed_id",
    )


# -- Anthropic Messages -------------------------------------------------------------------------


def test_anthropic_stream_text_and_tool_use_through_input_json_delta(tmp_path):
    built = build.anthropic_messages(TEXT, tool_calls=[WEATHER], cadence=CADENCE)
    with served(tmp_path, built) as cassette:
        clock = Clock()
        kinds, deltas, times, partial = [], [], [], ""
        with anthropic_client(cassette).messages.stream(
            model="claude-sonnet-4-6", max_tokens=256, messages=MESSAGES
        ) as stream:
            for event in stream:
                kinds.append(event.type)
                if event.type == "text":
                    deltas.append(event.text)
                    times.append(clock())
                elif event.type == "input_json":
                    partial += event.partial_json
            final = stream.get_final_message()

    assert "ping" in [e["event"] for e in built.response.body.events]
    assert deltas == WORDS
    assert json.loads(partial) == {"city": "Paris", "unit": "C"}
    text, tool = final.content
    assert text.text == TEXT
    assert (tool.type, tool.name, tool.input) == ("tool_use", "get_weather", WEATHER.arguments)
    assert tool.id.startswith("toolu_")
    assert final.stop_reason == "tool_use"
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
    wanted = cadence_seconds(content_count(built))[: len(WORDS)]
    assert_incremental(times, expected=wanted)


def test_anthropic_stream_has_a_ping_the_sdk_accepts(tmp_path):
    built = build.anthropic_messages("Hi there", cadence=CADENCE)
    with served(tmp_path, built) as cassette:
        events = list(
            anthropic_client(cassette).messages.create(
                model="claude-sonnet-4-6", max_tokens=16, messages=MESSAGES, stream=True
            )
        )

    # the ping went over the wire, one event among the others, and the SDK skipped it
    wire = [e.get("event") for e in built.response.body.events]
    assert wire[2] == "ping"
    assert len(cassette.requests[0].deliveries) == len(wire) == 8
    assert [e.type for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_anthropic_answer_without_streaming(tmp_path):
    built = build.anthropic_messages(
        TEXT, tool_calls=[TIME], stream=False, usage={"input": 30, "output": 12}, cadence=CADENCE
    )
    with served(tmp_path, built) as cassette:
        reply = anthropic_client(cassette).messages.create(
            model="claude-sonnet-4-6", max_tokens=256, messages=MESSAGES
        )

    text, tool = reply.content
    assert text.text == TEXT
    assert (tool.name, tool.input, tool.id) == (
        "get_time",
        {"zone": "Europe/Paris"},
        "call_fixed_id",
    )
    assert reply.stop_reason == "tool_use"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (30, 12)


# -- Gemini -------------------------------------------------------------------------------------


def test_gemini_stream_generate_content_text_and_function_call(tmp_path):
    built = build.gemini(TEXT, tool_calls=[WEATHER], cadence=CADENCE)
    with served(tmp_path, built) as cassette:
        clock = Clock()
        deltas, times, calls = [], [], []
        for chunk in gemini_client(cassette).models.generate_content_stream(
            model="gemini-2.5-flash", contents="Weather in Paris?"
        ):
            for part in chunk.candidates[0].content.parts:
                if part.text:
                    deltas.append(part.text)
                    times.append(clock())
                if part.function_call:
                    calls.append(part.function_call)
            last = chunk

    assert deltas == WORDS
    assert [(c.name, c.args) for c in calls] == [("get_weather", {"city": "Paris", "unit": "C"})]
    assert last.candidates[0].finish_reason == "STOP"
    assert cassette.requests[0].url.endswith(":streamGenerateContent?alt=sse")
    assert_incremental(times, expected=cadence_seconds(len(WORDS) + 1)[: len(WORDS)])


def test_gemini_generate_content_without_streaming(tmp_path):
    built = build.gemini(TEXT, tool_calls=[TIME], stream=False, cadence=CADENCE)
    with served(tmp_path, built) as cassette:
        reply = gemini_client(cassette).models.generate_content(
            model="gemini-2.5-flash", contents="Time?"
        )

    parts = reply.candidates[0].content.parts
    assert parts[0].text == TEXT
    assert [(c.name, c.args) for c in reply.function_calls] == [
        ("get_time", {"zone": "Europe/Paris"})
    ]
    assert reply.usage_metadata.total_token_count > 0


# -- Ollama -------------------------------------------------------------------------------------


def test_ollama_chat_ndjson_stream_text_then_tool_calls(tmp_path):
    built = build.ollama_chat(TEXT, tool_calls=[WEATHER], cadence=CADENCE)
    with served(tmp_path, built) as cassette:
        clock = Clock()
        deltas, times, calls, done = [], [], [], []
        for part in ollama_client(cassette).chat(model="llama3.2", messages=MESSAGES, stream=True):
            if part.message.content:
                deltas.append(part.message.content)
                times.append(clock())
            calls += part.message.tool_calls or []
            done.append(part.done)

    assert deltas == WORDS
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris", "unit": "C"})
    ]
    assert done[-1] is True
    assert not any(done[:-1])
    assert built.response.headers.get("content-type") == "application/x-ndjson"
    assert_incremental(times, expected=cadence_seconds(len(WORDS) + 2)[: len(WORDS)])


def test_ollama_chat_answer_without_streaming(tmp_path):
    built = build.ollama_chat(TEXT, tool_calls=[TIME], stream=False, cadence=CADENCE)
    with served(tmp_path, built) as cassette:
        reply = ollama_client(cassette).chat(model="llama3.2", messages=MESSAGES)

    assert reply.message.content == TEXT
    assert [(c.function.name, dict(c.function.arguments)) for c in reply.message.tool_calls] == [
        ("get_time", {"zone": "Europe/Paris"})
    ]
    assert reply.done


# -- errors -------------------------------------------------------------------------------------


def test_openai_error_is_the_sdks_typed_error_with_the_built_message(tmp_path):
    with (
        served(tmp_path, build.error(400, message="Unsupported parameter: 'foo'")) as cassette,
        pytest.raises(openai.BadRequestError) as caught,
    ):
        openai_client(cassette).chat.completions.create(model="m", messages=MESSAGES)

    assert caught.value.status_code == 400
    assert caught.value.body["message"] == "Unsupported parameter: 'foo'"
    assert caught.value.type == "invalid_request_error"


def test_anthropic_error_is_the_sdks_typed_error_with_the_built_message(tmp_path):
    built = build.error(529, url=build.ANTHROPIC_URL, message="Overloaded")
    with served(tmp_path, built) as cassette, pytest.raises(anthropic.OverloadedError) as caught:
        anthropic_client(cassette).messages.create(
            model="claude-sonnet-4-6", max_tokens=16, messages=MESSAGES
        )

    assert caught.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }


def test_gemini_client_error_carries_googles_status_name(tmp_path):
    url = f"{build.GEMINI_BASE}/gemini-2.5-flash:generateContent"
    with (
        served(tmp_path, build.error(400, url=url, message="Invalid JSON payload")) as cassette,
        pytest.raises(genai_errors.ClientError) as caught,
    ):
        gemini_client(cassette).models.generate_content(model="gemini-2.5-flash", contents="Hi")

    assert (caught.value.code, caught.value.status) == (400, "INVALID_ARGUMENT")
    assert caught.value.message == "Invalid JSON payload"


def test_gemini_error_is_the_sdks_typed_error_with_the_built_message(tmp_path):
    url = f"{build.GEMINI_BASE}/gemini-2.5-flash:generateContent"
    with (
        served(tmp_path, build.error(429, url=url, message="Quota exceeded")) as cassette,
        pytest.raises(genai_errors.ClientError) as caught,
    ):
        gemini_client(cassette).models.generate_content(model="gemini-2.5-flash", contents="Hi")

    assert (caught.value.code, caught.value.status) == (429, "RESOURCE_EXHAUSTED")
    assert caught.value.message == "Quota exceeded"


def test_ollama_error_is_the_sdks_typed_error_with_the_built_message(tmp_path):
    built = build.error(404, url=build.OLLAMA_URL, message="model 'llama9' not found")
    with served(tmp_path, built) as cassette, pytest.raises(ollama.ResponseError) as caught:
        ollama_client(cassette).chat(model="llama9", messages=MESSAGES)

    assert caught.value.status_code == 404
    assert caught.value.error == "model 'llama9' not found"


def test_a_retry_after_and_an_html_page_built_into_the_cassette(tmp_path):
    built = [
        build.error(503, retry_after="3"),
        build.openai_chat(TEXT, stream=False),
        build.error(502, html=True, message="upstream went away"),
    ]
    with served(tmp_path, *built) as cassette:
        reply = openai_client(cassette, retries=1).chat.completions.create(
            model="m", messages=MESSAGES
        )
        with pytest.raises(openai.InternalServerError) as caught:
            openai_client(cassette).chat.completions.create(model="m", messages=MESSAGES)

    assert reply.choices[0].message.content == TEXT
    assert [r.status for r in cassette.requests] == [503, 200, 502]
    assert_waits(cassette.requests[:2], [3.0])
    assert caught.value.response.headers["content-type"] == "text/html"
    assert "<p>upstream went away</p>" in caught.value.response.text


# -- Cadence ------------------------------------------------------------------------------------


def test_cadence_without_jitter_is_ttft_then_one_gap_apart():
    cadence = build.Cadence(ttft=0.3, gap=0.05)
    assert cadence.times(4) == [300.0, 350.0, 400.0, 450.0]


def test_cadence_is_reproducible_from_its_seed_and_varies_with_it():
    same = build.Cadence(ttft=0.2, gap=0.05, jitter=0.02, seed=3)
    assert same.times(50) == build.Cadence(ttft=0.2, gap=0.05, jitter=0.02, seed=3).times(50)
    assert same.times(50) != build.Cadence(ttft=0.2, gap=0.05, jitter=0.02, seed=4).times(50)


@pytest.mark.parametrize("seed", range(5))
def test_cadence_jitter_is_bounded_and_times_never_decrease(seed):
    cadence = build.Cadence(ttft=0.2, gap=0.01, jitter=0.03, seed=seed, headers=0.1)
    times = cadence.times(200)
    nominal = [200 + 10 * i for i in range(200)]
    assert all(abs(t - n) <= 30 + 0.001 for t, n in zip(times, nominal, strict=True))
    assert all(later >= earlier for earlier, later in itertools.pairwise(times))
    assert times[0] >= 100  # never before the headers
    assert len(set(times)) > 100  # the jitter really moves them


def test_cadence_at_sdk_level_ttft_and_gap_are_respected_under_virtual_time(tmp_path):
    cadence = build.Cadence(ttft=0.7, gap=0.125, headers=0.1)
    with served(tmp_path, build.anthropic_messages(TEXT, cadence=cadence)) as cassette:
        client = anthropic_client(cassette)
        clock = Clock()
        with client.messages.stream(
            model="claude-sonnet-4-6", max_tokens=64, messages=MESSAGES
        ) as stream:
            at_headers = clock()
            times = []
            for _ in stream.text_stream:
                times.append(clock())

    assert at_headers == pytest.approx(0.1)
    assert times[0] == pytest.approx(0.7)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == pytest.approx([0.125] * (len(times) - 1), abs=0.001)


# -- the request side ---------------------------------------------------------------------------


def seam_request(body):
    return TransportRequest(
        method="POST",
        url=build.OPENAI_CHAT_URL,
        headers=Headers([("content-type", "application/json")]),
        body=body,
    )


def test_a_built_request_matches_any_body_at_its_url(tmp_path):
    answers = [build.openai_chat("one", stream=False), build.openai_chat("two", stream=False)]
    with served(tmp_path, *answers) as cassette:
        first = cassette.transport(seam_request({"model": "a", "messages": []}))
        second = cassette.transport(seam_request({"anything": ["at", "all"]}))

    assert first.body["choices"][0]["message"]["content"] == "one"
    assert second.body["choices"][0]["message"]["content"] == "two"


def test_request_body_pins_the_body_a_built_answer_matches(tmp_path):
    pinned = build.openai_chat("pinned", stream=False, request_body={"model": "a", "n": 1})
    with served(tmp_path, pinned) as cassette:
        with pytest.raises(CassetteMissError, match="No recorded interaction matches"):
            cassette.transport(seam_request({"model": "b", "n": 1}))
        answer = cassette.transport(seam_request({"n": 1, "model": "a"}))

    assert answer.body["choices"][0]["message"]["content"] == "pinned"


def test_a_built_request_does_not_match_another_url(tmp_path):
    with served(tmp_path, build.openai_chat("x", stream=False), on_unused="ignore") as cassette:
        request = TransportRequest(
            method="POST", url=build.ANTHROPIC_URL, headers=Headers(), body={}
        )
        with pytest.raises(CassetteMissError):
            cassette.transport(request)


def test_build_cassette_writes_a_file_marked_as_built(tmp_path):
    path = tmp_path / "sub" / "built.msgpack"
    path.parent.mkdir()
    build.build_cassette(path, [build.openai_chat("x")], meta={"purpose": "test"})

    loaded = load_cassette(path)
    assert loaded.meta["source"] == "built with pytest_toolnexus.build, not recorded"
    assert loaded.meta["purpose"] == "test"
    assert len(loaded.interactions) == 1
    again = tmp_path / "again.msgpack"
    build.build_cassette(again, [build.openai_chat("x")], meta={"purpose": "test"})
    assert again.read_bytes() == path.read_bytes()  # built cassettes are stable


def test_split_text_joins_back_to_the_text():
    for text in ["", " leading", "trailing ", "a  b\n\nc", TEXT]:
        assert "".join(build.split_text(text)) == text


def test_tool_call_arguments_are_a_compact_json_object():
    assert WEATHER.arguments_json == '{"city":"Paris","unit":"C"}'
    assert TIME.arguments_value == {"zone": "Europe/Paris"}
    with pytest.raises(ValueError, match="arguments must be a JSON object"):
        _ = build.ToolCall("f", "[1, 2]").arguments_value
