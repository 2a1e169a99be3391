"""Every kind of stream a cassette holds goes out of ``serve`` piece by piece at its recorded
offset: SSE and NDJSON (tests/test_serve.py), and here a JSON-array stream (Gemini's
``streamGenerateContent`` without ``alt=sse``) and an AWS event stream (Bedrock's
``converse-stream``), each recorded first through ``pytest-toolnexus record`` from an upstream
that drips its pieces, as a client in another language would record it.

Pieces are counted in what the client received with parsers of their own (a closing brace of
a flat JSON object; an event-stream frame's length prefix), not the plugin's, and timed from
a moment before the request was sent, judged as a loaded machine allows: none before its
recorded offset, in order, and spread out rather than held back and sent together.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from pytest_toolnexus import load_cassette
from pytest_toolnexus._store.cassette import EventStreamBody, JsonBody
from tests.support.bedrock import EVENTSTREAM, frame
from tests.support.serve_cli import serving, start_record
from tests.support.servers import Drip, LoopbackServer

GAP = 0.4
ARRAY = [b'[{"n":0,"text":"a"}', b',{"n":1,"text":"b"}', b',{"n":2,"text":"c"}]']
FRAMES = [frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": t}}) for t in "abc"]


def _objects(received: bytes) -> int:
    """Flat JSON objects completed in ``received``."""
    return received.count(b"}")


def _frames(received: bytes) -> int:
    """Whole event-stream frames in ``received`` (each starts with its total length)."""
    count = at = 0
    while len(received) >= at + 4:
        (length,) = struct.unpack(">I", received[at : at + 4])
        if len(received) < at + length:
            break
        at += length
        count += 1
    return count


def _record(tmp_path: Path, chunks: list[bytes], content_type: str, path: str) -> Path:
    out = tmp_path / "recorded.msgpack"
    with LoopbackServer(Drip(chunks, interval=GAP, headers=[("Content-Type", content_type)])) as up:
        proxy = start_record(up.origin, out)
        through = httpx.post(proxy.url + path, json={"contents": "Hi"}, timeout=30)
        code, err = proxy.stop()
    assert code == 0, err
    assert through.content == b"".join(chunks)  # the proxy handed on what the upstream sent
    return out


def _arrivals(url: str, path: str, count: Callable[[bytes], int]) -> tuple[list[float], bytes]:
    """When each piece was whole at the client, in seconds from before the request was sent,
    over a socket read as it comes (chunked framing and all: the counters skip it)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    body = b'{"contents": "Hi"}'
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body
    times: list[float] = []
    received = b""
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        start = time.perf_counter()
        sock.sendall(request)
        while chunk := sock.recv(65536):
            received += chunk
            payload = received.split(b"\r\n\r\n", 1)[-1]
            times += [time.perf_counter() - start] * (count(_unchunked(payload)) - len(times))
    return times, _unchunked(received.split(b"\r\n\r\n", 1)[1])


def _unchunked(payload: bytes) -> bytes:
    """The body of a chunked payload received so far (a partial last chunk left out)."""
    body, at = b"", 0
    while (end := payload.find(b"\r\n", at)) != -1:
        size = int(payload[at:end], 16)
        if size == 0 or len(payload) < end + 2 + size:
            break
        body += payload[end + 2 : end + 2 + size]
        at = end + 2 + size + 2
    return body


@pytest.mark.parametrize(
    ("chunks", "content_type", "path", "count"),
    [
        (
            ARRAY,
            "application/json",
            "/v1beta/models/gemini-2.0-flash:streamGenerateContent",
            _objects,
        ),
        (FRAMES, EVENTSTREAM, "/model/m/converse-stream", _frames),
    ],
    ids=["json-array", "aws-event-stream"],
)
def test_each_piece_of_the_stream_goes_out_at_its_recorded_offset(
    tmp_path: Path,
    chunks: list[bytes],
    content_type: str,
    path: str,
    count: Callable[[bytes], int],
):
    out = _record(tmp_path, chunks, content_type, path)
    [interaction] = load_cassette(out).interactions
    assert interaction.response is not None
    recorded = [t / 1000 for t in _piece_times(interaction.response.body)]
    assert len(recorded) == 3

    with serving([out]) as served:
        arrivals, body = _arrivals(served.url, f"/c/recorded{path}", count)

    assert count(body) == 3
    assert len(arrivals) == 3
    late = [got - due for got, due in zip(arrivals, recorded, strict=True)]
    assert min(late) >= -0.005, f"a piece came before its recorded offset: {late}"
    assert arrivals == sorted(arrivals)
    assert arrivals[0] < recorded[-1], f"the pieces were held back and sent together: {arrivals}"


def _piece_times(body: object) -> list[float]:
    """The recorded arrival (ms) of each piece of a JSON-array or event-stream body."""
    if isinstance(body, JsonBody):
        assert body.times is not None, "the array was recorded whole, not element by element"
        return list(body.times)
    assert isinstance(body, EventStreamBody), body
    return [float(f["t"]) for f in body.frames]
