"""Recording (DESIGN §1 and §3): the recorder tees a live transport. The client reads every chunk
the moment it arrives, and the copy is stored parsed, each event stamped with its arrival time.

Every server binds 127.0.0.1 on a free port and is stopped by the test that started it.

Times are real (:func:`tests.support.realtime.wall`, the clock the servers stamp on). A stored
offset is checked exactly: it puts its piece after the server sent it and before the client
had it. How promptly the client had it is bounded by this machine's own sleep lateness.
"""

import gzip
import json
import socket
import time
from dataclasses import dataclass, field

import pytest

from pytest_toolnexus._bridges.live import LiveTransport
from pytest_toolnexus._seam.cancel import CancelToken
from pytest_toolnexus._seam.errors import ConnectError, RemoteProtocolError, TransportCancelled
from pytest_toolnexus._seam.transport import ByteStream, TransportRequest
from pytest_toolnexus._session.record import RecordingTransport
from pytest_toolnexus._store.cassette import ChunksBody, JsonBody, NdjsonBody, SseBody
from tests.support.observers import Kept
from tests.support.realtime import apaced, paced, wall
from tests.support.servers import (
    Drip,
    Fixed,
    LoopbackServer,
    write_chunk,
    write_chunked_head,
)

INTERVAL = 0.1
EVENT_STREAM = ("Content-Type", "text/event-stream")
EVENTS = [b'data: {"n": %d}\n\n' % n for n in range(5)]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def recorded():
    """The interactions the recorder handed its observer, in the order they finished."""
    return []


@pytest.fixture
def recorder(recorded):
    with LiveTransport() as live:
        yield RecordingTransport(live, Kept(recorded))


def stream_request(url, **fields):
    return TransportRequest("POST", url, body={"stream": True}, stream=True, **fields)


def collect(stream, into):
    for chunk in stream:
        into.append(chunk)


def read_with_arrivals(stream):
    chunks, arrivals = [], []
    for chunk in stream:
        arrivals.append(wall())
        chunks.append(chunk)
    return chunks, arrivals


@dataclass
class Read:
    """A recorded stream as the client read it, on real time (:func:`wall` readings)."""

    drip: Drip
    before: float = 0.0
    """Just before the recorder was called."""
    received_at: float = 0.0
    """When the server had read the request."""
    chunks: list = field(default_factory=list)
    arrivals: list = field(default_factory=list)
    """When each chunk reached the client."""
    recorded: list = field(default_factory=list)

    def since_before(self, times):
        return [t - self.before for t in times]


def read_recorded(drip):
    """Record ``drip`` through a fresh live transport, reading the whole stream as it comes."""
    read = Read(drip)
    with LiveTransport() as live, LoopbackServer(drip) as server:
        read.before = wall()
        response = RecordingTransport(live, Kept(read.recorded))(
            stream_request(server.url("/v1/chat"))
        )
        assert isinstance(response.body, ByteStream)
        read.chunks, read.arrivals = read_with_arrivals(response.body)
    read.received_at = server.requests[0].received_at
    return read


def assert_stamped_between_send_and_arrival(stamps_ms, sent_at, arrivals, *, before, received_at):
    """Each stored offset (ms from the recorder's start) is at or after the server sent that
    piece and at or before the client had it. The recorder's start lies between ``before`` (read
    just before the call) and ``received_at`` (the server had the request), so on any machine:
    ``sent - received_at <= offset <= arrived - before``."""
    assert len(stamps_ms) == len(sent_at) == len(arrivals)
    rounding = 1e-6  # offsets are stored to the microsecond
    outside = [
        (n, round(sent - received_at, 4), stamp / 1000, round(arrived - before, 4))
        for n, (stamp, sent, arrived) in enumerate(zip(stamps_ms, sent_at, arrivals, strict=True))
        if not sent - received_at - rounding <= stamp / 1000 <= arrived - before + rounding
    ]
    assert outside == [], f"stored offsets outside (sent, arrived), in seconds: {outside}"


def test_each_sse_event_reaches_the_client_as_it_arrives_and_is_stamped():
    # No draining: each event reaches the client when the server sends it, no later than this
    # machine's sleeps are late (a drained stream would be 400 ms late on its first event).
    def run():
        read = read_recorded(Drip(EVENTS, interval=INTERVAL))
        return read.since_before(read.arrivals), read

    read = paced(
        run, lambda read: read.since_before(read.drip.sent_at), gaps=[INTERVAL], what="event"
    )

    assert b"".join(read.chunks) == b"".join(EVENTS)
    (interaction,) = read.recorded
    response = interaction.response
    assert response.status == 200
    assert response.complete is True
    assert response.error is None
    body = response.body
    assert isinstance(body, SseBody)
    assert [e["data"] for e in body.events] == [{"n": n} for n in range(5)]
    assert_stamped_between_send_and_arrival(
        [e["t"] for e in body.events],
        read.drip.sent_at,
        read.arrivals,
        before=read.before,
        received_at=read.received_at,
    )
    assert response.t_headers <= body.events[0]["t"]
    assert response.t_end >= body.events[-1]["t"]


def test_a_client_that_stops_reading_gives_an_incomplete_interaction():
    # Recording ends when the client lets go, and letting go does not wait for the rest of the
    # stream (three more events, the last due 200 ms after the first): the close returns no
    # later than this machine's sleeps are late.
    def run():
        read = Read(Drip(EVENTS, interval=0.05))
        with LiveTransport() as live, LoopbackServer(read.drip) as server:
            read.before = wall()
            response = RecordingTransport(live, Kept(read.recorded))(
                stream_request(server.url("/v1/chat"))
            )
            for chunk in response.body:
                read.chunks.append(chunk)
                read.arrivals.append(wall())
                if len(read.chunks) == 2:
                    break
            closing = wall()
            response.body.close()
            abandoned = wall()
        read.received_at = server.requests[0].received_at
        return read.since_before([*read.arrivals, abandoned]), (read, closing, abandoned)

    def expected(result):
        read, closing, _ = result
        return read.since_before([*read.drip.sent_at[:2], closing])

    read, closing, abandoned = paced(run, expected, gaps=[0.05], what="event or close")

    assert read.chunks == EVENTS[:2]
    (interaction,) = read.recorded
    response = interaction.response
    assert response.complete is False
    assert response.error is None
    assert [e["data"] for e in response.body.events] == [{"n": 0}, {"n": 1}]
    # The recording ended inside the client's close() call, after the last event it read.
    assert response.body.events[1]["t"] <= response.t_end
    assert closing - read.received_at <= response.t_end / 1000 <= abandoned - read.before


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
        self.cut_at = wall()
        conn.shutdown(socket.SHUT_RDWR)


def test_a_connection_cut_mid_stream_is_recorded_and_raised(recorder, recorded):
    handler = CutMidBody(pause=0.1)
    with LoopbackServer(handler) as server:
        sent_at = wall()
        response = recorder(stream_request(server.url("/v1/chat")))
        received = []
        with pytest.raises(RemoteProtocolError):
            collect(response.body, received)
        raised_at = wall()

    assert received[0] == b'data: {"n": 0}\n\n'
    (interaction,) = recorded
    response = interaction.response
    assert [e["data"] for e in response.body.events] == [{"n": 0}]
    assert response.error is not None
    assert response.error.kind == "RemoteProtocolError"
    assert response.error.message
    # After the server's pause (the recorder's clock starts before the server has the
    # request), and before the client saw the error raised.
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


def test_ndjson_is_recorded_as_timed_lines():
    drip = Drip(NDJSON_CHUNKS, interval=0.05, headers=[("Content-Type", "application/x-ndjson")])
    read = read_recorded(drip)

    assert b"".join(read.chunks) == b"".join(NDJSON_CHUNKS)
    body = read.recorded[0].response.body
    assert isinstance(body, NdjsonBody)
    assert [{k: v for k, v in line.items() if k != "t"} for line in body.lines] == [
        {"value": {"message": {"content": "He"}, "done": False}},
        {"value": {"message": {"content": "llo"}, "done": False}},
        {"text": "not json"},
        {"value": {"done": True}},
    ]
    # The first line completed with chunk 0, the second with chunk 1, and so on.
    assert_stamped_between_send_and_arrival(
        [line["t"] for line in body.lines],
        drip.sent_at,
        read.arrivals,
        before=read.before,
        received_at=read.received_at,
    )
    assert body.tail == ""


def test_any_other_stream_is_recorded_as_timed_chunks():
    blobs = [b"\x00\x01\x02", b"\xff" * 10, b"\x89PNG"]
    drip = Drip(blobs, interval=0.05, headers=[("Content-Type", "application/octet-stream")])
    read = read_recorded(drip)

    assert read.chunks == blobs
    body = read.recorded[0].response.body
    assert isinstance(body, ChunksBody)
    assert [chunk["data"] for chunk in body.chunks] == blobs
    assert_stamped_between_send_and_arrival(
        [chunk["t"] for chunk in body.chunks],
        drip.sent_at,
        read.arrivals,
        before=read.before,
        received_at=read.received_at,
    )


def test_a_json_error_sent_as_an_event_stream_is_stored_as_json():
    # A gateway that answers a bad request with JSON under the stream's content type: an SSE
    # parser drops every line of it ('  "error": {' is no SSE field), so none may be lost.
    error = b'{\n  "error": {\n    "code": 400,\n    "message": "bad model"\n  }\n}\n'
    drip = Drip([error[:12], error[12:]], interval=0.02, headers=[EVENT_STREAM])
    read = read_recorded(drip)

    assert b"".join(read.chunks) == error
    body = read.recorded[0].response.body
    assert isinstance(body, JsonBody)
    assert body.value == {"error": {"code": 400, "message": "bad model"}}


def test_an_event_stream_with_lines_no_parser_keeps_is_stored_as_timed_chunks():
    pieces = [b"data: one\n\n", b"<html>proxy error</html>\n", b"data: two\n\n"]
    drip = Drip(pieces, interval=0.05, headers=[EVENT_STREAM])
    read = read_recorded(drip)

    body = read.recorded[0].response.body
    assert isinstance(body, ChunksBody)
    assert [chunk["data"] for chunk in body.chunks] == pieces
    assert_stamped_between_send_and_arrival(
        [chunk["t"] for chunk in body.chunks],
        drip.sent_at,
        read.arrivals,
        before=read.before,
        received_at=read.received_at,
    )


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
async def test_async_recording_tees_each_event_as_it_arrives():
    async def run():
        read = Read(Drip(EVENTS, interval=INTERVAL))
        async with LiveTransport() as live:
            recorder = RecordingTransport(live, Kept(read.recorded))
            with LoopbackServer(read.drip) as server:
                read.before = wall()
                response = await recorder.acall(stream_request(server.url("/v1/chat")))
                async for chunk in response.body:
                    read.arrivals.append(wall())
                    read.chunks.append(chunk)
        read.received_at = server.requests[0].received_at
        return read.since_before(read.arrivals), read

    read = await apaced(
        run, lambda read: read.since_before(read.drip.sent_at), gaps=[INTERVAL], what="event"
    )

    assert b"".join(read.chunks) == b"".join(EVENTS)
    (interaction,) = read.recorded
    body = interaction.response.body
    assert [e["data"] for e in body.events] == [{"n": n} for n in range(5)]
    assert_stamped_between_send_and_arrival(
        [e["t"] for e in body.events],
        read.drip.sent_at,
        read.arrivals,
        before=read.before,
        received_at=read.received_at,
    )
    assert interaction.response.complete is True


@pytest.mark.anyio
async def test_async_a_client_that_stops_reading_gives_an_incomplete_interaction(recorded):
    drip = Drip(EVENTS, interval=0.05)
    async with LiveTransport() as live:
        recorder = RecordingTransport(live, Kept(recorded))
        with LoopbackServer(drip) as server:
            response = await recorder.acall(stream_request(server.url("/v1/chat")))
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
    async with LiveTransport() as live:
        recorder = RecordingTransport(live, Kept(recorded))
        with LoopbackServer(drip) as server:
            response = await recorder.acall(stream_request(server.url("/v1/chat"), cancel=token))
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
    async with LiveTransport() as live:
        recorder = RecordingTransport(live, Kept(recorded))
        with pytest.raises(ConnectError):
            await recorder.acall(TransportRequest("GET", url))

    assert recorded[0].error.kind == "ConnectError"


def test_finish_pending_saves_a_stream_nobody_closed(recorded):
    drip = Drip(EVENTS, interval=0.05)
    with LiveTransport() as live, LoopbackServer(drip) as server:
        recorder = RecordingTransport(live, Kept(recorded))
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
