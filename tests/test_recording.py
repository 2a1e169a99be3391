"""Recording (DESIGN §1 and §3): the recorder tees a live transport. The client reads every chunk
the moment it arrives, and the copy is stored parsed, each event stamped with its arrival time.

Every server binds 127.0.0.1 on a free port and is stopped by the test that started it.
"""

import gzip
import json
import socket
import time

import pytest

from pytest_toolnexus._cancel import CancelToken
from pytest_toolnexus._cassette import ChunksBody, JsonBody, NdjsonBody, SseBody
from pytest_toolnexus._errors import ConnectError, RemoteProtocolError, TransportCancelled
from pytest_toolnexus._live import AsyncLiveTransport, LiveTransport
from pytest_toolnexus._record import AsyncRecordingTransport, RecordingTransport
from pytest_toolnexus._seam import ByteStream, TransportRequest
from tests.support.servers import (
    Drip,
    Fixed,
    LoopbackServer,
    write_chunk,
    write_chunked_head,
)

INTERVAL = 0.1
EVENTS = [b'data: {"n": %d}\n\n' % n for n in range(5)]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def recorded():
    """The interactions handed to ``on_record``, in the order they finished."""
    return []


@pytest.fixture
def recorder(recorded):
    with LiveTransport() as live:
        yield RecordingTransport(live, recorded.append)


def stream_request(url, **fields):
    return TransportRequest("POST", url, body={"stream": True}, stream=True, **fields)


def offsets(times):
    return [t - times[0] for t in times]


def collect(stream, into):
    for chunk in stream:
        into.append(chunk)


def read_with_arrivals(stream):
    chunks, arrivals = [], []
    for chunk in stream:
        arrivals.append(time.monotonic())
        chunks.append(chunk)
    return chunks, arrivals


def test_each_sse_event_reaches_the_client_as_it_arrives_and_is_stamped(recorder, recorded):
    drip = Drip(EVENTS, interval=INTERVAL)
    with LoopbackServer(drip) as server:
        response = recorder(stream_request(server.url("/v1/chat")))
        assert isinstance(response.body, ByteStream)
        chunks, arrivals = read_with_arrivals(response.body)

    assert b"".join(chunks) == b"".join(EVENTS)
    assert len(arrivals) == len(EVENTS)
    assert arrivals[-1] - arrivals[0] >= 0.3
    # No draining: the first event was in the client's hands long before the last was sent,
    # and each one before the server wrote the next.
    assert arrivals[0] < drip.sent_at[-1] - 0.3
    for arrived, sent in zip(arrivals, drip.sent_at, strict=True):
        assert 0 <= arrived - sent < INTERVAL

    (interaction,) = recorded
    response = interaction.response
    assert response.status == 200
    assert response.complete is True
    assert response.error is None
    body = response.body
    assert isinstance(body, SseBody)
    assert [e["data"] for e in body.events] == [{"n": n} for n in range(5)]
    stamps = [e["t"] / 1000 for e in body.events]
    for stamp, sent in zip(offsets(stamps), offsets(drip.sent_at), strict=True):
        assert stamp == pytest.approx(sent, abs=0.02)
    assert response.t_headers <= body.events[0]["t"]
    assert response.t_end >= body.events[-1]["t"]


def test_a_client_that_stops_reading_gives_an_incomplete_interaction(recorder, recorded):
    drip = Drip(EVENTS, interval=0.05)
    with LoopbackServer(drip) as server:
        sent_at = time.monotonic()
        response = recorder(stream_request(server.url("/v1/chat")))
        stream = response.body
        received = []
        for chunk in stream:
            received.append(chunk)
            if len(received) == 2:
                break
        stream.close()
        abandoned_at = time.monotonic() - sent_at

    assert received == EVENTS[:2]
    (interaction,) = recorded
    response = interaction.response
    assert response.complete is False
    assert response.error is None
    assert [e["data"] for e in response.body.events] == [{"n": 0}, {"n": 1}]
    # Recording ended when the client let go, not when the server would have finished
    # (its last event was due 200 ms after the first).
    assert response.body.events[1]["t"] <= response.t_end <= abandoned_at * 1000
    assert response.t_end - response.body.events[0]["t"] < 150


def test_a_client_that_cancels_mid_stream_gives_an_incomplete_interaction(recorder, recorded):
    drip = Drip(EVENTS, interval=0.05)
    token = CancelToken()
    with LoopbackServer(drip) as server:
        response = recorder(stream_request(server.url("/v1/chat"), cancel=token))
        received = []

        def read_and_cancel_after_two():
            for chunk in response.body:
                received.append(chunk)
                if len(received) == 2:
                    token.cancel()

        with pytest.raises(TransportCancelled):
            read_and_cancel_after_two()

    assert received == EVENTS[:2]
    (interaction,) = recorded
    # Cancelling is the client's doing, not a failure of the server: the recording says the
    # rest was never seen, and holds no error that a replay would raise.
    assert interaction.response.complete is False
    assert interaction.response.error is None
    assert [e["data"] for e in interaction.response.body.events] == [{"n": 0}, {"n": 1}]


class CutMidBody:
    """Sends one event, then half of a chunk, then closes the connection."""

    def __init__(self, pause):
        self.pause = pause
        self.cut_at = None

    def __call__(self, request, conn):
        write_chunked_head(conn, 200, [("Content-Type", "text/event-stream")])
        write_chunk(conn, b'data: {"n": 0}\n\n')
        time.sleep(self.pause)
        conn.sendall(b'40\r\ndata: {"n": 1')
        self.cut_at = time.monotonic()
        conn.shutdown(socket.SHUT_RDWR)


def test_a_connection_cut_mid_stream_is_recorded_and_raised(recorder, recorded):
    handler = CutMidBody(pause=0.1)
    with LoopbackServer(handler) as server:
        sent_at = time.monotonic()
        response = recorder(stream_request(server.url("/v1/chat")))
        received = []
        with pytest.raises(RemoteProtocolError):
            collect(response.body, received)
        raised_at = time.monotonic()

    assert received[0] == b'data: {"n": 0}\n\n'
    (interaction,) = recorded
    response = interaction.response
    assert [e["data"] for e in response.body.events] == [{"n": 0}]
    assert response.error is not None
    assert response.error.kind == "RemoteProtocolError"
    assert response.error.message
    assert 100 <= response.error.t <= (raised_at - sent_at) * 1000
    assert response.error.t == response.t_end
    # The half event is not invented into an event; its text is kept as the tail.
    assert response.body.tail.startswith('data: {"n": 1')


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_connect_error_is_recorded_as_an_interaction_error(recorder, recorded):
    url = f"http://127.0.0.1:{closed_port()}/v1/chat"

    with pytest.raises(ConnectError):
        recorder(TransportRequest("POST", url, body={"q": 1}))

    (interaction,) = recorded
    assert interaction.response is None
    assert interaction.error.kind == "ConnectError"
    assert interaction.error.t >= 0
    assert interaction.request.url == url
    assert interaction.request.body == JsonBody({"q": 1})


NDJSON_CHUNKS = [
    b'{"message":{"content":"He"},"done":false}\n{"mess',
    b'age":{"content":"llo"},"done":false}\n',
    b"not json\n",
    b'{"done":true}\n',
]


def test_ndjson_is_recorded_as_timed_lines(recorder, recorded):
    drip = Drip(NDJSON_CHUNKS, interval=0.05, headers=[("Content-Type", "application/x-ndjson")])
    with LoopbackServer(drip) as server:
        response = recorder(stream_request(server.url("/api/chat")))
        chunks, _ = read_with_arrivals(response.body)

    assert b"".join(chunks) == b"".join(NDJSON_CHUNKS)
    body = recorded[0].response.body
    assert isinstance(body, NdjsonBody)
    assert [{k: v for k, v in line.items() if k != "t"} for line in body.lines] == [
        {"value": {"message": {"content": "He"}, "done": False}},
        {"value": {"message": {"content": "llo"}, "done": False}},
        {"text": "not json"},
        {"value": {"done": True}},
    ]
    # The first line completed with chunk 0, the second with chunk 1, and so on.
    stamps = offsets([line["t"] / 1000 for line in body.lines])
    for stamp, sent in zip(stamps, offsets(drip.sent_at), strict=True):
        assert stamp == pytest.approx(sent, abs=0.02)
    assert body.tail == ""


def test_any_other_stream_is_recorded_as_timed_chunks(recorder, recorded):
    blobs = [b"\x00\x01\x02", b"\xff" * 10, b"\x89PNG"]
    drip = Drip(blobs, interval=0.05, headers=[("Content-Type", "application/octet-stream")])
    with LoopbackServer(drip) as server:
        response = recorder(stream_request(server.url("/blob")))
        chunks, _ = read_with_arrivals(response.body)

    assert chunks == blobs
    body = recorded[0].response.body
    assert isinstance(body, ChunksBody)
    assert [chunk["data"] for chunk in body.chunks] == blobs
    stamps = offsets([chunk["t"] / 1000 for chunk in body.chunks])
    for stamp, sent in zip(stamps, offsets(drip.sent_at), strict=True):
        assert stamp == pytest.approx(sent, abs=0.02)


def test_a_gzip_json_response_is_stored_decoded(recorder, recorded):
    payload = {"id": "chatcmpl-1", "choices": [{"message": {"content": "h\u00e9llo"}}]}
    handler = Fixed(
        200,
        [("Content-Type", "application/json"), ("Content-Encoding", "gzip")],
        gzip.compress(json.dumps(payload).encode()),
    )
    with LoopbackServer(handler) as server:
        response = recorder(TransportRequest("POST", server.url("/v1/chat"), body={"q": 1}))

    assert response.body == payload
    stored = recorded[0].response
    assert stored.body == JsonBody(payload)
    assert "content-encoding" not in stored.headers
    assert "content-length" not in stored.headers
    assert stored.headers["content-type"] == "application/json"


def test_a_gzip_json_response_read_as_a_stream_is_stored_decoded(recorder, recorded):
    payload = {"object": "list", "data": [1, 2, 3]}
    compressed = gzip.compress(json.dumps(payload).encode())
    drip = Drip(
        [compressed[:10], compressed[10:]],
        interval=0.01,
        headers=[("Content-Type", "application/json"), ("Content-Encoding", "gzip")],
    )
    with LoopbackServer(drip) as server:
        response = recorder(stream_request(server.url("/v1/models")))
        content = b"".join(response.body)

    assert json.loads(content) == payload
    assert recorded[0].response.body == JsonBody(payload)
    assert "content-encoding" not in recorded[0].response.headers


@pytest.mark.anyio
async def test_async_recording_tees_each_event_as_it_arrives(recorded):
    drip = Drip(EVENTS, interval=INTERVAL)
    async with AsyncLiveTransport() as live:
        recorder = AsyncRecordingTransport(live, recorded.append)
        with LoopbackServer(drip) as server:
            response = await recorder(stream_request(server.url("/v1/chat")))
            arrivals, chunks = [], []
            async for chunk in response.body:
                arrivals.append(time.monotonic())
                chunks.append(chunk)

    assert b"".join(chunks) == b"".join(EVENTS)
    assert arrivals[-1] - arrivals[0] >= 0.3
    assert arrivals[0] < drip.sent_at[-1] - 0.3
    (interaction,) = recorded
    body = interaction.response.body
    assert [e["data"] for e in body.events] == [{"n": n} for n in range(5)]
    stamps = offsets([e["t"] / 1000 for e in body.events])
    for stamp, sent in zip(stamps, offsets(drip.sent_at), strict=True):
        assert stamp == pytest.approx(sent, abs=0.02)
    assert interaction.response.complete is True


@pytest.mark.anyio
async def test_async_a_client_that_stops_reading_gives_an_incomplete_interaction(recorded):
    drip = Drip(EVENTS, interval=0.05)
    async with AsyncLiveTransport() as live:
        recorder = AsyncRecordingTransport(live, recorded.append)
        with LoopbackServer(drip) as server:
            response = await recorder(stream_request(server.url("/v1/chat")))
            received = []
            async for chunk in response.body:
                received.append(chunk)
                if len(received) == 2:
                    break
            await response.body.aclose()

    assert received == EVENTS[:2]
    (interaction,) = recorded
    assert interaction.response.complete is False
    assert [e["data"] for e in interaction.response.body.events] == [{"n": 0}, {"n": 1}]


@pytest.mark.anyio
async def test_async_a_client_that_cancels_gives_an_incomplete_interaction(recorded):
    drip = Drip(EVENTS, interval=0.05)
    token = CancelToken()
    async with AsyncLiveTransport() as live:
        recorder = AsyncRecordingTransport(live, recorded.append)
        with LoopbackServer(drip) as server:
            response = await recorder(stream_request(server.url("/v1/chat"), cancel=token))
            received = []

            async def read_and_cancel_after_two():
                async for chunk in response.body:
                    received.append(chunk)
                    if len(received) == 2:
                        token.cancel()

            with pytest.raises(TransportCancelled):
                await read_and_cancel_after_two()

    assert received == EVENTS[:2]
    (interaction,) = recorded
    assert interaction.response.complete is False
    assert interaction.response.error is None


@pytest.mark.anyio
async def test_async_a_connect_error_is_recorded(recorded):
    url = f"http://127.0.0.1:{closed_port()}/"
    async with AsyncLiveTransport() as live:
        recorder = AsyncRecordingTransport(live, recorded.append)
        with pytest.raises(ConnectError):
            await recorder(TransportRequest("GET", url))

    assert recorded[0].error.kind == "ConnectError"


def test_finish_pending_saves_a_stream_nobody_closed(recorded):
    drip = Drip(EVENTS, interval=0.05)
    with LiveTransport() as live, LoopbackServer(drip) as server:
        recorder = RecordingTransport(live, recorded.append)
        response = recorder(stream_request(server.url("/v1/chat")))
        first = next(iter(response.body))

        assert recorded == []
        assert recorder.finish_pending() == 1
        assert recorder.finish_pending() == 0
        response.body.close()

    assert first == EVENTS[0]
    (interaction,) = recorded
    assert interaction.response.complete is False
    assert [e["data"] for e in interaction.response.body.events] == [{"n": 0}]


def _fake_live(request):
    from pytest_toolnexus import ByteStream, TransportResponse

    chunks = [b'data: {"n": 1}\n\n', b'data: {"n": 2}\n\n', b"data: [DONE]\n\n"]
    return TransportResponse(200, {"content-type": "text/event-stream"}, ByteStream(iter(chunks)))


@pytest.mark.parametrize(("read", "complete"), [(None, True), (1, False)], ids=["all", "one"])
def test_a_recorded_request_says_whether_the_client_read_its_whole_answer(tmp_path, read, complete):
    from pytest_toolnexus import TransportRequest, use_cassette

    with use_cassette(tmp_path / "c.msgpack", record="once", live=_fake_live) as session:
        request = TransportRequest("POST", "http://test/v1/x", body={"stream": True}, stream=True)
        stream = session.transport(request).body
        pieces = []
        for piece in stream:
            pieces.append(piece)
            if read is not None and len(pieces) == read:
                break
        stream.close()
    (sent,) = session.requests
    assert sent.replayed is False
    assert len(sent.deliveries) == len(pieces)
    assert sent.complete is complete
