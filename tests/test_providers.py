"""The provider layer: which dialect a request speaks, and what each dialect's answers,
errors and streams look like to the official SDKs.

The fixtures in ``tests/data/providers/`` are written by hand from each provider's public API
documentation (each file's ``source`` names the pages). The SDKs read them unmodified, through
``httpx2`` and a cassette, so a fixture that the SDK could not parse fails here first.
"""

import json
from pathlib import Path

import anthropic
import httpx2
import ollama
import openai
import pytest

from pytest_toolnexus import (
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    build,
    faults,
    use_cassette,
)
from pytest_toolnexus._cli.main import main
from pytest_toolnexus._providers import ends_stream, provider_of
from pytest_toolnexus._seam.bodies import wants_stream
from pytest_toolnexus._store.cassette import AnyBody, JsonBody, SseBody
from pytest_toolnexus.views import ViewError, view

DATA = Path(__file__).resolve().parent / "data" / "providers"
KEY = "test-key-not-a-secret"
MESSAGES = [{"role": "user", "content": "What happened in quantum computing in 2025?"}]
SSE = Headers([("content-type", "text/event-stream; charset=utf-8")])
OPENROUTER = "https://openrouter.ai/api/v1/chat/completions"
VLLM = "http://10.1.2.3:8000/v1/chat/completions"


def fixture(name):
    """A hand-written stream: the interaction, and the text its documentation implies."""
    doc = json.loads((DATA / name).read_text("utf-8"))
    events = [{"t": float(t), "event": event, "data": data} for t, event, data in doc["events"]]
    request = RecordedRequest("POST", doc["url"], Headers([("content-type", "application/json")]))
    request = RecordedRequest(request.method, request.url, request.headers, AnyBody())
    response = RecordedResponse(200, SSE, SseBody(events), 150.0, events[-1]["t"])
    return Interaction(request, response), doc["text"]


def save(tmp_path, *interactions, name="built.msgpack"):
    path = tmp_path / name
    build.build_cassette(path, interactions)
    return path


def replay(path, fault_list=()):
    return use_cassette(path, faults=fault_list, on_unused="ignore")


def openai_client(cassette, base_url=None):
    http = httpx2.Client(transport=cassette.http_transport())
    return openai.OpenAI(api_key=KEY, base_url=base_url, http_client=http, max_retries=0)


# -- detection ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "url", "name"),
    [
        ("POST", "https://api.openai.com/v1/chat/completions", "openai"),
        ("POST", OPENROUTER, "openai"),  # OpenRouter: not Ollama, although the path has /api/
        ("POST", VLLM, "openai"),  # a local vLLM (or Ollama's own OpenAI route) on any host
        ("POST", "http://localhost:11434/v1/chat/completions", "openai"),
        ("POST", "https://api.openai.com/v1/responses", "openai-responses"),
        ("GET", "https://api.openai.com/v1/responses/resp_123", "openai-responses"),
        ("GET", "https://api.openai.com/v1/responses/resp_123?stream=true", "openai-responses"),
        ("GET", "https://api.openai.com/v1/responses/resp_123/input_items", None),
        ("POST", "https://api.anthropic.com/v1/messages", "anthropic"),
        ("POST", "https://api.anthropic.com/v1/messages?beta=true", "anthropic"),
        ("POST", "https://api.anthropic.com/v1/messages#stream", "anthropic"),
        ("POST", "https://api.anthropic.com/v1/messages/count_tokens", None),
        ("POST", "https://api.openai.com/v1/threads/thread_1/messages", None),
        (
            "POST",
            "https://us-east5-aiplatform.googleapis.com/v1/projects/p/locations/us-east5/"
            "publishers/anthropic/models/claude-sonnet-4-6:streamRawPredict",
            "anthropic",
        ),
        ("POST", f"{build.GEMINI_BASE}/gemini-2.5-flash:generateContent", "gemini"),
        ("POST", f"{build.GEMINI_BASE}/m:streamGenerateContent?alt=sse#frag", "gemini"),
        ("POST", "http://localhost:11434/api/chat", "ollama"),
        ("POST", "http://localhost:11434/api/generate", "ollama"),
        ("POST", "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse", "bedrock"),
        ("GET", "https://api.openai.com/v1/chat/completions", None),
        ("POST", "https://example.test/api/v1/other?x=/chat/completions", None),
        ("POST", "http://[::1/broken", None),
    ],
)
def test_the_dialect_is_read_from_method_and_path_only(method, url, name):
    found = provider_of(method, url, Headers([("user-agent", "x")]))

    assert (None if found is None else found.name) == name


# -- faults: the error shape each SDK parses ----------------------------------------------------


@pytest.mark.parametrize("url", [OPENROUTER, VLLM], ids=["openrouter", "vllm"])
def test_a_prepended_429_on_an_openai_compatible_url_is_an_openai_rate_limit_error(tmp_path, url):
    path = save(tmp_path, build.openai_chat("never read", stream=False, url=url))
    with replay(path, [faults.prepend(429)]) as cassette:
        client = openai_client(cassette, base_url=url.removesuffix("/chat/completions"))
        with pytest.raises(openai.RateLimitError) as caught:
            client.chat.completions.create(model="m", messages=MESSAGES)

    # The SDK found OpenAI's {"error": {...}} and read its parts: an Ollama-shaped body
    # ({"error": "text"}) would leave the code and the type unset.
    assert caught.value.status_code == 429
    assert "Too Many Requests (injected by pytest-toolnexus)" in caught.value.message
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.type == "rate_limit_exceeded"
    assert cassette.requests[0].faults == ["prepended 429"]


def test_a_prepended_429_on_the_responses_api_is_an_openai_rate_limit_error(tmp_path):
    path = save(tmp_path, build.openai_responses("never read", stream=False))
    with replay(path, [faults.prepend(429)]) as cassette:
        client = openai_client(cassette)
        with pytest.raises(openai.RateLimitError) as caught:
            client.responses.create(model="gpt-4o-mini", input="hi")

    assert "Too Many Requests (injected by pytest-toolnexus)" in caught.value.message
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.body == {
        "message": "Too Many Requests (injected by pytest-toolnexus)",
        "type": "rate_limit_exceeded",
        "param": None,
        "code": "rate_limit_exceeded",
    }


def test_an_error_event_in_a_responses_stream_is_the_event_the_sdk_types(tmp_path):
    built = build.openai_responses("one two three four five", cadence=build.Cadence(gap=0.1))
    path = save(tmp_path, built)
    with replay(path, [faults.error_event(after_event=4, message="The server had an error")]) as c:
        events = list(openai_client(c).responses.create(model="m", input="hi", stream=True))

    assert [e.type for e in events][-1] == "error"
    assert events[-1].message == "The server had an error"
    assert len(events) == 5


def test_error_bodies_follow_the_dialect_not_the_host():
    anthropic_proxy = "https://llm-proxy.internal/anthropic/v1/messages"
    ollama = "http://gpu-box:11434/api/chat"

    assert faults.error_body(429, anthropic_proxy)["error"]["type"] == "rate_limit_error"
    assert faults.error_body(500, ollama, "down") == {"error": "down"}
    assert faults.error_body(429, OPENROUTER)["error"]["code"] == "rate_limit_exceeded"
    assert faults.error_body(503, "https://example.test/anything")["error"]["type"] == (
        "server_error"
    )


# -- Anthropic server tools and thinking --------------------------------------------------------


def test_an_anthropic_web_search_stream_reads_with_its_text_and_server_tools():
    interaction, text = fixture("anthropic_web_search_stream.json")

    answer = view(interaction)

    assert answer.text == text
    assert answer.finish_reason == "stop"  # the search ran on Anthropic's side
    assert answer.tool_calls == ()
    (search,) = answer.extra["server_tool_calls"]
    assert (search.id, search.name) == ("srvtoolu_014hJH82Qum7Td6UV8gDXThB", "web_search")
    assert json.loads(search.arguments) == {"query": "quantum computing breakthroughs 2025"}
    assert answer.extra["server_tool_results"] == (
        ("srvtoolu_014hJH82Qum7Td6UV8gDXThB", "web_search_tool_result"),
    )
    assert answer.extra["reasoning"] == (
        "The user asks about recent news, so I should search the web."
    )
    assert [piece for _, piece in answer.deltas] == [
        "I'll search for that.",
        " Researchers reported a new ",
        "error-corrected logical qubit in 2025.",
    ]
    assert answer.usage.input_tokens == 2679
    assert answer.usage.output_tokens == 510


def test_the_anthropic_sdk_reads_the_web_search_fixture_as_the_view_does(tmp_path):
    interaction, text = fixture("anthropic_web_search_stream.json")
    path = save(tmp_path, interaction)
    with replay(path) as cassette:
        http = httpx2.Client(transport=cassette.http_transport())
        client = anthropic.Anthropic(api_key=KEY, http_client=http, max_retries=0)
        with client.messages.stream(
            model="claude-sonnet-4-6", max_tokens=1024, messages=MESSAGES
        ) as stream:
            message = stream.get_final_message()

    kinds = [block.type for block in message.content]
    assert kinds == ["thinking", "text", "server_tool_use", "web_search_tool_result", "text"]
    assert message.content[2].input == {"query": "quantum computing breakthroughs 2025"}
    sdk_text = "".join(block.text for block in message.content if block.type == "text")
    assert sdk_text == view(cassette.interactions[0]).text == text


def test_check_passes_on_the_anthropic_web_search_recording(tmp_path, capsys):
    interaction, _ = fixture("anthropic_web_search_stream.json")
    path = save(tmp_path, interaction)

    assert main(["check", str(path)]) == 0
    assert f"ok   {path} (1 interaction)" in capsys.readouterr().out


def _message(*blocks, stop="end_turn"):
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": list(blocks),
        "stop_reason": stop,
        "usage": {"input_tokens": 5, "output_tokens": 7},
    }
    request = RecordedRequest("POST", build.ANTHROPIC_URL)
    return Interaction(request, RecordedResponse(200, Headers(), JsonBody(body), 1.0, 1.0))


def test_every_anthropic_block_type_reads_in_a_whole_message():
    answer = view(
        _message(
            {"type": "thinking", "thinking": "Let me look.", "signature": "sig"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
            {
                "type": "mcp_tool_use",
                "id": "mcptoolu_1",
                "name": "echo",
                "server_name": "s",
                "input": {"param1": "x"},
            },
            {
                "type": "mcp_tool_result",
                "tool_use_id": "mcptoolu_1",
                "is_error": False,
                "content": [{"type": "text", "text": "x"}],
            },
            {
                "type": "server_tool_use",
                "id": "srvtoolu_2",
                "name": "web_fetch",
                "input": {"url": "https://example.com"},
            },
            {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_2", "content": {}},
            {
                "type": "server_tool_use",
                "id": "srvtoolu_3",
                "name": "code_execution",
                "input": {"code": "print(1)"},
            },
            {
                "type": "code_execution_tool_result",
                "tool_use_id": "srvtoolu_3",
                "content": {"type": "code_execution_result", "stdout": "1\n"},
            },
            {"type": "text", "text": "Done."},
            {
                "type": "tool_use",
                "id": "toolu_4",
                "name": "get_weather",
                "input": {"city": "Paris"},
            },
        )
    )

    assert answer.text == "Done."
    assert [(c.id, c.name) for c in answer.tool_calls] == [("toolu_4", "get_weather")]
    assert answer.finish_reason == "tool_calls"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in answer.extra["server_tool_calls"]] == [
        ("mcptoolu_1", "echo", {"param1": "x"}),
        ("srvtoolu_2", "web_fetch", {"url": "https://example.com"}),
        ("srvtoolu_3", "code_execution", {"code": "print(1)"}),
    ]
    assert [kind for _, kind in answer.extra["server_tool_results"]] == [
        "mcp_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
    ]
    assert answer.extra["reasoning"] == "Let me look."
    assert answer.extra["redacted_reasoning"] == 1


def test_a_json_delta_for_a_block_that_never_started_is_a_view_error_not_a_key_error():
    events = [
        {"t": 1.0, "event": "message_start", "data": {"type": "message_start", "message": {}}},
        {
            "t": 2.0,
            "event": "content_block_delta",
            "data": {
                "type": "content_block_delta",
                "index": 3,
                "delta": {"type": "input_json_delta", "partial_json": "{}"},
            },
        },
    ]
    request = RecordedRequest("POST", build.ANTHROPIC_URL)
    broken = Interaction(request, RecordedResponse(200, SSE, SseBody(events), 1.0, 2.0))

    with pytest.raises(ViewError, match="no tool call block started at that index"):
        view(broken)


# -- OpenAI Responses reasoning and web search --------------------------------------------------


def test_a_responses_stream_with_reasoning_and_web_search_reads_with_its_text():
    interaction, text = fixture("responses_reasoning_web_search_stream.json")

    answer = view(interaction)

    assert answer.text == text
    assert answer.finish_reason == "stop"
    assert answer.tool_calls == ()
    (search,) = answer.extra["server_tool_calls"]
    assert (search.id, search.name) == ("ws_byhand01", "web_search")
    assert json.loads(search.arguments)["action"]["query"] == "quantum computing breakthroughs 2025"
    assert answer.extra["reasoning"].endswith("so I will search the web.")
    assert answer.model == "o4-mini-2025-04-16"
    assert answer.usage.total_tokens == 468


def test_the_openai_sdk_reads_the_responses_fixture_as_the_view_does(tmp_path):
    interaction, text = fixture("responses_reasoning_web_search_stream.json")
    path = save(tmp_path, interaction)
    with replay(path) as cassette:
        client = openai_client(cassette)
        events = list(client.responses.create(model="o4-mini", input="hi", stream=True))

    final = events[-1].response
    assert [item.type for item in final.output] == ["reasoning", "web_search_call", "message"]
    assert final.output_text == view(cassette.interactions[0]).text == text


def test_check_passes_on_the_responses_recording(tmp_path, capsys):
    interaction, _ = fixture("responses_reasoning_web_search_stream.json")
    path = save(tmp_path, interaction)

    assert main(["check", str(path)]) == 0
    assert f"ok   {path} (1 interaction)" in capsys.readouterr().out


def test_a_stored_response_fetched_by_id_reads_as_an_answer():
    built = build.openai_responses("Stored answer.", stream=False)
    request = RecordedRequest("GET", "https://api.openai.com/v1/responses/resp_builtbytoolnexus")
    fetched = Interaction(request, built.response)

    answer = view(fetched)

    assert (answer.provider, answer.text, answer.finish_reason) == (
        "openai-responses",
        "Stored answer.",
        "stop",
    )


# -- Gemini tool calls without an id ------------------------------------------------------------


def test_a_gemini_tool_call_without_an_id_has_none_not_an_invented_one():
    built = build.gemini(tool_calls=[build.ToolCall("get_weather", {"city": "Paris"})])

    (call,) = view(built).tool_calls

    assert call.id is None
    assert call.name == "get_weather"


# -- check: an error the provider sent inside a 200 is information -----------------------------


def _with_event(interaction, event, data):
    events = [*interaction.response.body.events]
    events.insert(3, {"t": events[2]["t"], "event": event, "data": data})
    response = interaction.response
    stored = RecordedResponse(200, response.headers, SseBody(events[:4]), 1.0, events[2]["t"])
    return Interaction(interaction.request, stored)


def test_check_reports_in_stream_errors_as_information_not_failures(tmp_path, capsys):
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    anthropic_error = _with_event(build.anthropic_messages("a b c d"), "error", overloaded)
    failed = {
        "type": "response.failed",
        "sequence_number": 3,
        "response": {
            "object": "response",
            "status": "failed",
            "error": {"code": "server_error", "message": "The model failed"},
        },
    }
    responses_failed = _with_event(build.openai_responses("a b c d"), "response.failed", failed)
    path = save(tmp_path, anthropic_error, responses_failed)

    code = main(["check", str(path)])

    out = capsys.readouterr().out
    assert code == 0, out
    assert f"ok   {path} (2 interactions)" in out
    assert (
        "  info: interaction #0 (anthropic) carries an error in its answer: "
        "overloaded_error: Overloaded"
    ) in out
    assert (
        "  info: interaction #1 (openai-responses) carries an error in its answer: "
        "the response failed: The model failed"
    ) in out
    # and the views carry the errors, beside what was read before them
    assert view(anthropic_error).error == "overloaded_error: Overloaded"
    assert view(responses_failed).error == "the response failed: The model failed"


def test_an_error_event_in_an_ollama_stream_is_an_ndjson_line_the_sdk_raises(tmp_path):
    path = save(tmp_path, build.ollama_chat("one two three four"))
    with replay(path, [faults.error_event(after_event=2, message="model crashed")]) as cassette:
        client = ollama.Client(host="http://localhost:11434", transport=cassette.http_transport())
        parts = []

        def read_all():
            for part in client.chat(model="llama3.2", messages=MESSAGES, stream=True):
                parts.append(part.message.content)

        with pytest.raises(ollama.ResponseError) as caught:
            read_all()

    assert caught.value.error == "model crashed"
    assert parts == ["one ", "two "]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"{build.GEMINI_BASE}/m:streamGenerateContent", True),
        (f"{build.GEMINI_BASE}/m:generateContent?alt=sse", True),
        ("https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse-stream", True),
        ("https://api.openai.com/v1/responses/resp_1?stream=true", True),
        ("https://api.openai.com/v1/responses/resp_1", False),
        ("https://vertex.test/v1/x/publishers/anthropic/models/c:streamRawPredict", True),
        ("https://api.openai.com/v1/chat/completions#:streamGenerateContent", False),
    ],
)
def test_a_url_asks_for_a_stream_in_its_dialects_way(url, expected):
    assert wants_stream(url, Headers(), {"model": "m"}) is expected


@pytest.mark.parametrize(
    ("event", "payload", "expected"),
    [
        (None, "[DONE]", True),
        ("message_stop", {"type": "message_stop"}, True),
        (None, {"type": "message_stop"}, True),
        ("response.completed", {"type": "response.completed"}, True),
        (None, {"type": "response.failed"}, True),
        (None, {"done": True, "model": "llama3.2"}, True),
        (None, {"done": False}, False),
        ("content_block_stop", {"type": "content_block_stop"}, False),
        (None, "[DONE] and more", False),
    ],
)
def test_the_end_of_stream_markers_of_every_dialect(event, payload, expected):
    assert ends_stream(event, payload) is expected
