"""A session gives its memory back when it ends: nothing the plugin keeps for the process (the
WebSocket hubs, the patches' tables) holds a finished session, its cassette or what it
replayed, so a suite of a thousand cassette tests holds one session at a time, not a thousand,
and the collector's full passes stay as short in the last test as in the first.
"""

import gc
import json
import weakref

import httpx
import pytest

from pytest_toolnexus import use_cassette
from pytest_toolnexus._realtime.hub import realtime_of
from pytest_toolnexus._seam.duplex import DuplexClosed, Handshake
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._store.cassette import (
    Cassette,
    EmptyBody,
    Interaction,
    JsonBody,
    RecordedRequest,
    RecordedResponse,
    WebSocketBody,
)
from pytest_toolnexus._store.ws_frames import frame_doc
from tests.support.plugin_projects import CHAT_CONFTEST

WS_URL = "wss://realtime.example.test/v1/realtime?model=m"
HTTP_URL = "https://api.example.test/v1/chat/completions"
JSON_TYPE = Headers([("content-type", "application/json")])


@pytest.fixture
def mixed_path(tmp_path):
    """One chat request over HTTP and one WebSocket session of two server frames."""
    chat = Interaction(
        RecordedRequest("POST", HTTP_URL, JSON_TYPE, JsonBody({"q": 1})),
        RecordedResponse(200, JSON_TYPE, JsonBody({"a": 1}), 0.01, 0.02),
    )
    frames = [frame_doc(10.0 * n, "server", json.dumps({"n": n})) for n in (1, 2)]
    frames.append(frame_doc(30.0, "server", None, code=1000))
    socket = Interaction(
        RecordedRequest("GET", WS_URL, Headers(), EmptyBody()),
        RecordedResponse(
            101, Headers([("Upgrade", "websocket")]), WebSocketBody(frames), 2.0, 30.0
        ),
    )
    path = tmp_path / "mixed.msgpack"
    Cassette(path, [chat, socket]).save()
    return path


def _replay(path):
    """Replay both interactions of ``path`` in a block; returns a weak reference to the
    session."""
    with use_cassette(path) as session:
        with httpx.Client() as client:
            assert client.post(HTTP_URL, json={"q": 1}).json() == {"a": 1}
        connection = realtime_of(session).connect(Handshake(WS_URL), None)
        assert [json.loads(connection.recv())["n"] for _ in range(2)] == [1, 2]
        # The close is raised to every read after it: each raise must keep no frame.
        with pytest.raises(DuplexClosed):
            connection.recv()
        with pytest.raises(DuplexClosed):
            connection.recv()
        return weakref.ref(session)


def test_a_session_that_served_http_and_a_websocket_is_freed_once_dropped(mixed_path):
    ref = _replay(mixed_path)

    gc.collect()

    assert ref() is None, "the finished session is still held"


def test_a_second_session_of_the_same_process_frees_too(mixed_path):
    first = _replay(mixed_path)
    second = _replay(mixed_path)

    gc.collect()

    assert (first(), second()) == (None, None)


THREE_TESTS_THEN_A_COUNT = """
import gc

import pytest

from pytest_toolnexus import CassetteSession


@pytest.mark.cassette
def test_one(chat):
    chat("one")


@pytest.mark.cassette
def test_two(chat):
    chat("two")


@pytest.mark.cassette
def test_three(chat):
    chat("three")


def test_no_session_outlives_its_test():
    gc.collect()
    alive = [o for o in gc.get_objects() if isinstance(o, CassetteSession)]
    assert alive == []
"""


def test_a_suites_finished_sessions_are_not_kept_for_the_run(pytester, emulator):
    pytester.makeconftest(CHAT_CONFTEST)
    pytester.makepyfile(test_release=THREE_TESTS_THEN_A_COUNT)
    args = ("-p", "no:randomly", "-p", "no:hypothesispytest")
    # The first run records the three cassettes, the second replays them: both are checked.
    # In a process of its own each time: an in-process run's hook recorder keeps every call.
    pytester.runpytest_subprocess(*args, "--cassette-record=once").assert_outcomes(passed=4)
    replayed = pytester.runpytest_subprocess(*args)

    replayed.assert_outcomes(passed=4)
    assert len(emulator.requests) == 3, "the second run replayed; only the first reached it"
