"""Replay (DESIGN §4): socket-free, one piece per recorded event at its recorded offset on the
clock, recorded errors raised again, and each interaction played once, in order.
"""

import socket
import time

import anyio
import httpx
import httpx2
import pytest

from pytest_toolnexus import use_cassette
from pytest_toolnexus._bridges.httpx import HTTPBridge
from pytest_toolnexus._seam.errors import (
    CassetteMissError,
    ConnectError,
    ReadTimeout,
    RemoteProtocolError,
    ReplayError,
)
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import AsyncByteStream, ByteStream, TransportRequest
from pytest_toolnexus._session.record import BodyRecorder
from pytest_toolnexus._session.replay import play
from pytest_toolnexus._session.session import CassetteSession
from pytest_toolnexus._store.cassette import (
    Cassette,
    ChunksBody,
    Interaction,
    JsonBody,
    NdjsonBody,
    RecordedError,
    RecordedRequest,
    RecordedResponse,
    SseBody,
    load_cassette,
    sse_event_doc,
)
from pytest_toolnexus._store.streams import SseEvent, SseParser, encode_sse_event
from pytest_toolnexus._timing.clock import InstantClock
from tests.support.realtime import apaced, assert_did_not_sleep, paced, wall
from tests.support.servers import Drip, LoopbackServer

# Kept in a dict: the virtual clock replaces time.sleep in module globals too.
REAL = {"sleep": time.sleep}

URL = "http://127.0.0.1:9/v1/chat/completions"
BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
SSE = Headers([("content-type", "text/event-stream")])
OFFSETS_MS = [0.0, 80.0, 160.0, 240.0]
EVENTS = [
    SseEvent(event="message_start", data='{"type":"message_start"}', id="1", comments=["hi"]),
    SseEvent(data='{"delta":"Hel"}', retry=1000),
    SseEvent(data='{"delta":"lo"}'),
    SseEvent(data="[DONE]"),
]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def no_network(monkeypatch):
    """Fail the test if anything tries to open a connection."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise AssertionError(f"replay opened a socket: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def request(body=None, url=URL, stream=True, **fields):
    return TransportRequest(
        "POST", url, body=BODY if body is None else body, stream=stream, **fields
    )


def recorded_request(body=None, url=URL):
    return RecordedRequest("POST", url, Headers(), JsonBody(BODY if body is None else body))


def sse_response(offsets=OFFSETS_MS, events=EVENTS, **fields):
    docs = [sse_event_doc(t, event) for t, event in zip(offsets, events, strict=True)]
    fields.setdefault("t_end", offsets[-1])
    return RecordedResponse(200, SSE, SseBody(docs), t_headers=0.0, **fields)


def save(tmp_path, *interactions, name="replay.msgpack"):
    path = tmp_path / name
    Cassette(path, list(interactions)).save()
    return path


@pytest.fixture
def sse_cassette(tmp_path):
    return save(tmp_path, Interaction(recorded_request(), sse_response()))


def collect(stream, into):
    for piece in stream:
        into.append(piece)


async def acollect(stream, into):
    async for piece in stream:
        into.append(piece)


def pieces_with_times(stream, start):
    """Each piece with the real seconds from ``start`` (a :func:`wall` reading) it arrived."""
    pieces = []
    for piece in stream:
        pieces.append((wall() - start, piece))
    return pieces


# -- no network -------------------------------------------------------------------------------


def test_replay_opens_no_socket(no_network, sse_cassette):
    session = CassetteSession(sse_cassette, timing="instant")
    transport = session.transport

    response = transport(request())
    content = b"".join(response.body)
    session.close()

    assert content == b"".join(encode_sse_event(event) for event in EVENTS)
    assert no_network == []


def test_replay_through_an_httpx_client_opens_no_socket(no_network, sse_cassette):
    session = CassetteSession(sse_cassette, timing="instant")
    transport = session.transport

    with (
        httpx.Client(transport=HTTPBridge(transport)) as client,
        client.stream("POST", URL, json=BODY) as response,
    ):
        lines = list(response.iter_lines())

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert "data: [DONE]" in lines
    assert no_network == []


def test_a_recording_replays_after_its_server_is_gone(tmp_path):
    drip = Drip([b'data: {"n": 0}\n\n', b'data: {"n": 1}\n\n'], interval=0.02)
    path = tmp_path / "gone.msgpack"
    with LoopbackServer(drip) as server:
        url = server.url("/v1/chat")
        with CassetteSession(path, record="once") as session:
            live = b"".join(session.transport(request(url=url)).body)

    assert len(server.requests) == 1
    with CassetteSession(path, record="none", timing="instant") as session:
        replayed = b"".join(session.transport(request(url=url)).body)

    assert live == b"".join(drip.chunks)
    assert replayed == b'data: {"n":0}\n\ndata: {"n":1}\n\n'
    assert session.requests[0].replayed is True
    assert len(server.requests) == 1


# -- one piece per recorded unit --------------------------------------------------------------


def test_each_sse_event_is_its_own_piece_in_order(sse_cassette):
    session = CassetteSession(sse_cassette, timing="instant")
    transport = session.transport

    response = transport(request())

    assert isinstance(response.body, ByteStream)
    assert list(response.body) == [encode_sse_event(event) for event in EVENTS]


def test_each_ndjson_line_and_each_chunk_is_its_own_piece(tmp_path):
    lines = [{"t": 0.0, "value": {"a": 1}}, {"t": 5.0, "text": "not json"}, {"t": 9.0, "value": []}]
    chunks = [{"t": 1.0, "data": b"\x00\x01"}, {"t": 2.0, "data": b"\xff"}]
    path = save(
        tmp_path,
        Interaction(
            recorded_request({"n": 1}),
            RecordedResponse(200, body=NdjsonBody(lines, tail='{"cut'), t_end=9.0),
        ),
        Interaction(recorded_request({"n": 2}), RecordedResponse(200, body=ChunksBody(chunks))),
    )
    session = CassetteSession(path, timing="instant")
    transport = session.transport

    ndjson = list(transport(request({"n": 1})).body)
    binary = list(transport(request({"n": 2})).body)

    assert ndjson == [b'{"a":1}\n', b"not json\n", b"[]\n", b'{"cut']
    assert binary == [b"\x00\x01", b"\xff"]


def test_a_replayed_stream_parses_to_exactly_what_was_recorded(tmp_path):
    wire = (
        b": ping\r\n\r\n"
        b"event: content_block_delta\r\nid: 9\r\nretry: 3000\r\n"
        b'data: {"type":"content_block_delta","delta":{"text":"h\xc3\xa9"}}\r\n\r\n'
        b"data: line one\r\ndata: line two\r\n\r\n"
        b"event: ping\r\n\r\n"
        b"data: [DONE]\r\n\r\n"
    )
    recorder = BodyRecorder(SSE)
    for index in range(0, len(wire), 7):  # cut everywhere, even inside CRLF and the é
        recorder.feed(wire[index : index + 7], float(index))
    path = save(
        tmp_path, Interaction(recorded_request(), RecordedResponse(200, SSE, recorder.finish()))
    )
    session = CassetteSession(path, timing="instant")
    transport = session.transport

    parser = SseParser()
    replayed = [event for piece in transport(request()).body for event in parser.feed(piece)]

    assert replayed == SseParser().feed(wire)
    assert replayed[1].data == '{"type":"content_block_delta","delta":{"text":"h\u00e9"}}'
    assert len(replayed) == 5
    assert parser.finish() == ""


def test_a_json_body_asked_for_without_stream_is_the_parsed_value(tmp_path):
    path = save(
        tmp_path,
        Interaction(
            recorded_request({"q": 1}),
            RecordedResponse(
                200, Headers([("content-type", "application/json")]), JsonBody({"ok": [1, 2]})
            ),
        ),
    )
    session = CassetteSession(path, timing="instant")
    transport = session.transport

    response = transport(request({"q": 1}, stream=False))

    assert response.body == {"ok": [1, 2]}


# -- timing -----------------------------------------------------------------------------------


@pytest.mark.parametrize("speed", [1.0, 2.0])
def test_with_a_real_clock_each_piece_arrives_at_its_recorded_offset(sse_cassette, speed):
    # Never early, in order, and no later than this machine's sleeps are late right now.
    def run():
        session = CassetteSession(sse_cassette, timing="real", speed=speed)
        transport = session.transport
        start = wall()
        pieces = pieces_with_times(transport(request()).body, start)
        return [at for at, _ in pieces], [piece for _, piece in pieces]

    expected = [t / 1000 / speed for t in OFFSETS_MS]
    pieces = paced(run, expected, gaps=[0.08 / speed])

    assert pieces == [encode_sse_event(event) for event in EVENTS]


def test_the_clock_waits_when_the_client_pulls_not_when_the_request_is_sent(sse_cassette):
    busy = 0.2  # the client is busy while the first three events (0, 80, 160 ms) fall due

    def run():
        session = CassetteSession(sse_cassette, timing="real")
        transport = session.transport
        start = wall()
        stream = transport(request()).body
        returned = wall() - start
        time.sleep(busy)
        pulled = wall() - start
        pieces = pieces_with_times(stream, start)
        return [returned, *(at for at, _ in pieces)], pulled

    # The call returns with the headers (recorded at 0 ms), not after the last event
    # (240 ms). Events whose time passed while the client was busy come as soon as it pulls;
    # later ones wait for their offsets.
    def expected(pulled):
        return [0.0, *(max(t / 1000, pulled) for t in OFFSETS_MS)]

    pulled = paced(run, expected, gaps=[0.08, busy])

    assert pulled >= busy


SLOW_MS = [0.0, 1000.0, 2500.0, 5000.0]


@pytest.fixture
def slow_cassette(tmp_path):
    """A stream recorded over five seconds."""
    return save(tmp_path, Interaction(recorded_request(), sse_response(SLOW_MS, t_end=6000.0)))


def test_an_instant_clock_delivers_at_once(slow_cassette):
    session = CassetteSession(slow_cassette, timing="instant")
    transport = session.transport

    start = wall()
    pieces = pieces_with_times(transport(request()).body, start)

    assert len(pieces) == 4
    assert_did_not_sleep(pieces[-1][0], SLOW_MS[-1] / 1000, what="an instant replay")


def test_the_default_clock_reads_recorded_offsets_without_waiting(slow_cassette):
    session = CassetteSession(slow_cassette)
    transport = session.transport

    start = wall()
    list(transport(request()).body)
    took = wall() - start

    assert_did_not_sleep(took, SLOW_MS[-1] / 1000, what="a replay on the default clock")
    deliveries = session.requests[0].deliveries
    assert deliveries == pytest.approx([t / 1000 for t in SLOW_MS], abs=1e-6)


def test_headers_arrive_at_their_recorded_time(tmp_path):
    response = sse_response([150.0, 160.0, 170.0, 180.0])
    slow_headers = RecordedResponse(
        response.status, response.headers, response.body, t_headers=120.0, t_end=180.0
    )
    path = save(tmp_path, Interaction(recorded_request(), slow_headers))

    def run():
        session = CassetteSession(path, timing="real")
        transport = session.transport
        start = wall()
        stream = transport(request()).body
        headers_at = wall() - start
        pieces = pieces_with_times(stream, start)
        return [headers_at, *(at for at, _ in pieces)], len(pieces)

    expected = [0.12, 0.15, 0.16, 0.17, 0.18]  # the headers, then each event
    assert paced(run, expected, gaps=[0.12, 0.03]) == 4


# -- recorded errors --------------------------------------------------------------------------


@pytest.fixture
def error_cassette(tmp_path):
    connect = Interaction(
        recorded_request({"n": "connect"}),
        error=RecordedError("ConnectError", "[Errno 111] Connection refused", 3.0),
    )
    cut = Interaction(
        recorded_request({"n": "cut"}),
        sse_response(
            OFFSETS_MS[:2],
            EVENTS[:2],
            error=RecordedError("RemoteProtocolError", "peer closed connection", 200.0),
            t_end=200.0,
        ),
    )
    timeout = Interaction(
        recorded_request({"n": "timeout"}),
        error=RecordedError("ReadTimeout", "timed out", 5000.0),
    )
    return save(tmp_path, connect, cut, timeout)


def test_a_recorded_connect_error_is_raised_again(error_cassette):
    session = CassetteSession(error_cassette, timing="instant")
    transport = session.transport

    with pytest.raises(ConnectError, match=r"\[Errno 111\] Connection refused"):
        transport(request({"n": "connect"}))
    with pytest.raises(ReadTimeout):
        transport(request({"n": "timeout"}))


def test_a_recorded_cut_is_raised_after_the_recorded_events(error_cassette):
    session = CassetteSession(error_cassette, timing="instant")
    transport = session.transport

    stream = transport(request({"n": "cut"})).body
    received = []
    with pytest.raises(RemoteProtocolError, match="peer closed connection"):
        collect(stream, received)

    assert received == [encode_sse_event(event) for event in EVENTS[:2]]


def test_a_recorded_error_comes_at_its_recorded_time(error_cassette):
    def run():
        session = CassetteSession(error_cassette, timing="real")
        transport = session.transport
        start = wall()
        arrivals = []
        stream = transport(request({"n": "cut"})).body
        with pytest.raises(RemoteProtocolError):
            collect((wall() - start for _ in stream), arrivals)
        return [*arrivals, wall() - start], None

    paced(run, [0.0, 0.08, 0.2], gaps=[0.08, 0.12], what="piece or error")


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_through_the_bridge_recorded_errors_are_the_library_exceptions(error_cassette, lib):
    session = CassetteSession(error_cassette, timing="instant")
    transport = session.transport

    with lib.Client(transport=HTTPBridge(transport)) as client:
        with pytest.raises(lib.ConnectError):
            client.post(URL, json={"n": "connect"})
        received = []
        with (
            client.stream("POST", URL, json={"n": "cut"}) as response,
            pytest.raises(lib.RemoteProtocolError),
        ):
            collect(response.iter_lines(), received)
        with pytest.raises(lib.ReadTimeout):
            client.post(URL, json={"n": "timeout"})

    assert response.status_code == 200
    assert 'data: {"delta":"Hel"}' in received


def test_an_incomplete_stream_read_past_its_end_is_a_replay_error(tmp_path):
    path = save(
        tmp_path,
        Interaction(recorded_request(), sse_response(OFFSETS_MS[:2], EVENTS[:2], complete=False)),
    )
    session = CassetteSession(path, timing="instant")
    transport = session.transport

    stream = transport(request()).body
    received = []
    with pytest.raises(ReplayError, match="stopped reading after 2 piece"):
        collect(stream, received)

    assert len(received) == 2


def test_an_incomplete_stream_closed_where_recording_stopped_is_fine(tmp_path):
    path = save(
        tmp_path,
        Interaction(recorded_request(), sse_response(OFFSETS_MS[:2], EVENTS[:2], complete=False)),
    )
    session = CassetteSession(path, timing="instant")
    transport = session.transport

    with transport(request()).body as stream:
        pieces = iter(stream)
        first, second = next(pieces), next(pieces)

    assert (first, second) == tuple(encode_sse_event(event) for event in EVENTS[:2])


def _closed_after_two(tmp_path):
    """A cassette whose stream the client closed after two events, at t_end = 5 s."""
    return save(
        tmp_path,
        Interaction(
            recorded_request(),
            sse_response(OFFSETS_MS[:2], EVENTS[:2], complete=False, t_end=5000.0),
        ),
    )


def test_an_async_incomplete_stream_stays_open_until_the_recorded_close(tmp_path):
    """A stream the client closed at t_end while it was recorded stays open in replay until
    t_end on the virtual clock, as the live server kept it: a client that reads on, waiting
    for the work of another task, and closes it then, reads no further and gets no error."""
    path = _closed_after_two(tmp_path)

    async def client():
        async with use_cassette(path) as session:
            response = await session.async_transport(request())
            stream = response.body
            got, closed_at = [], []
            start = time.monotonic()
            both = anyio.Event()

            async def reader():
                async for piece in stream:
                    got.append((piece, time.monotonic() - start))
                    if len(got) == 2:
                        both.set()

            async def closer():
                await both.wait()
                for _ in range(20):  # the client's own work with what it got, then it hangs up
                    await anyio.lowlevel.checkpoint()
                closed_at.append(time.monotonic() - start)
                group.cancel_scope.cancel()

            async with anyio.create_task_group() as group:
                group.start_soon(reader)
                group.start_soon(closer)
            await stream.aclose()
            return got, closed_at

    got, closed_at = anyio.run(client)

    assert [piece for piece, _ in got] == [encode_sse_event(e) for e in EVENTS[:2]]
    assert [round(t, 6) for _, t in got] == [o / 1000 for o in OFFSETS_MS[:2]]
    assert closed_at == [pytest.approx(0.08)]  # long before the recorded close at 5 s


def test_an_async_incomplete_stream_still_read_at_the_recorded_close_is_a_replay_error(
    tmp_path,
):
    path = _closed_after_two(tmp_path)

    async def client():
        async with use_cassette(path) as session:
            response = await session.async_transport(request())
            start = time.monotonic()
            with pytest.raises(ReplayError, match="stopped reading after 2 piece"):
                async for _ in response.body:
                    pass
            return time.monotonic() - start

    assert anyio.run(client) == pytest.approx(5.0)  # held open until then, on virtual time


# -- order and repeats ------------------------------------------------------------------------


@pytest.fixture
def rate_limited(tmp_path):
    limited = Interaction(
        recorded_request({"q": 1}),
        RecordedResponse(
            429,
            Headers([("retry-after", "1"), ("content-type", "application/json")]),
            JsonBody({"error": "rate limited"}),
        ),
    )
    ok = Interaction(
        recorded_request({"q": 1}),
        RecordedResponse(200, Headers([("content-type", "application/json")]), JsonBody("ok")),
    )
    return save(tmp_path, limited, ok)


def test_a_429_then_a_200_replay_in_order_once_each(rate_limited):
    session = CassetteSession(rate_limited, timing="instant")
    transport = session.transport

    first = transport(request({"q": 1}, stream=False))
    second = transport(request({"q": 1}, stream=False))

    assert (first.status, first.headers["Retry-After"]) == (429, "1")
    assert first.body == {"error": "rate limited"}
    assert (second.status, second.body) == (200, "ok")
    with pytest.raises(
        CassetteMissError, match="recorded as interaction #1, and it was already played"
    ):
        transport(request({"q": 1}, stream=False))
    assert [r.interaction for r in session.requests] == [0, 1]


def test_allow_repeats_replays_the_last_match_again(rate_limited):
    session = CassetteSession(rate_limited, timing="instant", allow_repeats=True)
    transport = session.transport

    statuses = [transport(request({"q": 1}, stream=False)).status for _ in range(4)]

    assert statuses == [429, 200, 200, 200]
    assert [r.interaction for r in session.requests] == [0, 1, 1, 1]


def test_play_on_its_own_needs_no_session(sse_cassette):
    interaction = load_cassette(sse_cassette).interactions[0]

    response = play(interaction, request(), InstantClock(), 0.0)
    pieces = list(response.body)

    assert len(pieces) == 4


# -- async ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_replay_delivers_each_event_at_its_offset(sse_cassette):
    async def run():
        session = CassetteSession(sse_cassette, timing="real")
        transport = session.async_transport
        start = wall()
        response = await transport(request())
        assert isinstance(response.body, AsyncByteStream)
        pieces = []
        async for piece in response.body:
            pieces.append((wall() - start, piece))
        await session.aclose()
        return [at for at, _ in pieces], [piece for _, piece in pieces]

    expected = [t / 1000 for t in OFFSETS_MS]
    pieces = await apaced(run, expected, gaps=[0.08])

    assert pieces == [encode_sse_event(event) for event in EVENTS]


@pytest.mark.anyio
async def test_async_replay_raises_recorded_errors(error_cassette, no_network):
    session = CassetteSession(error_cassette, timing="instant", on_unused="ignore")
    transport = session.async_transport

    with pytest.raises(ConnectError):
        await transport(request({"n": "connect"}))
    response = await transport(request({"n": "cut"}))
    received = []
    with pytest.raises(RemoteProtocolError):
        await acollect(response.body, received)
    await session.aclose()

    assert len(received) == 2
    assert no_network == []


@pytest.mark.anyio
async def test_async_replay_through_an_httpx2_client(error_cassette):
    session = CassetteSession(error_cassette, timing="instant", on_unused="ignore")
    transport = session.async_transport

    async with httpx2.AsyncClient(transport=HTTPBridge(async_transport=transport)) as client:
        with pytest.raises(httpx2.ConnectError):
            await client.post(URL, json={"n": "connect"})
        async with client.stream("POST", URL, json={"n": "cut"}) as response:
            with pytest.raises(httpx2.RemoteProtocolError):
                await response.aread()

    assert response.status_code == 200


# Reading a property has no side effect.


def test_reading_a_sessions_transports_again_gives_the_same_ones(tmp_path):
    session = CassetteSession(tmp_path / "new.msgpack", record="all")

    first, first_async = session.transport, session.async_transport

    assert session.transport is first
    assert session.async_transport is first_async
    assert len(session._route._recorders) == 2  # one recorder each, however often they are read
    session.close()


@pytest.mark.anyio
async def test_use_cassette_opens_and_closes_a_cassette_with_async_with(sse_cassette):
    async with use_cassette(sse_cassette) as cassette:
        response = await cassette.async_transport(request())
        pieces = [piece async for piece in response.body]
        assert time.sleep is not REAL["sleep"]  # the virtual clock is in for the block

    assert time.sleep is REAL["sleep"]
    assert pieces == [encode_sse_event(event) for event in EVENTS]
    assert cassette.requests[0].complete
    with pytest.raises(RuntimeError, match="is closed"):
        await cassette.async_transport(request())
