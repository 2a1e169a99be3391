"""The live default transport against loopback servers (DESIGN §2, rules 1, 3, 4 and 5).

Every server binds 127.0.0.1 on a free port and is stopped by the test that started it.
"""

import gzip
import socket
import threading

import httpx
import httpx2
import pytest

from pytest_toolnexus import (
    AsyncByteStream,
    ByteStream,
    CancelToken,
    ConnectError,
    LiveTransport,
    ReadTimeout,
    TransportCancelled,
    TransportRequest,
)
from pytest_toolnexus._seam.transport import call
from tests.support.realtime import apaced, paced, wall
from tests.support.servers import Drip, Fixed, LoopbackServer

HTML_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n"
    b"<body><center><h1>502 Bad Gateway</h1></center></body>\r\n</html>\r\n"
)
NDJSON = (
    b'{"model":"llama","message":{"role":"assistant","content":"H\xc3\xa9"},"done":false}\n'
    b'{"model":"llama","message":{"role":"assistant","content":""},"done":true}\n'
)
SLOW_EVENTS = [b'data: {"n": %d}\n\n' % n for n in range(20)]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def live():
    with LiveTransport() as transport:
        yield transport


# Rule 4: with nothing installed, the bytes on the wire are today's bytes.

JSON_BODIES = [
    pytest.param(
        {"model": "gpt-x", "messages": [{"role": "user", "content": "h\u00e9llo \U0001f600"}]},
        id="chat",
    ),
    pytest.param([{"a": 1.5, "b": None, "c": True}], id="list"),
    pytest.param({"stream": True, "max_tokens": 10, "stop": ["\n"]}, id="stream-flag"),
]


@pytest.mark.parametrize("body", JSON_BODIES)
def test_a_json_request_puts_the_same_bytes_on_the_wire_as_plain_httpx(live, body):
    with LoopbackServer(Fixed(200, [("Content-Type", "application/json")], b"{}")) as server:
        with httpx.Client() as client:
            client.post(server.url("/v1/chat/completions"), json=body)
        live(TransportRequest("POST", server.url("/v1/chat/completions"), body=body))

        httpx_request, live_request = server.requests

    assert b"Content-Type: application/json" in httpx_request.raw
    assert live_request.raw == httpx_request.raw


def test_headers_given_on_the_request_go_on_the_wire_as_httpx_sends_them(live):
    headers = [("Authorization", "Bearer sk-test"), ("X-Trace", "1"), ("X-Trace", "2")]
    with LoopbackServer(Fixed(204)) as server:
        with httpx.Client() as client:
            client.post(server.url("/v1/x"), json={"a": 1}, headers=headers)
        live(TransportRequest("POST", server.url("/v1/x"), headers=headers, body={"a": 1}))

        httpx_request, live_request = server.requests

    assert b"X-Trace: 1\r\nX-Trace: 2\r\n" in live_request.raw
    assert live_request.raw == httpx_request.raw


@pytest.mark.parametrize(
    ("body", "content"),
    [
        pytest.param({"b": 1, "a": 2}, b'{ "b" : 1,\n  "a": 2 }', id="content-wins-over-body"),
        pytest.param(None, b"\x00\x01binary\xff", id="binary"),
    ],
)
def test_encoded_content_is_sent_byte_for_byte(live, body, content):
    with LoopbackServer(Fixed(200)) as server:
        live(TransportRequest("POST", server.url("/upload"), body=body, content=content))

        (received,) = server.requests

    assert received.body == content
    assert received.header("Content-Length") == str(len(content))
    assert received.raw.endswith(b"\r\n\r\n" + content)


def test_a_bytes_body_is_sent_byte_for_byte(live):
    body = b"not json at all {"
    with LoopbackServer(Fixed(200)) as server:
        live(TransportRequest("POST", server.url("/raw"), body=body))

        (received,) = server.requests

    assert received.body == body


def test_a_client_of_your_own_keeps_its_defaults_and_is_not_closed():
    with LoopbackServer(Fixed(200, [("Content-Type", "application/json")], b"[1]")) as server:
        client = httpx2.Client(base_url=server.origin, headers={"X-Default": "yes"})
        with LiveTransport(client) as transport:
            response = transport(TransportRequest("GET", "/models"))

        (received,) = server.requests

    assert response.body == [1]
    assert received.target == "/models"
    assert received.header("X-Default") == "yes"
    assert not client.is_closed
    client.close()


def test_client_and_transport_are_exclusive():
    with pytest.raises(TypeError, match="pass client= or transport=, not both"):
        LiveTransport(httpx.Client(), transport=httpx.HTTPTransport())


def test_a_library_transport_can_be_driven_directly():
    with LoopbackServer(Fixed(200, [("Content-Type", "text/plain")], b"pong")) as server:
        transport = LiveTransport(transport=httpx.HTTPTransport())
        response = transport(TransportRequest("GET", server.url("/ping"), timeout=5))

        (received,) = server.requests

    assert response.body == b"pong"
    assert received.header("Host") == f"127.0.0.1:{server.port}"


# Rule 5: a status is a value; rule 1: headers are case-insensitive and multi-valued.


def test_429_and_500_are_responses_not_exceptions(live):
    too_many = Fixed(429, [("retry-after", "7"), ("content-type", "application/json")], b"{}")
    with LoopbackServer(too_many) as server:
        response = call(live, TransportRequest("POST", server.url("/v1/x"), body={"a": 1}))

    assert response.status == 429
    assert response.headers["Retry-After"] == "7"

    body = b'{"error":{"message":"boom","type":"server_error"}}'
    with LoopbackServer(Fixed(500, [("Content-Type", "application/json")], body)) as server:
        response = call(live, TransportRequest("POST", server.url("/v1/x"), body={"a": 1}))

    assert response.status == 500
    assert response.body == {"error": {"message": "boom", "type": "server_error"}}


@pytest.mark.anyio
async def test_429_is_a_response_async():
    with LoopbackServer(Fixed(429, [("retry-after", "3")])) as server:
        async with LiveTransport() as transport:
            response = await transport.acall(TransportRequest("GET", server.url("/")))

    assert response.status == 429
    assert response.headers["Retry-After"] == "3"
    assert response.body == b""


def test_two_set_cookie_headers_stay_two(live):
    cookies = [("Set-Cookie", "a=1; Path=/"), ("Set-Cookie", "b=2; Expires=Wed, 21 Oct 2037")]
    with LoopbackServer(Fixed(200, cookies)) as server:
        response = live(TransportRequest("GET", server.url("/")))

    assert response.headers.get_list("set-cookie") == [value for _, value in cookies]


# Rule 3: a body that is not JSON travels as bytes, unchanged.


@pytest.mark.parametrize(
    ("status", "content_type", "body"),
    [
        pytest.param(502, "text/html", HTML_502, id="html-502"),
        pytest.param(502, "application/json", HTML_502, id="html-502-mislabelled-json"),
        pytest.param(200, "application/x-ndjson", NDJSON, id="ndjson"),
        pytest.param(200, "application/octet-stream", bytes(range(256)), id="binary"),
    ],
)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_body_that_is_not_json_arrives_unchanged(live, status, content_type, body, stream):
    with LoopbackServer(Fixed(status, [("Content-Type", content_type)], body)) as server:
        response = live(TransportRequest("GET", server.url("/"), stream=stream))
        content = response.body.read() if stream else response.body

    assert response.status == status
    assert content == body


def test_a_gzip_body_is_handed_over_decoded_without_its_wire_headers(live):
    payload = b'{"ok":true}'
    headers = [("Content-Type", "application/json"), ("Content-Encoding", "gzip")]
    with LoopbackServer(Fixed(200, headers, gzip.compress(payload))) as server:
        response = live(TransportRequest("GET", server.url("/")))

    assert response.body == {"ok": True}
    assert response.content == payload
    assert "content-encoding" not in response.headers
    assert "content-length" not in response.headers


def test_a_json_answer_is_parsed_and_keeps_the_servers_bytes_as_its_content(live):
    sent = b'{ "b" : 1.0 , "a" : "\\u00e9" }\r\n'
    with LoopbackServer(Fixed(200, [("Content-Type", "application/json")], sent)) as server:
        response = live(TransportRequest("GET", server.url("/")))

    assert response.body == {"b": 1.0, "a": "\u00e9"}
    assert response.content == sent  # what a bridge hands its client


def test_a_body_that_is_not_json_has_no_separate_content(live):
    with LoopbackServer(Fixed(502, [("Content-Type", "text/html")], HTML_502)) as server:
        response = live(TransportRequest("GET", server.url("/")))

    assert response.body == HTML_502
    assert response.content is None


# Streaming: chunks arrive when the server sends them.


def test_a_stream_delivers_each_chunk_as_it_is_sent(live):
    # Each chunk reaches the client after the server sent it, and no later than this machine's
    # sleeps are late right now: a chunk held back would be a whole interval late.
    def run():
        drip = Drip(SLOW_EVENTS[:5], interval=0.15)
        with LoopbackServer(drip) as server:
            start = wall()
            response = live(TransportRequest("GET", server.url("/"), stream=True))
            arrivals, chunks = [], []
            with response.body as stream:
                for chunk in stream:
                    arrivals.append(wall() - start)
                    chunks.append(chunk)
        return arrivals, (response, chunks, [t - start for t in drip.sent_at])

    response, chunks, _ = paced(run, lambda result: result[2], gaps=[0.15], what="chunk")

    assert isinstance(response.body, ByteStream)
    assert b"".join(chunks) == b"".join(SLOW_EVENTS[:5])


def test_a_stream_closed_unread_gives_its_connection_back():
    client = httpx.Client(limits=httpx.Limits(max_connections=1), timeout=httpx.Timeout(5, pool=1))
    with LoopbackServer(Drip(SLOW_EVENTS, interval=0.5)) as server, client:
        transport = LiveTransport(client)
        first = transport(TransportRequest("GET", server.url("/"), stream=True))
        first.body.close()

        second = transport(TransportRequest("GET", server.url("/"), stream=True))
        with second.body as stream:
            assert next(iter(stream)) == SLOW_EVENTS[0]

    assert first.body.closed


@pytest.mark.anyio
async def test_an_async_stream_closed_unread_gives_its_connection_back():
    client = httpx.AsyncClient(
        limits=httpx.Limits(max_connections=1), timeout=httpx.Timeout(5, pool=1)
    )
    with LoopbackServer(Drip(SLOW_EVENTS, interval=0.5)) as server:
        async with client:
            transport = LiveTransport(client)
            first = await transport.acall(TransportRequest("GET", server.url("/"), stream=True))
            await first.body.aclose()

            second = await transport.acall(TransportRequest("GET", server.url("/"), stream=True))
            async with second.body as stream:
                assert await anext(aiter(stream)) == SLOW_EVENTS[0]


# Cancellation: a cancelled request stops promptly, mid-stream.


def read_starting_timer_after_first_chunk(stream, received, timer):
    for chunk in stream:
        received.append(chunk)
        if len(received) == 1:
            timer.start()


async def aread_starting_timer_after_first_chunk(stream, received, timer):
    async for chunk in stream:
        received.append(chunk)
        if len(received) == 1:
            timer.start()


class Canceller:
    """Cancels ``token`` from a timer thread ``after`` seconds, noting when it did."""

    def __init__(self, token, after, *args):
        self.cancelled_at = None
        self.timer = threading.Timer(after, self._cancel, args=(token, *args))

    def _cancel(self, token, *args):
        self.cancelled_at = wall()
        token.cancel(*args)

    def start(self):
        self.timer.start()


def test_cancelling_mid_stream_stops_promptly(live):
    # The read blocked on the socket is interrupted: the stream raises as soon as the token is
    # cancelled (no later than this machine's sleeps are late), not when the next chunk comes
    # (0.5 s after the first).
    def run():
        drip = Drip(SLOW_EVENTS, interval=0.5)  # ~10 s of stream
        token = CancelToken()
        canceller = Canceller(token, 0.1, "test cancel")
        with LoopbackServer(drip) as server:
            response = live(TransportRequest("GET", server.url("/"), stream=True, cancel=token))
            received = []
            with pytest.raises(TransportCancelled, match="test cancel"):
                read_starting_timer_after_first_chunk(response.body, received, canceller)
            raised_at = wall()
            canceller.timer.join()

            assert drip.done.wait(timeout=3), "the server kept streaming to a cancelled client"
        return [raised_at - canceller.cancelled_at], (received, drip)

    # Seconds from the cancel to the raise: due at once.
    received, drip = paced(run, [0.0], gaps=[0.1], what="cancellation")

    assert received == SLOW_EVENTS[:1]
    assert drip.client_gone.is_set()


@pytest.mark.anyio
async def test_cancelling_mid_stream_stops_promptly_async():
    # As above: the raise is due as soon as the token is cancelled.
    async def run():
        drip = Drip(SLOW_EVENTS, interval=0.5)
        token = CancelToken()
        canceller = Canceller(token, 0.1, "test cancel")
        with LoopbackServer(drip) as server:
            async with LiveTransport() as transport:
                request = TransportRequest("GET", server.url("/"), stream=True, cancel=token)
                response = await transport.acall(request)
                assert isinstance(response.body, AsyncByteStream)
                received = []
                with pytest.raises(TransportCancelled, match="test cancel"):
                    await aread_starting_timer_after_first_chunk(response.body, received, canceller)
                raised_at = wall()
                canceller.timer.join()
        return [raised_at - canceller.cancelled_at], received

    received = await apaced(run, [0.0], gaps=[0.1], what="cancellation")

    assert received == SLOW_EVENTS[:1]


def test_cancelling_during_a_whole_body_read_stops_promptly(live):
    # Interrupted in the read that waits for the second chunk (due 1 s in): the call raises as
    # soon as the token is cancelled, no later than this machine's sleeps are late.
    def run():
        drip = Drip(SLOW_EVENTS, interval=1.0)
        token = CancelToken()
        canceller = Canceller(token, 0.2)
        with LoopbackServer(drip) as server:
            canceller.start()
            with pytest.raises(TransportCancelled):
                live(TransportRequest("GET", server.url("/"), cancel=token))
            raised_at = wall()
            canceller.timer.join()
        return [raised_at - canceller.cancelled_at], drip

    drip = paced(run, [0.0], gaps=[0.2], what="cancellation")

    assert len(drip.sent_at) == 1


def test_a_token_cancelled_before_the_call_raises_at_once_and_sends_nothing(live):
    token = CancelToken()
    token.cancel("never mind")
    with LoopbackServer(Fixed(200)) as server:
        with pytest.raises(TransportCancelled, match="never mind"):
            live(TransportRequest("GET", server.url("/"), cancel=token))
        requests = list(server.requests)

    # Nothing was sent, so nothing was waited for: the server, which answers at once, saw no
    # request.
    assert requests == []


@pytest.mark.anyio
async def test_a_token_cancelled_before_the_async_call_raises_at_once():
    token = CancelToken()
    token.cancel()
    with LoopbackServer(Fixed(200)) as server:
        async with LiveTransport() as transport:
            with pytest.raises(TransportCancelled):
                await transport.acall(TransportRequest("GET", server.url("/"), cancel=token))
        requests = list(server.requests)

    assert requests == []


# Failures become seam errors, not httpx exceptions.


def test_a_refused_connection_is_a_seam_connect_error(live):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on that port now.

    with pytest.raises(ConnectError):
        live(TransportRequest("GET", f"http://127.0.0.1:{port}/"))


def test_a_silent_server_is_a_seam_read_timeout(live):
    # The request's own timeout (0.2 s), not the client's default: due 0.2 s after the first
    # chunk, and no later than this machine's sleeps are late.
    def run():
        drip = Drip(SLOW_EVENTS[:2], interval=2.0)
        with LoopbackServer(drip) as server:
            with pytest.raises(ReadTimeout) as excinfo:
                live(TransportRequest("GET", server.url("/"), timeout=0.2))
            raised_at = wall()
        return [raised_at - drip.sent_at[0]], excinfo.value

    error = paced(run, [0.2], gaps=[0.2], early=0.005, what="timeout")

    assert isinstance(error.__cause__, httpx.ReadTimeout)


# One class serves both seams (STYLE habit 2).


@pytest.mark.anyio
async def test_one_live_transport_serves_sync_and_async_callers_and_closes_both_clients():
    ok = Fixed(200, [("content-type", "application/json")], b'{"ok": true}')
    with LoopbackServer(ok) as server:
        transport = LiveTransport()
        sync_answer = transport(TransportRequest("GET", server.url("/sync")))
        async_answer = await transport.acall(TransportRequest("GET", server.url("/async")))
        clients = (transport._client, transport._async_client)
        await transport.aclose()

    assert sync_answer.body == async_answer.body == {"ok": True}
    assert isinstance(clients[0], httpx.Client)
    assert isinstance(clients[1], httpx.AsyncClient)
    assert clients[0].is_closed
    assert clients[1].is_closed


@pytest.mark.anyio
async def test_a_live_transport_over_a_sync_client_refuses_async_callers_with_the_fix():
    with httpx.Client() as client:
        transport = LiveTransport(client)
        with pytest.raises(TypeError, match=r"sends through a sync client.*async client"):
            await transport.acall(TransportRequest("GET", "http://127.0.0.1:9/x"))


def test_a_live_transport_over_an_async_client_refuses_sync_callers_with_the_fix():
    transport = LiveTransport(httpx2.AsyncClient())
    with pytest.raises(TypeError, match=r"sends through an async client.*acall"):
        transport(TransportRequest("GET", "http://127.0.0.1:9/x"))


def test_a_live_transport_never_closes_a_client_it_was_given():
    with httpx.Client() as client:
        LiveTransport(client).close()

        assert not client.is_closed
