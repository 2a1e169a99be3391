"""Benchmark 12: replaying a 1,000-frame WebSocket session (issue 21's speed goal).

The same client code reads 1,000 server frames (OpenAI Realtime text deltas, 1 ms apart, after
one client frame) from two sources, in one run:

* **baseline**: an in-memory ``asyncio.Queue`` (``queue.SimpleQueue`` for sync) holding the same
  decoded messages;
* **replay**: a cassette session's replayed connection (``realtime_of(session).aconnect``, or
  ``connect`` for sync), on the virtual clock, the cassette already open.

Only the reading loop is timed, on the real clock. The goal (issue 21): at most 1.5x the queue.
"""

from __future__ import annotations

import asyncio
import json
import queue
from pathlib import Path

from _common import Table, median, now, ratio, run_alone, us, verdict

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
)
from pytest_toolnexus._store.ws_frames import frame_doc

FRAMES = 1000
REPEATS = 5
GOAL = 1.5
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


def _read(connection: object) -> float:
    started = now()
    connection.send(ASK)  # type: ignore[attr-defined]
    size = 0
    for _ in range(FRAMES):
        size += len(connection.recv())  # type: ignore[attr-defined]
    took = now() - started
    assert size > 0
    return took


async def _aread(send: object, recv: object) -> float:
    started = now()
    await send(ASK)  # type: ignore[operator]
    size = 0
    for _ in range(FRAMES):
        size += len(await recv())  # type: ignore[operator]
    took = now() - started
    assert size > 0
    return took


def _replay_sync(path: Path) -> float:
    with CassetteSession(path, on_unused="ignore") as session:
        return _read(realtime_of(session).connect(Handshake(URL), _never))


async def _replay_async(path: Path) -> float:
    async with CassetteSession(path, on_unused="ignore") as session:
        connection = await realtime_of(session).aconnect(Handshake(URL), _anever)
        return await _aread(connection.send, connection.recv)


async def _queue_async(messages: list[str]) -> float:
    queued = _Queued(messages)
    return await _aread(queued.asend, queued.arecv)


def _never(handshake: Handshake) -> object:
    raise AssertionError("a replay opens no connection")


async def _anever(handshake: Handshake) -> object:
    raise AssertionError("a replay opens no connection")


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
    }
    table = Table(
        f"12. Replaying a {FRAMES:,}-frame WebSocket session against a queue of the same "
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
    table.note(
        "An async replay waits for each frame on the virtual clock's await_until, which lets "
        "every other task run first (_timing/virtual.py's settle): that, not the frames, is "
        "its cost."
    )
    return [table], figures


if __name__ == "__main__":
    run_alone(run)
