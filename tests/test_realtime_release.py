"""When an async replayed WebSocket hands a frame over (issue 21, the speed goal's side): a
frame nothing else could come before is handed over at once, on time, and a frame due after
another task's wait, or while another task has work to do, waits for it as before.
"""

import asyncio
import json
import time

import anyio
import pytest

from pytest_toolnexus._realtime.hub import realtime_of
from pytest_toolnexus._seam.duplex import DuplexClosed, Handshake
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

URL = "wss://realtime.example.test/v1/realtime?model=m"
SERVER_AT = [10.0, 20.0, 30.0, 40.0]


def _never_sync(handshake):
    raise AssertionError("a replay opens no connection")


def _saved(path, frames, end):
    """A cassette at ``path`` of one WebSocket session with ``frames``, ending at ``end`` ms."""
    request = RecordedRequest("GET", URL, Headers(), EmptyBody())
    response = RecordedResponse(
        101, Headers([("Upgrade", "websocket")]), WebSocketBody(frames), 2.0, end
    )
    Cassette(path, [Interaction(request, response)]).save()
    return path


@pytest.fixture
def session_path(tmp_path):
    """Four server frames 10 ms apart after the handshake, then the server closes."""
    frames = [frame_doc(t, "server", json.dumps({"n": n})) for n, t in enumerate(SERVER_AT)]
    frames.append(frame_doc(50.0, "server", None, code=1000))
    return _saved(tmp_path / "four.msgpack", frames, 50.0)


async def _read_all(connection, clock, start, seen):
    try:
        while True:
            message = await connection.recv()
            seen.append((f"frame {json.loads(message)['n']}", round(clock.now() - start, 6)))
    except DuplexClosed:
        seen.append(("closed", round(clock.now() - start, 6)))


def test_a_reader_alone_gets_each_frame_at_its_recorded_time(session_path):
    seen = []

    async def main():
        async with CassetteSession(session_path) as session:
            clock = session.clock
            start = clock.now()
            connection = await realtime_of(session).aconnect(Handshake(URL), None)
            await _read_all(connection, clock, start, seen)
            return realtime_of(session).connections[0]

    log = asyncio.run(main())
    assert seen == [
        ("frame 0", 0.01),
        ("frame 1", 0.02),
        ("frame 2", 0.03),
        ("frame 3", 0.04),
        ("closed", 0.05),
    ]
    assert [p.t for p in log.received] == [*SERVER_AT, 50.0]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_another_tasks_sleep_due_between_two_frames_wakes_between_them(session_path, backend):
    seen = []

    async def main():
        async with CassetteSession(session_path) as session:
            clock = session.clock
            start = clock.now()
            connection = await realtime_of(session).aconnect(Handshake(URL), None)

            async def sleeper():
                await anyio.sleep(0.023)  # from 2 ms, when the handshake was answered
                seen.append(("slept", round(clock.now() - start, 6)))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_read_all, connection, clock, start, seen)
                tasks.start_soon(sleeper)

    anyio.run(main, backend=backend)
    assert seen == [
        ("frame 0", 0.01),
        ("frame 1", 0.02),
        ("slept", 0.025),
        ("frame 2", 0.03),
        ("frame 3", 0.04),
        ("closed", 0.05),
    ]


def test_work_another_task_has_ready_runs_before_the_next_frame_moves_time(session_path):
    """A task with many steps to take at the time of frame 1 takes all of them before
    frame 2 is handed over, and sees no time pass while it does."""
    seen = []

    async def main():
        async with CassetteSession(session_path) as session:
            clock = session.clock
            start = clock.now()
            connection = await realtime_of(session).aconnect(Handshake(URL), None)
            first = await connection.recv()
            seen.append(("frame 0", round(clock.now() - start, 6)))

            async def busy():
                for _ in range(20):
                    await asyncio.sleep(0)
                seen.append(("busy done", round(clock.now() - start, 6)))

            task = asyncio.get_running_loop().create_task(busy())
            await _read_all(connection, clock, start, seen)
            await task
            return first

    assert json.loads(asyncio.run(main())) == {"n": 0}
    assert seen == [
        ("frame 0", 0.01),
        ("busy done", 0.01),
        ("frame 1", 0.02),
        ("frame 2", 0.03),
        ("frame 3", 0.04),
        ("closed", 0.05),
    ]


async def _never(handshake):
    raise AssertionError("a replay opens no connection")


def test_on_real_time_a_close_ends_a_reader_waiting_out_a_long_gap(tmp_path):
    # timing="real": the next frame is due 30 s after the handshake; the connection is closed
    # from another task 0.1 s in, and the waiting reader hears of it at once.
    frames = [frame_doc(30_000.0, "server", json.dumps({"n": 0}))]
    path = _saved(tmp_path / "gap.msgpack", frames, 30_000.0)

    async def main():
        async with CassetteSession(path, timing="real", on_unused="ignore") as session:
            connection = await realtime_of(session).aconnect(Handshake(URL), _never)
            loop = asyncio.get_running_loop()
            started = loop.time()

            async def close_soon():
                await asyncio.sleep(0.1)
                await connection.close()

            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(close_soon())
                with pytest.raises(DuplexClosed) as closed:
                    await connection.recv()
            return closed.value, loop.time() - started

    closed, took = asyncio.run(main())

    assert closed.by == "client"
    assert took < 5  # not the 30 s gap


def test_a_released_connection_is_forgotten_and_gives_what_it_left(session_path):
    # What serve does after each connection, so a server replaying one session again and
    # again (allow_repeats) keeps none of their frames.
    async def main():
        async with CassetteSession(
            session_path, timing="instant", allow_repeats=True, on_unused="ignore"
        ) as session:
            hub = realtime_of(session)
            left = []
            for _ in range(3):
                connection = await hub.aconnect(Handshake(URL), _never)
                await connection.recv()  # one frame of four read
                await connection.close()
                assert len(session.websockets) == 1
                left.append(hub.release(connection.playback))
            return left, session.websockets, hub.leftovers()

    left, logs, still = asyncio.run(main())

    assert (
        left
        == [
            [
                f"WebSocket {URL}: 3 recorded server frame(s) were never read (the first: "
                '{"n": 1} at 20.0 ms)'
            ]
        ]
        * 3
    )
    assert logs == []
    assert still == []


def test_on_real_time_a_close_from_another_thread_ends_a_sync_reader_s_wait(tmp_path):
    # The sync client's mirror of the async test above: the next frame is due 30 s after the
    # handshake, and another thread closes the connection 0.1 s in.
    import threading

    frames = [frame_doc(30_000.0, "server", json.dumps({"n": 0}))]
    path = _saved(tmp_path / "gap.msgpack", frames, 30_000.0)

    with CassetteSession(path, timing="real", on_unused="ignore") as session:
        connection = realtime_of(session).connect(Handshake(URL), _never_sync)
        closer = threading.Timer(0.1, connection.close)
        closer.start()
        started = time.monotonic()
        with pytest.raises(DuplexClosed) as closed:
            connection.recv()
        took = time.monotonic() - started
        closer.join()

    assert closed.value.by == "client"
    assert took < 5  # not the 30 s gap


def test_on_real_time_a_sync_timeout_is_a_timeout_and_a_frame_due_first_comes_first(tmp_path):
    frames = [frame_doc(50.0, "server", json.dumps({"n": 0}))]
    frames.append(frame_doc(30_000.0, "server", json.dumps({"n": 1})))
    path = _saved(tmp_path / "two.msgpack", frames, 30_000.0)

    with CassetteSession(path, timing="real", on_unused="ignore") as session:
        connection = realtime_of(session).connect(Handshake(URL), _never_sync)
        assert json.loads(connection.recv(timeout=5)) == {"n": 0}  # due in 50 ms: it comes
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            connection.recv(timeout=0.2)  # the next is 30 s away
        took = time.monotonic() - started

    assert 0.19 <= took < 5
