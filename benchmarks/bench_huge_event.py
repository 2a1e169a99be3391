"""Benchmark 15: recording one huge SSE event (issue 23, row 8).

A loopback server answers a streamed POST with a single SSE event whose one data line is
5, 20 or 60 MB of JSON text (a chat delta holding one long string), written in 16 KB pieces. A
direct ``httpx.Client()`` and a client over a new recording session's bridge (the plugin's
path for a test recording with ``record="all"``) read it in turn as an SDK does (line by line,
the event's data parsed as JSON). Timed: the
request sent to the body read, and for the recording, separately, the session's close, which
scans the recording for secrets and writes the cassette.

Goals (issue 23, row 8): recording is linear in the event's size (the recording's time per MB
at 60 MB within 1.5x its time per MB at 5 MB; before the fix, 5, 10, 20 and 60 MB took 1.8,
4.7, 18 and 131 s) and takes at most 2x the time without the plugin, reading and writing
together.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar

import httpx
from _common import LoopbackServer, Table, median, ms, now, ratio, verdict

from pytest_toolnexus import CassetteSession
from pytest_toolnexus._store.cassette import SseBody

SIZES_MB = (5, 20, 60)
ROUNDS = 3
PIECE = 16 * 1024
GOAL_TIMES = 2.0
GOAL_LINEAR = 1.5
REQUEST = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def _text(megabytes: int) -> str:
    return "lorem ipsum dolor sit amet " * (megabytes * 1024 * 1024 // 27)


def _event(text: str) -> bytes:
    return b'data: {"choices": [{"delta": {"content": "%s"}}]}\n\n' % text.encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    events: ClassVar[dict[str, bytes]] = {}

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        event = self.events[self.path]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(event)))
        self.end_headers()
        view = memoryview(event)
        for start in range(0, len(event), PIECE):
            self.wfile.write(view[start : start + PIECE])
        self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:
        pass


def _read(client: httpx.Client, url: str) -> int:
    """The stream read as an SDK reads it: line by line, each event's data parsed as JSON;
    gives the length of the text the event held."""
    held = 0
    with client.stream("POST", url, json=REQUEST) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                held += len(json.loads(line[6:])["choices"][0]["delta"]["content"])
    return held


def run(work: Path) -> tuple[list[Table], dict[str, float]]:
    server = LoopbackServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    figures: dict[str, float] = {}
    table = Table(
        "15. Recording one huge SSE event (one data line, 16 KB writes), medians of "
        f"{ROUNDS} rounds",
        ["event", "direct s", "recording: read s", "close s", "both s", "x direct", "goal", ""],
    )
    per_mb: dict[int, float] = {}
    try:
        for megabytes in SIZES_MB:
            path = f"/e{megabytes}"
            text = _text(megabytes)
            _Handler.events[path] = _event(text)
            direct: list[float] = []
            reads: list[float] = []
            closes: list[float] = []
            for n in range(ROUNDS + 1):  # the first round warms up and is not counted
                with httpx.Client() as client:
                    start = now()
                    assert _read(client, base + path) == len(text)
                    took = now() - start
                if n:
                    direct.append(took)
                cassette = work / f"huge-{megabytes}-{n}.msgpack"
                session = CassetteSession(cassette, record="all")
                try:
                    with httpx.Client(transport=session.http_transport()) as client:
                        start = now()
                        assert _read(client, base + path) == len(text)
                        read = now() - start
                finally:
                    start = now()
                    session.close()
                    closed = now() - start
                (interaction,) = session.recorded
                assert interaction.response is not None
                assert isinstance(interaction.response.body, SseBody)
                cassette.unlink()
                if n:
                    reads.append(read)
                    closes.append(closed)
            del _Handler.events[path]
            d, r, c = median(direct), median(reads), median(closes)
            both = r + c
            per_mb[megabytes] = both / megabytes
            figures[f"{megabytes}mb"] = both / d
            table.add(
                f"{megabytes} MB",
                f"{d:.2f}",
                f"{r:.2f}",
                f"{c:.2f}",
                f"{both:.2f}",
                ratio(both / d),
                f"<= {GOAL_TIMES:g}x",
                verdict(both / d <= GOAL_TIMES),
            )
    finally:
        server.shutdown()
        server.server_close()
    growth = per_mb[SIZES_MB[-1]] / per_mb[SIZES_MB[0]]
    figures["linear"] = growth
    table.add(
        f"time per MB, {SIZES_MB[-1]} MB over {SIZES_MB[0]} MB",
        "",
        "",
        "",
        f"{ms(per_mb[SIZES_MB[-1]])} ms",
        ratio(growth),
        f"<= {GOAL_LINEAR:g}x",
        verdict(growth <= GOAL_LINEAR),
    )
    table.note(
        "Direct: httpx.Client() reading the stream as an SDK does (iter_lines, json.loads of "
        "the data line). Recording: the same request through a "
        "new session's bridge (record='all'), then the session's close, which scans the "
        "recording for secrets (the event's text joined) and writes the cassette atomically. "
        "The two take turns, so load from other processes falls on both alike."
    )
    return [table], figures


if __name__ == "__main__":
    from _common import run_alone

    run_alone(run)
