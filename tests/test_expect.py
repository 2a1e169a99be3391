"""The timing assertions (docs/timing.md, "Assertions"): each passes on good data and fails
with a sentence that says what happened, from plain lists of seconds, from a ``SentRequest``
and from a ``CassetteSession`` that replayed real traffic.
"""

import re
import time
from dataclasses import replace

import pytest

from pytest_toolnexus import (
    Cassette,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    SentRequest,
    TransportRequest,
    assert_attempts,
    assert_incremental,
    assert_time_to_first_event,
    assert_waits,
    use_cassette,
)
from pytest_toolnexus._store.cassette import JsonBody, SseBody
from pytest_toolnexus._timing.expect import REAL_TIME_TOLERANCE

URL = "https://api.example.test/v1/chat"
OTHER_URL = "https://api.example.test/v1/embeddings"


def fails(message):
    """pytest.raises(AssertionError) matching ``message`` exactly, as a whole."""
    return pytest.raises(AssertionError, match=f"^{re.escape(message)}$")


def sent(sent_at=0.0, deliveries=(), status=200, retry_after=None, url=URL):
    return SentRequest(
        "POST",
        url,
        sent_at,
        replayed=True,
        status=status,
        retry_after=retry_after,
        deliveries=list(deliveries),
    )


# -- assert_incremental --------------------------------------------------------------------------


def test_incremental_passes_on_spread_arrivals():
    assert_incremental([0.1, 0.2, 0.3])
    assert_incremental([0.1, 0.2, 0.3], expected=[0.1, 0.2, 0.3])
    assert_incremental([0.1, 0.2005, 0.3], expected=[0.1, 0.2, 0.3], tolerance=0.001)
    assert_incremental([0.1, 0.2, 1.1], min_spread=1.0)
    assert_incremental((0.1, 0.2))  # a tuple of numbers
    assert_incremental([0.1, 0.1, 0.2])  # two pieces at one instant, then a later one


def test_incremental_catches_a_buffered_stream():
    with fails(
        "all 20 deltas reached the client at once: the stream was buffered, "
        "not delivered incrementally"
    ):
        assert_incremental([1.0] * 20, what="deltas")
    with fails(
        "all 3 events reached the client at once: the stream was buffered, "
        "not delivered incrementally"
    ):
        assert_incremental([0.5, 0.5004, 0.5008])  # within the 1 ms tolerance


def test_incremental_needs_two_pieces():
    with fails("cannot judge incremental delivery from 1 events; a stream needs two or more"):
        assert_incremental([0.2])
    with fails("cannot judge incremental delivery from 0 events; a stream needs two or more"):
        assert_incremental([])


def test_incremental_catches_out_of_order_arrivals():
    with fails("events arrived out of order: #3 reached the client 0.100 s before #2"):
        assert_incremental([0.05, 0.2, 0.1, 0.3])
    # The last before the first: out of order, not "buffered".
    with fails("deltas arrived out of order: #2 reached the client 0.100 s before #1"):
        assert_incremental([0.3, 0.2, 0.1], what="deltas")


def test_incremental_catches_a_too_short_spread():
    with fails("the 3 events arrived within 0.200 s, expected them spread over at least 1.000 s"):
        assert_incremental([0.1, 0.2, 0.3], min_spread=1.0)


def test_incremental_compares_with_the_expected_offsets():
    with fails(
        "delta #2 reached the client 50.0 ms late: at 0.150 s, expected 0.100 s (tolerance 1 ms)"
    ):
        assert_incremental([0.05, 0.15, 0.2], expected=[0.05, 0.1, 0.2], what="deltas")
    with fails(
        "event #1 reached the client 30.0 ms early: at 0.020 s, expected 0.050 s (tolerance 10 ms)"
    ):
        assert_incremental([0.02, 0.1], expected=[0.05, 0.1], tolerance=0.01)
    with fails("3 events reached the client, expected 4"):
        assert_incremental([0.1, 0.2, 0.3], expected=[0.1, 0.2, 0.3, 0.4])


def test_incremental_refuses_a_sent_request():
    # Its deliveries are the plugin's hand-over to the HTTP library, spread out even for a
    # client that buffers; the caller's own arrival times are what catch it.
    request = sent(deliveries=[0.05, 0.1, 0.15])
    with pytest.raises(TypeError, match=r"takes the times each piece reached your code, not a"):
        assert_incremental(request)  # type: ignore[arg-type]
    # The hand-over times, passed on purpose, check the replayed cadence itself.
    assert_incremental(request.deliveries, expected=[0.05, 0.1, 0.15])
    with fails(
        "all 2 events reached the client at once, 0.300 s after the request: the stream was "
        "buffered, not delivered incrementally"
    ):
        assert_incremental([0.3, 0.3], sent_at=0.0)


def test_incremental_never_quotes_a_raw_clock_reading():
    # Readings of time.monotonic(), as the README's example collects them: no "t=1303.827 s".
    with fails(
        "all 3 deltas reached the client at once: the stream was buffered, "
        "not delivered incrementally"
    ):
        assert_incremental([1303.827, 1303.827, 1303.8272], what="deltas")
    with fails("events arrived out of order: #2 reached the client 0.200 s before #1"):
        assert_incremental([1303.9, 1303.7])
    # With the request's send time, every time is an offset from it.
    request = sent(sent_at=1300.0, deliveries=[1300.1, 1300.25])
    with fails(
        "event #2 reached the client 50.0 ms late: at 0.250 s after the request, expected "
        "0.200 s (tolerance 1 ms)"
    ):
        assert_incremental(request.deliveries, expected=[1300.1, 1300.2], sent_at=request.sent_at)
    with fails(
        "all 2 events reached the client at once, 0.500 s after the request: the stream was "
        "buffered, not delivered incrementally"
    ):
        assert_incremental([1300.5, 1300.5], sent_at=1300.0)


# -- assert_time_to_first_event ------------------------------------------------------------------


def test_time_to_first_event_returns_it():
    assert assert_time_to_first_event([1.3, 1.4], sent_at=1.0) == pytest.approx(0.3)
    assert assert_time_to_first_event(
        [1.3, 1.4], sent_at=1.0, equals=0.3, at_most=0.5, at_least=0.2
    ) == pytest.approx(0.3)
    request = sent(sent_at=2.0, deliveries=[2.25, 2.5])
    assert assert_time_to_first_event(request, equals=0.25) == pytest.approx(0.25)
    # sent_at= overrides the request's own send time.
    assert assert_time_to_first_event(request, sent_at=2.2) == pytest.approx(0.05)


def test_time_to_first_event_over_and_under():
    with fails("time to first event was 0.300 s, more than the allowed 0.200 s"):
        assert_time_to_first_event([0.3, 0.4], sent_at=0.0, at_most=0.2)
    with fails("time to first token was 0.050 s, less than 0.100 s"):
        assert_time_to_first_event([0.05], sent_at=0.0, at_least=0.1, what="token")
    with fails(
        "the first event reached the client 0.300 s after the request was sent, expected 0.100 s"
    ):
        assert_time_to_first_event(sent(deliveries=[0.3]), equals=0.1)


def test_time_to_first_event_tolerance():
    assert_time_to_first_event([0.2005], sent_at=0.0, at_most=0.2)  # within 1 ms
    with fails("time to first event was 0.202 s, more than the allowed 0.200 s"):
        assert_time_to_first_event([0.202], sent_at=0.0, at_most=0.2)


def test_time_to_first_event_with_nothing_delivered():
    with fails("no event reached the client, so there is no time to first event"):
        assert_time_to_first_event(sent(deliveries=[]), at_most=1.0)
    with pytest.raises(TypeError, match="pass sent_at="):
        assert_time_to_first_event([0.1])


# -- assert_attempts -----------------------------------------------------------------------------


def test_attempts_counts_requests():
    requests = [sent(status=429), sent(status=429), sent(status=200)]
    assert_attempts(requests, 3)
    assert_attempts([*requests, sent(url=OTHER_URL)], 3, url="/v1/chat")
    assert_attempts([*requests, sent(url=OTHER_URL)], 1, url="/v1/embeddings")


def test_attempts_lists_the_statuses_seen():
    requests = [sent(status=429), sent(status=429), sent(status=200)]
    with fails("expected 2 attempt(s), saw 3 (statuses: 429, 429, 200)"):
        assert_attempts(requests, 2)
    with fails("expected 1 attempt(s) to /v1/models, saw 0 (statuses: none)"):
        assert_attempts(requests, 1, url="/v1/models")
    with fails("expected 1 attempt(s), saw 0 (statuses: none)"):
        assert_attempts([], 1)


# -- assert_waits --------------------------------------------------------------------------------


def retried(wait, retry_after="2"):
    """A 429 answered at 0.030 s, then a retry sent ``wait`` seconds later."""
    return [
        sent(0.0, [0.03], status=429, retry_after=retry_after),
        sent(0.03 + wait, [0.03 + wait + 0.4], status=200),
    ]


def test_waits_pass_and_return_the_waits():
    assert assert_waits(retried(2.0), [2.0]) == [pytest.approx(2.0)]
    assert assert_waits(retried(2.5), at_least=[2.0]) == [pytest.approx(2.5)]
    assert assert_waits(retried(2.005), [2.0], tolerance=0.01) == [pytest.approx(2.005)]
    assert assert_waits([sent()], []) == []


def test_a_wait_shorter_than_retry_after_is_named():
    with fails(
        "expected a wait of 2.0 s before attempt 2 (Retry-After: 2), saw 0.000 s (tolerance 1 ms)"
    ):
        assert_waits(retried(0.0), [2.0])
    with fails("expected a wait of \u2265 2.0 s before attempt 2 (Retry-After: 2), saw 1.000 s"):
        assert_waits(retried(1.0), at_least=[2.0])
    with fails("expected a wait of 1.0 s before attempt 2, saw 0.250 s (tolerance 1 ms)"):
        assert_waits(retried(0.25, retry_after=None), [1.0])


def test_a_wait_is_quoted_as_expected_not_rounded():
    with fails("expected a wait of 0.25 s before attempt 2, saw 0.200 s (tolerance 1 ms)"):
        assert_waits(retried(0.2, retry_after=None), [0.25])
    with fails("expected a wait of \u2265 1.375 s before attempt 2 (Retry-After: 2), saw 1.000 s"):
        assert_waits(retried(1.0), at_least=[1.375])


def test_the_wrong_number_of_waits():
    with fails("expected 2 wait(s) between 3 attempts, saw 2 attempt(s) and so 1 wait(s)"):
        assert_waits(retried(2.0), [2.0, 4.0])
    with fails("expected 1 wait(s) between 2 attempts, saw 1 attempt(s) and so 0 wait(s)"):
        assert_waits([sent()], [2.0])
    with pytest.raises(TypeError, match="at_least="):
        assert_waits(retried(2.0))


def recorded(wait, retry_after="2"):
    """:func:`retried`, as a recording run saw it: on real time, nothing replayed."""
    return [replace(request, replayed=False) for request in retried(wait, retry_after)]


def test_the_default_tolerance_is_exact_on_replay_and_real_time_while_recording():
    # The docs' assert_waits(cassette, [2.0]) passes in the run that recorded the cassette ...
    assert assert_waits(recorded(2.002), [2.0]) == [pytest.approx(2.002)]
    assert assert_waits(recorded(2.2), [2.0]) == [pytest.approx(2.2)]
    assert_time_to_first_event(replace(sent(deliveries=[0.31]), replayed=False), equals=0.3)
    # ... and a real miss still fails it, naming the tolerance it used.
    assert REAL_TIME_TOLERANCE == 0.25
    with fails(
        "expected a wait of 2.0 s before attempt 2 (Retry-After: 2), saw 2.400 s (tolerance 250 ms)"
    ):
        assert_waits(recorded(2.4), [2.0])
    # On replay the same 2 ms is a real difference.
    with fails(
        "expected a wait of 2.0 s before attempt 2 (Retry-After: 2), saw 2.002 s (tolerance 1 ms)"
    ):
        assert_waits(retried(2.002), [2.0])
    # An explicit tolerance always wins.
    with fails(
        "expected a wait of 2.0 s before attempt 2 (Retry-After: 2), saw 2.002 s (tolerance 1 ms)"
    ):
        assert_waits(recorded(2.002), [2.0], tolerance=0.001)


def test_waits_count_from_the_end_of_the_previous_response():
    # A 429 whose body ends at 0.5 s: a retry sent at 2.5 s waited 2.0 s, not 2.5 s.
    requests = [
        sent(0.0, [0.1, 0.5], status=429, retry_after="2"),
        sent(2.5, [2.6], status=200),
    ]
    assert assert_waits(requests, [2.0]) == [pytest.approx(2.0)]


# -- from a CassetteSession that replayed traffic ------------------------------------------------


def answer(status, body, headers=(), t_headers=0.0, t_end=0.0):
    return Interaction(
        RecordedRequest("POST", URL, Headers(), JsonBody({"q": 1})),
        RecordedResponse(status, Headers(list(headers)), body, t_headers, t_end),
    )


@pytest.fixture
def rate_limited(tmp_path):
    path = tmp_path / "rate-limited.msgpack"
    limited = answer(
        429,
        JsonBody({"error": "slow down"}),
        [("content-type", "application/json"), ("retry-after", "2")],
        30.0,
        30.0,
    )
    ok = answer(200, JsonBody({"ok": True}), [("content-type", "application/json")], 100, 100)
    Cassette(path, [limited, ok]).save()
    return path


def send(cassette):
    return cassette.transport(TransportRequest("POST", URL, body={"q": 1}))


def test_a_session_that_honoured_retry_after(rate_limited):
    with use_cassette(rate_limited) as cassette:
        assert send(cassette).status == 429
        time.sleep(2)
        assert send(cassette).status == 200

    assert_attempts(cassette, 2)
    assert_attempts(cassette, 2, url="/v1/chat")
    assert assert_waits(cassette, [2.0]) == [pytest.approx(2.0)]
    assert_waits(cassette, at_least=[2.0])
    first, second = cassette.requests
    assert first.deliveries == [pytest.approx(0.03)]
    assert assert_time_to_first_event(first, equals=0.03) == pytest.approx(0.03)
    assert second.sent_at == pytest.approx(2.03)


def test_a_session_that_retried_too_soon(rate_limited):
    with use_cassette(rate_limited) as cassette:
        send(cassette)
        time.sleep(1)
        send(cassette)

    with fails(
        "expected a wait of 2.0 s before attempt 2 (Retry-After: 2), saw 1.000 s (tolerance 1 ms)"
    ):
        assert_waits(cassette, [2.0])
    with fails("expected a wait of \u2265 2.0 s before attempt 2 (Retry-After: 2), saw 1.000 s"):
        assert_waits(cassette, at_least=[2.0])
    with fails("expected 3 attempt(s), saw 2 (statuses: 429, 200)"):
        assert_attempts(cassette, 3)
    with fails("expected 1 attempt(s) to /v1/embeddings, saw 0 (statuses: none)"):
        assert_attempts(cassette, 1, url="/v1/embeddings")


def replay_stream(tmp_path, offsets_ms):
    path = tmp_path / "stream.msgpack"
    events = [{"t": t, "data": {"n": n}} for n, t in enumerate(offsets_ms)]
    headers = [("content-type", "text/event-stream")]
    Cassette(path, [answer(200, SseBody(events), headers, 20.0, offsets_ms[-1])]).save()
    with use_cassette(path) as cassette:
        response = cassette.transport(TransportRequest("POST", URL, body={"q": 1}, stream=True))
        pieces = list(response.body)
    assert len(pieces) == len(offsets_ms)
    return cassette


def test_a_replayed_stream_is_incremental(tmp_path):
    cassette = replay_stream(tmp_path, [100.0, 200.0, 300.0])
    (request,) = cassette.requests
    assert_incremental(request.deliveries, expected=[0.1, 0.2, 0.3])
    assert_incremental(request.deliveries, min_spread=0.2)
    assert assert_time_to_first_event(request, equals=0.1, at_most=0.1) == pytest.approx(0.1)
    with fails("the 3 events arrived within 0.200 s, expected them spread over at least 0.500 s"):
        assert_incremental(request.deliveries, min_spread=0.5)
    with fails("time to first event was 0.100 s, more than the allowed 0.050 s"):
        assert_time_to_first_event(request, at_most=0.05)


def test_a_stream_recorded_in_one_burst_reads_as_buffered(tmp_path):
    cassette = replay_stream(tmp_path, [300.0, 300.0, 300.0])
    with fails(
        "all 3 events reached the client at once, 0.300 s after the request: the stream was "
        "buffered, not delivered incrementally"
    ):
        (request,) = cassette.requests
        assert_incremental(request.deliveries, sent_at=request.sent_at)


def test_a_real_timing_replay_uses_the_real_time_tolerance(tmp_path):
    path = tmp_path / "short-retry.msgpack"
    limited = answer(429, JsonBody({"error": "slow down"}), [("retry-after", "0.2")], 5.0, 5.0)
    ok = answer(200, JsonBody({"ok": True}), [], 5.0, 5.0)
    Cassette(path, [limited, ok]).save()
    with use_cassette(path, timing="real") as cassette:
        send(cassette)
        time.sleep(0.2)  # a real sleep: the scheduler adds its own milliseconds
        send(cassette)
    (wait,) = assert_waits(cassette, [0.2])
    assert wait >= 0.2
