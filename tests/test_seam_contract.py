"""The seam's rules, enforced by ``call``/``acall``/``check_response`` (DESIGN §2).

Those three are private: the package calls every transport through them (the bridges, the
recorder), so a rule broken by any transport is caught there.

Every transport here is an in-process function: no sockets. The live transport and the bridge
have their own files.
"""

import threading

import anyio
import httpx
import pytest

from pytest_toolnexus import (
    AsyncByteStream,
    ByteStream,
    CancelToken,
    ContractError,
    Headers,
    HTTPBridge,
    TransportCancelled,
    TransportRequest,
    TransportResponse,
)
from pytest_toolnexus._seam.bodies import decode_body, encode_json, is_json_type, wants_stream
from pytest_toolnexus._seam.transport import PUSHED, acall, call, check_response
from tests.support.realtime import paced, wall

URL = "http://test/v1/chat/completions"
HTML_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n"
    b"<body><center><h1>502 Bad Gateway</h1></center></body>\r\n</html>\r\n"
)
NDJSON = b'{"message":{"content":"a"},"done":false}\n{"message":{"content":""},"done":true}\n'


@pytest.fixture
def anyio_backend():
    return "asyncio"


def answer(response):
    """A sync transport that records each request and always gives ``response``."""
    seen = []

    def transport(request):
        seen.append(request)
        return response

    transport.seen = seen
    return transport


def answer_async(response):
    seen = []

    async def transport(request):
        seen.append(request)
        return response

    transport.seen = seen
    return transport


def stream_request(**kwargs):
    return TransportRequest("POST", URL, body={"model": "m", "stream": True}, stream=True, **kwargs)


# Rule 2: a stream=True request answered with a parsed body is a contract error.

PARSED_BODIES = [
    pytest.param({"choices": []}, id="dict"),
    pytest.param([1, 2], id="list"),
    pytest.param("text", id="str"),
    pytest.param(None, id="None"),
    pytest.param(0, id="int"),
]


@pytest.mark.parametrize("body", PARSED_BODIES)
def test_a_parsed_answer_to_a_stream_request_is_a_contract_error(body):
    transport = answer(TransportResponse(200, {"content-type": "application/json"}, body))

    with pytest.raises(ContractError) as excinfo:
        call(transport, stream_request())

    message = str(excinfo.value)
    assert f"POST {URL}" in message
    assert "stream=True" in message
    assert "ByteStream" in message
    assert len(transport.seen) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("body", PARSED_BODIES)
async def test_a_parsed_answer_to_a_stream_request_is_a_contract_error_async(body):
    transport = answer_async(TransportResponse(200, {}, body))

    with pytest.raises(ContractError, match=r"stream=True.*AsyncByteStream"):
        await acall(transport, stream_request())


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"data: {}\n\n", id="bytes"),
        pytest.param(ByteStream([b"data: {}\n\n"]), id="ByteStream"),
    ],
)
def test_a_stream_request_may_be_answered_with_bytes_or_a_byte_stream(body):
    response = call(answer(TransportResponse(200, {}, body)), stream_request())

    assert response.body is body


def test_a_parsed_answer_to_a_plain_request_is_fine():
    response = call(answer(TransportResponse(200, {}, {"ok": True})), TransportRequest("GET", URL))

    assert response.body == {"ok": True}
    assert response.is_parsed
    assert not response.is_stream


def test_a_sync_transport_may_not_answer_with_an_async_stream():
    async def chunks():
        yield b"x"

    transport = answer(TransportResponse(200, {}, AsyncByteStream(chunks())))

    with pytest.raises(
        ContractError, match=r"a sync transport answered .* with an AsyncByteStream"
    ):
        call(transport, stream_request())


@pytest.mark.anyio
async def test_an_async_transport_may_not_answer_with_a_sync_stream():
    transport = answer_async(TransportResponse(200, {}, ByteStream([b"x"])))

    with pytest.raises(ContractError, match=r"async transport answered .* with a sync ByteStream"):
        await acall(transport, stream_request())


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        pytest.param({"status": 200}, "with dict; a Transport must return a TransportResponse"),
        pytest.param(TransportResponse(True), "status True; a status must be an int"),
        pytest.param(TransportResponse("200"), "status '200'; a status must be an int"),
        pytest.param(TransportResponse(99), "status 99, which is not an HTTP status"),
        pytest.param(TransportResponse(600), "status 600, which is not an HTTP status"),
    ],
)
def test_answers_that_are_not_http_responses_are_contract_errors(returned, message):
    with pytest.raises(ContractError, match=message):
        call(answer(returned), TransportRequest("GET", URL))


def test_pushed_without_an_on_event_callback_is_a_contract_error():
    with pytest.raises(ContractError, match="no on_event callback"):
        call(answer(TransportResponse.pushed(200)), stream_request())


def test_a_transport_may_push_chunks_to_on_event():
    received = []

    def pushing(request):
        for chunk in (b"data: 1\n\n", b"data: 2\n\n"):
            request.on_event(chunk)
        return TransportResponse.pushed(200, {"content-type": "text/event-stream"})

    response = call(pushing, stream_request(on_event=received.append))

    assert response.is_pushed
    assert response.body is PUSHED
    assert response.headers["Content-Type"] == "text/event-stream"
    assert received == [b"data: 1\n\n", b"data: 2\n\n"]
    assert not response.is_parsed
    assert not response.is_stream
    assert repr(PUSHED) == "PUSHED"


@pytest.mark.parametrize("body", [None, {"a": 1}, b"raw", ByteStream([b"x"])])
def test_only_a_pushed_answer_reads_as_pushed(body):
    assert not TransportResponse(200, {}, body).is_pushed


class Dual:
    """One object for both seams: calling it is sync, ``acall`` is async."""

    def __init__(self):
        self.seen = []

    def __call__(self, request):
        self.seen.append(("sync", request.url))
        return TransportResponse(200, {"content-type": "application/json"}, {"side": "sync"})

    async def acall(self, request):
        self.seen.append(("async", request.url))
        await anyio.sleep(0)
        return TransportResponse(200, {"content-type": "application/json"}, {"side": "async"})


@pytest.mark.anyio
async def test_a_dual_transport_is_called_on_its_async_side_from_async_code():
    dual = Dual()

    sync_answer = call(dual, TransportRequest("GET", URL))
    async_answer = await acall(dual, TransportRequest("GET", URL))

    assert (sync_answer.body, async_answer.body) == ({"side": "sync"}, {"side": "async"})
    assert dual.seen == [("sync", URL), ("async", URL)]


@pytest.mark.anyio
async def test_the_bridge_serves_sync_and_async_clients_from_one_dual_transport():
    dual = Dual()
    bridge = HTTPBridge(dual)

    with httpx.Client(transport=bridge) as client:
        sync_body = client.get(URL).json()
    async with httpx.AsyncClient(transport=bridge) as client:
        async_body = (await client.get(URL)).json()

    assert (sync_body, async_body) == ({"side": "sync"}, {"side": "async"})
    assert [side for side, _ in dual.seen] == ["sync", "async"]


def test_check_response_returns_the_response_it_was_given():
    response = TransportResponse(200, {}, b"ok")

    assert check_response(TransportRequest("GET", URL), response, asynchronous=False) is response


# Rule 5: a status is a value.


@pytest.mark.parametrize("status", [429, 500, 502, 503, 529])
def test_error_statuses_come_back_as_responses(status):
    transport = answer(TransportResponse(status, {"retry-after": "1"}, {"error": "busy"}))

    response = call(transport, TransportRequest("POST", URL, body={"model": "m"}))

    assert response.status == status
    assert response.body == {"error": "busy"}
    assert response.headers["Retry-After"] == "1"


@pytest.mark.anyio
async def test_error_statuses_come_back_as_responses_async():
    response = await acall(answer_async(TransportResponse(429, {})), TransportRequest("GET", URL))

    assert response.status == 429


# Rule 3: a body that is not JSON travels as bytes.


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/html", HTML_502),
        ("application/x-ndjson", NDJSON),
        ("application/octet-stream", bytes(range(256))),
    ],
)
def test_bytes_bodies_come_back_unchanged(content_type, body):
    response = call(
        answer(TransportResponse(502, {"content-type": content_type}, body)),
        TransportRequest("GET", URL),
    )

    assert response.body == body
    assert not response.is_parsed


# Cancellation at the seam.


def test_a_token_cancelled_before_the_call_raises_without_calling_the_transport():
    token = CancelToken()
    token.cancel("the user pressed stop")
    transport = answer(TransportResponse(200, {}, b""))

    with pytest.raises(TransportCancelled, match="the user pressed stop"):
        call(transport, TransportRequest("GET", URL, cancel=token))

    assert transport.seen == []


@pytest.mark.anyio
async def test_a_token_cancelled_before_the_async_call_raises_without_calling_the_transport():
    token = CancelToken()
    token.cancel()
    transport = answer_async(TransportResponse(200, {}, b""))

    with pytest.raises(TransportCancelled):
        await acall(transport, TransportRequest("GET", URL, cancel=token))

    assert transport.seen == []


def test_cancel_tokens_run_callbacks_once_and_late_callbacks_at_once():
    token = CancelToken()
    calls = []
    token.on_cancel(lambda: calls.append("early"))
    unregister = token.on_cancel(lambda: calls.append("unregistered"))
    unregister()

    assert not token.cancelled
    assert repr(token) == "<CancelToken active>"
    token.raise_if_cancelled()

    token.cancel("stop")
    token.cancel("again")
    token.on_cancel(lambda: calls.append("late"))

    assert calls == ["early", "late"]
    assert token.cancelled
    assert token.reason == "stop"
    assert repr(token) == "<CancelToken cancelled (stop)>"
    with pytest.raises(TransportCancelled, match="request cancelled: stop"):
        token.raise_if_cancelled()


def test_a_cancel_from_another_thread_wakes_a_waiter_promptly():
    # Woken by the cancel (wait returns True), as soon as it came: no later than this machine's
    # sleeps are late right now, well before the 5 s timeout.
    def run():
        token = CancelToken()
        cancelled = []

        def cancel():
            cancelled.append(wall())
            token.cancel()

        timer = threading.Timer(0.05, cancel)
        timer.start()
        woken = token.wait(timeout=5)
        woke_at = wall()
        timer.join()
        return [woke_at - cancelled[0]], woken

    assert paced(run, [0.0], gaps=[0.05], what="wake-up") is True
    assert not CancelToken().wait(timeout=0.01)


# Byte streams pull; they never read ahead.


def test_a_byte_stream_yields_each_chunk_when_the_producer_does():
    produced = []

    def producer():
        for index in range(3):
            produced.append(index)
            yield b"chunk %d" % index

    stream = ByteStream(producer())
    iterator = iter(stream)

    assert produced == []
    assert next(iterator) == b"chunk 0"
    assert produced == [0]
    assert next(iterator) == b"chunk 1"
    assert produced == [0, 1]


def test_a_byte_stream_that_yields_text_is_a_contract_error():
    with pytest.raises(ContractError, match="a ByteStream yielded str, not bytes"):
        list(ByteStream(["text"]))


def test_closing_a_byte_stream_runs_the_producer_cleanup_once():
    events = []

    def producer():
        try:
            yield b"a"
            yield b"b"
        finally:
            events.append("producer closed")

    stream = ByteStream(producer(), close=lambda: events.append("close callback"))
    with stream:
        assert next(iter(stream)) == b"a"
        assert repr(stream) == "<ByteStream open>"
    stream.close()

    assert stream.closed
    assert repr(stream) == "<ByteStream closed>"
    assert events == ["close callback", "producer closed"]


def test_read_joins_the_chunks_and_closes():
    closed = []
    stream = ByteStream([b"a", b"b"], close=lambda: closed.append(True))

    assert stream.read() == b"ab"
    assert closed == [True]


@pytest.mark.anyio
async def test_an_async_byte_stream_pulls_and_closes():
    produced = []
    events = []

    async def producer():
        try:
            for index in range(3):
                produced.append(index)
                yield b"chunk %d" % index
                await anyio.sleep(0)
        finally:
            events.append("producer closed")

    async def on_close():
        events.append("close callback")

    async with AsyncByteStream(producer(), aclose=on_close) as stream:
        iterator = aiter(stream)
        assert produced == []
        assert await anext(iterator) == b"chunk 0"
        assert produced == [0]
        await iterator.aclose()

    assert stream.closed
    assert events == ["close callback", "producer closed"]


@pytest.mark.anyio
async def test_an_async_byte_stream_that_yields_text_is_a_contract_error():
    async def producer():
        yield "text"

    with pytest.raises(ContractError, match="an AsyncByteStream yielded str, not bytes"):
        await AsyncByteStream(producer()).aread()


# What a request says about itself (_bodies).


def test_a_request_declares_its_content_as_bytes():
    with pytest.raises(TypeError, match="content must be bytes"):
        TransportRequest("POST", URL, content="text")


@pytest.mark.parametrize(
    ("url", "headers", "body", "expected"),
    [
        pytest.param(URL, {}, {"stream": True}, True, id="json-stream-true"),
        pytest.param(URL, {}, {"stream": False}, False, id="json-stream-false"),
        pytest.param(URL, {}, {"stream": "true"}, False, id="json-stream-string"),
        pytest.param(URL, {}, b'{"stream": true}', False, id="bytes-body"),
        pytest.param(URL, {"Accept": "text/event-stream"}, None, True, id="accept-sse"),
        pytest.param(URL, {"accept": "application/x-ndjson"}, None, True, id="accept-ndjson"),
        pytest.param(URL, {"accept": "application/json"}, None, False, id="accept-json"),
        pytest.param(
            "http://test/v1beta/models/g:streamGenerateContent?alt=sse", {}, {}, True, id="alt-sse"
        ),
        pytest.param("http://test/v1beta/models/g?alt=json", {}, {}, False, id="alt-json"),
        pytest.param(
            "http://test/v1beta/models/g:streamGenerateContent", {}, {}, True, id="gemini-array"
        ),
        pytest.param(
            "http://test/v1beta/models/g:generateContent", {}, {}, False, id="gemini-whole"
        ),
        pytest.param(
            "http://test/model/m%3A0/converse-stream", {}, {}, True, id="bedrock-converse-stream"
        ),
        pytest.param(
            "http://test/model/m/invoke-with-response-stream", {}, {}, True, id="bedrock-invoke"
        ),
        pytest.param("http://test/model/m%3A0/converse", {}, {}, False, id="bedrock-converse"),
        pytest.param(
            URL,
            {"accept": "application/vnd.amazon.eventstream"},
            None,
            True,
            id="accept-eventstream",
        ),
    ],
)
def test_wants_stream_reads_the_request(url, headers, body, expected):
    assert wants_stream(url, Headers(headers), body) is expected


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ("application/vnd.api+json", True),
        ("application/x-ndjson", False),
        ("text/json", False),
        ("", False),
    ],
)
def test_is_json_type(content_type, expected):
    assert is_json_type(content_type) is expected


@pytest.mark.parametrize(
    ("content_type", "content", "expected"),
    [
        pytest.param("application/json", b'{"a": [1, 2]}', {"a": [1, 2]}, id="json"),
        pytest.param("application/json", b"<html>502</html>", b"<html>502</html>", id="not-json"),
        pytest.param("application/json", b"", b"", id="empty-json"),
        pytest.param("application/json", b"\xff\xfe", b"\xff\xfe", id="not-utf8"),
        pytest.param("text/html", HTML_502, HTML_502, id="html"),
        pytest.param("application/x-ndjson", NDJSON, NDJSON, id="ndjson"),
        pytest.param("", b'{"a": 1}', b'{"a": 1}', id="undeclared"),
    ],
)
def test_decode_body_parses_only_declared_json(content_type, content, expected):
    assert decode_body(Headers({"content-type": content_type}), content) == expected


@pytest.mark.parametrize(
    "value",
    [
        {"model": "m", "messages": [{"role": "user", "content": "h\u00e9llo \u2603 \U0001f600"}]},
        [1, 2.5, None, True, "x"],
        {"nested": {"k": []}, "n": 10**20},
    ],
)
def test_encode_json_matches_httpx_json_encoding(value):
    assert encode_json(value) == httpx.Request("POST", URL, json=value).content


def test_encode_json_refuses_nan():
    with pytest.raises(ValueError, match="not JSON compliant"):
        encode_json({"x": float("nan")})


def test_a_parsed_answer_with_its_bytes_reaches_the_client_as_those_bytes():
    given = b'{"answer": 42,  "as": "sent"}'

    def transport(request):
        return TransportResponse(200, {"content-type": "application/json"}, {"answer": 42}, given)

    with httpx.Client(transport=HTTPBridge(transport)) as client:
        response = client.get("https://api.example.test/v1/x")

    assert response.content == given
    assert response.headers["content-length"] == str(len(given))


def test_a_response_content_that_is_not_bytes_is_refused():
    with pytest.raises(TypeError, match=r"TransportResponse\.content must be bytes"):
        TransportResponse(200, body={"a": 1}, content='{"a": 1}')  # type: ignore[arg-type]
