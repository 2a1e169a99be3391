"""Recorded timing, replayed to the real SDKs (docs/timing.md, DESIGN §4).

Cassettes are built by hand: a three-second, 20-delta stream for OpenAI chat completions and
for Anthropic Messages, rate limits with ``Retry-After`` in seconds and in HTTP-date form, and
4xx errors that must not be retried. Under the virtual clock every delta reaches the client at
its recorded offset, exactly, and the recorded seconds are not slept; in real mode the gaps of
a one-second stream are slept for real (halved with ``speed=2``); in instant mode everything
arrives at once.

Real time is read with :func:`tests.support.realtime.wall`, which the virtual clock leaves
alone. Every recording that a virtual replay must not sleep is two seconds or more, so that a
replay slowed by a loaded machine is never mistaken for one that slept (``assert_did_not_sleep``).
"""

import datetime
import email.utils
import time

import anthropic
import anyio
import httpx2
import openai
import pytest

from pytest_toolnexus import (
    Cassette,
    Headers,
    HTTPBridge,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    assert_attempts,
    assert_incremental,
    assert_time_to_first_event,
    assert_waits,
    use_cassette,
)
from pytest_toolnexus._store.cassette import JsonBody, SseBody
from tests.support.realtime import apaced, assert_did_not_sleep, paced, wall

OPENAI_URL = "https://api.openai.com/v1/chat/completions"
ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"
MODEL = "gpt-test"
CLAUDE = "claude-test"
MESSAGES = [{"role": "user", "content": "Count to twenty."}]
WORDS = [f"w{i} " for i in range(20)]
OFFSETS_MS = [150.0 * (i + 1) for i in range(20)]  # 150, 300, ... 3000 ms
OFFSETS = [ms / 1000 for ms in OFFSETS_MS]
END_MS = OFFSETS_MS[-1]
STREAM_SECONDS = END_MS / 1000
# Real mode sleeps for real: its stream is shorter.
REAL_OFFSETS_MS = [50.0 * (i + 1) for i in range(20)]  # 50, 100, ... 1000 ms
REAL_OFFSETS = [ms / 1000 for ms in REAL_OFFSETS_MS]
SSE = [("content-type", "text/event-stream")]
JSON = [("content-type", "application/json")]


def interaction(url, request_body, status, headers, body, t_headers=0.0, t_end=0.0):
    return Interaction(
        RecordedRequest("POST", url, Headers(), JsonBody(request_body)),
        RecordedResponse(status, Headers(headers), body, t_headers, t_end),
    )


def save(path, *interactions):
    Cassette(path, list(interactions)).save()
    return path


@pytest.fixture(scope="module", autouse=True)
def warm_sdks(tmp_path_factory):
    """Run every SDK path of this module once, so that the real-time checks below measure
    replay and not each SDK's one-time setup (pydantic validators built on first use, cached
    platform headers ...), which costs up to ~60 ms cold."""
    folder = tmp_path_factory.mktemp("warm")
    stream = save(
        folder / "openai-stream.msgpack",
        interaction(
            OPENAI_URL, openai_request(True), 200, SSE, SseBody(openai_events()), 20.0, END_MS
        ),
    )
    limited = [*JSON, ("retry-after", "1")]
    openai_retry = save(
        folder / "openai-retry.msgpack",
        interaction(
            OPENAI_URL,
            openai_request(False),
            429,
            limited,
            JsonBody(openai_error("slow down", "requests", None)),
        ),
        interaction(OPENAI_URL, openai_request(False), 200, JSON, JsonBody(openai_completion(""))),
    )
    anthropic_stream = save_anthropic_stream(folder / "anthropic-stream.msgpack")
    anthropic_retry = save(
        folder / "anthropic-retry.msgpack",
        interaction(
            ANTHROPIC_URL,
            anthropic_request(False),
            429,
            limited,
            JsonBody(anthropic_error("rate_limit_error", "slow down")),
        ),
        interaction(
            ANTHROPIC_URL, anthropic_request(False), 200, JSON, JsonBody(anthropic_message(""))
        ),
    )
    with use_cassette(stream) as cassette:
        stream_openai(openai_client(cassette))
    with use_cassette(openai_retry) as cassette:
        openai_client(cassette).chat.completions.create(model=MODEL, messages=MESSAGES)
    with use_cassette(anthropic_stream) as cassette:
        list(
            anthropic_client(cassette).messages.create(
                model=CLAUDE, max_tokens=256, messages=MESSAGES, stream=True
            )
        )
    with use_cassette(anthropic_retry) as cassette:
        anthropic_client(cassette).messages.create(model=CLAUDE, max_tokens=256, messages=MESSAGES)

    async def async_openai():
        for path in (stream, openai_retry):
            with use_cassette(path) as cassette:
                client = async_openai_client(cassette)
                if path == stream:
                    chunks = await client.chat.completions.create(
                        model=MODEL, messages=MESSAGES, stream=True
                    )
                    async for _ in chunks:
                        pass
                else:
                    await client.chat.completions.create(model=MODEL, messages=MESSAGES)
                await client.close()

    anyio.run(async_openai, backend="asyncio")
    anyio.run(async_openai, backend="trio")


# -- OpenAI chat completions ---------------------------------------------------------------------


def openai_request(stream):
    body = {"model": MODEL, "messages": MESSAGES}
    if stream:
        body["stream"] = True
    return body


def openai_chunk(text):
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": MODEL,
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }


def openai_completion(text):
    return {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "created": 1700000000,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }


def openai_error(message, kind, code):
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def openai_events(offsets_ms=OFFSETS_MS):
    events = [
        {"t": t, "data": openai_chunk(word)} for t, word in zip(offsets_ms, WORDS, strict=True)
    ]
    events.append({"t": offsets_ms[-1], "text": "[DONE]"})
    return events


def save_openai_stream(path, offsets_ms):
    body = SseBody(openai_events(offsets_ms))
    return save(
        path, interaction(OPENAI_URL, openai_request(True), 200, SSE, body, 20.0, offsets_ms[-1])
    )


@pytest.fixture
def openai_stream(tmp_path):
    """A 20-delta chat-completions stream recorded over three seconds, ended by ``[DONE]``."""
    return save_openai_stream(tmp_path / "openai-stream.msgpack", OFFSETS_MS)


@pytest.fixture
def openai_real_stream(tmp_path):
    """The same stream recorded over one second, for the modes that sleep for real."""
    return save_openai_stream(tmp_path / "openai-real-stream.msgpack", REAL_OFFSETS_MS)


def openai_client(cassette, **options):
    http = httpx2.Client(transport=cassette.http_transport())
    return openai.OpenAI(api_key="sk-test", http_client=http, **options)


def async_openai_client(cassette, **options):
    http = httpx2.AsyncClient(transport=cassette.http_transport())
    return openai.AsyncOpenAI(api_key="sk-test", http_client=http, **options)


def stream_openai(client):
    """The text of each delta and when it arrived on ``time.monotonic`` (virtual when a
    virtual clock is installed), from just before the call."""
    start = time.monotonic()
    arrivals, texts = [], []
    for chunk in client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append(time.monotonic() - start)
            texts.append(chunk.choices[0].delta.content)
    return texts, arrivals


def assert_on_the_recorded_offsets(arrivals, offsets=OFFSETS, tolerance=0.001):
    assert len(arrivals) == len(offsets)
    late = [
        (n, round(got, 4), want)
        for n, (got, want) in enumerate(zip(arrivals, offsets, strict=True))
        if abs(got - want) > tolerance
    ]
    assert late == [], f"arrivals off their recorded offsets by more than {tolerance} s"
    assert_incremental(arrivals, expected=offsets, tolerance=tolerance, what="deltas")


def test_openai_stream_arrives_at_the_recorded_offsets_without_sleeping(openai_stream):
    with use_cassette(openai_stream) as cassette:
        client = openai_client(cassette)
        started = wall()
        texts, arrivals = stream_openai(client)
        took = wall() - started

    assert_did_not_sleep(took, STREAM_SECONDS, what="the 3 s stream")
    assert texts == WORDS
    assert_on_the_recorded_offsets(arrivals)
    (sent,) = cassette.requests
    assert sent.status == 200
    assert sent.complete
    # 20 deltas + [DONE]
    assert sent.deliveries == pytest.approx([*OFFSETS, STREAM_SECONDS], abs=1e-9)
    assert assert_time_to_first_event(sent, equals=0.15) == pytest.approx(0.15)
    assert cassette.elapsed == pytest.approx(STREAM_SECONDS)
    assert cassette.sleeps == []


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_async_openai_stream_arrives_at_the_recorded_offsets(openai_stream, anyio_backend):
    with use_cassette(openai_stream) as cassette:
        client = async_openai_client(cassette)
        started = wall()
        start = time.monotonic()
        arrivals, texts = [], []
        stream = await client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append(time.monotonic() - start)
                texts.append(chunk.choices[0].delta.content)
        took = wall() - started
        await client.close()

    assert_did_not_sleep(took, STREAM_SECONDS, what="the 3 s stream")
    assert texts == WORDS
    assert_on_the_recorded_offsets(arrivals)
    assert cassette.requests[0].complete
    assert cassette.sleeps == []


# -- Anthropic Messages --------------------------------------------------------------------------


def anthropic_request(stream):
    body = {"model": CLAUDE, "max_tokens": 256, "messages": MESSAGES}
    if stream:
        body["stream"] = True
    return body


def anthropic_events():
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": CLAUDE,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    events = [
        {
            "t": 20.0,
            "event": "message_start",
            "data": {"type": "message_start", "message": message},
        },
        {
            "t": 25.0,
            "event": "content_block_start",
            "data": {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        },
    ]
    events += [
        {
            "t": t,
            "event": "content_block_delta",
            "data": {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": word},
            },
        }
        for t, word in zip(OFFSETS_MS, WORDS, strict=True)
    ]
    events += [
        {
            "t": END_MS,
            "event": "content_block_stop",
            "data": {"type": "content_block_stop", "index": 0},
        },
        {
            "t": END_MS,
            "event": "message_delta",
            "data": {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
        },
        {"t": END_MS, "event": "message_stop", "data": {"type": "message_stop"}},
    ]
    return events


def anthropic_message(text):
    return {
        "id": "msg_2",
        "type": "message",
        "role": "assistant",
        "model": CLAUDE,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }


def anthropic_error(kind, message):
    return {"type": "error", "error": {"type": kind, "message": message}}


def anthropic_client(cassette, **options):
    http = httpx2.Client(transport=cassette.http_transport())
    return anthropic.Anthropic(api_key="sk-ant-test", http_client=http, **options)


def save_anthropic_stream(path):
    body = SseBody(anthropic_events())
    return save(
        path, interaction(ANTHROPIC_URL, anthropic_request(True), 200, SSE, body, 15, END_MS)
    )


def test_anthropic_stream_arrives_at_the_recorded_offsets_without_sleeping(tmp_path):
    path = save_anthropic_stream(tmp_path / "anthropic-stream.msgpack")

    with use_cassette(path) as cassette:
        client = anthropic_client(cassette)
        started = wall()
        start = time.monotonic()
        arrivals, texts, kinds = [], [], []
        events = client.messages.create(
            model=CLAUDE, max_tokens=256, messages=MESSAGES, stream=True
        )
        for event in events:
            kinds.append(event.type)
            if event.type == "content_block_delta":
                arrivals.append(time.monotonic() - start)
                texts.append(event.delta.text)
        took = wall() - started

    assert_did_not_sleep(took, STREAM_SECONDS, what="the 3 s stream")
    assert texts == WORDS
    assert kinds == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * 20,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert_on_the_recorded_offsets(arrivals)
    assert assert_time_to_first_event(cassette.requests[0], equals=0.02) == pytest.approx(0.02)
    assert cassette.sleeps == []


# -- a buffering client is caught ----------------------------------------------------------------


def buffered(stream):
    """A client bug: read the whole stream, then hand the pieces on."""
    everything = list(stream)
    yield from everything


def test_a_buffering_client_fails_assert_incremental(openai_stream):
    with use_cassette(openai_stream) as cassette:
        client = openai_client(cassette)
        start = time.monotonic()
        arrivals = []
        stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
        for chunk in buffered(stream):
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append(time.monotonic() - start)

    assert arrivals == [STREAM_SECONDS] * 20
    with pytest.raises(
        AssertionError,
        match=r"^all 20 deltas reached the client at once: the stream was buffered, "
        r"not delivered incrementally$",
    ):
        assert_incremental(arrivals, what="deltas")
    # The transport did hand over piece by piece: only the test's own reading catches the
    # wrapper, which is why assert_incremental takes no SentRequest.
    assert_incremental(cassette.requests[0].deliveries, expected=[*OFFSETS, STREAM_SECONDS])


def test_the_same_stream_unbuffered_passes(openai_stream):
    with use_cassette(openai_stream) as cassette:
        _, arrivals = stream_openai(openai_client(cassette))
    assert_incremental(arrivals, expected=OFFSETS, min_spread=2.8, what="deltas")


# -- Retry-After is honoured, on virtual time ----------------------------------------------------


@pytest.fixture
def openai_rate_limited(tmp_path):
    return save(
        tmp_path / "openai-429.msgpack",
        interaction(
            OPENAI_URL,
            openai_request(False),
            429,
            [*JSON, ("retry-after", "2")],
            JsonBody(openai_error("Rate limit reached", "requests", "rate_limit_exceeded")),
            30.0,
            31.0,
        ),
        interaction(
            OPENAI_URL,
            openai_request(False),
            200,
            JSON,
            JsonBody(openai_completion("Hi!")),
            400,
            400,
        ),
    )


def test_openai_waits_the_retry_after_seconds(openai_rate_limited):
    with use_cassette(openai_rate_limited) as cassette:
        client = openai_client(cassette, max_retries=2)
        started = wall()
        completion = client.chat.completions.create(model=MODEL, messages=MESSAGES)
        took = wall() - started

    assert_did_not_sleep(took, 2.0, what="a 2 s retry wait")
    assert completion.choices[0].message.content == "Hi!"
    assert [s.duration for s in cassette.sleeps] == [2.0]
    assert [s.kind for s in cassette.sleeps] == ["time.sleep"]
    assert assert_waits(cassette, [2.0], tolerance=0.01) == [pytest.approx(2.0)]
    assert_attempts(cassette, 2)
    assert [r.status for r in cassette.requests] == [429, 200]
    assert cassette.requests[0].retry_after == "2"
    assert cassette.requests[1].sent_at == pytest.approx(0.031 + 2.0)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_async_openai_waits_the_retry_after_seconds(openai_rate_limited, anyio_backend):
    with use_cassette(openai_rate_limited) as cassette:
        client = async_openai_client(cassette, max_retries=2)
        started = wall()
        completion = await client.chat.completions.create(model=MODEL, messages=MESSAGES)
        took = wall() - started
        await client.close()

    assert_did_not_sleep(took, 2.0, what="a 2 s retry wait")
    assert completion.choices[0].message.content == "Hi!"
    assert [(s.kind, s.duration) for s in cassette.sleeps] == [("anyio.sleep", 2.0)]
    assert_waits(cassette, [2.0], tolerance=0.01)
    assert_attempts(cassette, 2)


def test_anthropic_waits_the_retry_after_seconds(tmp_path):
    path = save(
        tmp_path / "anthropic-429.msgpack",
        interaction(
            ANTHROPIC_URL,
            anthropic_request(False),
            429,
            [*JSON, ("retry-after", "2")],
            JsonBody(anthropic_error("rate_limit_error", "Too many requests")),
            25.0,
            25.0,
        ),
        interaction(
            ANTHROPIC_URL,
            anthropic_request(False),
            200,
            JSON,
            JsonBody(anthropic_message("Hi!")),
            600,
            600,
        ),
    )

    with use_cassette(path) as cassette:
        client = anthropic_client(cassette, max_retries=2)
        started = wall()
        message = client.messages.create(model=CLAUDE, max_tokens=256, messages=MESSAGES)
        took = wall() - started

    assert_did_not_sleep(took, 2.0, what="a 2 s retry wait")
    assert message.content[0].text == "Hi!"
    assert [s.duration for s in cassette.sleeps] == [2.0]
    assert_waits(cassette, [2.0], tolerance=0.01)
    assert_attempts(cassette, 2)
    assert [r.status for r in cassette.requests] == [429, 200]


# -- 4xx errors are not retried --------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, openai.BadRequestError),
        (404, openai.NotFoundError),
        (422, openai.UnprocessableEntityError),
    ],
)
def test_openai_does_not_retry_a_4xx(tmp_path, status, error):
    path = save(
        tmp_path / f"openai-{status}.msgpack",
        interaction(
            OPENAI_URL,
            openai_request(False),
            status,
            JSON,
            JsonBody(openai_error(f"error {status}", "invalid_request_error", None)),
            20,
            20,
        ),
    )
    # allow_repeats: a (wrong) retry would be served again and counted, not fail as a miss.
    with use_cassette(path, allow_repeats=True) as cassette:
        client = openai_client(cassette, max_retries=4)
        with pytest.raises(error, match=f"error {status}"):
            client.chat.completions.create(model=MODEL, messages=MESSAGES)

    assert_attempts(cassette, 1)
    assert cassette.sleeps == []
    assert cassette.requests[0].status == status


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, anthropic.BadRequestError),
        (404, anthropic.NotFoundError),
        (422, anthropic.UnprocessableEntityError),
    ],
)
def test_anthropic_does_not_retry_a_4xx(tmp_path, status, error):
    path = save(
        tmp_path / f"anthropic-{status}.msgpack",
        interaction(
            ANTHROPIC_URL,
            anthropic_request(False),
            status,
            JSON,
            JsonBody(anthropic_error("invalid_request_error", f"error {status}")),
            20,
            20,
        ),
    )
    with use_cassette(path, allow_repeats=True) as cassette:
        client = anthropic_client(cassette, max_retries=4)
        with pytest.raises(error, match=f"error {status}"):
            client.messages.create(model=CLAUDE, max_tokens=256, messages=MESSAGES)

    assert_attempts(cassette, 1)
    assert cassette.sleeps == []


def test_the_same_setup_does_count_retries_of_a_5xx(tmp_path):
    """The control for the 4xx tests: with allow_repeats a retried request is served and
    counted, so a retry of a 4xx would have been seen."""
    path = save(
        tmp_path / "openai-500.msgpack",
        interaction(
            OPENAI_URL,
            openai_request(False),
            500,
            JSON,
            JsonBody(openai_error("server error", "server_error", None)),
            20,
            20,
        ),
    )

    with use_cassette(path, allow_repeats=True) as cassette:
        client = openai_client(cassette, max_retries=3)
        started = wall()
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model=MODEL, messages=MESSAGES)
        took = wall() - started

    assert_attempts(cassette, 4)
    assert [r.status for r in cassette.requests] == [500] * 4
    # No Retry-After: exponential backoff with up to 25 % jitter, 0.5 s, 1 s, then 2 s.
    waits = [s.duration for s in cassette.sleeps]
    first, second, third = waits
    assert 0.375 <= first <= 0.5
    assert 0.75 <= second <= 1.0
    assert 1.5 <= third <= 2.0
    assert_did_not_sleep(took, sum(waits), what="three retry waits")
    assert cassette.requests[1].sent_at == pytest.approx(0.02 + first)
    assert assert_waits(cassette, waits) == [pytest.approx(wait) for wait in waits]


def test_waits_between_three_attempts(tmp_path):
    """Each request's deliveries count from the session start, like its sent_at, so the wait
    before attempt 3 is measured from the end of attempt 2's response."""

    def limited(seconds, t):
        headers = [*JSON, ("retry-after", str(seconds))]
        body = JsonBody(openai_error("Rate limit reached", "requests", None))
        return interaction(OPENAI_URL, openai_request(False), 429, headers, body, t, t)

    ok = JsonBody(openai_completion("Hi!"))
    path = save(
        tmp_path / "openai-429-429.msgpack",
        limited(1, 31.0),
        limited(2, 31.0),
        interaction(OPENAI_URL, openai_request(False), 200, JSON, ok, 400, 400),
    )
    with use_cassette(path) as cassette:
        openai_client(cassette, max_retries=2).chat.completions.create(
            model=MODEL, messages=MESSAGES
        )

    assert [s.duration for s in cassette.sleeps] == [1.0, 2.0]
    assert [r.sent_at for r in cassette.requests] == pytest.approx([0.0, 1.031, 3.062])
    assert [r.finished_at for r in cassette.requests] == pytest.approx([0.031, 1.062, 3.462])
    assert_waits(cassette, [1.0, 2.0], tolerance=0.01)


# -- Retry-After as an HTTP date -----------------------------------------------------------------


RECORDED_AT = datetime.datetime(2024, 3, 1, 12, 0, 0, tzinfo=datetime.UTC)


def http_date(moment):
    return email.utils.format_datetime(moment, usegmt=True)


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_retry_after_as_an_http_date_reads_as_it_did_live(tmp_path, sdk):
    headers = [
        *JSON,
        ("date", http_date(RECORDED_AT)),
        ("retry-after", http_date(RECORDED_AT + datetime.timedelta(seconds=3))),
    ]
    if sdk == "openai":
        url, request = OPENAI_URL, openai_request(False)
        error, ok = openai_error("slow down", "requests", None), openai_completion("Hi!")
    else:
        url, request = ANTHROPIC_URL, anthropic_request(False)
        error, ok = anthropic_error("rate_limit_error", "slow down"), anthropic_message("Hi!")
    path = save(
        tmp_path / f"{sdk}-429-date.msgpack",
        interaction(url, request, 429, headers, JsonBody(error)),
        interaction(url, request, 200, JSON, JsonBody(ok), 300, 300),
    )

    with use_cassette(path) as cassette:
        # The replay's wall clock starts at the first response's Date, years ago.
        assert time.time() == RECORDED_AT.timestamp()
        assert datetime.datetime.now(datetime.UTC) == RECORDED_AT
        started = wall()
        if sdk == "openai":
            answer = openai_client(cassette, max_retries=2).chat.completions.create(
                model=MODEL, messages=MESSAGES
            )
            text = answer.choices[0].message.content
        else:
            answer = anthropic_client(cassette, max_retries=2).messages.create(
                model=CLAUDE, max_tokens=256, messages=MESSAGES
            )
            text = answer.content[0].text
        took = wall() - started

    assert_did_not_sleep(took, 3.0, what="a 3 s retry wait")
    assert text == "Hi!"
    assert [s.duration for s in cassette.sleeps] == [pytest.approx(3.0, abs=0.01)]
    assert_waits(cassette, [3.0], tolerance=0.01)
    assert_attempts(cassette, 2)
    assert cassette.requests[0].retry_after == "Fri, 01 Mar 2024 12:00:03 GMT"


# -- real and instant timing ---------------------------------------------------------------------


def timed_stream(cassette):
    """Stream through the SDK, noting on the wall clock when the request reached the seam and
    when each delta reached the caller."""
    sent = []

    def seam(request):
        sent.append(wall())
        return cassette.transport(request)

    client = openai.OpenAI(api_key="sk-test", http_client=httpx2.Client(transport=HTTPBridge(seam)))
    readings, texts = [], []
    for chunk in client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            readings.append(wall())
            texts.append(chunk.choices[0].delta.content)
    assert len(sent) == 1
    return texts, [t - sent[0] for t in readings]


@pytest.mark.parametrize("speed", [1, 2])
def test_real_timing_sleeps_the_recorded_gaps(openai_real_stream, speed):
    """Each delta at or after its recorded offset (divided by ``speed``) on the wall clock, in
    order, and no later than this machine's own sleeps are late right now (``paced``)."""

    def run():
        with use_cassette(openai_real_stream, timing="real", speed=speed) as cassette:
            texts, arrivals = timed_stream(cassette)
        return arrivals, (cassette, texts)

    expected = [t / speed for t in REAL_OFFSETS]
    cassette, texts = paced(run, expected, gaps=[0.05 / speed], what="delta")

    assert texts == WORDS
    assert cassette.sleeps == []
    assert cassette.requests[0].complete


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_real_timing_async_notes_no_sleeps_of_its_own(openai_real_stream, anyio_backend):
    """Replay's own waits in real mode are not the code's sleeps: cassette.sleeps lists only
    the code's, while the stream still keeps its (scaled) timing."""
    speed = 10

    async def run():
        with use_cassette(openai_real_stream, timing="real", speed=speed) as cassette:
            sent = []

            async def seam(request):
                sent.append(wall())
                return await cassette.async_transport(request)

            http = httpx2.AsyncClient(transport=HTTPBridge(async_transport=seam))
            client = openai.AsyncOpenAI(api_key="sk-test", http_client=http)
            readings = []
            stream = await client.chat.completions.create(
                model=MODEL, messages=MESSAGES, stream=True
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    readings.append(wall())
            await anyio.sleep(0.01)  # the code's own sleep is still noted
            await client.close()
        return [t - sent[0] for t in readings], cassette

    expected = [t / speed for t in REAL_OFFSETS]
    cassette = await apaced(run, expected, gaps=[0.05 / speed], what="delta")

    assert [(s.kind, s.duration) for s in cassette.sleeps] == [("anyio.sleep", 0.01)]


def test_instant_timing_delivers_everything_at_once(openai_stream):
    with use_cassette(openai_stream, timing="instant") as cassette:
        texts, arrivals = timed_stream(cassette)

    assert texts == WORDS
    assert_did_not_sleep(arrivals[-1], STREAM_SECONDS, what="an instant replay of the 3 s stream")
    assert cassette.requests[0].complete
    assert cassette.sleeps == []
