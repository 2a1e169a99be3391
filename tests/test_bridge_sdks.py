"""The http bridge: real, unmodified SDKs served by an in-process seam Transport.

The seam transports here are plain functions that answer with a ``TransportResponse``; no socket
is opened except in the tests that go through ``LiveTransport`` to a loopback server. Streaming
seams sleep between events and note when each one left (on real time,
:func:`tests.support.realtime.wall`), so the tests can check that the client saw each event
after the seam emitted it and before the seam emitted the next: the seam emits the next one
only when the client pulls for it, so that order holds on any machine, loaded or not.
"""

import asyncio
import json
import time

import anthropic
import httpx
import httpx2
import ollama
import openai
import pytest

from pytest_toolnexus import (
    AsyncByteStream,
    ByteStream,
    ContractError,
    HTTPBridge,
    LiveTransport,
    ReadTimeout,
    TransportRequest,
    TransportResponse,
)
from pytest_toolnexus._seam.errors import ERROR_KINDS
from tests.support.realtime import wall
from tests.support.servers import Fixed, LoopbackServer

PAUSE = 0.05
WORDS = ["Once", " upon", " a", " time", ",", " the", " end"]
MESSAGES = [{"role": "user", "content": "Tell me a story."}]
HTML_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n"
    b"<body><center><h1>502 Bad Gateway</h1></center></body>\r\n</html>\r\n"
)
NDJSON_LINES = [b'{"n":1,"text":"caf\xc3\xa9"}\n', b'{"n":2}\n', b'{"n":3,"done":true}\n']
SSE = {"content-type": "text/event-stream; charset=utf-8"}
JSON = {"content-type": "application/json"}


@pytest.fixture
def anyio_backend():
    return "asyncio"


class Seam:
    """A sync seam transport that answers each request from ``answer`` and keeps what it saw.

    ``emitted`` holds the real time each streamed chunk was handed to the bridge.
    """

    def __init__(self, answer):
        self.answer = answer
        self.requests = []
        self.emitted = []

    def __call__(self, request):
        self.requests.append(request)
        return self.answer(self, request)

    def paced(self, chunks):
        for index, chunk in enumerate(chunks):
            if index:
                time.sleep(PAUSE)
            self.emitted.append(wall())
            yield chunk


class AsyncSeam(Seam):
    """The async mirror of :class:`Seam`; ``apaced`` sleeps with ``asyncio.sleep``."""

    async def __call__(self, request):
        self.requests.append(request)
        return self.answer(self, request)

    async def apaced(self, chunks):
        for index, chunk in enumerate(chunks):  # a plain iterable, paced with asyncio.sleep
            if index:
                await asyncio.sleep(PAUSE)
            self.emitted.append(wall())
            yield chunk


def assert_arrived_at_the_seams_pace(emitted, arrivals):
    """Each item reached the client after the seam emitted it, and before the next one left:
    the client had every item while the seam was still pausing between them."""
    assert len(arrivals) == len(emitted)
    emitted_spread = emitted[-1] - emitted[0]
    assert emitted_spread >= PAUSE * (len(emitted) - 1)
    for index, arrived in enumerate(arrivals):
        assert arrived >= emitted[index]
        if index + 1 < len(emitted):
            assert arrived < emitted[index + 1], f"item {index} was held back"


def assert_parsed_chat_request(request, *, model, stream):
    assert request.method == "POST"
    assert isinstance(request.body, dict)
    assert request.body["model"] == model
    assert request.body["messages"] == MESSAGES
    assert request.stream is stream
    assert json.loads(request.content) == request.body


# OpenAI (httpx2), sync and async.


def openai_completion(text):
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }


def openai_chunks():
    def chunk(delta, finish=None):
        data = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "gpt-test",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(data)}\n\n".encode()

    yield from (chunk({"content": word}) for word in WORDS)
    yield b"data: [DONE]\n\n"


def openai_answer(seam, request):
    if request.stream:
        return TransportResponse(200, SSE, ByteStream(seam.paced(openai_chunks())))
    return TransportResponse(200, JSON, openai_completion("Once upon a time."))


def openai_answer_async(seam, request):
    if request.stream:
        return TransportResponse(200, SSE, AsyncByteStream(seam.apaced(openai_chunks())))
    return TransportResponse(200, JSON, openai_completion("Once upon a time."))


def openai_client(seam, **options):
    return openai.OpenAI(
        api_key="test",
        base_url="http://test/v1",
        http_client=httpx2.Client(transport=HTTPBridge(seam)),
        **options,
    )


def test_openai_chat_completion_through_the_bridge():
    seam = Seam(openai_answer)

    completion = openai_client(seam).chat.completions.create(model="gpt-test", messages=MESSAGES)

    assert completion.choices[0].message.content == "Once upon a time."
    assert completion.usage.total_tokens == 7
    (request,) = seam.requests
    assert request.url == "http://test/v1/chat/completions"
    assert request.headers["Authorization"] == "Bearer test"
    assert_parsed_chat_request(request, model="gpt-test", stream=False)


def test_openai_stream_deltas_arrive_at_the_seams_pace():
    seam = Seam(openai_answer)
    client = openai_client(seam)

    arrivals, text = [], []
    stream = client.chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True)
    for chunk in stream:
        arrivals.append(wall())
        text.append(chunk.choices[0].delta.content)

    assert text == WORDS
    assert_arrived_at_the_seams_pace(seam.emitted[: len(WORDS)], arrivals)
    (request,) = seam.requests
    assert_parsed_chat_request(request, model="gpt-test", stream=True)


@pytest.mark.anyio
async def test_async_openai_stream_deltas_arrive_at_the_seams_pace():
    seam = AsyncSeam(openai_answer_async)
    client = openai.AsyncOpenAI(
        api_key="test",
        base_url="http://test/v1",
        http_client=httpx2.AsyncClient(transport=HTTPBridge(async_transport=seam)),
    )

    completion = await client.chat.completions.create(model="gpt-test", messages=MESSAGES)
    arrivals, text = [], []
    stream = await client.chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True)
    async for chunk in stream:
        arrivals.append(wall())
        text.append(chunk.choices[0].delta.content)
    await client.close()

    assert completion.choices[0].message.content == "Once upon a time."
    assert text == WORDS
    assert_arrived_at_the_seams_pace(seam.emitted[: len(WORDS)], arrivals)
    plain, streamed = seam.requests
    assert_parsed_chat_request(plain, model="gpt-test", stream=False)
    assert_parsed_chat_request(streamed, model="gpt-test", stream=True)
    assert streamed.headers["x-stainless-async"].startswith("async:")


# Anthropic (httpx2): the real SSE event sequence.


def anthropic_message():
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": "Once upon a time."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 4},
    }


def anthropic_events():
    def event(name, data):
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    start = {**anthropic_message(), "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": 5, "output_tokens": 1}
    yield event("message_start", {"message": start})
    yield event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    yield event("ping", {})
    for word in WORDS:
        yield event(
            "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": word}}
        )
    yield event("content_block_stop", {"index": 0})
    yield event(
        "message_delta",
        {
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 7},
        },
    )
    yield event("message_stop", {})


def anthropic_answer(seam, request):
    if request.stream:
        return TransportResponse(200, SSE, ByteStream(seam.paced(anthropic_events())))
    return TransportResponse(200, JSON, anthropic_message())


def anthropic_client(seam):
    return anthropic.Anthropic(
        api_key="test",
        base_url="http://test",
        http_client=httpx2.Client(transport=HTTPBridge(seam)),
    )


def test_anthropic_message_through_the_bridge():
    seam = Seam(anthropic_answer)

    message = anthropic_client(seam).messages.create(
        model="claude-test", max_tokens=64, messages=MESSAGES
    )

    assert message.content[0].text == "Once upon a time."
    assert message.stop_reason == "end_turn"
    (request,) = seam.requests
    assert request.url == "http://test/v1/messages"
    assert "anthropic-version" in request.headers
    credentials = (request.headers.get("X-Api-Key"), request.headers.get("Authorization"))
    assert credentials in {("test", None), (None, "Bearer test")}
    assert request.body["max_tokens"] == 64
    assert_parsed_chat_request(request, model="claude-test", stream=False)


def test_anthropic_stream_events_arrive_at_the_seams_pace():
    seam = Seam(anthropic_answer)
    client = anthropic_client(seam)

    arrivals, kinds, text = [], [], []
    stream = client.messages.create(
        model="claude-test", max_tokens=64, messages=MESSAGES, stream=True
    )
    for event in stream:
        arrivals.append(wall())
        kinds.append(event.type)
        if event.type == "content_block_delta":
            text.append(event.delta.text)

    assert text == WORDS
    assert kinds[:3] == ["message_start", "content_block_start", "content_block_delta"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    # The SDK drops the ping; compare every other event with the moment the seam emitted it.
    emitted = seam.emitted[:2] + seam.emitted[3:]
    assert_arrived_at_the_seams_pace(emitted, arrivals)
    (request,) = seam.requests
    assert_parsed_chat_request(request, model="claude-test", stream=True)


def test_anthropic_text_stream_helper_sees_the_same_pace():
    seam = Seam(anthropic_answer)

    arrivals, text = [], []
    with anthropic_client(seam).messages.stream(
        model="claude-test", max_tokens=64, messages=MESSAGES
    ) as stream:
        for piece in stream.text_stream:
            arrivals.append(wall())
            text.append(piece)
        final = stream.get_final_message()

    assert text == WORDS
    assert final.content[0].text == "".join(WORDS)
    deltas_emitted = seam.emitted[3 : 3 + len(WORDS)]
    assert_arrived_at_the_seams_pace(deltas_emitted, arrivals)


# Ollama (plain httpx): NDJSON lines.


def ollama_line(content, *, done):
    line = {
        "model": "llama-test",
        "created_at": "2025-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": content},
        "done": done,
    }
    if done:
        line["done_reason"] = "stop"
    return (json.dumps(line) + "\n").encode()


def ollama_answer(seam, request):
    if request.stream:
        lines = [ollama_line(word, done=False) for word in WORDS] + [ollama_line("", done=True)]
        ndjson = {"content-type": "application/x-ndjson"}
        return TransportResponse(200, ndjson, ByteStream(seam.paced(lines)))
    return TransportResponse(200, JSON, json.loads(ollama_line("Once upon a time.", done=True)))


def test_ollama_chat_through_the_bridge():
    seam = Seam(ollama_answer)
    client = ollama.Client(host="http://test", transport=HTTPBridge(seam))

    response = client.chat(model="llama-test", messages=MESSAGES)

    assert response.message.content == "Once upon a time."
    (request,) = seam.requests
    assert request.url == "http://test/api/chat"
    assert_parsed_chat_request(request, model="llama-test", stream=False)


def test_ollama_stream_lines_arrive_at_the_seams_pace():
    seam = Seam(ollama_answer)
    client = ollama.Client(host="http://test", transport=HTTPBridge(seam))

    arrivals, parts = [], []
    for part in client.chat(model="llama-test", messages=MESSAGES, stream=True):
        arrivals.append(wall())
        parts.append(part)

    assert [p.message.content for p in parts] == [*WORDS, ""]
    assert [p.done for p in parts] == [False] * len(WORDS) + [True]
    assert_arrived_at_the_seams_pace(seam.emitted, arrivals)
    (request,) = seam.requests
    assert_parsed_chat_request(request, model="llama-test", stream=True)


# Rule 2 through the bridge: a stream request answered with a parsed body fails loudly.


def parsed_always(seam, request):
    return TransportResponse(200, JSON, {"choices": []})


def test_a_parsed_answer_to_an_sdk_stream_is_a_contract_error_not_an_empty_stream():
    seam = Seam(parsed_always)
    client = openai_client(seam, max_retries=2)

    with pytest.raises(ContractError, match=r"POST http://test/v1/chat/completions.*stream=True"):
        client.chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True)

    assert len(seam.requests) == 1, "a contract error must not be retried as a network error"


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_a_parsed_answer_to_a_client_stream_is_a_contract_error(lib):
    client = lib.Client(transport=HTTPBridge(Seam(parsed_always)))

    with pytest.raises(ContractError, match="stream=True"):
        client.post("http://test/v1/chat/completions", json={"model": "m", "stream": True})
    with pytest.raises(ContractError, match="stream=True"):
        client.get("http://test/events", headers={"Accept": "text/event-stream"})


@pytest.mark.anyio
async def test_a_parsed_answer_to_an_async_client_stream_is_a_contract_error():
    async def parsed(request):
        return TransportResponse(200, JSON, {"choices": []})

    async with httpx2.AsyncClient(transport=HTTPBridge(async_transport=parsed)) as client:
        with pytest.raises(ContractError, match="AsyncByteStream"):
            await client.post("http://test/v1/messages", json={"stream": True})


# Rule 1 through the bridge: case-insensitive and multi-valued headers.


def test_a_lowercase_retry_after_reads_as_retry_after_on_an_httpx2_response():
    seam = Seam(lambda seam, request: TransportResponse(429, {"retry-after": "0.2"}, b""))

    response = httpx2.Client(transport=HTTPBridge(seam)).get("http://test/")

    assert response.status_code == 429
    assert response.headers["Retry-After"] == "0.2"


def test_openai_honours_a_lowercase_retry_after_from_the_seam(monkeypatch):
    def busy_then_fine(seam, request):
        if len(seam.requests) == 1:
            return TransportResponse(429, {"retry-after": "0.3", **JSON}, {"error": {}})
        return openai_answer(seam, request)

    real_sleep, waits = time.sleep, []

    def noted_sleep(seconds):
        waits.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", noted_sleep)
    seam = Seam(busy_then_fine)
    client = openai_client(seam, max_retries=1)

    started = wall()
    completion = client.chat.completions.create(model="gpt-test", messages=MESSAGES)
    elapsed = wall() - started

    assert completion.choices[0].message.content == "Once upon a time."
    assert [r.headers["x-stainless-retry-count"] for r in seam.requests] == ["0", "1"]
    # The header's 0.3 s, not the SDK's own backoff (0.375 s to 0.5 s for a first retry).
    assert waits == [0.3]
    assert elapsed >= 0.3


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_repeated_headers_survive_the_bridge_both_ways(lib):
    cookies = [("set-cookie", "a=1; Path=/"), ("Set-Cookie", "b=2; Expires=Wed, 21 Oct 2037")]
    seam = Seam(lambda seam, request: TransportResponse(200, cookies, b"ok"))
    client = lib.Client(transport=HTTPBridge(seam))

    response = client.get("http://test/", headers=[("X-Trace", "1"), ("x-trace", "2")])

    assert response.headers.get_list("Set-Cookie") == [value for _, value in cookies]
    assert seam.requests[0].headers.get_list("X-TRACE") == ["1", "2"]


# Rule 3 through the bridge: non-JSON bodies are bytes, unchanged.


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_an_html_502_travels_unchanged_and_is_not_an_exception(lib):
    seam = Seam(
        lambda seam, request: TransportResponse(502, {"content-type": "text/html"}, HTML_502)
    )

    response = lib.Client(transport=HTTPBridge(seam)).post("http://test/v1/x", json={"a": 1})

    assert response.status_code == 502
    assert response.content == HTML_502
    assert response.headers["content-type"] == "text/html"
    assert response.headers["content-length"] == str(len(HTML_502))


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_an_ndjson_stream_travels_chunk_for_chunk(lib):
    ndjson = {"content-type": "application/x-ndjson"}
    seam = Seam(lambda seam, request: TransportResponse(200, ndjson, ByteStream(NDJSON_LINES)))
    client = lib.Client(transport=HTTPBridge(seam))

    with client.stream("POST", "http://test/api/chat", json={"stream": True}) as response:
        chunks = list(response.iter_raw())

    assert chunks == NDJSON_LINES
    assert "content-length" not in response.headers


@pytest.mark.parametrize(
    ("status", "content_type", "body"),
    [
        pytest.param(502, "text/html", HTML_502, id="html-502"),
        pytest.param(200, "application/x-ndjson", b"".join(NDJSON_LINES), id="ndjson"),
    ],
)
def test_bytes_travel_unchanged_through_the_bridge_and_the_live_transport(
    status, content_type, body
):
    fixed = Fixed(status, [("Content-Type", content_type)], body)
    bridge = HTTPBridge(LiveTransport())
    with LoopbackServer(fixed) as server, httpx2.Client(transport=bridge) as client:
        response = client.get(server.url("/"))
        with client.stream("POST", server.url("/"), json={"stream": True}) as streamed:
            streamed_body = streamed.read()

    assert response.status_code == status
    assert response.content == body
    assert streamed_body == body


def test_a_parsed_answer_is_sent_to_the_client_as_json():
    seam = Seam(lambda seam, request: TransportResponse(200, {}, {"caf\u00e9": [1, None]}))

    response = httpx2.Client(transport=HTTPBridge(seam)).get("http://test/")

    assert response.headers["content-type"] == "application/json"
    assert response.content == '{"caf\u00e9":[1,null]}'.encode()
    assert response.json() == {"caf\u00e9": [1, None]}


# What the seam is told.


def test_the_seam_gets_the_clients_bytes_and_read_timeout():
    seam = Seam(lambda seam, request: TransportResponse(204))
    client = httpx2.Client(transport=HTTPBridge(seam), timeout=httpx2.Timeout(3, read=7))

    client.post("http://test/upload?x=1", content=b"\x00raw", headers={"Content-Type": "x/y"})
    client.post("http://test/json", content=b'{ "b": 1, "a": 2 }', headers=JSON)

    raw, parsed = seam.requests
    assert raw.url == "http://test/upload?x=1"
    assert raw.body == b"\x00raw"
    assert raw.content == b"\x00raw"
    assert raw.timeout == 7
    assert parsed.body == {"b": 1, "a": 2}
    assert parsed.content == b'{ "b": 1, "a": 2 }'
    assert parsed.stream is False


def test_closing_a_response_early_closes_the_seam_stream():
    closed = []

    def endless(seam, request):
        def chunks():
            while True:
                yield b"data: {}\n\n"

        return TransportResponse(200, SSE, ByteStream(chunks(), close=lambda: closed.append(1)))

    client = httpx2.Client(transport=HTTPBridge(Seam(endless)))
    with client.stream("GET", "http://test/", headers={"Accept": "text/event-stream"}) as response:
        first = next(response.iter_raw())

    assert first == b"data: {}\n\n"
    assert closed == [1]


def test_closing_the_client_closes_the_seam_transport():
    class Closable:
        closed = False

        def __call__(self, request):
            return TransportResponse(204)

        def close(self):
            self.closed = True

    seam = Closable()
    with httpx2.Client(transport=HTTPBridge(seam)):
        pass

    assert seam.closed


def test_a_bridge_needs_the_flavour_the_client_uses():
    with pytest.raises(TypeError, match="needs a transport=, an async_transport=, or both"):
        HTTPBridge()

    async def only_async(request):
        return TransportResponse(204)

    client = httpx2.Client(transport=HTTPBridge(async_transport=only_async))
    with pytest.raises(TypeError, match="pass transport= as well"):
        client.get("http://test/")


@pytest.mark.anyio
async def test_an_async_client_needs_an_async_transport():
    bridge = HTTPBridge(Seam(lambda seam, request: TransportResponse(204)))

    async with httpx2.AsyncClient(transport=bridge) as client:
        with pytest.raises(TypeError, match="pass async_transport= as well"):
            await client.get("http://test/")


# Errors: seam TransportErrors become the library's own exceptions.


def fails_mid_stream(seam, request):
    def chunks():
        yield b"data: 1\n\n"
        raise ReadTimeout("no event for 30 s")

    return TransportResponse(200, SSE, ByteStream(chunks()))


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_a_seam_error_mid_stream_is_the_librarys_read_timeout(lib):
    client = lib.Client(transport=HTTPBridge(Seam(fails_mid_stream)))

    received = []
    with client.stream("GET", "http://test/", headers={"Accept": "text/event-stream"}) as response:
        iterator = response.iter_bytes()
        received.append(next(iterator))
        with pytest.raises(lib.ReadTimeout, match="no event for 30 s") as excinfo:
            next(iterator)

    assert received == [b"data: 1\n\n"]
    assert isinstance(excinfo.value.__cause__, ReadTimeout)
    assert str(excinfo.value.request.url) == "http://test/"


@pytest.mark.anyio
async def test_a_seam_error_mid_async_stream_is_httpx2_read_timeout():
    async def answer(request):
        async def chunks():
            yield b"data: 1\n\n"
            raise ReadTimeout("no event for 30 s")

        return TransportResponse(200, SSE, AsyncByteStream(chunks()))

    client = httpx2.AsyncClient(transport=HTTPBridge(async_transport=answer))
    headers = {"Accept": "text/event-stream"}
    async with client, client.stream("GET", "http://test/", headers=headers) as response:
        iterator = response.aiter_bytes()
        assert await anext(iterator) == b"data: 1\n\n"
        with pytest.raises(httpx2.ReadTimeout, match="no event for 30 s"):
            await anext(iterator)


def test_an_sdk_stream_cut_by_a_seam_timeout_reaches_openai_as_httpx2_read_timeout():
    def answer(seam, request):
        def chunks():
            yield from list(openai_chunks())[:2]
            raise ReadTimeout("stalled")

        return TransportResponse(200, SSE, ByteStream(chunks()))

    client = openai_client(Seam(answer), max_retries=0)
    stream = client.chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True)

    iterator = iter(stream)
    assert next(iterator).choices[0].delta.content == WORDS[0]
    assert next(iterator).choices[0].delta.content == WORDS[1]
    with pytest.raises(openai.APITimeoutError) as excinfo:
        next(iterator)

    library_error = excinfo.value.__cause__
    assert isinstance(library_error, httpx2.ReadTimeout)
    assert str(library_error) == "stalled"
    assert isinstance(library_error.__cause__, ReadTimeout)


@pytest.mark.parametrize("kind", sorted(ERROR_KINDS))
@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_each_seam_error_maps_to_the_library_exception_of_the_same_name(lib, kind):
    def failing(request):
        raise ERROR_KINDS[kind](f"{kind} from the seam")

    expected = lib.ReadError if kind == "TransportCancelled" else getattr(lib, kind)
    client = lib.Client(transport=HTTPBridge(failing))

    with pytest.raises(lib.TransportError) as excinfo:
        client.get("http://test/")

    assert type(excinfo.value) is expected
    assert str(excinfo.value) == f"{kind} from the seam"
    assert isinstance(excinfo.value.__cause__, ERROR_KINDS[kind])


@pytest.mark.parametrize(
    ("seam_error", "sdk_error"),
    [("ConnectError", openai.APIConnectionError), ("ReadTimeout", openai.APITimeoutError)],
)
def test_openai_sees_seam_errors_as_its_own_connection_errors(seam_error, sdk_error):
    def failing(request):
        raise ERROR_KINDS[seam_error]("down")

    client = openai.OpenAI(
        api_key="test",
        base_url="http://test/v1",
        http_client=httpx2.Client(transport=HTTPBridge(failing)),
        max_retries=0,
    )

    with pytest.raises(sdk_error):
        client.chat.completions.create(model="gpt-test", messages=MESSAGES)


def test_a_request_built_by_hand_reaches_the_seam_unchanged():
    seam = Seam(lambda seam, request: TransportResponse(200, JSON, {"echo": request.body}))
    request = httpx2.Request("PUT", "http://test/items/1", json={"k": "v"})

    response = httpx2.Client(transport=HTTPBridge(seam)).send(request)

    assert response.json() == {"echo": {"k": "v"}}
    assert isinstance(seam.requests[0], TransportRequest)
    assert seam.requests[0].method == "PUT"
