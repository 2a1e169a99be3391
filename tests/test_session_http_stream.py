"""``CassetteSession.http_transport()`` with no live transport given: the response decides.

A client handed the session's bridge (``httpx.Client(transport=cassette.http_transport())``)
reads the bytes itself, as a patched client does, so a GET answered with an event stream is
handed on event by event and recorded with each event's time, though the request asked for no
stream. A body of known length still arrives whole, exactly as the server sent it.
"""

import json

import httpx

from pytest_toolnexus import load_cassette, use_cassette
from pytest_toolnexus._store.cassette import JsonBody, SseBody
from tests.support.realtime import wall
from tests.support.servers import Drip, Fixed, LoopbackServer
from tests.test_recording import assert_stamped_between_send_and_arrival

GAP = 0.05
EVENTS = [b'data: {"n":%d}\n\n' % n for n in range(5)]


def test_an_unflagged_get_event_stream_through_http_transport_is_handed_on_and_timed(tmp_path):
    drip = Drip(EVENTS, interval=GAP)
    cassette = tmp_path / "bridge.msgpack"
    lines, had = [], []
    with LoopbackServer(drip) as server, use_cassette(cassette, record="all") as session:
        with httpx.Client(transport=session.http_transport(), timeout=10) as client:
            before = wall()
            with client.stream("GET", server.url("/events")) as response:
                for line in response.iter_lines():
                    if line:
                        had.append(wall())
                        lines.append(line)
        received_at = server.requests[0].received_at

    assert lines == [f'data: {{"n":{n}}}' for n in range(5)]
    assert server.requests[0].header("accept") == "*/*"
    # Handed on as it came: the client had the first event before the server wrote the last.
    assert had[0] < drip.sent_at[-1]
    (interaction,) = load_cassette(cassette).interactions
    body = interaction.response.body
    assert isinstance(body, SseBody)
    assert [event["data"] for event in body.events] == [{"n": n} for n in range(5)]
    stamps = [event["t"] for event in body.events]
    assert_stamped_between_send_and_arrival(
        stamps, drip.sent_at, had, before=before, received_at=received_at
    )


def test_a_json_answer_through_http_transport_arrives_whole_as_the_server_sent_it(tmp_path):
    sent = b'{"a": 1, "b": [1, 2]}'
    cassette = tmp_path / "json.msgpack"
    headers = [("Content-Type", "application/json")]
    with (
        LoopbackServer(Fixed(200, headers, sent)) as server,
        use_cassette(cassette, record="all") as session,
        httpx.Client(transport=session.http_transport()) as client,
    ):
        got = client.get(server.url("/doc"))

    assert got.content == sent
    assert json.loads(got.content) == {"a": 1, "b": [1, 2]}
    (interaction,) = load_cassette(cassette).interactions
    assert interaction.response.body == JsonBody({"a": 1, "b": [1, 2]})
