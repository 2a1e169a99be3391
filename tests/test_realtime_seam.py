"""The duplex seam (issue 21): a WebSocket client written to it is recorded and replayed by a
cassette session, with no socket on replay, server frames released causally on the virtual
clock, client frames matched semantically and in order, and leftovers reported.
"""

import json
import time

import anyio
import pytest

from pytest_toolnexus._patching import websockets as ws_patching
from pytest_toolnexus._realtime import replay as replay_module
from pytest_toolnexus._realtime.hub import realtime_of
from pytest_toolnexus._seam.duplex import Accepted, DuplexClosed, Handshake
from pytest_toolnexus._seam.errors import CassetteMissError, ReplayError
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

URL = "wss://realtime.example.test/v1/realtime?model=m"
HANDSHAKE = Handshake(URL, Headers([("Authorization", "Bearer not-a-real-key-0")]))


class EchoServer:
    """A live duplex connection: answers each JSON event with two events, a little later."""

    def __init__(self, handshake):
        self.accepted = Accepted(101, Headers([("Upgrade", "websocket")]))
        self._pending = [json.dumps({"type": "session.created"})]
        self.closed = None

    def send(self, message):
        event = json.loads(message)
        self._pending += [
            json.dumps({"type": "ack", "of": event["type"]}),
            json.dumps({"type": "done", "of": event["type"]}),
        ]

    def recv(self, timeout=None):
        if not self._pending:
            raise DuplexClosed(1000, "bye", by="server")
        time.sleep(0.005)
        return self._pending.pop(0)

    def close(self, code=1000, reason=""):
        self.closed = (code, reason)


def test_a_session_is_recorded_then_replayed_without_the_server(tmp_path):
    path = tmp_path / "rt.msgpack"
    with CassetteSession(path, record="all", timing="real") as session:
        connection = realtime_of(session).connect(HANDSHAKE, EchoServer)
        first = connection.recv()
        connection.send(json.dumps({"type": "session.update", "event_id": "evt_1"}))
        answers = [connection.recv(), connection.recv()]
        connection.close()
    recorded = load_cassette(path, validate=True).interactions[0]
    assert recorded.request.method == "GET"
    assert recorded.request.url == URL
    assert recorded.request.headers["authorization"] == "REDACTED"
    assert recorded.response.status == 101
    frames = recorded.response.body.frames
    assert [(f["from"], f["kind"]) for f in frames] == [
        ("server", "text"),
        ("client", "text"),
        ("server", "text"),
        ("server", "text"),
        ("client", "close"),
    ]
    assert frames[1]["data"] == {"type": "session.update", "event_id": "evt_1"}
    times = [f["t"] for f in frames]
    assert times == sorted(times)
    assert times[0] >= 5.0  # the server's first event came after its 5 ms pause

    with CassetteSession(path, record="none") as replay:
        hub = realtime_of(replay)

        def never(handshake):
            raise AssertionError("replay must not open a connection")

        again = hub.connect(HANDSHAKE, never)
        assert again.recv() == first
        # event_id is volatile: a fresh one matches.
        again.send(json.dumps({"event_id": "evt_99", "type": "session.update"}))
        assert [again.recv(), again.recv()] == answers
        again.close()
        (log,) = hub.connections
        assert log.replayed
        # Arrival offsets on the virtual clock equal the recorded ones exactly.
        assert [round(p.t, 3) for p in log.received] == [times[0], times[2], times[3]]
        assert replay.requests[0].method == "GET"
        assert replay.requests[0].replayed
        assert hub.leftovers() == []


def build(path, frames, t_headers=2.0, allow=()):
    request = RecordedRequest("GET", URL, Headers(), EmptyBody())
    response = RecordedResponse(
        101, Headers([("Upgrade", "websocket")]), WebSocketBody(frames), t_headers, 160.0
    )
    Cassette(path, [Interaction(request, response)]).save(allow_secrets=allow)
    return path


CAUSAL = [
    frame_doc(5.0, "server", '{"type":"hello"}'),
    frame_doc(20.0, "client", '{"type":"a"}'),
    frame_doc(50.0, "server", '{"type":"a1"}'),
    frame_doc(80.0, "server", '{"type":"a2"}'),
    frame_doc(100.0, "client", '{"type":"b"}'),
    frame_doc(110.0, "server", '{"type":"b1"}'),
    frame_doc(150.0, "client", None, code=1000),
    frame_doc(151.0, "server", None, code=1000),
]


def arrivals(log):
    return [(json.loads(p.message)["type"], round(p.t, 3)) for p in log.received if p.message]


def test_a_client_quicker_than_the_recorded_one_is_held_to_the_recorded_pace(tmp_path):
    path = build(tmp_path / "causal.msgpack", CAUSAL)
    with CassetteSession(path) as session:
        hub = realtime_of(session)
        connection = hub.connect(HANDSHAKE, None)
        assert connection.recv() == '{"type":"hello"}'
        connection.send('{"type":"a"}')  # at 5 ms: 15 ms earlier than recorded
        connection.recv()
        connection.recv()
        connection.send('{"type":"b"}')
        connection.recv()
        connection.close()
        with pytest.raises(DuplexClosed) as closed:
            connection.recv()
    assert closed.value.by == "client"
    # 'a' counts as sent at 20 ms, as recorded (on the virtual clock a client spends no time
    # thinking), so a1 and a2 come 30 and 60 ms later; 'b' at 100 ms, and b1 10 ms after it.
    assert arrivals(hub.connections[0]) == [
        ("hello", 5.0),
        ("a1", 50.0),
        ("a2", 80.0),
        ("b1", 110.0),
    ]
    assert [round(p.t, 3) for p in hub.connections[0].sent] == [5.0, 80.0, 110.0]


def test_a_client_that_answers_late_sees_the_server_frames_shift_with_it(tmp_path):
    path = build(tmp_path / "late.msgpack", CAUSAL)
    with CassetteSession(path) as session:
        hub = realtime_of(session)
        connection = hub.connect(HANDSHAKE, None)
        connection.recv()
        time.sleep(2.0)  # on the virtual clock: the client thinks for 2 s
        connection.send('{"type":"a"}')
        connection.recv()
        connection.recv()
        time.sleep(0.5)
        connection.send('{"type":"b"}')
        connection.recv()
        connection.close()
    assert arrivals(hub.connections[0]) == [
        ("hello", 5.0),
        ("a1", 2035.0),
        ("a2", 2065.0),
        ("b1", 2575.0),
    ]
    assert session.elapsed < 3.0


def test_a_client_that_has_not_asked_gets_no_answer(tmp_path, monkeypatch):
    monkeypatch.setattr(replay_module, "PATIENCE", 0.05)
    path = build(tmp_path / "ask.msgpack", CAUSAL)
    with CassetteSession(path) as session:
        connection = realtime_of(session).connect(HANDSHAKE, None)
        connection.recv()
        with pytest.raises(TimeoutError):
            connection.recv(timeout=1.0)  # a1 answers 'a', which was not sent
        with pytest.raises(ReplayError) as stuck:
            connection.recv()
        connection.close()
    assert "answers client frame #0 (recorded at 20.0 ms), which the client has not sent" in str(
        stuck.value
    )


def test_a_client_frame_that_does_not_match_is_a_miss_with_a_path_diff(tmp_path):
    path = build(tmp_path / "miss.msgpack", CAUSAL)
    with CassetteSession(path, on_unused="ignore") as session:
        connection = realtime_of(session).connect(HANDSHAKE, None)
        connection.recv()
        with pytest.raises(CassetteMissError) as caught:
            connection.send('{"type":"z"}')
    message = str(caught.value)
    assert f"client frame #0 on the WebSocket {URL} does not match the recording" in message
    assert f"in cassette {path} (record mode 'none')" in message
    assert """expected (recorded at 20.0 ms): {"type":"a"}""" in message
    assert "root['type']: recorded 'a', sent 'z'" in message
    assert "ignore_body=['type']" in message
    assert "--cassette-record=all" in message
    assert session.misses == [caught.value]


GOOGLE_KEY = "AIzaSyD" + "q7Lm2Xv9Rt4Wn8Kp3Jc6Hb1Fg5Ys0UeW"  # 39 characters, as Google's are
OPENAI_KEY = "sk-" + "Vb7Nq2Lx9Tr4Wm8Kp3Jc6Hd1Fg5Ys0Uz"


def near_the_cut(key, limit=160):
    """A text frame whose cut at ``limit`` characters falls inside ``key``."""
    return "x" * (limit - 3 - 13) + " " + key + " and the rest"


def test_a_miss_masks_a_frame_before_cutting_it_so_a_key_at_the_cut_never_shows(tmp_path):
    sent_key, recorded_key = GOOGLE_KEY, OPENAI_KEY
    frames = [frame_doc(5.0, "client", near_the_cut(recorded_key))]
    path = build(tmp_path / "cut.msgpack", frames, allow=[recorded_key])
    with CassetteSession(path, on_unused="ignore") as session:
        connection = realtime_of(session).connect(HANDSHAKE, None)
        with pytest.raises(CassetteMissError) as caught:
            connection.send(near_the_cut(sent_key))
    message = str(caught.value)
    assert "  sent: " + "x" * 144 + " [secret]" in message
    assert "): " + "x" * 144 + " [secret]" in message
    for key in (sent_key, recorded_key):
        assert key[:8] not in message
        assert key[-8:] not in message


def test_a_miss_diff_masks_a_key_in_a_long_json_value_before_cutting_it(tmp_path):
    frames = [frame_doc(5.0, "client", json.dumps({"note": "y" * 30 + " " + OPENAI_KEY}))]
    path = build(tmp_path / "diff.msgpack", frames, allow=[OPENAI_KEY])
    with CassetteSession(path, on_unused="ignore") as session:
        connection = realtime_of(session).connect(HANDSHAKE, None)
        with pytest.raises(CassetteMissError) as caught:
            connection.send(json.dumps({"note": "z" * 30 + " " + GOOGLE_KEY}))
    message = str(caught.value)
    assert "root['note']" in message
    for key in (GOOGLE_KEY, OPENAI_KEY):
        assert key[:8] not in message
        assert key[-8:] not in message


def test_a_frame_sent_where_the_recording_closes_is_quoted_masked(tmp_path):
    path = build(tmp_path / "close.msgpack", [frame_doc(5.0, "client", None, code=1000)])
    with CassetteSession(path, on_unused="ignore") as session:
        connection = realtime_of(session).connect(HANDSHAKE, None)
        with pytest.raises(CassetteMissError) as caught:
            connection.send(near_the_cut(GOOGLE_KEY))
    message = str(caught.value)
    assert "expects the client to close here, and it sent " + "x" * 144 + " [secret]" in message
    assert GOOGLE_KEY[:8] not in message


def test_leftover_frames_are_masked_before_they_are_cut(tmp_path):
    frames = [
        frame_doc(5.0, "client", near_the_cut(OPENAI_KEY, 80)),
        frame_doc(6.0, "server", near_the_cut(GOOGLE_KEY, 80)),
    ]
    path = build(tmp_path / "left-keys.msgpack", frames, allow=[OPENAI_KEY, GOOGLE_KEY])
    with CassetteSession(path, on_unused="ignore") as session:
        hub = realtime_of(session)
        hub.connect(HANDSHAKE, None).close()
        left = " | ".join(hub.leftovers())
    assert left.count("x" * 64 + " [secret]") == 2
    for key in (GOOGLE_KEY, OPENAI_KEY):
        assert key[:8] not in left
        assert key[-8:] not in left


def test_unsent_and_unread_frames_are_reported_at_the_end(tmp_path):
    path = build(tmp_path / "left.msgpack", CAUSAL)
    with CassetteSession(path) as session:
        hub = realtime_of(session)
        connection = hub.connect(HANDSHAKE, None)
        connection.recv()
        connection.send('{"type":"a"}')
        connection.close()
    assert hub.leftovers() == [
        f"WebSocket {URL}: 1 recorded client frame(s) were never sent (the first: "
        '{"type":"b"} at 100.0 ms)',
        f"WebSocket {URL}: 3 recorded server frame(s) were never read (the first: "
        '{"type":"a1"} at 50.0 ms)',
    ]


def test_a_websocket_the_cassette_does_not_hold_is_the_sessions_miss(tmp_path):
    path = build(tmp_path / "other.msgpack", CAUSAL)
    session = CassetteSession(path, on_unused="ignore")
    with session, pytest.raises(CassetteMissError) as caught:
        realtime_of(session).connect(Handshake("wss://elsewhere.test/live"), None)
    assert "GET wss://elsewhere.test/live" in str(caught.value)


def test_the_async_connection_releases_frames_causally_across_tasks(tmp_path):
    path = build(tmp_path / "async.msgpack", CAUSAL)
    got = []

    async def main():
        async with CassetteSession(path) as session:
            hub = realtime_of(session)
            connection = await hub.aconnect(HANDSHAKE, None)

            async def reader():
                try:
                    while True:
                        got.append(await connection.recv())
                except DuplexClosed:
                    pass

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(reader)
                await anyio.sleep(1.0)  # from 2 ms, when the handshake's answer came
                await connection.send('{"type":"a"}')
                await anyio.sleep(0.2)
                await connection.send('{"type":"b"}')
                await anyio.sleep(0.1)
                await connection.close()
            return hub

    hub = anyio.run(main)
    assert [json.loads(m)["type"] for m in got] == ["hello", "a1", "a2", "b1"]
    assert arrivals(hub.connections[0]) == [
        ("hello", 5.0),
        ("a1", 1032.0),
        ("a2", 1062.0),
        ("b1", 1212.0),
    ]


class DroppingServer(EchoServer):
    """Answers the first event, then the connection drops without a close frame."""

    def recv(self, timeout=None):
        if not self._pending:
            time.sleep(0.005)
            raise DuplexClosed(1006, by="server")
        return super().recv(timeout)


def test_a_dropped_connection_is_recorded_at_its_time_and_replayed(tmp_path):
    path = tmp_path / "drop.msgpack"
    with CassetteSession(path, record="all", timing="real") as session:
        connection = realtime_of(session).connect(HANDSHAKE, DroppingServer)
        connection.recv()
        with pytest.raises(DuplexClosed) as live:
            connection.recv()
    assert live.value.code == 1006
    response = load_cassette(path, validate=True).interactions[0].response
    assert response.error.kind == "RemoteProtocolError"
    assert "dropped without a close frame (code 1006)" in response.error.message
    assert response.error.t > response.body.frames[-1]["t"]

    with CassetteSession(path) as replay:
        hub = realtime_of(replay)
        again = hub.connect(HANDSHAKE, None)
        again.recv()
        with pytest.raises(DuplexClosed) as replayed:
            again.recv()
    assert (replayed.value.code, replayed.value.by) == (1006, "server")
    assert hub.connections[0].frames[-1].t == pytest.approx(response.error.t, abs=1e-3)


def test_every_websocket_patch_comes_off_though_an_earlier_undo_raises(tmp_path, monkeypatch):
    undone = []

    def when_imported(name, install):
        def undo():
            undone.append(name)
            if name == "aiohttp.client":  # the first to run: undos run last put on, first
                raise RuntimeError("this undo failed")

        return undo

    monkeypatch.setattr(ws_patching, "when_imported", when_imported)
    path = build(tmp_path / "undo.msgpack", CAUSAL)
    with CassetteSession(path, on_unused="ignore") as session:
        undo = ws_patching.patch_websockets(session)
        with pytest.raises(RuntimeError, match="this undo failed"):
            undo()
    assert sorted(undone) == [
        "aiohttp.client",
        "websockets.asyncio.client",
        "websockets.sync.client",
    ]
