"""Benchmark 12: replaying a 1,000-frame WebSocket session, and recording one (issue 21's
speed goals).

12a. The same client code reads 1,000 server frames (OpenAI Realtime text deltas, 1 ms apart,
after one client frame) from two sources, in one run:

* **baseline**: an in-memory ``asyncio.Queue`` (``queue.SimpleQueue`` for sync) holding the same
  decoded messages;
* **replay**: a cassette session's replayed connection (``realtime_of(session).aconnect``, or
  ``connect`` for sync), on the virtual clock, the cassette already open.

Only the reading loop is timed, on the real clock. The goal (issue 21): at most 1.5x the queue.

12b. A loopback ``websockets`` server answers one client event with a burst of server events.
The websockets library's own client (sync, and asyncio) reads them, directly and inside a
recording cassette session (``record="all"``, the library served through the session as the
plugin serves it), in turn, round after round. Each frame's delivery is the time from the
client's send to its ``recv()`` returning that frame. The goal (issue 21): recording adds at
most 1 ms to any frame's delivery (the largest, over the frames, of the difference of the
medians at that position).
"""

from __future__ import annotations

import asyncio
import json
import queue
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import websockets.asyncio.client
import websockets.sync.client
from _common import Table, median, ms, now, ratio, run_alone, us, verdict

from pytest_toolnexus._patching.websockets import patch_websockets
from pytest_toolnexus._realtime.hub import realtime_of
from pytest_toolnexus._seam.duplex import Handshake
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._session.session import CassetteSession
from pytest_toolnexus._store.cassette import (
    Cassette,
    EmptyBody,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    WebSocketBody,
    load_cassette,
)
from pytest_toolnexus._store.ws_frames import frame_doc

FRAMES = 1000
REPEATS = 5
GOAL = 1.5
BURST = 100  # 12b: the server events answering one client event
ROUNDS = 31  # 12b: rounds of each client, after one to warm up
GOAL_ADDED_S = 1e-3
URL = "wss://bench.invalid/v1/realtime?model=gpt-realtime"
ASK = '{"type":"response.create"}'


def _messages() -> list[str]:
    return [
        json.dumps(
            {"type": "response.output_text.delta", "event_id": f"event_{i}", "delta": f"t{i} "},
            separators=(",", ":"),
        )
        for i in range(FRAMES)
    ]


def _cassette(path: Path, messages: list[str]) -> None:
    frames = [frame_doc(1.0, "client", ASK)]
    frames += [frame_doc(2.0 + i, "server", m) for i, m in enumerate(messages)]
    request = RecordedRequest("GET", URL, Headers(), EmptyBody())
    headers = Headers([("Upgrade", "websocket")])
    response = RecordedResponse(101, headers, WebSocketBody(frames), 1.0, 2.0 + FRAMES)
    Cassette(path, [Interaction(request, response)]).save()


class _Queued:
    """The baseline connection: the decoded messages handed over from a queue."""

    def __init__(self, messages: list[str]) -> None:
        self._sync: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._async: asyncio.Queue[str] = asyncio.Queue()
        for message in messages:
            self._sync.put(message)
            self._async.put_nowait(message)

    def send(self, message: str) -> None:
        pass

    def recv(self, timeout: float | None = None) -> str:
        return self._sync.get()

    async def asend(self, message: str) -> None:
        pass

    async def arecv(self) -> str:
        return await self._async.get()


def _parsed(message: str) -> int:
    """What a realtime client does with each event at the least: parse it, read its type."""
    return len(json.loads(message)["type"])


def _read(connection: object, use: Callable[[str], int] = len) -> float:
    started = now()
    connection.send(ASK)  # type: ignore[attr-defined]
    size = 0
    for _ in range(FRAMES):
        size += use(connection.recv())  # type: ignore[attr-defined]
    took = now() - started
    assert size > 0
    return took


async def _aread(send: object, recv: object, use: Callable[[str], int] = len) -> float:
    started = now()
    await send(ASK)  # type: ignore[operator]
    size = 0
    for _ in range(FRAMES):
        size += use(await recv())  # type: ignore[operator]
    took = now() - started
    assert size > 0
    return took


def _replay_sync(path: Path, use: Callable[[str], int] = len) -> float:
    with CassetteSession(path, on_unused="ignore") as session:
        return _read(realtime_of(session).connect(Handshake(URL), _never), use)


async def _replay_async(path: Path, use: Callable[[str], int] = len) -> float:
    async with CassetteSession(path, on_unused="ignore") as session:
        connection = await realtime_of(session).aconnect(Handshake(URL), _anever)
        return await _aread(connection.send, connection.recv, use)


async def _queue_async(messages: list[str], use: Callable[[str], int] = len) -> float:
    queued = _Queued(messages)
    return await _aread(queued.asend, queued.arecv, use)


def _never(handshake: Handshake) -> object:
    raise AssertionError("a replay opens no connection")


async def _anever(handshake: Handshake) -> object:
    raise AssertionError("a replay opens no connection")


# -- 12b: recording ------------------------------------------------------------------------


_SERVER = """
import asyncio, json, sys
from websockets.asyncio.server import serve

EVENTS = json.loads(sys.stdin.readline())

async def answer(ws):
    async for _ in ws:
        for event in EVENTS:
            await ws.send(event)

async def main():
    async with serve(answer, "127.0.0.1", 0, compression=None) as server:
        print(next(iter(server.sockets)).getsockname()[1], flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


class _Server:
    """A loopback websockets server in a process of its own (as a provider's server is: it
    shares no interpreter lock with the client), answering each client event with the given
    text events at once. It ends when its stdin closes."""

    def __init__(self, events: list[str]) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        self._process.stdin.write(json.dumps(events) + "\n")
        self._process.stdin.flush()
        port = int(self._process.stdout.readline())
        self.uri = f"ws://127.0.0.1:{port}/v1/realtime"

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=30)


def _deliveries(uri: str) -> list[float]:
    """Seconds from the client's send to each server event's recv(), sync client."""
    times = []
    with websockets.sync.client.connect(uri, compression=None) as ws:
        started = now()
        ws.send(ASK)
        for _ in range(BURST):
            ws.recv()
            times.append(now() - started)
    return times


async def _adeliveries(uri: str) -> list[float]:
    times = []
    async with websockets.asyncio.client.connect(uri, compression=None) as ws:
        started = now()
        await ws.send(ASK)
        for _ in range(BURST):
            await ws.recv()
            times.append(now() - started)
    return times


def _recording(path: Path, uri: str) -> list[float]:
    with CassetteSession(path, record="all") as session:
        undo = patch_websockets(session)
        try:
            return _deliveries(uri)
        finally:
            undo()


async def _arecording(path: Path, uri: str) -> list[float]:
    async with CassetteSession(path, record="all") as session:
        undo = patch_websockets(session)
        try:
            return await _adeliveries(uri)
        finally:
            undo()


def _recorded_frames(path: Path) -> int:
    (interaction,) = load_cassette(path).interactions
    assert interaction.response is not None
    body = interaction.response.body
    assert isinstance(body, WebSocketBody)
    return len(body.frames)


def _record(work: Path) -> tuple[Table, dict[str, float]]:
    events = _messages()[:BURST]
    server = _Server(events)
    path = work / "recorded.msgpack"
    series: dict[str, list[list[float]]] = {
        k: [] for k in ("direct sync", "recording sync", "direct async", "recording async")
    }
    try:
        runs: dict[str, Callable[[], list[float]]] = {
            "direct sync": lambda: _deliveries(server.uri),
            "recording sync": lambda: _recording(path, server.uri),
            "direct async": lambda: asyncio.run(_adeliveries(server.uri)),
            "recording async": lambda: asyncio.run(_arecording(path, server.uri)),
        }
        for n in range(ROUNDS + 1):  # the first round warms each up and is not counted
            # Which of a pair goes first alternates: the one that follows the other meets
            # the server still closing the connection before it.
            pairs = [("direct sync", "recording sync"), ("direct async", "recording async")]
            order = [key for pair in pairs for key in (pair if n % 2 else pair[::-1])]
            took = {key: runs[key]() for key in order}
            if n:
                for key, times in took.items():
                    series[key].append(times)
        kept = _recorded_frames(path)
    finally:
        server.close()
    assert kept == BURST + 2, kept  # the client's event, the burst, the client's close
    medians = {k: [median(column) for column in zip(*v, strict=True)] for k, v in series.items()}
    table = Table(
        f"12b. Recording: each of a burst of {BURST} server events delivered to the websockets "
        f"client, directly and through a recording session (medians of {ROUNDS} rounds)",
        ["client", "first ms", "last ms", "added at worst ms", "goal", ""],
    )
    figures: dict[str, float] = {}
    for side in ("sync", "async"):
        base, ours = medians[f"direct {side}"], medians[f"recording {side}"]
        added = [o - b for o, b in zip(ours, base, strict=True)]
        worst = max(range(BURST), key=added.__getitem__)
        table.add(f"websockets {side}, direct", ms(base[0]), ms(base[-1]), "", "", "")
        table.add(
            f"websockets {side}, recording",
            ms(ours[0]),
            ms(ours[-1]),
            f"{added[worst] * 1e3:+.3f} (event {worst + 1})",
            "<= +1 ms",
            verdict(added[worst] <= GOAL_ADDED_S),
        )
        figures[f"added {side}"] = added[worst]
    table.note(
        "A frame's delivery: from the client's send of its one event to recv() returning that "
        "server event; the server (a websockets asyncio server in a process of its own) writes "
        "all of them at once, so what the client spends on each frame adds up along the burst. "
        "Direct and recording clients take turns, which goes first alternating round after "
        "round, each on a new connection opened before its time starts; a recording session "
        "per round, as each test has its own, its cassette written after the time is read."
    )
    return table, figures


def run(work: Path) -> tuple[list[Table], dict[str, float]]:
    messages = _messages()
    path = work / "realtime.msgpack"
    _cassette(path, messages)
    _read(_Queued(messages))  # warm-up
    _replay_sync(path)
    figures = {
        "queue sync": median([_read(_Queued(messages)) for _ in range(REPEATS)]),
        "replay sync": median([_replay_sync(path) for _ in range(REPEATS)]),
        "queue async": median([asyncio.run(_queue_async(messages)) for _ in range(REPEATS)]),
        "replay async": median([asyncio.run(_replay_async(path)) for _ in range(REPEATS)]),
        "parsed queue sync": median([_read(_Queued(messages), _parsed) for _ in range(REPEATS)]),
        "parsed replay sync": median([_replay_sync(path, _parsed) for _ in range(REPEATS)]),
        "parsed queue async": median(
            [asyncio.run(_queue_async(messages, _parsed)) for _ in range(REPEATS)]
        ),
        "parsed replay async": median(
            [asyncio.run(_replay_async(path, _parsed)) for _ in range(REPEATS)]
        ),
    }
    table = Table(
        f"12a. Replaying a {FRAMES:,}-frame WebSocket session against a queue of the same "
        f"decoded frames (median of {REPEATS})",
        ["figure", "per frame (us)", "ratio", "goal", ""],
    )
    for side in ("sync", "async"):
        base, replay = figures[f"queue {side}"], figures[f"replay {side}"]
        table.add(f"queue, {side}", us(base / FRAMES), "", "", "")
        table.add(
            f"replay, {side}",
            us(replay / FRAMES),
            ratio(replay / base),
            f"<= {GOAL}x",
            verdict(replay / base <= GOAL),
        )
    for side in ("sync", "async"):
        base, replay = figures[f"parsed queue {side}"], figures[f"parsed replay {side}"]
        table.add(f"  client parsing each event, queue, {side}", us(base / FRAMES), "", "", "")
        table.add(
            f"  client parsing each event, replay, {side}",
            us(replay / FRAMES),
            ratio(replay / base),
            "",
            verdict(None),
        )
    table.note(
        "The client code of the goal rows takes each message's length, so they compare the "
        "replay's own cost with a queue's. The information rows give the client the least an "
        "SDK does with an event (json.loads, then its type); the openai SDK also builds a "
        "pydantic model of it."
    )
    table.note(
        "Each replayed frame moves the virtual clock to its time (and the wall clock with it, "
        "through time-machine), is checked against the session's state under its lock and "
        "noted in the connection's log; an async frame that another task's work or wait "
        "could come before also lets the event loop turn. The queue does none of that."
    )
    recording, recorded = _record(work)
    return [table, recording], {**figures, **recorded}


if __name__ == "__main__":
    run_alone(run)
