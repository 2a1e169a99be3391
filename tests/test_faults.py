"""Faults at replay, consumed by the real SDKs (DESIGN §4, ``pytest_toolnexus.faults``).

Every fault is applied to a built cassette and read by the unmodified ``openai`` and
``anthropic`` clients through ``httpx2``. Each test checks what the client saw (its text, its
typed error, its retries), *when* it saw it on the virtual clock, and how the fault shows in
``cassette.requests[i].faults``. The virtual clock starts at a whole-second wall time
(``EPOCH``, each built cassette's recorded start) so an HTTP-date ``Retry-After`` is exact.
"""

import contextlib
import email.utils
import math
import re
import time
from dataclasses import dataclass, field

import anthropic
import httpx2
import openai
import pytest

from pytest_toolnexus import (
    Headers,
    TransportRequest,
    assert_attempts,
    assert_incremental,
    assert_waits,
    build,
    faults,
    use_cassette,
)

TEXT = "héllo wörld ✓ naïve café über"
CADENCE = build.Cadence(ttft=0.3, gap=0.1, headers=0.05)
MESSAGES = [{"role": "user", "content": "Say it."}]
KEY = "test-key-not-a-secret"
EPOCH = 1_767_225_600.0
SDKS = ("openai", "anthropic")
RETRYABLE = (429, 529, 500, 502, 503, 504)
BACKOFF = (0.375, 0.5)  # both SDKs: 0.5 s less up to 25 % jitter, before the first retry


# -- helpers ------------------------------------------------------------------------------------


def answer(sdk, *, stream=True, text=TEXT):
    if sdk == "openai":
        return build.openai_chat(text, stream=stream, cadence=CADENCE)
    return build.anthropic_messages(text, stream=stream, cadence=CADENCE)


def save(tmp_path, *interactions):
    path = tmp_path / "built.msgpack"
    build.build_cassette(path, interactions, meta={"clock_epoch": EPOCH})
    return path


def session(path, fault_list=(), **options):
    options.setdefault("on_unused", "ignore")
    return use_cassette(path, faults=fault_list, **options)


def client_for(sdk, cassette, retries=0):
    http = httpx2.Client(transport=cassette.http_transport())
    if sdk == "openai":
        return openai.OpenAI(api_key=KEY, http_client=http, max_retries=retries)
    return anthropic.Anthropic(api_key=KEY, http_client=http, max_retries=retries)


def ask(sdk, client):
    """One non-streaming request; the answer's text."""
    if sdk == "openai":
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
        return reply.choices[0].message.content
    reply = client.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=MESSAGES)
    return "".join(block.text for block in reply.content if block.type == "text")


@dataclass
class Received:
    """Text deltas as the client yields them, with their arrival times since ``t0``."""

    t0: float = field(default_factory=lambda: time.monotonic())
    deltas: list = field(default_factory=list)
    times: list = field(default_factory=list)

    @property
    def text(self):
        return "".join(self.deltas)

    def add(self, delta):
        self.deltas.append(delta)
        self.times.append(time.monotonic() - self.t0)


def stream_into(sdk, client, got):
    """Stream one request, noting each text delta in ``got`` as it arrives."""
    if sdk == "openai":
        chunks = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
        for chunk in chunks:
            if chunk.choices and chunk.choices[0].delta.content:
                got.add(chunk.choices[0].delta.content)
        return
    with client.messages.stream(
        model="claude-sonnet-4-6", max_tokens=64, messages=MESSAGES
    ) as events:
        for delta in events.text_stream:
            got.add(delta)


def content_events(interaction):
    """``(event index, arrival in s)`` of each event of a built stream that carries text."""
    found = []
    for index, event in enumerate(interaction.response.body.events):
        data = event.get("data")
        if not isinstance(data, dict):
            continue
        anthropic_text = data.get("type") == "content_block_delta" and (
            data["delta"]["type"] == "text_delta"
        )
        openai_text = data.get("choices") and data["choices"][0]["delta"].get("content")
        if anthropic_text or openai_text:
            found.append((index, event["t"] / 1000))
    return found


def expected_times(interaction, *, shift=0.0):
    return [t + shift for _, t in content_events(interaction)]


WORDS = build.split_text(TEXT)


# -- prepend: error answers before the recorded one --------------------------------------------


@pytest.mark.parametrize("status", RETRYABLE)
@pytest.mark.parametrize("sdk", SDKS)
def test_a_prepended_retryable_error_is_retried_after_its_retry_after(tmp_path, sdk, status):
    path = save(tmp_path, answer(sdk, stream=False))
    with session(path, [faults.prepend(status, retry_after="2")]) as cassette:
        text = ask(sdk, client_for(sdk, cassette, retries=2))

    assert text == TEXT
    assert [r.status for r in cassette.requests] == [status, 200]
    assert cassette.requests[0].retry_after == "2"
    assert cassette.requests[0].interaction is None  # made up by the fault
    assert cassette.requests[1].interaction == 0  # the recording, kept for the retry
    assert_waits(cassette, [2.0])
    assert cassette.requests[0].faults == [f"prepended {status}, Retry-After: 2"]
    assert cassette.requests[1].faults == []
    assert cassette.unused() == []


@pytest.mark.parametrize("status", RETRYABLE)
@pytest.mark.parametrize("sdk", SDKS)
def test_without_retry_after_the_sdk_falls_back_to_its_backoff(tmp_path, sdk, status):
    path = save(tmp_path, answer(sdk, stream=False))
    with session(path, [faults.prepend(status, count=2)]) as cassette:
        text = ask(sdk, client_for(sdk, cassette, retries=2))

    assert text == TEXT
    assert [r.status for r in cassette.requests] == [status, status, 200]
    assert [r.retry_after for r in cassette.requests] == [None, None, None]
    first, second = assert_waits(cassette, at_least=[0.0, 0.0])
    assert BACKOFF[0] <= first <= BACKOFF[1]
    assert 2 * BACKOFF[0] <= second <= 2 * BACKOFF[1]  # exponential: doubled
    shown = f"prepended {status}"
    assert [r.faults for r in cassette.requests] == [[shown], [shown], []]


def http_date(seconds_after_epoch):
    return email.utils.formatdate(EPOCH + seconds_after_epoch, usegmt=True)


# The prepended response reaches the client 1 ms after it was sent, so a wait that the SDK
# computes from the clock at that moment ends 1 ms short of the HTTP-date's second.
RETRY_AFTER_CASES = [
    pytest.param("3", {"openai": 3.0, "anthropic": 3.0}, id="delay-seconds"),
    pytest.param("0.5", {"openai": 0.5, "anthropic": 0.5}, id="fractional-0.5"),
    pytest.param("1.5", {"openai": 1.5, "anthropic": 1.5}, id="fractional-1.5"),
    pytest.param(http_date(3), {"openai": 2.999, "anthropic": 2.999}, id="http-date"),
    pytest.param("-1", {"openai": BACKOFF, "anthropic": BACKOFF}, id="negative"),
    pytest.param("soon", {"openai": BACKOFF, "anthropic": BACKOFF}, id="garbage"),
    pytest.param("150", {"openai": None, "anthropic": 150.0}, id="over-120s"),
]


@pytest.mark.parametrize(("value", "waits"), RETRY_AFTER_CASES)
@pytest.mark.parametrize("sdk", SDKS)
def test_retry_after_in_every_form_is_sent_verbatim_and_read_by_the_sdk(
    tmp_path, sdk, value, waits
):
    path = save(tmp_path, answer(sdk, stream=False))
    wanted = waits[sdk]
    with session(path, [faults.prepend(429, retry_after=value)]) as cassette:
        client = client_for(sdk, cassette, retries=2)
        if wanted is None:
            error_type = openai.RateLimitError if sdk == "openai" else anthropic.RateLimitError
            with pytest.raises(error_type):
                ask(sdk, client)
        else:
            assert ask(sdk, client) == TEXT

    assert cassette.requests[0].retry_after == value
    assert cassette.requests[0].faults == [f"prepended 429, Retry-After: {value}"]
    if wanted is None:  # openai refuses to wait more than 120 s, and gives up at once
        assert_attempts(cassette, 1)
        assert cassette.sleeps == []
    elif isinstance(wanted, tuple):  # not a delay the SDK takes: its own backoff instead
        (wait,) = assert_waits(cassette, at_least=[0.0])
        assert wanted[0] <= wait <= wanted[1]
    else:
        assert_waits(cassette, [wanted])
        assert [s.duration for s in cassette.sleeps] == pytest.approx([wanted], abs=1e-6)


def test_an_http_date_retry_after_is_honoured_to_the_second_on_the_virtual_wall_clock(tmp_path):
    path = save(tmp_path, answer("openai", stream=False))
    with session(path, [faults.prepend(503, retry_after=http_date(7))]) as cassette:
        assert ask("openai", client_for("openai", cassette, retries=1)) == TEXT

    retry = cassette.requests[1]
    assert EPOCH + retry.sent_at == pytest.approx(EPOCH + 7, abs=1e-6)


@pytest.mark.parametrize(
    ("sdk", "status", "error_type", "kind"),
    [
        ("openai", 429, openai.RateLimitError, "rate_limit_exceeded"),
        ("openai", 500, openai.InternalServerError, "server_error"),
        ("openai", 503, openai.InternalServerError, "server_error"),
        ("anthropic", 429, anthropic.RateLimitError, "rate_limit_error"),
        ("anthropic", 500, anthropic.InternalServerError, "api_error"),
        ("anthropic", 529, anthropic.OverloadedError, "overloaded_error"),
    ],
)
def test_a_prepended_json_body_is_the_providers_own_error_shape(
    tmp_path, sdk, status, error_type, kind
):
    path = save(tmp_path, answer(sdk, stream=False))
    with session(path, [faults.prepend(status)]) as cassette, pytest.raises(error_type) as caught:
        ask(sdk, client_for(sdk, cassette))

    error = caught.value
    assert error.status_code == status
    assert "(injected by pytest-toolnexus)" in error.message
    if sdk == "openai":  # openai keeps the "error" object as the body
        assert error.type == kind
        assert error.body["type"] == kind
    else:
        assert error.body["type"] == "error"
        assert error.body["error"]["type"] == kind
    assert error.response.headers["content-type"] == "application/json"
    assert cassette.requests[0].faults == [f"prepended {status}"]


def test_a_prepended_body_of_your_own_reaches_the_sdk(tmp_path):
    body = {"error": {"message": "Your key is over quota.", "type": "insufficient_quota"}}
    path = save(tmp_path, answer("openai", stream=False))
    with (
        session(path, [faults.prepend(429, body=body)]) as cassette,
        pytest.raises(openai.RateLimitError) as caught,
    ):
        ask("openai", client_for("openai", cassette))

    assert caught.value.type == "insufficient_quota"
    assert "Your key is over quota." in caught.value.message


@pytest.mark.parametrize("sdk", SDKS)
def test_a_prepended_html_body_is_a_load_balancer_page(tmp_path, sdk):
    path = save(tmp_path, answer(sdk, stream=False))
    with session(path, [faults.prepend(502, body="html")]) as cassette:
        error_type = openai.InternalServerError if sdk == "openai" else anthropic.APIStatusError
        with pytest.raises(error_type) as caught:
            ask(sdk, client_for(sdk, cassette))

    response = caught.value.response
    assert response.status_code == 502
    assert response.headers["content-type"] == "text/html"
    assert "<h1>502 Bad Gateway</h1>" in response.text
    assert "nginx" in str(caught.value.body)
    assert cassette.requests[0].faults == ["prepended 502"]


@pytest.mark.parametrize("sdk", SDKS)
def test_an_html_error_page_is_retried_like_any_5xx(tmp_path, sdk):
    path = save(tmp_path, answer(sdk, stream=False))
    with session(path, [faults.prepend(502, body="html", retry_after="1")]) as cassette:
        assert ask(sdk, client_for(sdk, cassette, retries=1)) == TEXT

    assert [r.status for r in cassette.requests] == [502, 200]
    assert_waits(cassette, [1.0])


def test_prepend_before_the_second_request_leaves_the_first_alone(tmp_path):
    path = save(
        tmp_path,
        build.openai_chat("first answer", stream=False, cadence=CADENCE),
        build.openai_chat("second answer", stream=False, cadence=CADENCE),
    )
    with session(path, [faults.prepend(503, nth=2, retry_after="1")]) as cassette:
        client = client_for("openai", cassette, retries=2)
        first = ask("openai", client)
        second = ask("openai", client)

    assert (first, second) == ("first answer", "second answer")
    assert [r.status for r in cassette.requests] == [200, 503, 200]
    assert [r.interaction for r in cassette.requests] == [0, None, 1]
    assert [r.faults for r in cassette.requests] == [[], ["prepended 503, Retry-After: 1"], []]
    assert_waits(cassette, at_least=[0.0, 1.0])
    assert cassette.requests[2].sent_at - cassette.requests[1].finished_at == pytest.approx(1.0)


def test_count_prepends_several_errors_and_a_client_with_too_few_retries_gives_up(tmp_path):
    path = save(tmp_path, answer("anthropic", stream=False))
    with (
        session(path, [faults.prepend(529, count=3, retry_after="1")]) as cassette,
        pytest.raises(anthropic.OverloadedError),
    ):
        ask("anthropic", client_for("anthropic", cassette, retries=2))

    assert [r.status for r in cassette.requests] == [529, 529, 529]
    assert_waits(cassette, [1.0, 1.0])
    assert cassette.unused() == [(0, cassette.interactions[0].request)]


@pytest.mark.parametrize("sdk", SDKS)
def test_a_prepended_error_before_a_stream_is_retried_and_the_stream_keeps_its_timing(
    tmp_path, sdk
):
    built = answer(sdk)
    path = save(tmp_path, built)
    with session(path, [faults.prepend(429, retry_after="1")]) as cassette:
        got = Received()
        stream_into(sdk, client_for(sdk, cassette, retries=1), got)

    assert got.text == TEXT
    retry_sent = cassette.requests[1].sent_at
    assert retry_sent == pytest.approx(1.001)
    assert_incremental(got.times, expected=expected_times(built, shift=retry_sent))


# -- rechunk: the same bytes in other pieces ----------------------------------------------------


@pytest.mark.parametrize("mode", ["bytes", "lines", "utf8"])
@pytest.mark.parametrize("sdk", SDKS)
def test_a_rechunked_stream_gives_the_same_text_at_the_same_times(tmp_path, sdk, mode):
    built = answer(sdk)
    path = save(tmp_path, built)
    with session(path, [faults.rechunk(mode)]) as cassette:
        got = Received()
        stream_into(sdk, client_for(sdk, cassette), got)

    assert got.text == TEXT
    assert got.deltas == WORDS
    assert_incremental(got.times, expected=expected_times(built))
    assert cassette.requests[0].faults == [f"re-chunked ({mode})"]
    assert cassette.requests[0].complete
    # the client was handed many more pieces than there are events
    assert len(cassette.requests[0].deliveries) > len(built.response.body.events)


@pytest.mark.parametrize("sdk", SDKS)
def test_a_rechunked_plain_answer_still_parses_and_arrives_when_recorded(tmp_path, sdk):
    built = answer(sdk, stream=False)
    path = save(tmp_path, built)
    with session(path, [faults.rechunk("bytes")]) as cassette:
        assert ask(sdk, client_for(sdk, cassette)) == TEXT
        answered_at = cassette.elapsed

    deliveries = cassette.requests[0].deliveries
    assert len(deliveries) == len(built.response.body.content())  # one piece per byte
    assert deliveries == pytest.approx([built.response.t_end / 1000] * len(deliveries))
    assert answered_at == pytest.approx(built.response.t_end / 1000)
    assert cassette.requests[0].faults == ["re-chunked (bytes)"]


@pytest.mark.parametrize("sdk", SDKS)
def test_merged_events_arrive_together_at_the_last_ones_time(tmp_path, sdk):
    built = answer(sdk)
    events = built.response.body.events
    size = 3
    path = save(tmp_path, built)
    with session(path, [faults.rechunk("merge", size=size)]) as cassette:
        got = Received()
        stream_into(sdk, client_for(sdk, cassette), got)

    def group_end(index):
        last = min((index // size) * size + size - 1, len(events) - 1)
        return events[last]["t"] / 1000

    wanted = [group_end(index) for index, _ in content_events(built)]
    assert got.text == TEXT
    assert got.times == pytest.approx(wanted, abs=1e-6)
    assert len(set(wanted)) < len(wanted)  # some deltas did arrive together
    assert wanted != expected_times(built)  # ... later than they were recorded
    assert len(cassette.requests[0].deliveries) == math.ceil(len(events) / size)
    assert cassette.requests[0].faults == ["re-chunked (merge)"]


def seam_pieces(path, fault_list):
    """The byte pieces the seam hands a client for the built stream, and their times."""
    with session(path, fault_list) as cassette:
        request = TransportRequest(
            method="POST",
            url=build.OPENAI_CHAT_URL,
            headers=Headers([("content-type", "application/json")]),
            body={"model": "gpt-4o-mini", "messages": MESSAGES, "stream": True},
            stream=True,
        )
        response = cassette.transport(request)
        pieces = list(response.body)
    return pieces, cassette.requests[0].deliveries


class TestRechunkPiecesThroughTheSeam:
    """The pieces themselves, read straight from the seam: split exactly as described."""

    @pytest.fixture
    def stream(self, tmp_path):
        built = build.openai_chat(TEXT, cadence=CADENCE)
        path = save(tmp_path, built)
        events, times = seam_pieces(path, [])
        assert len(events) == len(built.response.body.events)  # one piece per event, unfaulted
        return path, events, times

    def test_bytes_sends_one_byte_per_piece_at_its_events_time(self, stream):
        path, events, times = stream
        pieces, deliveries = seam_pieces(path, [faults.rechunk("bytes")])

        assert all(len(piece) == 1 for piece in pieces)
        assert b"".join(pieces) == b"".join(events)
        wanted = [t for event, t in zip(events, times, strict=True) for _ in event]
        assert deliveries == pytest.approx(wanted, abs=1e-9)

    def test_lines_splits_every_line_in_the_middle(self, stream):
        path, events, _ = stream
        pieces, _ = seam_pieces(path, [faults.rechunk("lines")])

        wanted = []
        for event in events:
            for line in event.splitlines(keepends=True):
                if len(line) > 2:
                    middle = (len(line) - 1) // 2
                    wanted += [line[:middle], line[middle:]]
                else:
                    wanted.append(line)
        assert pieces == wanted
        data_lines = [p for p in pieces if p.startswith(b"data: ")]
        assert data_lines  # every data line's first half ends short of its newline
        assert not any(p.endswith(b"\n") for p in data_lines)
        assert b"".join(pieces) == b"".join(events)

    def test_utf8_splits_inside_a_multi_byte_character(self, stream):
        path, events, _ = stream
        pieces, _ = seam_pieces(path, [faults.rechunk("utf8")])

        assert len(pieces) == 2 * len(events)
        assert b"".join(pieces) == b"".join(events)
        multi_byte = [
            (head, tail)
            for head, tail in zip(pieces[::2], pieces[1::2], strict=True)
            if any(byte >= 0x80 for byte in head + tail)
        ]
        assert len(multi_byte) == len(WORDS)  # every word has a non-ASCII character
        for head, tail in multi_byte:
            assert head[-1] >= 0xC0  # ends on the lead byte of a character
            assert 0x80 <= tail[0] < 0xC0  # the next piece starts on its continuation
            with pytest.raises(UnicodeDecodeError):
                head.decode()
        check_mark = "✓".encode()
        assert any(head.endswith(check_mark[:1]) for head, _ in multi_byte)

    def test_merge_joins_size_events_into_one_piece_at_the_last_ones_time(self, stream):
        path, events, times = stream
        pieces, deliveries = seam_pieces(path, [faults.rechunk("merge", size=3)])

        assert pieces == [b"".join(events[i : i + 3]) for i in range(0, len(events), 3)]
        assert deliveries == pytest.approx(
            [times[min(i + 2, len(times) - 1)] for i in range(0, len(events), 3)], abs=1e-9
        )


# -- stall: a gap in virtual time ---------------------------------------------------------------


@pytest.mark.parametrize("sdk", SDKS)
def test_a_stall_after_event_k_delays_the_rest_by_exactly_its_length(tmp_path, sdk):
    built = answer(sdk)
    found = content_events(built)
    k = found[2][0]  # the event carrying the third word
    path = save(tmp_path, built)
    with session(path, [faults.stall(2.5, after_event=k)]) as cassette:
        got = Received()
        stream_into(sdk, client_for(sdk, cassette), got)

    wanted = [t + (2.5 if index >= k else 0.0) for index, t in found]
    assert got.text == TEXT
    assert_incremental(got.times, expected=wanted)
    assert got.times[2] - got.times[1] == pytest.approx(CADENCE.gap + 2.5)
    assert cassette.requests[0].faults == [f"stall 2.5 s after event {k}"]


@pytest.mark.parametrize("sdk", SDKS)
def test_a_stall_before_the_headers_delays_a_stream_from_its_first_byte(tmp_path, sdk):
    built = answer(sdk)
    path = save(tmp_path, built)
    with session(path, [faults.stall(1.5)]) as cassette:
        got = Received()
        stream_into(sdk, client_for(sdk, cassette), got)

    assert got.text == TEXT
    assert_incremental(got.times, expected=expected_times(built, shift=1.5))
    assert cassette.requests[0].deliveries[0] == pytest.approx(CADENCE.headers + 1.5)
    assert cassette.requests[0].faults == ["stall 1.5 s before the headers"]


def test_a_stall_before_the_headers_of_a_plain_answer_shows_as_slow_headers(tmp_path):
    path = save(tmp_path, answer("openai", stream=False))
    with session(path, [faults.stall(4)]) as cassette:
        client = client_for("openai", cassette)
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=MESSAGES
        )
        at_headers = cassette.elapsed

    assert raw.parse().choices[0].message.content == TEXT
    assert at_headers == pytest.approx(CADENCE.ttft + 4)
    assert cassette.requests[0].faults == ["stall 4 s before the headers"]


# -- disconnect ---------------------------------------------------------------------------------


def test_a_disconnect_after_event_k_is_openais_connection_error_from_remote_protocol_error(
    tmp_path,
):
    built = answer("openai")
    found = content_events(built)
    k = found[2][0]  # cut just before the third word
    path = save(tmp_path, built)
    with session(path, [faults.disconnect(after_event=k)]) as cassette:
        got = Received()
        with pytest.raises(openai.APIConnectionError) as caught:
            stream_into("openai", client_for("openai", cassette, retries=2), got)
        failed_at = time.monotonic() - got.t0

    cause = caught.value.__cause__
    assert isinstance(cause, httpx2.RemoteProtocolError)
    assert "peer closed connection without sending complete message body" in str(cause)
    assert got.deltas == WORDS[:2]
    assert failed_at == pytest.approx(found[1][1])  # at the last event that got through
    assert_attempts(cassette, 1)  # a stream already under way is not retried
    assert cassette.requests[0].faults == [f"disconnect after event {k}"]
    assert not cassette.requests[0].complete


@contextlib.contextmanager
def raised_while_streaming(kind, match=""):
    """The library's ``kind`` error, as anthropic's code meets it while iterating a stream:
    before 2.17 the SDK lets it through as it is; from 2.17 it wraps it in its own
    ``APIConnectionError`` (``APITimeoutError`` for a timeout), the library's error as the
    cause. Either way the error the fault made reaches the SDK's caller."""
    with pytest.raises((kind, anthropic.APIConnectionError)) as caught:
        yield
    error = caught.value
    if isinstance(error, anthropic.APIConnectionError):
        if isinstance(kind, type) and issubclass(kind, httpx2.TimeoutException):
            assert isinstance(error, anthropic.APITimeoutError), error
        error = error.__cause__
    assert isinstance(error, kind), repr(error)
    assert re.search(match, str(error)), str(error)


def test_a_disconnect_mid_stream_reaches_anthropic_code_as_httpx2_remote_protocol_error(
    tmp_path,
):
    built = answer("anthropic")
    found = content_events(built)
    k = found[2][0]
    path = save(tmp_path, built)
    with session(path, [faults.disconnect(after_event=k)]) as cassette:
        got = Received()
        with raised_while_streaming(httpx2.RemoteProtocolError, "peer closed connection"):
            stream_into("anthropic", client_for("anthropic", cassette, retries=2), got)

    assert got.deltas == WORDS[:2]
    assert got.times == pytest.approx([t for _, t in found[:2]])
    assert_attempts(cassette, 1)
    assert cassette.requests[0].faults == [f"disconnect after event {k}"]


def test_a_disconnect_during_a_plain_answer_is_retried_into_the_next_recording(tmp_path):
    path = save(tmp_path, answer("openai", stream=False), answer("openai", stream=False))
    with session(path, [faults.disconnect(after_event=0)]) as cassette:
        assert ask("openai", client_for("openai", cassette, retries=1)) == TEXT

    # the cut answer used up its recording; the retry plays the second one
    assert [r.interaction for r in cassette.requests] == [0, 1]
    assert [r.faults for r in cassette.requests] == [["disconnect after event 0"], []]
    assert [r.complete for r in cassette.requests] == [False, True]


# -- timeouts -----------------------------------------------------------------------------------

TIMEOUTS = [
    pytest.param(faults.connect_timeout(3), httpx2.ConnectTimeout, "connect timeout after 3 s"),
    pytest.param(
        faults.read_timeout(3), httpx2.ReadTimeout, "read timeout before the headers", id="read"
    ),
]


@pytest.mark.parametrize(("fault", "cause", "shown"), TIMEOUTS)
@pytest.mark.parametrize("sdk", SDKS)
def test_a_timeout_before_the_headers_is_the_sdks_timeout_error(tmp_path, sdk, fault, cause, shown):
    path = save(tmp_path, answer(sdk, stream=False))
    with session(path, [fault]) as cassette:
        error_type = openai.APITimeoutError if sdk == "openai" else anthropic.APITimeoutError
        with pytest.raises(error_type) as caught:
            ask(sdk, client_for(sdk, cassette))
        failed_at = cassette.elapsed

    assert isinstance(caught.value.__cause__, cause)
    assert failed_at == pytest.approx(3.0)  # after the timeout's length, in virtual time
    assert cassette.requests[0].status is None
    assert cassette.requests[0].faults == [shown]
    assert cassette.unused() == [(0, cassette.interactions[0].request)]


@pytest.mark.parametrize(("fault", "cause", "shown"), TIMEOUTS)
@pytest.mark.parametrize("sdk", SDKS)
def test_after_a_timeout_the_retry_gets_the_recorded_answer(tmp_path, sdk, fault, cause, shown):
    path = save(tmp_path, answer(sdk, stream=False))
    with session(path, [fault]) as cassette:
        assert ask(sdk, client_for(sdk, cassette, retries=2)) == TEXT

    first, retry = cassette.requests
    assert (first.status, retry.status) == (None, 200)
    assert (first.interaction, retry.interaction) == (None, 0)
    assert 3.0 + BACKOFF[0] <= retry.sent_at <= 3.0 + BACKOFF[1]
    assert [first.faults, retry.faults] == [[shown], []]


def test_a_read_timeout_after_event_k_is_openais_timeout_error(tmp_path):
    built = answer("openai")
    found = content_events(built)
    k = found[1][0]
    path = save(tmp_path, built)
    with session(path, [faults.read_timeout(4, after_event=k)]) as cassette:
        got = Received()
        with pytest.raises(openai.APITimeoutError) as caught:
            stream_into("openai", client_for("openai", cassette, retries=2), got)
        failed_at = time.monotonic() - got.t0

    assert isinstance(caught.value.__cause__, httpx2.ReadTimeout)
    assert got.deltas == WORDS[:1]
    assert failed_at == pytest.approx(found[0][1] + 4)  # 4 s of silence after the last event
    assert_attempts(cassette, 1)
    assert cassette.requests[0].faults == [f"read timeout after event {k}"]


def test_a_read_timeout_after_event_k_reaches_anthropic_code_as_httpx2_read_timeout(tmp_path):
    built = answer("anthropic")
    found = content_events(built)
    k = found[1][0]
    path = save(tmp_path, built)
    with session(path, [faults.read_timeout(4, after_event=k)]) as cassette:
        got = Received()
        with raised_while_streaming(httpx2.ReadTimeout):
            stream_into("anthropic", client_for("anthropic", cassette), got)
        failed_at = time.monotonic() - got.t0

    assert got.deltas == WORDS[:1]
    assert failed_at == pytest.approx(found[0][1] + 4)
    assert cassette.requests[0].faults == [f"read timeout after event {k}"]


# -- error events inside a 200 stream ---------------------------------------------------------


def test_an_anthropic_error_event_mid_stream_raises_with_the_providers_body(tmp_path):
    built = answer("anthropic")
    found = content_events(built)
    k = found[2][0]
    path = save(tmp_path, built)
    fault = faults.error_event(after_event=k, message="Overloaded, try later")
    with session(path, [fault]) as cassette:
        got = Received()
        with pytest.raises(anthropic.APIStatusError) as caught:
            stream_into("anthropic", client_for("anthropic", cassette, retries=2), got)

    assert caught.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded, try later"},
    }
    assert caught.value.status_code == 200  # the stream itself had begun with a 200
    assert got.deltas == WORDS[:2]
    assert_attempts(cassette, 1)
    assert cassette.requests[0].status == 200
    assert cassette.requests[0].faults == [f"error event after event {k}"]


def test_an_openai_chunk_carrying_error_raises_api_error(tmp_path):
    built = answer("openai")
    found = content_events(built)
    k = found[2][0]
    path = save(tmp_path, built)
    fault = faults.error_event(after_event=k, message="The server had an error")
    with session(path, [fault]) as cassette:
        got = Received()
        with pytest.raises(openai.APIError) as caught:
            stream_into("openai", client_for("openai", cassette, retries=2), got)

    assert caught.value.message == "The server had an error"
    assert caught.value.body["type"] == "server_error"
    assert not isinstance(caught.value, openai.APIStatusError)
    assert got.deltas == WORDS[:2]
    assert_attempts(cassette, 1)
    assert cassette.requests[0].faults == [f"error event after event {k}"]


# -- composition --------------------------------------------------------------------------------


def test_faults_compose_a_retry_then_a_rechunked_stalled_stream(tmp_path):
    built = answer("openai")
    found = content_events(built)
    k = found[3][0]
    path = save(tmp_path, built)
    # shapers apply in the order given: stall counts events before rechunk splits them
    composed = [
        faults.prepend(429, retry_after="1"),
        faults.stall(2, after_event=k),
        faults.rechunk("utf8"),
    ]
    with session(path, composed) as cassette:
        got = Received()
        stream_into("openai", client_for("openai", cassette, retries=2), got)

    assert got.text == TEXT
    assert [r.status for r in cassette.requests] == [429, 200]
    # shapers change the recorded answer, so the made-up 429 neither shows nor uses them
    assert [r.faults for r in cassette.requests] == [
        ["prepended 429, Retry-After: 1"],
        [f"stall 2 s after event {k}", "re-chunked (utf8)"],
    ]
    retry = cassette.requests[1].sent_at
    wanted = [retry + t + (2.0 if index >= k else 0.0) for index, t in found]
    assert_incremental(got.times, expected=wanted)


def test_two_faults_that_answer_in_place_of_the_recording_take_turns(tmp_path):
    path = save(tmp_path, answer("anthropic", stream=False))
    composed = [faults.prepend(429, retry_after="1"), faults.connect_timeout(2)]
    with session(path, composed) as cassette:
        assert ask("anthropic", client_for("anthropic", cassette, retries=2)) == TEXT

    assert [r.status for r in cassette.requests] == [429, None, 200]
    assert [r.faults for r in cassette.requests] == [
        ["prepended 429, Retry-After: 1"],
        ["connect timeout after 2 s"],
        [],
    ]
    assert cassette.requests[1].sent_at == pytest.approx(1.001)


def test_a_disconnect_then_a_rechunk_cuts_after_events_and_splits_what_got_through(tmp_path):
    built = answer("openai")
    found = content_events(built)
    k = found[2][0]
    path = save(tmp_path, built)
    composed = [faults.disconnect(after_event=k), faults.rechunk("bytes")]
    with session(path, composed) as cassette:
        got = Received()
        with pytest.raises(openai.APIConnectionError):
            stream_into("openai", client_for("openai", cassette), got)

    assert got.deltas == WORDS[:2]
    assert cassette.requests[0].faults == [f"disconnect after event {k}", "re-chunked (bytes)"]
    assert len(cassette.requests[0].deliveries) > k  # bytes, not events, reached the client


# -- where faults are declared ------------------------------------------------------------------


def test_faults_injected_on_the_handle_count_requests_from_then_on(tmp_path):
    path = save(
        tmp_path,
        build.openai_chat("one", stream=False, cadence=CADENCE),
        build.openai_chat("two", stream=False, cadence=CADENCE),
    )
    with session(path) as cassette:
        client = client_for("openai", cassette, retries=2)
        assert ask("openai", client) == "one"
        cassette.inject(faults.prepend(500, retry_after="1"), faults.stall(0.75))
        assert ask("openai", client) == "two"

    assert [r.status for r in cassette.requests] == [200, 500, 200]
    assert [r.faults for r in cassette.requests] == [
        [],
        ["prepended 500, Retry-After: 1"],
        ["stall 0.75 s before the headers"],
    ]
    assert cassette.requests[2].first_delivery - cassette.requests[2].sent_at == pytest.approx(
        CADENCE.ttft + 0.75
    )


def test_something_that_is_not_a_fault_is_refused_on_the_handle(tmp_path):
    path = save(tmp_path, answer("openai", stream=False))
    with session(path) as cassette, pytest.raises(TypeError, match="is not a fault"):
        cassette.inject("prepend 429")


# Inner pytest runs skip the plugins they do not need: faster, and no warnings of theirs.
QUIET_PLUGINS = ("-p", "no:hypothesispytest", "-p", "no:cacheprovider")

MARKER_TESTS = """
import openai
import pytest

from pytest_toolnexus import faults

MESSAGES = [{"role": "user", "content": "Hi"}]


@pytest.mark.cassette(
    "built",
    faults=[faults.prepend(503, retry_after="2"), faults.rechunk("bytes")],
)
def test_marker_faults(cassette):
    client = openai.OpenAI(api_key="k", max_retries=2)
    deltas = [
        c.choices[0].delta.content
        for c in client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        if c.choices and c.choices[0].delta.content
    ]
    assert "".join(deltas) == "héllo wörld ✓"
    assert [r.status for r in cassette.requests] == [503, 200]
    assert [r.faults for r in cassette.requests] == [
        ["prepended 503, Retry-After: 2"],
        ["re-chunked (bytes)"],
    ]
    assert [s.duration for s in cassette.sleeps] == [2.0]


@pytest.mark.cassette("built")
def test_handle_faults(cassette):
    cassette.inject(faults.error_event(after_event=1, message="boom"))
    client = openai.OpenAI(api_key="k", max_retries=2)
    with pytest.raises(openai.APIError, match="boom"):
        for _ in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):
            pass
    assert cassette.requests[0].faults == ["error event after event 1"]


@pytest.mark.cassette("built", faults=faults.connect_timeout(2))
def test_a_single_fault_on_the_marker(cassette):
    client = openai.OpenAI(api_key="k", max_retries=0)
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="m", messages=MESSAGES)
    assert cassette.requests[0].faults == ["connect timeout after 2 s"]
    assert cassette.elapsed == pytest.approx(2.0)
"""


def test_faults_on_the_marker_and_on_the_cassette_fixture(pytester):
    folder = pytester.path / "cassettes" / "test_marker"
    folder.mkdir(parents=True)
    build.build_cassette(folder / "built.msgpack", [build.openai_chat("héllo wörld ✓")])
    pytester.makepyfile(test_marker=MARKER_TESTS)

    result = pytester.runpytest(*QUIET_PLUGINS, "-q")

    result.assert_outcomes(passed=3)


def test_a_marker_fault_that_is_not_a_fault_is_a_usage_error(pytester):
    pytester.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.cassette(faults=["prepend 429"])
        def test_bad(cassette):
            pass
        """
    )

    result = pytester.runpytest(*QUIET_PLUGINS)

    result.stdout.fnmatch_lines(["*faults must be made with pytest_toolnexus.faults*"])
    assert result.ret != 0


def test_fault_arguments_are_checked_when_made():
    with pytest.raises(ValueError, match="600 is not an HTTP status"):
        faults.prepend(600)
    with pytest.raises(ValueError, match="count and nth start at 1"):
        faults.prepend(429, nth=0)
    with pytest.raises(TypeError, match="'before'"):
        faults.prepend(429, before=2)  # one spelling: nth=, as every other fault
    with pytest.raises(ValueError, match="rechunk mode 'words'"):
        faults.rechunk("words")
    with pytest.raises(ValueError, match="a stall cannot be negative"):
        faults.stall(-1)
    with pytest.raises(ValueError, match="after_event counts events from 0"):
        faults.disconnect(after_event=-1)
    with pytest.raises(ValueError, match="merge joins size >= 2 events into one chunk"):
        faults.rechunk("merge", size=1)


def test_the_error_body_helper_follows_the_provider_behind_the_url():
    assert faults.error_body(529, build.ANTHROPIC_URL) == {
        "type": "error",
        "error": {
            "type": "overloaded_error",
            "message": "Overloaded (injected by pytest-toolnexus)",
        },
    }
    assert faults.error_body(404, build.OLLAMA_URL, "model not found") == {
        "error": "model not found"
    }
    gemini = f"{build.GEMINI_BASE}/gemini-2.5-flash:generateContent"
    assert faults.error_body(400, gemini, "bad")["error"] == {
        "code": 400,
        "message": "bad",
        "status": "INVALID_ARGUMENT",
    }
    assert faults.error_body(404, gemini)["error"]["status"] == "NOT_FOUND"
