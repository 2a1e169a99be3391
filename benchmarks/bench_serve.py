"""Benchmark 11: ``pytest-toolnexus serve`` against a bare aiohttp server (issue 22).

Both run as processes of their own on loopback, as a client in another language meets them:

- per request: sequential non-streamed POSTs over one keep-alive connection, answered by
  ``serve --timing instant --allow-repeats`` from a cassette (the body matched semantically,
  the recorded JSON answer encoded) and by a bare aiohttp handler that returns prebuilt bytes;
  the two alternate in blocks, and each figure is the median over the blocks (goal: serve at
  most ``PER_REQUEST_GOAL`` times the bare handler);
- launch: from the process's start to the first answered request, for ``serve`` with 100
  cassettes and for the bare aiohttp server (the floor: the interpreter and aiohttp's import),
  with ``python -c pass`` beside them (goal: serve within ``LAUNCH_GOAL_MS`` ms, the issue's);
- pace: each text delta of a streamed chat (20 deltas, 50 ms apart) from ``serve`` in real
  timing, timed from the request on a raw socket against its recorded offset (goal: each at
  most ``PACE_GOAL_MS`` ms late, the issue's figure for a Node client, and none early);
- a realtime session's pace: each server frame of a recorded WebSocket session (a reply of 40
  deltas, 25 ms apart, to the client's ``response.create``) from ``serve`` in real timing, timed
  on the client from the handshake against its recorded offset (goal: as the stream's);
- the recording proxy: the time to the first event of a stream from a bare aiohttp upstream,
  directly, through ``pytest-toolnexus record`` and through a bare aiohttp proxy that records
  nothing (the floor of a proxy on that stack), alternating (goal: at most
  ``FIRST_BYTE_GOAL_MS`` ms later through ``record``, the issue's).

Run alone: ``python benchmarks/bench_serve.py``.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import httpx
from _common import Table, median, ms, now, ratio, run_alone, us, verdict

from pytest_toolnexus import (
    Cassette,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    build,
)
from pytest_toolnexus._store.bodies import EmptyBody, WebSocketBody
from pytest_toolnexus._store.ws_frames import frame_doc

PACE_GOAL_MS = 20.0
PACE_ROUNDS = 5
PACE = build.Cadence(ttft=0.2, gap=0.05)
WORDS = [f"w{i} " for i in range(20)]
PER_REQUEST_GOAL = 2.0
FIRST_BYTE_GOAL_MS = 1.0
FIRST_BYTES = 60
LAUNCH_GOAL_MS = 300.0
FRAME_DELTAS = 40
FRAME_GAP_MS = 25.0
ASK_AT_MS = 20.0
BLOCKS = 15
PER_BLOCK = 100
LAUNCHES = 5
CASSETTES = 100
ASKED = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}

_BARE = """
import sys
from aiohttp import web

body, port_file = open(sys.argv[1], "rb").read(), sys.argv[2]
headers = {"content-type": "application/json"}


async def handle(request):
    await request.read()
    return web.Response(body=body, headers=headers)


async def main():
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    import asyncio
    await asyncio.Event().wait()


import asyncio
asyncio.run(main())
"""


_UPSTREAM = """
import asyncio, sys
from aiohttp import web


async def handle(request):
    await request.read()
    response = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await response.prepare(request)
    await response.write(b'data: {"n": 0}\\n\\n')
    for n in range(1, 4):
        await asyncio.sleep(0.005)
        await response.write(b'data: {"n": %d}\\n\\n' % n)
    await response.write_eof()
    return response


async def main():
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    print(f"http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
"""


_BARE_PROXY = """
import asyncio, sys
import aiohttp
from aiohttp import web

upstream = sys.argv[1]
skipped = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
hop = {"host", "connection", "content-length", "transfer-encoding", "content-encoding"}


async def main():
    client = aiohttp.ClientSession(skip_auto_headers=skipped)

    async def handle(request):
        body = await request.read()
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in hop]
        async with client.request(
            request.method, upstream + request.raw_path, headers=headers, data=body
        ) as answer:
            out = web.StreamResponse(
                status=answer.status,
                headers=[(k, v) for k, v in answer.headers.items() if k.lower() not in hop],
            )
            await out.prepare(request)
            async for chunk in answer.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    print(f"http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
"""


def _first_event(base: str) -> float:
    """Seconds from sending a streamed POST on a new connection to the first event's bytes."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    body = json.dumps({**ASKED, "stream": True}).encode()
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode() + body
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = now()
        sock.sendall(request)
        seen = b""
        while b"data: " not in seen:
            chunk = sock.recv(65536)
            assert chunk, seen
            seen += chunk
        took = now() - start
        while sock.recv(65536):
            pass
    return took


_DELTA = re.compile(rb'"content":"[^"]')


def _delta_arrivals(base: str, path: str) -> list[float]:
    """Seconds from sending a streamed POST to each text delta's bytes (a non-empty
    ``"content"``), read off a raw socket as they come."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    body = json.dumps({**ASKED, "stream": True}).encode()
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body
    arrivals: list[float] = []
    seen = b""
    with socket.create_connection((host, int(port))) as sock:
        start = now()
        sock.sendall(request)
        while chunk := sock.recv(65536):
            seen += chunk
            found = len(_DELTA.findall(seen))
            arrivals += [now() - start] * (found - len(arrivals))
    return arrivals


def _realtime_cassette(path: Path) -> list[float]:
    """A recorded Realtime session: ``session.created``, the client's ``response.create`` at
    20 ms, then the reply's deltas and ``response.done``; returns each server frame's recorded
    time in seconds since the handshake was sent."""

    def server(t: float, kind: str, **fields: object) -> dict[str, object]:
        return frame_doc(t, "server", json.dumps({"type": kind, **fields}, separators=(",", ":")))

    frames = [server(1.0, "session.created", session={"type": "realtime"})]
    frames.append(frame_doc(ASK_AT_MS, "client", '{"type":"response.create"}'))
    times = [1.0 + FRAME_GAP_MS * (n + 4) for n in range(FRAME_DELTAS + 1)]
    frames += [
        server(t, "response.output_text.delta", delta=f"w{n} ") for n, t in enumerate(times[:-1])
    ]
    frames.append(server(times[-1], "response.done", response={"status": "completed"}))
    request = RecordedRequest("GET", "wss://api.openai.com/v1/realtime", Headers(), EmptyBody())
    headers = Headers([("Upgrade", "websocket")])
    response = RecordedResponse(101, headers, WebSocketBody(frames), 1.0, times[-1])
    Cassette(path, [Interaction(request, response)]).save()
    return [1.0 / 1000, *(t / 1000 for t in times)]


def _frame_arrivals(url: str) -> list[float]:
    """Seconds from opening the WebSocket to each server frame, the client asking for the
    reply as soon as the session is created, as the recorded client did 19 ms later."""
    from websockets.sync.client import connect

    arrivals: list[float] = []
    start = now()
    with connect(url) as ws:
        for message in ws:
            arrivals.append(now() - start)
            kind = json.loads(message)["type"]
            if kind == "session.created":
                ws.send('{"type":"response.create"}')
            elif kind == "response.done":
                break
    return arrivals


def _lateness(
    command: list[str], arrivals: Callable[[str], list[float]], due: list[float]
) -> list[float]:
    """How late each arrival was against ``due``, over ``PACE_ROUNDS`` rounds (after one to
    warm up) of ``arrivals(url)`` from the server ``command`` starts."""
    process, url, _ = _start(command)
    late: list[float] = []
    try:
        arrivals(url)  # warm-up
        for _ in range(PACE_ROUNDS):
            got = arrivals(url)
            assert len(got) == len(due), (got, due)
            late += [g - d for g, d in zip(got, due, strict=True)]
    finally:
        _stop(process)
    return late


def _pace_row(table: Table, late: list[float]) -> None:
    most = max(late) * 1000
    table.add(
        f"{len(late)}",
        f"{median(late) * 1000:.2f}",
        f"{most:.2f}",
        f"{min(late) * 1000:+.2f}",
        f"each <= {PACE_GOAL_MS:.0f} ms",
        verdict(most <= PACE_GOAL_MS and min(late) >= -0.001),
    )


def _start(command: list[str]) -> tuple[subprocess.Popen[str], str, float]:
    """Start a server; its process, its URL, and when it was started."""
    started = now()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    assert url.startswith("http://"), url
    return process, url, started


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=20)


class _RawClient:
    """HTTP/1.1 POSTs of one prebuilt request on one keep-alive connection, as cheap as a
    client can be: the answer's body is read by its content-length."""

    def __init__(self, base: str, path: str) -> None:
        host, port = base.removeprefix("http://").rsplit(":", 1)
        self._socket = socket.create_connection((host, int(port)))
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        body = json.dumps(ASKED).encode()
        self._request = (
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode() + body
        self._buffer = b""

    def post(self) -> bytes:
        self._socket.sendall(self._request)
        while b"\r\n\r\n" not in self._buffer:
            self._buffer += self._socket.recv(65536)
        head, self._buffer = self._buffer.split(b"\r\n\r\n", 1)
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(self._buffer) < length:
            self._buffer += self._socket.recv(65536)
        body, self._buffer = self._buffer[:length], self._buffer[length:]
        return body

    def close(self) -> None:
        self._socket.close()


def _launch(command: list[str], path: str) -> float:
    """Seconds from the start of ``command`` to its first answered request."""
    process, url, started = _start(command)
    try:
        answer = httpx.post(url + path, json=ASKED)
        took = now() - started
        assert answer.status_code == 200, answer.text
        return took
    finally:
        _stop(process)


def run(work: Path) -> tuple[list[Table], object]:
    # Launched as an installed package runs, from bytecode: run.py compiled the package.
    folder = work / "serve"
    for i in range(CASSETTES):
        build.build_cassette(
            folder / f"c{i:03}.msgpack",
            [build.openai_chat(f"Answer {i}.", stream=False, request_body=ASKED)],
        )
    one = folder / "c000.msgpack"
    serve = [sys.executable, "-m", "pytest_toolnexus", "serve", "--timing", "instant"]
    bare_script = work / "bare_aiohttp.py"
    bare_script.write_text(textwrap.dedent(_BARE))
    with httpx.Client() as client:
        process, url, _ = _start([*serve, "--allow-repeats", str(one)])
        try:
            prebuilt = client.post(f"{url}/c/c000/v1/chat/completions", json=ASKED).content
        finally:
            _stop(process)
    body_file = work / "body.json"
    body_file.write_bytes(prebuilt)
    bare = [sys.executable, str(bare_script), str(body_file), ""]

    per_request = Table(
        "11a. serve: a non-streamed replay over loopback, per request (issue 22)",
        ["server", "µs/request", "x bare aiohttp", "goal", "verdict"],
    )
    served, served_url, _ = _start([*serve, "--allow-repeats", str(one)])
    plain, plain_url, _ = _start(bare)
    try:
        times: dict[str, list[float]] = {"serve": [], "bare": []}
        clients = {
            "serve": _RawClient(served_url, "/c/c000/v1/chat/completions"),
            "bare": _RawClient(plain_url, "/v1/chat/completions"),
        }
        for client in clients.values():  # warm-up: first-call costs on both sides
            for _ in range(50):
                client.post()
        for _ in range(BLOCKS):
            for name, client in clients.items():
                start = now()
                for _ in range(PER_BLOCK):
                    answer = client.post()
                times[name].append((now() - start) / PER_BLOCK)
                assert answer == prebuilt
        for client in clients.values():
            client.close()
    finally:
        _stop(served)
        _stop(plain)
    bare_cost = median(times["bare"])
    serve_cost = median(times["serve"])
    per_request.add("bare aiohttp, prebuilt bytes", us(bare_cost), "1.00x", "", "")
    per_request.add(
        "serve --timing instant",
        us(serve_cost),
        ratio(serve_cost / bare_cost),
        f"<= {PER_REQUEST_GOAL:.0f}x",
        verdict(serve_cost / bare_cost <= PER_REQUEST_GOAL),
    )
    per_request.note(
        f"{BLOCKS} blocks of {PER_BLOCK} requests each, alternating; a raw-socket client sends "
        "prebuilt request bytes on one keep-alive connection to each, so the figures are "
        "almost all the servers' own."
    )

    launch = Table(
        "11b. serve: launch to the first answer, with 100 cassettes (issue 22)",
        ["process", "ms", "x bare aiohttp", "goal", "verdict"],
    )
    pythons, bares, serves = [], [], []
    for _ in range(LAUNCHES):
        start = now()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        pythons.append(now() - start)
        bares.append(_launch(bare, "/v1/chat/completions"))
        serves.append(_launch([*serve, str(folder)], "/c/c050/v1/chat/completions"))
    floor = median(bares)
    launch.add("python -c pass", ms(median(pythons)), "", "", "")
    launch.add("bare aiohttp server", ms(floor), "1.00x", "", "")
    launch.add(
        f"serve, {CASSETTES} cassettes",
        ms(median(serves)),
        ratio(median(serves) / floor),
        f"<= {LAUNCH_GOAL_MS:.0f} ms",
        verdict(median(serves) * 1000 <= LAUNCH_GOAL_MS),
    )
    launch.note(f"medians of {LAUNCHES} launches each, interleaved")

    pace = Table(
        "11d. serve: a stream's deltas at their recorded offsets, in real timing (issue 22)",
        ["deltas", "median ms late", "most ms late", "earliest", "goal", "verdict"],
    )
    paced = work / "paced" / "stream.msgpack"
    build.build_cassette(
        paced, [build.openai_chat("".join(WORDS), cadence=PACE, request_body=None)]
    )
    due = [t / 1000 for t in PACE.times(len(WORDS))]
    late = _lateness(
        [*serve[:-2], "--allow-repeats", str(paced)],
        lambda url: _delta_arrivals(url, "/c/stream/v1/chat/completions"),
        due,
    )
    _pace_row(pace, late)
    pace.note(
        f"{PACE_ROUNDS} streams of {len(WORDS)} chat deltas, the first 0.2 s after the request "
        "and one every 50 ms, from `serve` in real timing; each delta timed on a raw socket "
        "from the moment the request was sent, against its recorded offset (earliest: the "
        "least lateness; a negative one would be a delta sent early)"
    )

    frames = Table(
        "11e. serve: a realtime session's server frames at their recorded offsets, in real "
        "timing (issues 21, 22)",
        ["frames", "median ms late", "most ms late", "earliest", "goal", "verdict"],
    )
    session = work / "realtime" / "talk.msgpack"
    frame_due = _realtime_cassette(session)
    frame_late = _lateness(
        [*serve[:-2], "--allow-repeats", str(session)],
        lambda url: _frame_arrivals(url.replace("http://", "ws://", 1) + "/c/talk/v1/realtime"),
        frame_due,
    )
    _pace_row(frames, frame_late)
    frames.note(
        f"{PACE_ROUNDS} sessions of {len(frame_due)} server frames (session.created, then "
        f"{FRAME_DELTAS} deltas {FRAME_GAP_MS:.0f} ms apart and response.done, answering the "
        "client's response.create), from `serve` in real timing to websockets' sync client; "
        "each frame timed from the moment the client opened the connection, against its "
        "recorded time since the handshake (the client asks before the recorded client did, "
        "so every answer is due at its recorded time)"
    )

    proxy_table = Table(
        "11c. record: the first event of a stream through the recording proxy (issue 22)",
        ["path", "ms to first event", "later than direct", "goal", "verdict"],
    )
    upstream_script = work / "upstream.py"
    upstream_script.write_text(textwrap.dedent(_UPSTREAM))
    upstream, upstream_url, _ = _start([sys.executable, str(upstream_script)])
    proxy, proxy_url, _ = _start(
        [
            sys.executable,
            "-m",
            "pytest_toolnexus",
            "record",
            "--upstream",
            upstream_url,
            "--out",
            str(work / "proxied.msgpack"),
        ]
    )
    bare_proxy_script = work / "bare_proxy.py"
    bare_proxy_script.write_text(textwrap.dedent(_BARE_PROXY))
    bare_proxy, bare_proxy_url, _ = _start([sys.executable, str(bare_proxy_script), upstream_url])
    try:
        for _ in range(5):  # warm-up: first-call costs on every side
            _first_event(upstream_url)
            _first_event(proxy_url)
            _first_event(bare_proxy_url)
        direct, proxied, floor_proxied = [], [], []
        for _ in range(FIRST_BYTES):
            direct.append(_first_event(upstream_url))
            proxied.append(_first_event(proxy_url))
            floor_proxied.append(_first_event(bare_proxy_url))
    finally:
        _stop(proxy)
        _stop(bare_proxy)
        _stop(upstream)
    later = median(proxied) - median(direct)
    proxy_table.add("direct to the upstream", ms(median(direct)), "", "", "")
    proxy_table.add(
        "through a bare aiohttp proxy (no recording)",
        ms(median(floor_proxied)),
        f"{(median(floor_proxied) - median(direct)) * 1000:+.2f} ms",
        "",
        "",
    )
    proxy_table.add(
        "through pytest-toolnexus record",
        ms(median(proxied)),
        f"{later * 1000:+.2f} ms",
        f"<= {FIRST_BYTE_GOAL_MS:.0f} ms",
        verdict(later * 1000 <= FIRST_BYTE_GOAL_MS),
    )
    proxy_table.note(
        f"medians of {FIRST_BYTES} streamed POSTs each, alternating, each on a new connection "
        "to the server asked (each proxy keeps its connection to the upstream open, as a "
        "client's pool does); the bare aiohttp proxy forwards with aiohttp's server and client "
        "and records nothing: what any proxy on that stack pays"
    )
    return [per_request, launch, proxy_table, pace, frames], None


if __name__ == "__main__":
    run_alone(run)
