"""A Python function plays the model behind the seam: no cassette, no server (ADR 0019).

The official ``openai`` SDK, sync and async, talks to ``ModelTransport`` (one class serves
both) through ``HTTPBridge``. The tests run an agent loop (the model asks for
a tool, the loop runs it, the model answers with the result), check what the model was handed
(``transport.turns``), and check that streamed deltas arrive on the transport's cadence, read on
a virtual clock installed for the test.
"""

import json
import time

import httpx2
import openai
import pytest

from pytest_toolnexus import (
    Headers,
    HTTPBridge,
    ModelTransport,
    ModelTurn,
    TransportRequest,
    assert_incremental,
    build,
)
from pytest_toolnexus._timing.timepatch import install
from pytest_toolnexus._timing.virtual import VirtualClock

CADENCE = build.Cadence(ttft=0.4, gap=0.08, jitter=0.02, seed=11, headers=0.1)
KEY = "test-key-not-a-secret"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
URL = "https://api.openai.com/v1/chat/completions"


@pytest.fixture
def clock():
    """A virtual clock for the test: sleeps cost nothing and are exact."""
    virtual = VirtualClock()
    undo = install(virtual)
    try:
        yield virtual
    finally:
        undo()


def get_weather(city):
    return {"city": city, "temperature_c": 21, "sky": "sunny"}


def weather_model(turn: ModelTurn):
    """Asks for the weather tool, then answers from its result."""
    last = turn.messages[-1]
    if last["role"] == "tool":
        result = json.loads(last["content"])
        return f"It is {result['temperature_c']} °C and {result['sky']} in {result['city']}."
    return build.ToolCall("get_weather", {"city": "Paris"})


def run_agent(client, *, stream):
    """A minimal agent loop over the chat-completions API; returns the final text."""
    messages = [{"role": "user", "content": "What's the weather in Paris?"}]
    for _ in range(5):
        text, calls = "", {}
        if stream:
            for chunk in client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, tools=[WEATHER_TOOL], stream=True
            ):
                delta = chunk.choices[0].delta if chunk.choices else None
                if delta is None:
                    continue
                text += delta.content or ""
                for part in delta.tool_calls or []:
                    call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] = part.id or call["id"]
                    call["name"] += part.function.name or ""
                    call["arguments"] += part.function.arguments or ""
        else:
            message = (
                client.chat.completions.create(
                    model="gpt-4o-mini", messages=messages, tools=[WEATHER_TOOL]
                )
                .choices[0]
                .message
            )
            text = message.content or ""
            for index, call in enumerate(message.tool_calls or []):
                calls[index] = {
                    "id": call.id,
                    "name": call.function.name,
                    "arguments": call.function.arguments,
                }
        if not calls:
            return text
        messages.append(
            {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"]},
                    }
                    for c in calls.values()
                ],
            }
        )
        for c in calls.values():
            assert c["name"] == "get_weather"
            result = get_weather(**json.loads(c["arguments"]))
            messages.append(
                {"role": "tool", "tool_call_id": c["id"], "content": json.dumps(result)}
            )
    raise AssertionError("the agent loop did not finish")


def sync_client(transport, retries=0):
    http = httpx2.Client(transport=HTTPBridge(transport))
    return openai.OpenAI(api_key=KEY, http_client=http, max_retries=retries)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_agent_loop_runs_against_a_model_function_with_no_cassette(clock, stream):
    transport = ModelTransport(weather_model, cadence=CADENCE)

    answer = run_agent(sync_client(transport), stream=stream)

    assert answer == "It is 21 °C and sunny in Paris."
    first, second = transport.turns
    assert first.messages == [{"role": "user", "content": "What's the weather in Paris?"}]
    assert [tool["function"]["name"] for tool in first.tools] == ["get_weather"]
    assert first.body["model"] == "gpt-4o-mini"
    assert first.body.get("stream", False) is stream
    # the second turn carries the OpenAI-shaped tool exchange back to the model
    assistant, tool = second.messages[-2:]
    assert assistant["role"] == "assistant"
    (call,) = assistant["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city":"Paris"}'}
    assert tool == {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": json.dumps(get_weather("Paris")),
    }
    assert call["id"].startswith("call_")


def test_streamed_deltas_arrive_on_the_cadence_under_the_virtual_clock(clock):
    words = ["Deltas ", "arrive ", "one ", "by ", "one."]

    def model(turn):
        yield from words

    client = sync_client(ModelTransport(model, cadence=CADENCE))
    start = time.monotonic()
    chunks = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Go"}], stream=True
    )
    deltas, times = [], []
    for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            deltas.append(chunk.choices[0].delta.content)
            times.append(time.monotonic() - start)

    assert deltas == words
    assert_incremental(times, expected=[t / 1000 for t in CADENCE.times(len(words))])
    assert clock.elapsed == pytest.approx(CADENCE.times(len(words))[-1] / 1000)


def test_the_model_function_is_called_lazily_while_the_client_reads(clock):
    produced = []

    def model(turn):
        for word in ["a ", "b ", "c"]:
            produced.append((word, time.monotonic()))
            yield word

    client = sync_client(ModelTransport(model, cadence=build.Cadence(ttft=0.5, gap=0.5)))
    start = time.monotonic()
    seen = [
        (chunk.choices[0].delta.content, time.monotonic() - start)
        for chunk in client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Go"}], stream=True
        )
        if chunk.choices and chunk.choices[0].delta.content
    ]

    assert [word for word, _ in seen] == ["a ", "b ", "c"]
    assert [t for _, t in seen] == pytest.approx([0.5, 1.0, 1.5])
    # each word was produced only after the one before had been delivered
    assert [t - start for _, t in produced] == pytest.approx([0.05, 0.5, 1.0])


def test_a_streamed_answer_ends_with_usage_when_asked(clock):
    client = sync_client(ModelTransport(lambda turn: "one two three"))
    chunks = list(
        client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "Count"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )

    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == 3
    assert chunks[-2].choices[0].finish_reason == "stop"


def test_a_whole_answer_waits_the_time_to_first_token(clock):
    client = sync_client(ModelTransport(lambda turn: "Hello there.", cadence=CADENCE))

    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}])

    assert reply.choices[0].message.content == "Hello there."
    assert reply.choices[0].finish_reason == "stop"
    assert clock.elapsed == pytest.approx(CADENCE.ttft)


def test_a_model_may_answer_with_an_openai_message_mapping(clock):
    def model(turn):
        return {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        }

    reply = sync_client(ModelTransport(model)).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Hi"}]
    )

    message = reply.choices[0].message
    assert message.content == "Checking."
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls] == [
        ("call_abc", "get_weather", '{"city":"Oslo"}')
    ]
    assert reply.choices[0].finish_reason == "tool_calls"


@pytest.mark.anyio
async def test_async_openai_streams_from_an_async_generator_model(clock):
    async def model(turn):
        for word in ["Async ", "deltas ", "on ", "time."]:
            yield word

    transport = ModelTransport(model, cadence=CADENCE)
    http = httpx2.AsyncClient(transport=HTTPBridge(transport))
    client = openai.AsyncOpenAI(api_key=KEY, http_client=http, max_retries=0)
    start = time.monotonic()
    deltas, times = [], []
    async for chunk in await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Go"}], stream=True
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            deltas.append(chunk.choices[0].delta.content)
            times.append(time.monotonic() - start)
    await client.close()

    assert "".join(deltas) == "Async deltas on time."
    assert_incremental(times, expected=[t / 1000 for t in CADENCE.times(4)])
    assert transport.turns[0].messages == [{"role": "user", "content": "Go"}]


@pytest.mark.anyio
async def test_async_agent_loop_with_a_coroutine_model(clock):
    async def model(turn):
        if turn.messages[-1]["role"] == "tool":
            return f"Done: {turn.messages[-1]['content']}"
        return build.ToolCall("get_weather", {"city": "Lima"}, id="call_lima")

    transport = ModelTransport(model)
    http = httpx2.AsyncClient(transport=HTTPBridge(transport))
    client = openai.AsyncOpenAI(api_key=KEY, http_client=http, max_retries=0)
    messages = [{"role": "user", "content": "Weather in Lima?"}]
    first = (await client.chat.completions.create(model="m", messages=messages)).choices[0]
    (call,) = first.message.tool_calls
    messages += [
        first.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
    ]
    second = (await client.chat.completions.create(model="m", messages=messages)).choices[0]
    await client.close()

    assert first.finish_reason == "tool_calls"
    assert call.id == "call_lima"
    assert second.message.content == "Done: sunny"
    assert transport.turns[1].messages[-1] == {
        "role": "tool",
        "tool_call_id": "call_lima",
        "content": "sunny",
    }


def seam(transport, method="POST", url=URL, body=None):
    request = TransportRequest(
        method=method, url=url, headers=Headers([("content-type", "application/json")]), body=body
    )
    return transport(request)


def test_other_paths_are_a_404_that_names_what_is_served():
    transport = ModelTransport(lambda turn: "unused")

    response = seam(transport, "GET", "https://api.openai.com/v1/models")

    assert response.status == 404
    message = response.body["error"]["message"]
    assert message == (
        "the in-process model answers POST .../chat/completions, not "
        "GET https://api.openai.com/v1/models"
    )
    assert transport.turns == []


def test_the_sdk_sees_a_404_for_another_endpoint_as_not_found():
    client = sync_client(ModelTransport(lambda turn: "unused"))

    with pytest.raises(openai.NotFoundError, match=r"answers POST \.\.\./chat/completions"):
        client.embeddings.create(model="text-embedding-3-small", input="hi")


@pytest.mark.parametrize(
    "body",
    [b"not json at all", {"model": "m"}, {"model": "m", "messages": "hi"}, ["messages"]],
    ids=["bytes", "no-messages", "messages-not-a-list", "not-an-object"],
)
def test_a_bad_body_is_a_400_and_the_model_is_not_asked(body):
    transport = ModelTransport(lambda turn: pytest.fail("the model was asked"))

    response = seam(transport, body=body)

    assert response.status == 400
    assert response.body["error"]["message"] == (
        "the request body must be a JSON object with a messages list"
    )
    assert response.body["error"]["type"] == "invalid_request_error"
    assert transport.turns == []


def test_a_model_that_yields_something_else_is_told_what_to_yield(clock):
    client = sync_client(ModelTransport(lambda turn: iter([42])))

    with pytest.raises(TypeError, match="a model function yielded int; yield text or ToolCall"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}])


def test_an_async_model_cannot_serve_sync_code():
    async def coroutine_model(turn):
        return "hi"

    async def generator_model(turn):
        yield "hi"

    request = TransportRequest("POST", URL, body={"model": "m", "messages": []})
    for model in (coroutine_model, generator_model):
        transport = ModelTransport(model)
        with pytest.raises(TypeError, match=r"model is an async function.*send from async code"):
            transport(request)
        assert transport.turns == []


@pytest.mark.anyio
async def test_one_model_transport_serves_a_sync_and_an_async_client(clock):
    transport = ModelTransport(weather_model)
    bridge = HTTPBridge(transport)
    messages = [{"role": "user", "content": "Weather in Paris?"}]

    sync = openai.OpenAI(api_key=KEY, http_client=httpx2.Client(transport=bridge), max_retries=0)
    first = sync.chat.completions.create(model="m", messages=messages).choices[0]
    sync.close()
    http = httpx2.AsyncClient(transport=bridge)
    aclient = openai.AsyncOpenAI(api_key=KEY, http_client=http, max_retries=0)
    second = (await aclient.chat.completions.create(model="m", messages=messages)).choices[0]
    await aclient.close()

    assert first.message.tool_calls[0].function.name == "get_weather"
    assert second.message.tool_calls[0].function.name == "get_weather"
    assert len(transport.turns) == 2
