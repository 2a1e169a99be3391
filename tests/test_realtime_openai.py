"""The openai SDK's Realtime client, sync and async, recorded and replayed unmodified (issue 21):
a pytester project records a session with a fake Realtime server on loopback (a session.update,
a text turn, an audio turn in base64 chunks and a function call round trip), then replays it
with the server stopped and every socket refused. The same events come back, each at the very
offset it arrived at while recording (on the virtual clock), without sleeping; a client that
answers the function call a second later sees the server's answer move by as much.
"""

import json
import socket
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SERVER_SOURCE = (Path(__file__).parent / "support" / "fake_realtime.py").read_text()

CONFTEST = """
import os

import pytest

import fake_realtime

PORT = {port}
fake_realtime.THINK = 0.8  # four answers: a recording of over 3 s


@pytest.fixture(scope="session")
def realtime_url():
    if os.environ.get("REALTIME_REPLAY"):
        yield f"http://127.0.0.1:{{PORT}}/v1"  # nothing listens: the cassette answers
        return
    port, stop = fake_realtime.start(PORT)
    yield f"http://127.0.0.1:{{port}}/v1"
    stop()
"""

COMMON = """
import base64
import json
import os
import socket
import time

import pytest

from pytest_toolnexus import NetworkBlockedError, load_cassette
from pytest_toolnexus._timing.virtual import VirtualClock

LATE = float(os.environ.get("REALTIME_LATE", "0"))
REPLAY = bool(os.environ.get("REALTIME_REPLAY"))
USER = {"type": "message", "role": "user"}


def said(text):
    return {**USER, "content": [{"type": "input_text", "text": text}]}


def check(cassette, events):
    kinds = [e.type for e in events]
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    audio = b"".join(
        base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta"
    )
    args = "".join(
        e.delta for e in events if e.type == "response.function_call_arguments.delta"
    )
    assert text == "Hi there! It is sunny. "
    assert audio == bytes([0]) * 48 + bytes([1]) * 48 + bytes([2]) * 48
    assert args == '{"city":"Paris"}'
    print("EVENTS", json.dumps(kinds))
    (log,) = cassette.websockets
    assert log.replayed == REPLAY
    if not REPLAY:
        return  # the cassette is written when the test is over
    recorded = load_cassette(cassette.path).interactions[0].response.body.frames
    server_t = [f["t"] for f in recorded if f["from"] == "server"]
    client_t = [f["t"] for f in recorded if f["from"] == "client"]
    got = [p.t for p in log.received]
    with pytest.raises(NetworkBlockedError):
        socket.create_connection(("127.0.0.1", int(os.environ["REALTIME_PORT"])))
    if not LATE:
        # A replay waits on the virtual clock, not the wall's: the session's virtual time
        # reached the last event's recorded offset (judged on that clock, not by how fast
        # a busy machine ran it).
        assert isinstance(cassette.clock, VirtualClock)
        assert cassette.elapsed >= server_t[-1] / 1000.0 - 1e-6
        assert got == server_t  # 0.00 ms: each event at its recorded offset
        print("EXACT", len(got))
        return
    # The function call's output is client frame #6 (after the session update, two items and
    # three response.create): everything the server sent after it moves with it.
    output = 6
    sent_t = [p.t for p in log.sent]
    shift = sent_t[output] - client_t[output]
    assert shift > LATE * 1000 - 200
    answered = [f["t"] > client_t[output] for f in recorded if f["from"] == "server"]
    for before, now, after in zip(server_t, got, answered):
        assert now == pytest.approx(before + shift if after else before, abs=1e-6)
    print("SHIFTED", round(shift, 3), sum(answered))
"""

SYNC_TEST = (
    COMMON
    + """
from openai import OpenAI


def until(connection, last):
    events = []
    for event in connection:
        events.append(event)
        if event.type == last:
            return events
    raise AssertionError(f"the connection ended before {last}")


@pytest.mark.cassette
def test_realtime_sync(cassette, realtime_url):
    client = OpenAI(api_key="test-key", base_url=realtime_url)
    events = []
    with client.realtime.connect(model="gpt-realtime") as connection:
        connection.session.update(session={"type": "realtime", "instructions": "be brief"})
        events += until(connection, "session.updated")
        connection.conversation.item.create(item=said("Say hi"))
        connection.response.create()
        events += until(connection, "response.done")
        connection.response.create(response={"output_modalities": ["audio"]})
        events += until(connection, "response.done")
        connection.conversation.item.create(item=said("What is the weather in Paris?"))
        connection.response.create()
        events += until(connection, "response.done")
        time.sleep(LATE)  # the client takes its time to call the tool
        connection.conversation.item.create(
            item={"type": "function_call_output", "call_id": "call_1", "output": '{"temp": 21}'}
        )
        connection.response.create()
        events += until(connection, "response.done")
    check(cassette, events)
"""
)

ASYNC_TEST = (
    COMMON
    + """
import asyncio

from openai import AsyncOpenAI


async def until(connection, last):
    events = []
    async for event in connection:
        events.append(event)
        if event.type == last:
            return events
    raise AssertionError(f"the connection ended before {last}")


@pytest.mark.asyncio
@pytest.mark.cassette
async def test_realtime_async(cassette, realtime_url):
    client = AsyncOpenAI(api_key="test-key", base_url=realtime_url)
    events = []
    async with client.realtime.connect(model="gpt-realtime") as connection:
        await connection.session.update(session={"type": "realtime", "instructions": "be brief"})
        events += await until(connection, "session.updated")
        await connection.conversation.item.create(item=said("Say hi"))
        await connection.response.create()
        events += await until(connection, "response.done")
        await connection.response.create(response={"output_modalities": ["audio"]})
        events += await until(connection, "response.done")
        await connection.conversation.item.create(item=said("What is the weather in Paris?"))
        await connection.response.create()
        events += await until(connection, "response.done")
        await asyncio.sleep(LATE)
        await connection.conversation.item.create(
            item={"type": "function_call_output", "call_id": "call_1", "output": '{"temp": 21}'}
        )
        await connection.response.create()
        events += await until(connection, "response.done")
    check(cassette, events)
"""
)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def printed(result, word):
    """What the inner tests printed after ``word`` (``-s`` puts it after the test's name)."""
    return [line.split(word, 1)[1] for line in result.outlines if word in line]


def events_of(result):
    return [json.loads(text) for text in printed(result, "EVENTS ")]


@pytest.fixture
def project(pytester, monkeypatch):
    port = free_port()
    pytester.makepyfile(fake_realtime=SERVER_SOURCE)
    pytester.makeconftest(CONFTEST.format(port=port))
    pytester.makepyfile(test_sync=SYNC_TEST, test_async=ASYNC_TEST)
    monkeypatch.setenv("REALTIME_PORT", str(port))
    monkeypatch.delenv("REALTIME_REPLAY", raising=False)
    monkeypatch.delenv("REALTIME_LATE", raising=False)
    return pytester


def test_openai_realtime_records_then_replays_offline_at_the_recorded_offsets(project, monkeypatch):
    recorded = project.runpytest_subprocess("-p", "no:randomly", "-s", "--cassette-record=once")
    recorded.assert_outcomes(passed=2)
    recorded.stdout.fnmatch_lines(["*2 recorded, 2 written*"])
    cassettes = sorted(p.name for p in (project.path / "cassettes").rglob("*.msgpack"))
    assert cassettes == ["test_realtime_async.msgpack", "test_realtime_sync.msgpack"]

    monkeypatch.setenv("REALTIME_REPLAY", "1")
    replayed = project.runpytest_subprocess("-p", "no:randomly", "-s")

    replayed.assert_outcomes(passed=2)
    assert events_of(replayed) == events_of(recorded)
    expected = [
        "session.created",
        "session.updated",
        "conversation.item.added",
        "response.created",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.done",
    ]
    assert events_of(replayed)[0][: len(expected)] == expected
    assert printed(replayed, "EXACT ") == ["30", "30"]
    assert "UnusedInteractionsWarning" not in replayed.stdout.str()


def test_a_client_that_answers_late_sees_the_answer_move_with_it(project, monkeypatch):
    project.runpytest_subprocess("-p", "no:randomly", "--cassette-record=once").assert_outcomes(
        passed=2
    )

    monkeypatch.setenv("REALTIME_REPLAY", "1")
    monkeypatch.setenv("REALTIME_LATE", "1.0")
    late = project.runpytest_subprocess("-p", "no:randomly", "-s")

    late.assert_outcomes(passed=2)
    shifted = [text.split() for text in printed(late, "SHIFTED ")]
    assert len(shifted) == 2
    for shift, moved in shifted:
        assert 800.0 < float(shift) <= 1000.0
        # conversation.item.added, response.created, three text deltas, text done, response.done
        assert int(moved) == 7
