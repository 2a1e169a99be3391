"""Benchmark 10: what recording adds to a stream's first chunk, and to its recorded times
(issue 26, the recording row).

A loopback server answers a streamed POST with a few SSE events at once. Each round, a direct
``httpx.Client()`` and a client over a new recording session's bridge (one session per round,
as each test opens its own) send the same request on a new connection, in turn. Both clients,
and the session, are made before the clock starts, as a test makes them in its setup; what is
timed is the request sent to its first body chunk read. The goal is DESIGN section 8's: the
recording client sees the first chunk at most 1 ms after the direct one, and the time the
cassette keeps for the first event is the server's, not the plugin's (at most 1 ms over the
direct client's first chunk).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
from _common import LoopbackServer, Table, median, ms, now, verdict

from pytest_toolnexus import CassetteSession
from pytest_toolnexus._store.cassette import SseBody

ROUNDS = 41
GOAL_S = 1e-3
EVENTS = [b'data: {"choices": [{"delta": {"content": "tok%d"}}]}\n\n' % n for n in range(8)]
REQUEST = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for event in EVENTS:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:
        pass


def _first_chunk(client: httpx.Client, url: str) -> float:
    """Seconds from sending the request to its first body chunk; the rest is read, untimed."""
    start = now()
    first = 0.0
    with client.stream("POST", url, json=REQUEST) as response:
        for _ in response.iter_raw():
            if not first:
                first = now() - start
    return first


def run(work: Path) -> tuple[list[Table], dict[str, float]]:
    server = LoopbackServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    direct: list[float] = []
    recording: list[float] = []
    kept: list[float] = []
    try:
        for n in range(ROUNDS + 1):  # the first round warms both up and is not counted
            with httpx.Client() as client:
                took = _first_chunk(client, url)
            if n:
                direct.append(took)
            session = CassetteSession(work / f"record-{n}.msgpack", record="all")
            with session, httpx.Client(transport=session.http_transport()) as client:
                took = _first_chunk(client, url)
                (interaction,) = session.recorded
            body = interaction.response.body if interaction.response else None
            assert isinstance(body, SseBody), body
            if n:
                recording.append(took)
                kept.append(body.events[0]["t"] / 1000.0)
    finally:
        server.shutdown()
        server.server_close()
    base, ours, stored = median(direct), median(recording), median(kept)
    table = Table(
        "10. Recording: a stream's first chunk, each recording in a new session",
        ["client", "first chunk ms", "over direct ms", "goal", ""],
    )
    table.add("direct httpx.Client()", ms(base), "", "", "")
    table.add(
        "the same request recorded (a new session's bridge)",
        ms(ours),
        f"{(ours - base) * 1e3:+.2f}",
        "<= +1 ms",
        verdict(ours - base <= GOAL_S),
    )
    table.add(
        "  the first event's time in the cassette",
        ms(stored),
        f"{(stored - base) * 1e3:+.2f}",
        "<= +1 ms",
        verdict(stored - base <= GOAL_S),
    )
    table.note(
        f"Medians of {ROUNDS} rounds, a new connection each; the direct and recording clients "
        "take turns, so load from other processes falls on both alike. The clients and the "
        "session are made before the clock starts, as a test's setup makes them."
    )
    return [table], {"direct": base, "recording": ours, "kept": stored}


if __name__ == "__main__":
    from _common import run_alone

    run_alone(run)
