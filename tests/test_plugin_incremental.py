"""``assert_incremental`` catches a client that buffers, as a user's suite meets it.

A pytester project replays one built stream, 100 ms between events, to three clients: one
that reads it line by line as it comes, one that reads it whole with ``list(...)`` before
handing it on, and one that sends the request without ``stream=True`` (httpx then reads the
whole event stream before it returns). The times each client's own code saw the events are
what tell them apart; the times the plugin handed the events to httpx are the same for all
three, which is why ``assert_incremental`` refuses a ``SentRequest``.
"""

# Imported once here, so that pytester's in-process runs share one SentRequest class with the
# assertion (a module first imported inside one run is imported afresh by the next).
import pytest_toolnexus._plugin.serve  # noqa: F401
from pytest_toolnexus import assert_incremental, build  # noqa: F401

PROJECT = """
import time

import httpx
import pytest

from pytest_toolnexus import assert_incremental, build

BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Hi"}]}


def streamed():
    # An honest client: each line is handed on as it arrives.
    with httpx.Client() as client:
        with client.stream("POST", build.OPENAI_CHAT_URL, json=BODY) as response:
            yield from response.iter_lines()


def listed():
    # A buffering client: the whole stream is read before the first line is handed on.
    yield from list(streamed())


def posted():
    # Another: without stream=True, httpx reads the whole body before it returns.
    with httpx.Client() as client:
        response = client.post(build.OPENAI_CHAT_URL, json=BODY)
    yield from response.iter_lines()


CLIENTS = {"streamed": streamed, "listed": listed, "posted": posted}


def arrivals_of(client):
    times = []
    for line in CLIENTS[client]():
        if line.startswith("data: "):
            times.append(time.monotonic())
    return times


@pytest.mark.parametrize("client", list(CLIENTS))
@pytest.mark.cassette("chat.msgpack")
def test_arrivals(client):
    assert_incremental(arrivals_of(client), min_spread=0.3)


@pytest.mark.parametrize("client", list(CLIENTS))
@pytest.mark.cassette("chat.msgpack")
def test_hand_over(client, cassette):
    arrivals_of(client)
    # The plugin's hand-over to httpx, passed on purpose: spread out whatever the client did.
    (request,) = cassette.requests
    assert_incremental(request.deliveries, min_spread=0.3)


@pytest.mark.cassette("chat.msgpack")
def test_a_sent_request(cassette):
    arrivals_of("listed")
    assert_incremental(cassette.requests[0])
"""


def project(pytester):
    pytester.makepyfile(test_streams=PROJECT)
    cadence = build.Cadence(ttft=0.1, gap=0.1)
    build.build_cassette(
        pytester.path / "cassettes" / "test_streams" / "chat.msgpack",
        [build.openai_chat("one two three four", cadence=cadence)],
    )
    return pytester


def run(pytester, *args):
    return project(pytester).runpytest(
        "-p", "no:randomly", "-p", "no:hypothesispytest", "-rf", *args
    )


def test_the_callers_arrival_times_catch_both_buffering_clients(pytester):
    result = run(pytester, "-v", "-k", "test_arrivals")

    # The honest client passes; both buffering clients fail, and say why
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines_random(
        [
            "test_streams.py::test_arrivals[[]streamed[]] PASSED*",
            "test_streams.py::test_arrivals[[]listed[]] FAILED*",
            "test_streams.py::test_arrivals[[]posted[]] FAILED*",
        ]
    )
    buffered = (
        "E   * AssertionError: all 8 events reached the client at once: the stream was "
        "buffered, not delivered incrementally"
    )
    result.stdout.fnmatch_lines([buffered, buffered])


def test_the_plugins_hand_over_times_are_spread_for_every_client(pytester):
    result = run(pytester, "-k", "test_hand_over")

    result.assert_outcomes(passed=3)


def test_a_sent_request_is_refused_with_what_to_pass(pytester):
    result = run(pytester, "-k", "test_a_sent_request")

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E   * TypeError: assert_incremental() takes the times each piece reached your code, "
            "not a SentRequest: *",
        ]
    )
    assert "pass request.deliveries (docs/timing.md)" in result.stdout.str()
