"""urllib3 served through the seam, and requests on it: unmodified clients, streamed.

The project runs twice, as a user would: once recording against the loopback emulator, then,
with the emulator stopped, replaying. Each of its tests writes what it saw (each piece's text,
and its arrival on the virtual clock and on the real one) to a file; the assertions here
compare the two runs with each other and with what the emulator sent.
"""

import json

import pytest

from tests.support.emulator import Emulator
from tests.support.plugin_projects import stored_times
from tests.support.realtime import assert_did_not_sleep, assert_stamped_in_flight

pytest_plugins = ["pytester"]

CLIENT_TESTS = """
import json
import os
import time

import pytest
import requests
import urllib3

URL = os.environ["EMULATOR_URL"] + "/v1/chat/completions"
BODY = {"model": "m", "messages": [{"role": "user", "content": "Count."}]}


def wall():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def report(name, cassette, **seen):
    sent = cassette.requests[0]
    seen.update(
        url=sent.url,
        replayed=sent.replayed,
        deliveries=[d - sent.sent_at for d in sent.deliveries],
        complete=sent.complete,
        requests=len(cassette.requests),
    )
    with open(os.environ["SEEN"], "a") as out:
        out.write(json.dumps({"test": name, **seen}) + "\\n")


def delta(line):
    if not line.startswith(b"data: {"):
        return None
    choices = json.loads(line[len(b"data: "):])["choices"]
    return choices[0]["delta"].get("content") if choices else None


class Timed:
    def __init__(self):
        self.texts, self.virtual, self.real = [], [], []
        self.start, self.start_wall = time.monotonic(), wall()

    def saw(self, text):
        if text:
            self.virtual.append(time.monotonic() - self.start)
            self.real.append(wall() - self.start_wall)
            self.texts.append(text)

    def seen(self):
        return {
            "texts": self.texts,
            "virtual": self.virtual,
            "real": self.real,
            "before": self.start_wall,
        }


@pytest.mark.cassette
def test_requests_iter_lines(cassette):
    timed = Timed()
    with requests.post(URL, json={**BODY, "stream": True}, stream=True) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            timed.saw(delta(line))
    report("iter_lines", cassette, **timed.seen())


@pytest.mark.cassette
def test_requests_iter_content(cassette):
    timed, buffer = Timed(), b""
    with requests.post(URL, json={**BODY, "stream": True}, stream=True) as response:
        for piece in response.iter_content(chunk_size=None):
            buffer += piece
            while b"\\n\\n" in buffer:
                event, buffer = buffer.split(b"\\n\\n", 1)
                timed.saw(delta(event))
    report("iter_content", cassette, **timed.seen())


@pytest.mark.cassette
def test_requests_json(cassette):
    reply = requests.post(URL, json=BODY)
    assert reply.status_code == 200
    report("json", cassette, texts=[reply.json()["choices"][0]["message"]["content"]])


@pytest.mark.cassette
def test_urllib3_stream(cassette):
    timed, buffer = Timed(), b""
    with urllib3.PoolManager() as pool:
        response = pool.request("POST", URL, json={**BODY, "stream": True}, preload_content=False)
        for piece in response.stream():
            buffer += piece
            while b"\\n\\n" in buffer:
                event, buffer = buffer.split(b"\\n\\n", 1)
                timed.saw(delta(event))
        response.release_conn()
    report("stream", cassette, **timed.seen())


@pytest.mark.cassette
def test_urllib3_read_amt(cassette):
    pieces = []
    response = urllib3.request("POST", URL, json={**BODY, "stream": True}, preload_content=False)
    while True:
        piece = response.read(64)
        if not piece:
            break
        assert len(piece) == 64 or not response.read(1)
        pieces.append(piece.decode("latin-1"))
    response.release_conn()
    texts = [delta(e) for e in "".join(pieces).encode("latin-1").split(b"\\n\\n")]
    report("read_amt", cassette, texts=[t for t in texts if t], sizes=[len(p) for p in pieces])
"""

# Gaps long enough that each stream spans over two seconds: a replay that slept them cannot be
# taken for one slowed by a busy machine.
DELAY = 0.6
EVENTS = 5
TESTS = 5


def seen_by(path):
    return {entry["test"]: entry for entry in map(json.loads, path.read_text().splitlines())}


def record_then_replay(project, monkeypatch):
    """Record the project against the emulator, stop the emulator, replay: what each run's
    tests saw, and what the emulator sent."""
    emulator = Emulator(events=EVENTS, delay=DELAY).start()
    try:
        monkeypatch.setenv("EMULATOR_URL", emulator.base_url)
        monkeypatch.setenv("SEEN", str(project.path / "recorded.jsonl"))
        recording = project.runpytest_subprocess("--cassette-record=once", "-p", "no:randomly")
        recording.assert_outcomes(passed=TESTS)
    finally:
        emulator.stop()
    monkeypatch.setenv("SEEN", str(project.path / "replayed.jsonl"))
    replaying = project.runpytest_subprocess("-p", "no:randomly")
    replaying.assert_outcomes(passed=TESTS)
    replaying.stdout.fnmatch_lines(
        [f"*cassettes: {TESTS} used, {TESTS} replayed, 0 recorded, 0 written*"]
    )
    return (
        seen_by(project.path / "recorded.jsonl"),
        seen_by(project.path / "replayed.jsonl"),
        emulator.responses,
    )


ORDER = ("iter_lines", "iter_content", "json", "stream", "read_amt")  # as the tests run
STREAMED = ("iter_lines", "iter_content", "stream")
TEST_OF = {
    "iter_lines": "requests_iter_lines",
    "iter_content": "requests_iter_content",
    "stream": "urllib3_stream",
}


def test_requests_and_urllib3_record_then_replay_offline_on_the_recorded_times(
    pytester, monkeypatch
):
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_clients=CLIENT_TESTS)

    recorded, replayed, sent = record_then_replay(pytester, monkeypatch)

    # Given: each test reached the emulator once while recording, and wrote its cassette.
    assert len(sent) == TESTS
    assert sorted(p.stem for p in pytester.path.glob("cassettes/test_clients/*.msgpack")) == [
        "test_requests_iter_content",
        "test_requests_iter_lines",
        "test_requests_json",
        "test_urllib3_read_amt",
        "test_urllib3_stream",
    ]
    words = [
        json.loads(e.data.decode()[len("data: ") :])["choices"][0]["delta"]["content"]
        for e in sent[0].events
        if e.kind == "delta"
    ]
    assert len(words) == EVENTS
    # Then: the replay, offline, gave every client what the recording did.
    for name in ORDER:
        live, again = recorded[name], replayed[name]
        assert (live["replayed"], again["replayed"]) == (False, True)
        assert live["requests"] == again["requests"] == 1
        assert live["url"] == again["url"]
        assert live["url"].endswith("/v1/chat/completions")
        assert live["complete"]
        assert again["complete"]
        assert again["texts"] == live["texts"]
    for name in (*STREAMED, "read_amt"):
        assert recorded[name]["texts"] == words
    assert recorded["json"]["texts"] == ["".join(words)]
    # read(64) fills each read across chunks, recording and replaying alike.
    assert recorded["read_amt"]["sizes"] == replayed["read_amt"]["sizes"]
    assert set(recorded["read_amt"]["sizes"][:-1]) == {64}

    for name in STREAMED:
        live, again, written = recorded[name], replayed[name], sent[ORDER.index(name)]
        assert written.streamed
        # Recording: each delta was stamped when it passed the recorder, after the emulator
        # began writing it and before the client had it. Stamps count from when the request was
        # sent, which lies between ``before`` (read just before the call) and the emulator's
        # ``received_at``. Both processes read CLOCK_MONOTONIC, so on any machine, however
        # loaded: ``began - received_at <= stamp <= read - before``. The deltas are pieces 1 to
        # EVENTS, after the role chunk.
        began = [event.started_at - written.received_at for event in written.events]
        began = [b for b, e in zip(began, written.events, strict=True) if e.kind == "delta"]
        stamps = live["deliveries"][1 : EVENTS + 1]
        read = live["real"]  # seconds since ``before``
        assert len(stamps) == EVENTS, name
        assert_stamped_in_flight(began, stamps, read, what=f"recording {name}")
        # And the client had the first delta while the emulator still held the last one back,
        # seconds later: a bridge that buffered the stream would hand over nothing until the end.
        first_read = live["before"] + read[0]
        last_began = written.received_at + began[-1]
        assert first_read < last_began, (name, first_read, last_began)

        # Replaying: each piece was delivered at its recorded offset ...
        cassette = pytester.path / f"cassettes/test_clients/test_{TEST_OF[name]}.msgpack"
        stored = stored_times(cassette)
        assert again["deliveries"] == pytest.approx(stored, abs=1e-3), name
        # ... and the client saw each delta then, on the (virtual) time.monotonic: the stored
        # times, which the recording session's own deliveries may miss by the ms a loaded
        # machine puts between stamping a piece and handing it on ...
        deltas = stored[1 : EVENTS + 1]
        start = deltas[0] - again["virtual"][0]
        assert [start + t for t in again["virtual"]] == pytest.approx(deltas, abs=1e-3), name
        # ... without sleeping the seconds of gaps.
        assert_did_not_sleep(again["real"][-1], deltas[-1], what=f"replaying {name}")
