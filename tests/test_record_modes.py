"""Record modes (DESIGN §5): ``none`` only replays, ``once`` records a missing cassette, ``new``
replays what matches and records the rest, ``all`` records everything again. Credentials are
redacted before anything is written, and interactions left unplayed are reported.

The server is a loopback JSON server that counts its hits; a replay must not reach it.
"""

import json
import threading
import warnings

import httpx
import msgpack
import pytest

from pytest_toolnexus import use_cassette
from pytest_toolnexus._bridges.live import LiveTransport
from pytest_toolnexus._seam.errors import CassetteMissError
from pytest_toolnexus._seam.transport import TransportRequest
from pytest_toolnexus._session.session import CassetteSession, UnusedInteractionsWarning
from pytest_toolnexus._store.cassette import load_cassette
from tests.support.realtime import wall
from tests.support.servers import Drip, LoopbackServer, write_response
from tests.test_recording import assert_stamped_between_send_and_arrival, read_with_arrivals


@pytest.fixture
def anyio_backend():
    return "asyncio"


class Counting:
    """Answers each request with JSON naming the hit number and echoing the body it got."""

    def __init__(self):
        self.hits = 0
        self._lock = threading.Lock()

    def __call__(self, request, conn):
        with self._lock:
            self.hits += 1
            hit = self.hits
        body = json.dumps({"hit": hit, "echo": json.loads(request.body or b"null")}).encode()
        write_response(
            conn,
            200,
            [("Content-Type", "application/json"), ("Set-Cookie", f"session=s{hit}; Path=/")],
            body,
        )


@pytest.fixture
def server():
    handler = Counting()
    with LoopbackServer(handler) as running:
        running.counter = handler
        yield running


@pytest.fixture
def path(tmp_path):
    return tmp_path / "cassettes" / "test_x" / "modes.msgpack"


NOWHERE = "https://api.example.test/v1/chat/completions"


def session(path, record, **options):
    options.setdefault("timing", "instant")
    return CassetteSession(path, record=record, **options)


def ask(active, server, question, **headers):
    response = active.transport(
        TransportRequest(
            "POST",
            server.url("/v1/chat/completions"),
            headers={"content-type": "application/json", **headers},
            body={"q": question},
        )
    )
    return response.body


def stored_questions(path):
    return [i.request.body.value["q"] for i in load_cassette(path).interactions]


# -- none -------------------------------------------------------------------------------------


def test_none_with_no_file_says_how_to_record_at_the_first_request(path):
    replaying = session(path, "none")  # no request yet: nothing is missing
    with replaying, pytest.raises(CassetteMissError) as caught:
        replaying.transport(TransportRequest("POST", NOWHERE, body={"q": "first"}))

    assert replaying.misses == [caught.value]
    message = str(caught.value)
    assert message.endswith(f"(The first request that needed it: POST {NOWHERE}.)")
    assert caught.value.path == str(path)
    assert str(path) in message
    assert "record mode 'none' only replays" in message
    assert "record mode 'once'" in message
    assert "--cassette-record=once" in message
    assert not path.exists()


def test_none_with_a_miss_raises_and_never_reaches_the_server(path, server):
    with session(path, "once") as recording:
        ask(recording, server, "a")
    hits = server.counter.hits

    with (
        session(path, "none", on_unused="ignore") as replaying,
        pytest.raises(CassetteMissError) as caught,
    ):
        ask(replaying, server, "b")

    assert "record mode:   none" in str(caught.value)
    assert server.counter.hits == hits == 1


# -- once -------------------------------------------------------------------------------------


def test_once_records_a_missing_cassette_and_then_replays_it(path, server):
    with session(path, "once") as recording:
        first = ask(recording, server, "a")
        second = ask(recording, server, "b")
    assert server.counter.hits == 2
    assert path.exists()
    assert stored_questions(path) == ["a", "b"]
    assert [r.replayed for r in recording.requests] == [False, False]

    with session(path, "once") as replaying:
        again = [ask(replaying, server, "a"), ask(replaying, server, "b")]

    assert server.counter.hits == 2
    assert again == [first, second]
    assert first == {"hit": 1, "echo": {"q": "a"}}
    assert second == {"hit": 2, "echo": {"q": "b"}}
    assert [r.replayed for r in replaying.requests] == [True, True]


def test_once_with_the_file_present_does_not_record(path, server):
    with session(path, "once") as recording:
        ask(recording, server, "a")
    before = path.read_bytes()

    with session(path, "once") as replaying:
        ask(replaying, server, "a")
        with pytest.raises(CassetteMissError) as caught:
            ask(replaying, server, "new question")

    assert "record mode:   once" in str(caught.value)
    assert server.counter.hits == 1
    assert path.read_bytes() == before


# -- new --------------------------------------------------------------------------------------


def test_new_replays_matches_and_records_the_rest(path, server):
    with session(path, "once") as recording:
        ask(recording, server, "a")
        ask(recording, server, "b")
    assert server.counter.hits == 2

    with session(path, "new") as adding:
        replayed_a = ask(adding, server, "a")
        fresh = ask(adding, server, "c")
        replayed_b = ask(adding, server, "b")

    assert server.counter.hits == 3  # only "c" reached the server
    assert replayed_a["hit"] == 1
    assert replayed_b["hit"] == 2
    assert fresh == {"hit": 3, "echo": {"q": "c"}}
    assert [r.replayed for r in adding.requests] == [True, False, True]
    assert stored_questions(path) == ["a", "b", "c"]

    with session(path, "none") as replaying:
        answers = [ask(replaying, server, q)["hit"] for q in ("a", "b", "c")]
    assert answers == [1, 2, 3]
    assert server.counter.hits == 3


def test_new_records_a_repeat_beyond_what_was_recorded(path, server):
    with session(path, "once") as recording:
        ask(recording, server, "a")

    with session(path, "new") as adding:
        ask(adding, server, "a")
        ask(adding, server, "a")

    assert server.counter.hits == 2
    assert stored_questions(path) == ["a", "a"]


def test_new_with_nothing_new_leaves_the_file_alone(path, server):
    with session(path, "once") as recording:
        ask(recording, server, "a")
    before = path.read_bytes()

    with session(path, "new") as adding:
        ask(adding, server, "a")

    assert path.read_bytes() == before
    assert server.counter.hits == 1


# -- all --------------------------------------------------------------------------------------


def test_all_records_everything_again_and_drops_the_old(path, server):
    with session(path, "once") as recording:
        ask(recording, server, "a")
        ask(recording, server, "b")

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with session(path, "all") as again:
            fresh = ask(again, server, "a")

    assert server.counter.hits == 3
    assert fresh["hit"] == 3
    assert stored_questions(path) == ["a"]
    assert load_cassette(path).interactions[0].response.body.value["hit"] == 3


def test_an_unknown_mode_is_refused(path):
    with pytest.raises(ValueError, match="record mode 'sometimes' is not one of none, once"):
        session(path, "sometimes")


# -- unused interactions ----------------------------------------------------------------------


@pytest.fixture
def three_recorded(path, server):
    with session(path, "once") as recording:
        for question in ("a", "b", "c"):
            ask(recording, server, question)
    return path


def test_unused_interactions_give_a_warning_listing_them(three_recorded, server):
    with (
        pytest.warns(UnusedInteractionsWarning) as caught,
        session(three_recorded, "none") as replaying,
    ):
        ask(replaying, server, "b")

    (warning,) = caught
    message = str(warning.message)
    assert "2 recorded interaction(s) were never played" in message
    assert f"#0 POST {server.url('/v1/chat/completions')}" in message
    assert f"#2 POST {server.url('/v1/chat/completions')}" in message
    assert "#1 " not in message
    assert str(three_recorded) in message
    assert [i for i, _ in replaying.unused()] == [0, 2]


def test_unused_interactions_can_be_an_error(three_recorded, server):
    replaying = session(three_recorded, "none", on_unused="error")
    ask(replaying, server, "a")

    with pytest.raises(CassetteMissError, match=r"2 recorded interaction\(s\) were never played"):
        replaying.close()


def test_unused_interactions_can_be_ignored(three_recorded, server):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with session(three_recorded, "none", on_unused="ignore") as replaying:
            ask(replaying, server, "a")

    assert len(replaying.unused()) == 2


def test_all_played_gives_no_warning(three_recorded, server):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with session(three_recorded, "none") as replaying:
            for question in ("a", "b", "c"):
                ask(replaying, server, question)

    assert replaying.unused() == []


# -- redaction --------------------------------------------------------------------------------


def test_credentials_are_redacted_in_the_file_and_replay_still_works(path, server):
    secret_headers = {"authorization": "Bearer sk-live-0123456789", "x-api-key": "key-abcdef"}
    with session(path, "once") as recording:
        live = ask(recording, server, "a", **secret_headers)

    raw = path.read_bytes()
    assert b"sk-live-0123456789" not in raw
    assert b"key-abcdef" not in raw
    assert b"session=s1" not in raw  # the response's set-cookie is a credential too
    assert server.requests[0].header("authorization") == "Bearer sk-live-0123456789"
    stored = load_cassette(path).interactions[0]
    assert stored.request.headers["authorization"] == "REDACTED"
    assert stored.request.headers["x-api-key"] == "REDACTED"
    assert stored.response.headers["set-cookie"] == "REDACTED"

    with session(path, "none") as replaying:
        replayed = ask(replaying, server, "a", **secret_headers)
    assert replayed == live
    assert server.counter.hits == 1


# -- what a recording session writes ----------------------------------------------------------


def test_a_recorded_stream_is_written_as_timed_events(path):
    events = [b'data: {"n": %d}\n\n' % n for n in range(3)] + [b"data: [DONE]\n\n"]
    drip = Drip(events, interval=0.03)
    with LoopbackServer(drip) as sse_server, session(path, "once") as recording:
        before = wall()
        response = recording.transport(
            TransportRequest("POST", sse_server.url("/v1/chat"), body={"stream": True}, stream=True)
        )
        chunks, arrivals = read_with_arrivals(response.body)
        content = b"".join(chunks)
    received_at = sse_server.requests[0].received_at

    assert content.endswith(b"data: [DONE]\n\n")
    doc = msgpack.unpackb(path.read_bytes())
    body = doc["interactions"][0]["response"]["body"]
    assert body["kind"] == "sse"
    assert [e.get("data", e.get("text")) for e in body["events"]] == [
        {"n": 0},
        {"n": 1},
        {"n": 2},
        "[DONE]",
    ]
    # Each event is stamped between the moment the server sent it and the moment the client
    # had it: true on a busy machine too, where a gap can stretch but never invert.
    assert_stamped_between_send_and_arrival(
        [e["t"] for e in body["events"]],
        drip.sent_at,
        arrivals,
        before=before,
        received_at=received_at,
    )


def test_a_stream_the_client_never_closed_is_saved_as_incomplete(path):
    drip = Drip([b'data: {"n": %d}\n\n' % n for n in range(5)], interval=0.05)
    with LoopbackServer(drip) as sse_server:
        recording = session(path, "once")
        response = recording.transport(
            TransportRequest("POST", sse_server.url("/v1/chat"), body={"stream": True}, stream=True)
        )
        first = next(iter(response.body))
        recording.close()
        response.body.close()

    assert first == b'data: {"n": 0}\n\n'
    (interaction,) = load_cassette(path).interactions
    assert interaction.response.complete is False
    assert [e["data"] for e in interaction.response.body.events] == [{"n": 0}]


def test_use_cassette_records_through_an_httpx_client(path, server):
    url = server.url("/v1/chat/completions")
    with (
        use_cassette(path, record="once") as cassette,
        httpx.Client(transport=cassette.http_transport()) as client,
    ):
        live = client.post(url, json={"q": "a"}).json()

    with (
        use_cassette(path, record="none") as cassette,
        httpx.Client(transport=cassette.http_transport()) as client,
    ):
        replayed = client.post(url, json={"q": "a"}).json()

    assert live == replayed == {"hit": 1, "echo": {"q": "a"}}
    assert server.counter.hits == 1


@pytest.mark.anyio
async def test_async_once_records_then_replays(path, server):
    request = TransportRequest("POST", server.url("/v1/x"), body={"q": "async"})
    async with (
        LiveTransport() as live,
        CassetteSession(path, record="once", async_live=live) as recording,
    ):
        first = (await recording.async_transport(request)).body

    async with CassetteSession(path, record="none", timing="instant") as replaying:
        second = (await replaying.async_transport(request)).body

    assert first == second == {"hit": 1, "echo": {"q": "async"}}
    assert server.counter.hits == 1
