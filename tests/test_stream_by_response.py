"""The response decides whether a stream is timed (issue 16).

Each case records a plain httpx client through the patched transports (as the pytest plugin
installs them) against a loopback server that sends pieces 50 ms apart, and checks that the
cassette keeps every piece with a time between the server's write and the client's read. It
then replays with the server stopped, on the virtual clock, and checks that each piece
reaches the client at its recorded time. The requests say nothing about streaming: no
``"stream": true``, no ``Accept`` header, no streaming URL (except where the URL is the point).
"""

import contextlib
import itertools
import json
import time

import httpx
import httpx_sse

from pytest_toolnexus import load_cassette, use_cassette
from pytest_toolnexus._store.cassette import ChunksBody, JsonBody, NdjsonBody, SseBody, TextBody
from tests.support.realtime import wall
from tests.support.servers import Drip, Fixed, LoopbackServer
from tests.test_recording import assert_stamped_between_send_and_arrival

GAP = 0.05


@contextlib.contextmanager
def recording(cassette):
    """Every httpx client records into ``cassette``, as under the pytest plugin."""
    with use_cassette(cassette, record="all"):
        yield


def _read(url, method, how, **kwargs):
    """``(pieces, arrivals)``: what the client read, each at ``time.monotonic()`` minus the
    reading just before the request (real time while recording, virtual on replay)."""
    pieces, arrivals = [], []
    with httpx.Client(timeout=10) as client:
        start = time.monotonic()
        with client.stream(method, url, **kwargs) as response:
            assert response.status_code == 200
            for piece in response.iter_lines() if how == "lines" else response.iter_bytes():
                if piece:
                    arrivals.append(time.monotonic() - start)
                    pieces.append(piece)
    return pieces, arrivals


def record_and_replay(tmp_path, drip, path="/stream", method="GET", how="lines", **kwargs):
    """Record ``drip`` once, then replay it with the server gone. Returns the stored body, the
    pieces the client read each time, the recording's wall readings and the replay arrivals."""
    cassette = tmp_path / "stream.msgpack"
    with LoopbackServer(drip) as server:
        url = server.url(path)
        with use_cassette(cassette, record="all"):
            before = wall()
            live, _ = _read(url, method, how, **kwargs)
            arrived = wall()
        received_at = server.requests[0].received_at
    (interaction,) = load_cassette(cassette).interactions
    with use_cassette(cassette):  # replay only: the virtual clock, no network
        replayed, replay_arrivals = _read(url, method, how, **kwargs)
    # Compact JSON is sent, so that the replayed bytes (stored JSON is re-encoded compactly)
    # are the very bytes the server sent.
    assert b"".join(_bytes(p) for p in replayed) == b"".join(_bytes(p) for p in live)
    if how == "lines":
        assert replayed == live
    return interaction.response.body, replayed, (before, received_at, arrived), replay_arrivals


def _bytes(piece):
    return piece if isinstance(piece, bytes) else piece.encode()


def _assert_timed(stamps_ms, drip, walls, replay_arrivals):
    before, received_at, arrived = walls
    count = len(stamps_ms)
    # Each stamp lies between the server's write and the end of the client's read.
    assert_stamped_between_send_and_arrival(
        stamps_ms, drip.sent_at[:count], [arrived] * count, before=before, received_at=received_at
    )
    # The cadence was kept: no two pieces share a time (a body read whole would).
    assert all(b > a for a, b in itertools.pairwise(stamps_ms))
    # On replay each piece reaches the client at its recorded time, on the virtual clock.
    assert [round(t * 1000, 3) for t in replay_arrivals] == [round(t, 3) for t in stamps_ms]


SSE = [b'data: {"n":%d}\n\n' % n for n in range(5)]


def test_a_get_event_stream_read_by_lines_is_recorded_and_replayed_with_its_timing(tmp_path):
    drip = Drip(SSE, interval=GAP)
    body, lines, walls, arrivals = record_and_replay(tmp_path, drip)

    assert lines == [f'data: {{"n":{n}}}' for n in range(5)]
    assert isinstance(body, SseBody)
    assert [event["data"] for event in body.events] == [{"n": n} for n in range(5)]
    _assert_timed([event["t"] for event in body.events], drip, walls, arrivals)


def test_a_post_answered_with_an_event_stream_is_timed_though_it_asked_for_no_stream(tmp_path):
    drip = Drip(SSE, interval=GAP)
    body, lines, walls, arrivals = record_and_replay(
        tmp_path, drip, path="/v1/run", method="POST", json={"task": "go"}
    )

    assert len(lines) == 5
    assert isinstance(body, SseBody)
    _assert_timed([event["t"] for event in body.events], drip, walls, arrivals)


def test_ndjson_by_get_is_recorded_as_timed_lines(tmp_path):
    lines = [b'{"n":%d}\n' % n for n in range(5)]
    drip = Drip(lines, interval=GAP, headers=[("Content-Type", "application/x-ndjson")])
    body, read, walls, arrivals = record_and_replay(tmp_path, drip)

    assert [json.loads(line) for line in read] == [{"n": n} for n in range(5)]
    assert isinstance(body, NdjsonBody)
    assert [line["value"] for line in body.lines] == [{"n": n} for n in range(5)]
    _assert_timed([line["t"] for line in body.lines], drip, walls, arrivals)


GEMINI = "/v1beta/models/gemini-2.0-flash:streamGenerateContent"
JSON = [("Content-Type", "application/json; charset=UTF-8")]


def test_a_json_array_that_arrives_element_by_element_keeps_each_elements_time(tmp_path):
    # Gemini without alt=sse: one JSON array, an element per chunk, the bracket last.
    elements = [b'[{"n":0}'] + [b',{"n":%d}' % n for n in range(1, 5)] + [b"]"]
    drip = Drip(elements, interval=GAP, headers=JSON)
    body, chunks, walls, arrivals = record_and_replay(
        tmp_path, drip, path=GEMINI, method="POST", how="bytes", json={"contents": []}
    )

    assert json.loads(b"".join(chunks)) == [{"n": n} for n in range(5)]
    assert isinstance(body, JsonBody)
    assert body.value == [{"n": n} for n in range(5)]
    assert body.times is not None
    assert len(body.times) == 5
    # One piece per element on replay (the bracket goes with the last), each at its time.
    assert chunks == [b'[{"n":0}', b',{"n":1}', b',{"n":2}', b',{"n":3}', b',{"n":4}]']
    _assert_timed(list(body.times), drip, walls, arrivals)


def test_a_json_array_that_arrives_in_one_piece_is_stored_whole(tmp_path):
    array = b'[{"n": 0},\r\n{"n": 1}]'
    cassette = tmp_path / "whole.msgpack"
    with LoopbackServer(Fixed(200, JSON, array)) as server, recording(cassette):
        chunks, _ = _read(server.url(GEMINI), "POST", "bytes", json={"contents": []})

    assert b"".join(chunks) == array
    (interaction,) = load_cassette(cassette).interactions
    assert interaction.response.body == JsonBody([{"n": 0}, {"n": 1}])


def test_an_octet_stream_read_as_it_comes_is_recorded_as_timed_chunks(tmp_path):
    pieces = [bytes([n]) * 64 for n in range(5)]
    drip = Drip(pieces, interval=GAP, headers=[("Content-Type", "application/octet-stream")])
    body, read, walls, arrivals = record_and_replay(tmp_path, drip, how="bytes")

    assert read == pieces
    assert isinstance(body, ChunksBody)
    assert [chunk["data"] for chunk in body.chunks] == pieces
    _assert_timed([chunk["t"] for chunk in body.chunks], drip, walls, arrivals)


def test_plain_text_of_a_known_length_is_stored_whole(tmp_path):
    # A body with a content-length that the request did not ask to stream is not a stream.
    cassette = tmp_path / "text.msgpack"
    text = b"hello\nworld\n"
    plain = Fixed(200, [("Content-Type", "text/plain")], text)
    with LoopbackServer(plain) as server, recording(cassette):
        read, _ = _read(server.url("/"), "GET", "bytes")

    assert b"".join(read) == text
    (interaction,) = load_cassette(cassette).interactions
    assert interaction.response.body == TextBody(text.decode())


def test_httpx_sse_connect_sse_is_recorded_and_replayed_with_its_timing(tmp_path):
    drip = Drip(SSE, interval=GAP)
    cassette = tmp_path / "sse.msgpack"

    def read(url):
        events, arrivals = [], []
        with httpx.Client(timeout=10) as client:
            start = time.monotonic()
            with httpx_sse.connect_sse(client, "GET", url) as source:
                for event in source.iter_sse():
                    arrivals.append(time.monotonic() - start)
                    events.append(event.json())
        return events, arrivals

    with LoopbackServer(drip) as server:
        url = server.url("/sse")
        with recording(cassette):
            before = wall()
            live, _ = read(url)
            arrived = wall()
        received_at = server.requests[0].received_at
    with use_cassette(cassette):  # replay only: the virtual clock, no network
        replayed, arrivals = read(url)

    assert live == replayed == [{"n": n} for n in range(5)]
    (interaction,) = load_cassette(cassette).interactions
    body = interaction.response.body
    assert isinstance(body, SseBody)
    stamps = [event["t"] for event in body.events]
    _assert_timed(stamps, drip, (before, received_at, arrived), arrivals)
