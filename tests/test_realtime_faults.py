"""Faults on realtime sessions (issue 21, point 4), through the openai SDK's
``client.realtime.connect`` (sync and async) against a replayed cassette, with the SDK's and
the library's own errors: a drop after server frame k (1006), a close with a code and reason,
a stall that only the client's own timeout ends (on the virtual clock), an error event, a slow
handshake, and a refused handshake (also through aiohttp).
"""

import asyncio
import json
import time
import warnings
from pathlib import Path

import aiohttp
import pytest
import websockets.sync.client
from openai import AsyncOpenAI, OpenAI, OpenAIError
from websockets.exceptions import ConnectionClosedError, InvalidStatus

from pytest_toolnexus import ReplayError, UnusedInteractionsWarning, faults, use_cassette
from pytest_toolnexus._seam.transport import TransportRequest
from tests.support import realtime_cassette as rt


@pytest.fixture
def recorded(tmp_path):
    return rt.write(tmp_path / "realtime.msgpack")


@pytest.fixture(autouse=True)
def no_leftover_warnings():
    """A session a fault cut short is not reported for what it left."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield
    assert [w for w in seen if issubclass(w.category, UnusedInteractionsWarning)] == []


def client():
    return OpenAI(api_key="test-key", base_url=rt.BASE_URL)


def aclient():
    return AsyncOpenAI(api_key="test-key", base_url=rt.BASE_URL)


def kinds(events):
    return [e.type for e in events]


# -- a drop after server frame k -------------------------------------------------------------


def test_a_drop_after_frame_k_is_the_librarys_1006_through_the_sync_sdk(recorded):
    with (
        use_cassette(recorded, faults=[faults.ws_drop(after_frame=5)]) as cassette,
        pytest.raises(ConnectionClosedError) as dropped,
        client().realtime.connect(model="gpt-realtime") as connection,
    ):
        rt.talk(connection)
    (log,) = cassette.websockets
    # No close frame either way: the library's 1006.
    assert dropped.value.rcvd is None
    assert dropped.value.sent is None
    assert [f.event for f in log.events()] == [
        "session.created",
        "session.updated",
        "conversation.item.added",
        "response.created",
        "response.output_audio.delta",
    ]
    # The drop comes at the time of the last frame that got through.
    assert (log.closed.sender, log.closed.code, log.closed.t) == ("server", 1006, 800.0)
    assert log.faults == cassette.requests[0].faults == ["ws_drop(after_frame=5)"]


def test_a_drop_through_the_async_sdk(recorded):
    async def main():
        async with use_cassette(recorded, faults=[faults.ws_drop(after_frame=0)]) as cassette:
            with pytest.raises(ConnectionClosedError):
                async with aclient().realtime.connect(model="gpt-realtime") as connection:
                    await rt.atalk(connection)
        return cassette

    cassette = asyncio.run(main())
    (log,) = cassette.websockets
    assert log.events() == []
    assert (log.closed.code, log.closed.t) == (1006, rt.T_HANDSHAKE)


# -- a close with a code and reason ----------------------------------------------------------


def test_a_close_with_a_code_and_reason_reaches_the_sdk(recorded):
    fault = faults.ws_close(1011, "upstream overloaded", after_frame=7)
    with (
        use_cassette(recorded, faults=[fault]) as cassette,
        pytest.raises(ConnectionClosedError) as closed,
        client().realtime.connect(model="gpt-realtime") as connection,
    ):
        rt.talk(connection)
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1011, "upstream overloaded")
    (log,) = cassette.websockets
    assert [f.event for f in log.events()][-1] == "response.output_audio.delta"
    assert (log.closed.code, log.closed.reason, log.closed.t) == (
        1011,
        "upstream overloaded",
        830.0,
    )
    assert log.faults == ["ws_close(1011, 'upstream overloaded', after_frame=7)"]


def test_a_normal_close_ends_the_async_sdks_iteration_cleanly(recorded):
    async def main():
        fault = faults.ws_close(1000, after_frame=2)
        async with (
            use_cassette(recorded, faults=[fault]) as cassette,
            aclient().realtime.connect(model="gpt-realtime") as connection,
        ):
            events = await rt.atalk(connection)  # the iteration just stops
        return cassette, events

    cassette, events = asyncio.run(main())
    assert kinds(events) == ["session.created", "session.updated"]
    assert cassette.websockets[0].closed.code == 1000


# -- a stall ---------------------------------------------------------------------------------


def test_a_stall_is_ended_by_the_clients_own_timeout_on_the_virtual_clock(recorded):
    with (
        use_cassette(recorded, faults=[faults.ws_stall(after_frame=1)]) as cassette,
        websockets.sync.client.connect(rt.URL) as ws,
    ):
        assert json.loads(ws.recv())["type"] == "session.created"
        ws.send(json.dumps({"type": "session.update", "session": rt.SESSION}))
        before = time.monotonic()
        with pytest.raises(TimeoutError):
            ws.recv(timeout=5)
        waited = time.monotonic() - before
    assert waited == pytest.approx(5.0, abs=1e-6)
    (log,) = cassette.websockets
    assert [f.event for f in log.events()] == ["session.created"]
    assert log.faults == ["ws_stall(for ever, after_frame=1)"]


def test_a_stall_without_a_timeout_says_the_server_sends_nothing_more(recorded, monkeypatch):
    from pytest_toolnexus._realtime import replay

    monkeypatch.setattr(replay, "PATIENCE", 0.05)
    with (
        use_cassette(recorded, faults=[faults.ws_stall(after_frame=0)]),
        pytest.raises(ReplayError) as stuck,
        client().realtime.connect(model="gpt-realtime") as connection,
    ):
        rt.talk(connection)
    assert "the server sends nothing more (fault ws_stall(for ever, after_frame=0))" in str(
        stuck.value
    )


def test_a_stall_of_some_seconds_holds_the_frames_back_exactly(recorded):
    with (
        use_cassette(recorded, faults=[faults.ws_stall(30, after_frame=4)]) as cassette,
        client().realtime.connect(model="gpt-realtime") as connection,
    ):
        rt.talk(connection)
    (log,) = cassette.websockets
    shifted = [t + 30000.0 if n >= 4 else t for n, t in enumerate(rt.SERVER_T)]
    assert [f.t for f in log.events()] == shifted


def test_the_async_sdk_times_out_a_stall_with_a_virtual_watchdog(recorded):
    async def main():
        async with (
            use_cassette(recorded, faults=[faults.ws_stall(after_frame=4)]) as cassette,
            aclient().realtime.connect(model="gpt-realtime") as connection,
        ):

            async def watchdog():
                await asyncio.sleep(10)  # on the virtual clock
                await connection.close()

            guard = asyncio.create_task(watchdog())
            events = await rt.atalk(connection)  # ends when the watchdog closes
            await guard
        return cassette, events

    cassette, events = asyncio.run(main())
    assert kinds(events)[-1] == "response.created"
    (log,) = cassette.websockets
    assert (log.closed.sender, log.closed.t) == ("client", 10180.0)


# -- an error event --------------------------------------------------------------------------


def test_an_error_event_is_the_sdks_openai_error(recorded):
    fault = faults.ws_error(after_frame=4, message="Audio generation failed", code="audio_error")
    with (
        use_cassette(recorded, faults=[fault]) as cassette,
        client().realtime.connect(model="gpt-realtime") as connection,
    ):
        connection.session.update(session=rt.SESSION)
        connection.conversation.item.create(item=rt.ITEM)
        connection.response.create()
        with pytest.raises(OpenAIError, match="Audio generation failed"):
            connection.dispatch_events()  # no handler for "error": the SDK raises
    (log,) = cassette.websockets
    error = log.events("error")[0]
    assert error.t == 790.0  # with response.created, the last frame before it
    assert error.data["error"] == {
        "type": "server_error",
        "code": "audio_error",
        "message": "Audio generation failed",
        "param": None,
        "event_id": None,
    }


def test_after_an_error_event_the_recorded_frames_carry_on(recorded):
    async def main():
        async with (
            use_cassette(recorded, faults=[faults.ws_error(after_frame=8)]),
            aclient().realtime.connect(model="gpt-realtime") as connection,
        ):
            return await rt.atalk(connection)

    events = asyncio.run(main())
    assert kinds(events)[7:] == [
        rt.TRANSCRIPT,
        "error",
        rt.TRANSCRIPT,
        "response.output_audio.done",
        "response.done",
    ]
    assert events[8].error.type == "server_error"


def test_gemini_live_has_no_error_event_and_is_told_the_fix(tmp_path):
    url = (
        "wss://generativelanguage.googleapis.com/ws/"
        "google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
    )
    path = rt.write(tmp_path / "live.msgpack", url=url)
    with (
        use_cassette(path, faults=[faults.ws_error(after_frame=1)], on_unused="ignore"),
        pytest.raises(ReplayError) as refused,
    ):
        websockets.sync.client.connect(url)
    message = str(refused.value)
    assert f"fault ws_error(after_frame=1) cannot apply to the WebSocket {url}" in message
    assert f"(interaction #0 of cassette {path})" in message
    assert "Gemini Live has no error event" in message
    assert "Use faults.ws_close(1011, 'the reason', after_frame=k)" in message


# -- the handshake ---------------------------------------------------------------------------


def test_a_slow_handshake_delays_the_connection_and_all_that_follows(recorded):
    with use_cassette(recorded, faults=[faults.ws_slow_handshake(2.5)]) as cassette:
        before = time.monotonic()
        with client().realtime.connect(model="gpt-realtime") as connection:
            opened = time.monotonic() - before
            rt.talk(connection)
    assert opened == pytest.approx(2.680, abs=1e-6)  # 2.5 s late, after the recorded 180 ms
    (log,) = cassette.websockets
    assert [f.t for f in log.events()] == [t + 2500.0 for t in rt.SERVER_T]
    assert log.faults == ["ws_slow_handshake(2.5 s)"]


def test_a_slow_handshake_through_the_async_sdk(recorded):
    async def main():
        async with use_cassette(recorded, faults=[faults.ws_slow_handshake(4)]) as cassette:
            before = time.monotonic()
            async with aclient().realtime.connect(model="gpt-realtime") as connection:
                opened = time.monotonic() - before
                await rt.atalk(connection)
        return cassette, opened

    cassette, opened = asyncio.run(main())
    assert opened == pytest.approx(4.180, abs=1e-6)
    assert [f.t for f in cassette.websockets[0].events()] == [t + 4000.0 for t in rt.SERVER_T]


def test_a_refused_handshake_is_invalid_status_through_the_sdk(recorded):
    with use_cassette(recorded, faults=[faults.ws_refuse(401)]) as cassette:
        with pytest.raises(InvalidStatus) as refused:
            client().realtime.connect(model="gpt-realtime").enter()
        # The recording stays for the next attempt.
        with client().realtime.connect(model="gpt-realtime") as connection:
            events = rt.talk(connection)
    response = refused.value.response
    assert (response.status_code, response.reason_phrase) == (401, "Unauthorized")
    assert json.loads(response.body)["error"]["message"].startswith("Unauthorized")
    assert str(refused.value) == "server rejected WebSocket connection: HTTP 401"
    assert kinds(events)[-1] == "response.done"
    assert [r.status for r in cassette.requests] == [401, 101]
    assert [r.faults for r in cassette.requests] == [["ws_refuse(401)"], []]
    assert len(cassette.websockets) == 1  # only the connection that opened


def test_a_refused_handshake_through_the_async_sdk(recorded):
    async def main():
        async with use_cassette(recorded, faults=[faults.ws_refuse(503)], on_unused="ignore"):
            with pytest.raises(InvalidStatus) as refused:
                async with aclient().realtime.connect(model="gpt-realtime"):
                    pass
        return refused.value

    assert asyncio.run(main()).response.status_code == 503


def test_a_refused_handshake_is_aiohttps_handshake_error(recorded):
    async def main():
        async with (
            use_cassette(recorded, faults=[faults.ws_refuse(429)], on_unused="ignore"),
            aiohttp.ClientSession() as http,
        ):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(rt.URL, headers={"Authorization": "Bearer sk-not-real"})
        return refused.value

    error = asyncio.run(main())
    assert (error.status, error.message) == (429, "Invalid response status")
    assert str(error.request_info.real_url) == rt.URL
    assert "sk-not-real" not in repr(error.request_info)


# -- what a fault is given -------------------------------------------------------------------


def test_a_frame_the_recording_does_not_reach_is_refused_with_the_fix(recorded):
    with (
        use_cassette(recorded, faults=[faults.ws_drop(after_frame=40)], on_unused="ignore"),
        pytest.raises(ReplayError) as refused,
    ):
        client().realtime.connect(model="gpt-realtime").enter()
    assert str(refused.value) == (
        f"fault ws_drop(after_frame=40) cannot apply to the WebSocket {rt.URL} (interaction #0 "
        f"of cassette {recorded}): its recording has 11 server frame(s). Give after_frame a "
        "number from 0 to 11."
    )


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: faults.ws_close(1006, after_frame=1), "use faults.ws_drop(after_frame=k)"),
        (lambda: faults.ws_close(999, after_frame=1), "a close code is 1000 to 4999"),
        (lambda: faults.ws_drop(after_frame=-1), "after_frame counts the server's frames"),
        (lambda: faults.ws_refuse(101), "an HTTP status other than 101"),
        (lambda: faults.ws_stall(-1, after_frame=0), "a stall lasts 0 seconds or more"),
        (lambda: faults.ws_slow_handshake(float("inf")), "a finite number of seconds"),
    ],
)
def test_a_fault_that_cannot_be_is_refused_when_it_is_made(make, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        make()


@pytest.mark.parametrize(
    "fault",
    [
        faults.ws_drop(after_frame=1),
        faults.ws_close(after_frame=1),
        faults.ws_stall(after_frame=1),
        faults.ws_error(after_frame=1),
        faults.ws_slow_handshake(1),
        faults.ws_refuse(403),
    ],
    ids=lambda fault: type(fault).__name__,
)
def test_a_websocket_fault_never_counts_an_http_request(fault):
    assert fault.targets(TransportRequest("GET", rt.URL))
    assert fault.targets(TransportRequest("GET", rt.URL.replace("ws://", "wss://")))
    assert not fault.targets(TransportRequest("GET", "http://127.0.0.1:9/v1/models"))
    assert not fault.targets(TransportRequest("POST", "https://api.openai.com/v1/responses"))


# -- on the marker and the handle ------------------------------------------------------------

MARKER_TESTS = """
import pytest
from openai import OpenAI
from websockets.exceptions import ConnectionClosedError

import realtime_cassette as rt
from pytest_toolnexus import faults


def talk():
    with OpenAI(api_key="k", base_url=rt.BASE_URL).realtime.connect(model="gpt-realtime") as c:
        return rt.talk(c)


@pytest.mark.cassette("rt", faults=[faults.ws_drop(after_frame=5)])
def test_a_fault_on_the_marker(cassette):
    with pytest.raises(ConnectionClosedError):
        talk()
    assert cassette.websockets[0].closed.code == 1006


@pytest.mark.cassette("rt")
def test_a_fault_on_the_handle(cassette):
    cassette.inject(faults.ws_close(4000, "bye", after_frame=1))
    with pytest.raises(ConnectionClosedError) as closed:
        talk()
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4000, "bye")


@pytest.mark.cassette("rt", faults=faults.ws_drop(after_frame=12))
def test_a_fault_the_recording_cannot_take(cassette):
    talk()
"""


def test_websocket_faults_on_the_marker_and_on_the_handle(pytester):
    folder = pytester.path / "cassettes" / "test_marker"
    folder.mkdir(parents=True)
    rt.write(folder / "rt.msgpack")
    pytester.makepyfile(realtime_cassette=Path(rt.__file__).read_text())
    pytester.makepyfile(test_marker=MARKER_TESTS)

    result = pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:cacheprovider", "-q")

    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ReplayError: fault ws_drop(after_frame=12) cannot apply to the WebSocket "
            f"{rt.URL} (interaction #0 of cassette *rt.msgpack): its recording has 11 server "
            "frame(s). Give after_frame a number from 0 to 11."
        ]
    )
    assert "UnusedInteractionsWarning" not in result.stdout.str()


def test_after_the_last_frame_a_fault_comes_before_the_recorded_close(recorded):
    with use_cassette(recorded, faults=[faults.ws_error(after_frame=11)]) as cassette:
        ws = websockets.sync.client.connect(rt.URL)
        ws.send(json.dumps({"type": "session.update", "session": rt.SESSION}))
        ws.send(json.dumps({"type": "conversation.item.create", "item": rt.ITEM}))
        ws.send(json.dumps({"type": "response.create"}))
        read = [json.loads(ws.recv())["type"] for _ in range(12)]
        ws.close()
    assert read[-2:] == ["response.done", "error"]
    assert cassette.websockets[0].events("error")[0].t == 900.0

    with (
        use_cassette(recorded, faults=[faults.ws_drop(after_frame=11)]) as cassette,
        pytest.raises(ConnectionClosedError),
        client().realtime.connect(model="gpt-realtime") as connection,
    ):
        rt.talk(connection, until="never")
    (log,) = cassette.websockets
    assert len(log.events()) == 11
    assert (log.closed.code, log.closed.t) == (1006, 900.0)


# -- on a session recorded from a live server ------------------------------------------------


def a_text_turn(connection):
    """A text turn over the SDK's sync connection, until ``response.done``: the event types."""
    connection.conversation.item.create(item=rt.ITEM)
    connection.response.create()
    events = []
    for event in connection:
        events.append(event.type)
        if event.type == "response.done":
            break
    return events


def test_faults_apply_to_a_session_recorded_from_the_fake_realtime_server(tmp_path):
    from tests.support import fake_realtime

    path = tmp_path / "live.msgpack"
    port, stop = fake_realtime.start()
    sdk = OpenAI(api_key="test-key", base_url=f"http://127.0.0.1:{port}/v1")
    try:
        with (
            use_cassette(path, record="all"),
            sdk.realtime.connect(model="gpt-realtime") as connection,
        ):
            recorded = a_text_turn(connection)
    finally:
        stop()
    assert recorded[-1] == "response.done"

    with use_cassette(path, faults=[faults.ws_drop(after_frame=4)]) as cassette:
        connection = sdk.realtime.connect(model="gpt-realtime").enter()
        with pytest.raises(ConnectionClosedError):
            a_text_turn(connection)
        connection.close()
    (log,) = cassette.websockets
    assert [f.event for f in log.events()] == recorded[:4]
    frames = cassette.interactions[0].response.body.frames
    recorded_t = [f["t"] for f in frames if f["from"] == "server"]
    assert [f.t for f in log.events()] == recorded_t[:4]
    assert (log.closed.code, log.closed.t) == (1006, recorded_t[3])


def test_google_genai_reads_an_injected_close_as_its_own_api_error(tmp_path):
    from google import genai
    from google.genai import errors

    from tests.support import fake_live

    path = tmp_path / "live.msgpack"
    server_tls, client_tls = fake_live.tls()
    port, stop = fake_live.start(0, server_tls)
    key = "AIza" + "Sy" + "B1xZ9" * 6 + "q"  # shaped as a Google API key: never written
    options = {
        "base_url": f"wss://127.0.0.1:{port}/live?key={key}",
        "headers": {"x-goog-api-key": key},
        "async_client_args": {"ssl": client_tls},
    }

    async def say_hi(text=""):
        client = genai.Client(vertexai=True, http_options=options)
        config = {"response_modalities": ["TEXT"]}
        async with client.aio.live.connect(model="gemini-live-2.5-flash", config=config) as live:
            hi = {"role": "user", "parts": [{"text": "Say hi"}]}
            await live.send_client_content(turns=hi, turn_complete=True)
            async for message in live.receive():
                text += message.text or ""
        return text

    async def record():
        async with use_cassette(path, record="all"):
            return await say_hi()

    try:
        assert asyncio.run(record()) == "Hi there!"
    finally:
        stop()

    async def replay():
        fault = faults.ws_close(1011, "model overloaded", after_frame=2)
        async with use_cassette(path, faults=[fault]) as cassette:
            with pytest.raises(errors.APIError) as caught:
                await say_hi()
        return cassette, caught.value

    cassette, error = asyncio.run(replay())
    assert (error.code, str(error)) == (1011, "1011 None. model overloaded")
    (log,) = cassette.websockets
    assert [f.event for f in log.events()] == ["setupComplete", "serverContent"]
    assert (log.closed.code, log.closed.reason) == (1011, "model overloaded")


@pytest.mark.parametrize(
    "fault",
    [
        faults.prepend(503),
        faults.stall(2),
        faults.disconnect(after_event=1),
        faults.connect_timeout(),
        faults.rechunk("bytes"),
    ],
    ids=lambda fault: type(fault).__name__,
)
def test_an_http_fault_never_counts_a_websocket_handshake(recorded, fault):
    assert not fault.targets(TransportRequest("GET", rt.URL))
    assert fault.targets(TransportRequest("GET", "http://127.0.0.1:9/v1/models"))
    with (
        use_cassette(recorded, faults=[fault]) as cassette,
        client().realtime.connect(model="gpt-realtime") as connection,
    ):
        events = rt.talk(connection)
    assert kinds(events)[-1] == "response.done"
    assert [f.t for f in cassette.websockets[0].events()] == rt.SERVER_T
    assert cassette.requests[0].faults == []
