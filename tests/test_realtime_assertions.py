"""What a test reads back of a realtime session (issue 21, point 4): ``cassette.websockets``
lists each connection's frames both ways with their times, and the timing assertions judge its
server frames (time to first audio, transcript deltas one by one) exactly on the virtual clock.
"""

import base64
import time

import pytest
from openai import OpenAI

from pytest_toolnexus import (
    WebSocketFrame,
    WebSocketLog,
    assert_incremental,
    assert_time_to_first_event,
    use_cassette,
)
from tests.support import realtime_cassette as rt


@pytest.fixture
def recorded(tmp_path):
    return rt.write(tmp_path / "realtime.msgpack")


def replay(path, frames_until="response.done"):
    with use_cassette(path) as cassette:
        client = OpenAI(api_key="test-key", base_url=rt.BASE_URL)
        with client.realtime.connect(model="gpt-realtime") as connection:
            events = rt.talk(connection, frames_until)
    return cassette, events


def test_the_handle_lists_each_frame_both_ways_with_its_time(recorded):
    cassette, events = replay(recorded)

    (log,) = cassette.websockets
    assert isinstance(log, WebSocketLog)
    assert (log.url, log.replayed, log.opened_at) == (rt.URL, True, 0.0)
    assert all(isinstance(f, WebSocketFrame) for f in log.frames)
    # Every server event the SDK yielded, at its recorded offset: 0.00 ms error.
    assert [(f.event, f.t) for f in log.events()] == [
        (e.type, t) for e, t in zip(events, rt.SERVER_T, strict=True)
    ]
    sent = [(f.sender, f.kind, f.event) for f in log.sent]
    assert sent == [
        ("client", "text", "session.update"),
        ("client", "text", "conversation.item.create"),
        ("client", "text", "response.create"),
        ("client", "close", None),
    ]
    # When the client sent each one: at once after the handshake, then as soon as it read
    # session.updated (a client on the virtual clock takes no time to think).
    assert [f.t for f in log.sent[:3]] == [180.0, 230.0, 230.0]
    assert log.sent[0].data == {"type": "session.update", "session": rt.SESSION}
    audio = b"".join(base64.b64decode(f.data["delta"]) for f in log.events(*rt.AUDIO_DELTAS))
    assert audio == b"".join(rt.AUDIO)
    assert (log.closed.sender, log.closed.code) == ("client", 1000)
    assert cassette.requests[0].url == rt.URL  # the handshake, a request like any other


def test_time_to_first_audio_is_measured_from_the_frame_that_asked_exactly(recorded):
    cassette, _ = replay(recorded)
    (log,) = cassette.websockets

    # The client sent response.create at 230 ms, as soon as it read session.updated; the
    # first audio delta came at 800 ms, its recorded offset (a client quicker than the
    # recorded one is held to the recorded pace: docs/realtime.md).
    took = assert_time_to_first_event(log, events=rt.AUDIO_DELTAS, equals=0.570)
    assert took == pytest.approx(0.570, abs=1e-9)
    from_handshake = assert_time_to_first_event(log, events=rt.AUDIO_DELTAS, sent_at=0.0)
    assert from_handshake == pytest.approx(0.800, abs=1e-9)

    with pytest.raises(AssertionError) as late:
        assert_time_to_first_event(log, events=rt.AUDIO_DELTAS, at_most=0.5)
    assert str(late.value) == (
        "time to the first response.output_audio.delta or response.audio.delta was 0.570 s "
        "after client frame #2 (response.create), more than the allowed 0.500 s"
    )
    with pytest.raises(AssertionError) as off:
        assert_time_to_first_event(log, events=rt.AUDIO_DELTAS, equals=0.568)
    assert "reached the client 0.570 s after client frame #2 (response.create), expected " in str(
        off.value
    )
    assert "expected 0.568 s (tolerance 1 ms)" in str(off.value)


def test_transcript_deltas_arrive_one_by_one_at_their_recorded_times(recorded):
    cassette, _ = replay(recorded)
    (log,) = cassette.websockets

    assert_incremental(log, events=rt.TRANSCRIPT, expected=[0.835, 0.850])
    assert_incremental(log, events=rt.AUDIO_DELTAS, expected=[0.800, 0.815, 0.830])
    with pytest.raises(AssertionError, match=r"#2 reached the client 1\.0 ms early"):
        assert_incremental(log, events=rt.TRANSCRIPT, expected=[0.835, 0.851])


def test_a_buffered_transcript_is_caught(tmp_path):
    frames = [dict(f) for f in rt.FRAMES]
    frames[11]["t"] = 835.0  # the second transcript delta comes with the first
    path = rt.write(tmp_path / "buffered.msgpack", frames)
    cassette, _ = replay(path)
    (log,) = cassette.websockets

    with pytest.raises(AssertionError) as caught:
        assert_incremental(log, events=rt.TRANSCRIPT)
    assert str(caught.value) == (
        f"all 2 {rt.TRANSCRIPT} frames reached the client at once: the stream was buffered, "
        "not delivered incrementally"
    )


@pytest.mark.filterwarnings("ignore::pytest_toolnexus.UnusedInteractionsWarning")
def test_no_such_frame_names_what_the_server_sent(recorded):
    cassette, _ = replay(recorded, frames_until="session.updated")
    (log,) = cassette.websockets

    with pytest.raises(AssertionError) as caught:
        assert_time_to_first_event(log, events=rt.AUDIO_DELTAS, at_most=1.0)
    assert "no response.output_audio.delta or response.audio.delta reached the client" in str(
        caught.value
    )
    assert "(the server's frames: session.created, session.updated)" in str(caught.value)


def test_events_is_refused_for_plain_times():
    with pytest.raises(TypeError, match=r"pass cassette.websockets\[i\]"):
        assert_incremental([0.1, 0.2], events="response.output_audio.delta")


def test_a_log_opened_later_says_when(recorded):
    with use_cassette(recorded) as cassette:
        time.sleep(1.5)
        client = OpenAI(api_key="test-key", base_url=rt.BASE_URL)
        with client.realtime.connect(model="gpt-realtime") as connection:
            rt.talk(connection)
    (log,) = cassette.websockets
    assert log.opened_at == pytest.approx(1.5, abs=1e-9)
    assert log.events()[0].t == 181.0  # still from its own handshake


def test_a_frame_names_its_event_as_openai_and_gemini_live_send_it():
    openai_event = WebSocketFrame("server", 1.0, '{"type":"response.done","response":{}}')
    live = WebSocketFrame("server", 2.0, b'{"serverContent":{"turnComplete":true}}')
    assert (openai_event.kind, openai_event.event) == ("text", "response.done")
    assert (live.kind, live.event) == ("binary", "serverContent")  # Live's JSON comes as binary
    assert live.data == {"serverContent": {"turnComplete": True}}
    assert WebSocketFrame("server", 3.0, "not JSON {").event is None
    assert WebSocketFrame("server", 3.0, b"\x00\xff").data is None
    assert WebSocketFrame("server", 3.0, "[1, 2]").event is None  # an array names nothing
    close = WebSocketFrame("server", 4.0, None, 1011, "overloaded")
    assert (close.kind, close.data, close.event) == ("close", None, None)
