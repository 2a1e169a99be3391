"""The observer contract: replay and recording tell one object what happens to a request.

A custom :class:`~pytest_toolnexus._session.observer.Observer` passed to ``play``/``aplay`` or to a
recording transport sees each piece as it reaches the client (in order, at the clock time it
was due), then the end, and, when recording, the interaction it made; a broken stored piece
raises the error the observer chooses. With no observer, the transports work as before.
"""

import pytest

from pytest_toolnexus._seam.errors import CassetteFormatError
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import (
    AsyncByteStream,
    ByteStream,
    TransportRequest,
    TransportResponse,
)
from pytest_toolnexus._session import record_body as _record_body
from pytest_toolnexus._session.faults import ErrorEventFault, Shaping
from pytest_toolnexus._session.observer import NO_OBSERVER
from pytest_toolnexus._session.record import RecordingTransport
from pytest_toolnexus._session.replay import aplay, plan_of, play
from pytest_toolnexus._store.cassette import (
    ChunksBody,
    Interaction,
    JsonBody,
    MalformedCassette,
    RecordedRequest,
    RecordedResponse,
    SseBody,
    sse_event_doc,
)
from pytest_toolnexus._store.streams import SseEvent
from pytest_toolnexus._timing.clock import real_monotonic
from pytest_toolnexus._timing.virtual import VirtualClock
from tests.support.observers import Kept

URL = "http://127.0.0.1:9/v1/chat/completions"
ANTHROPIC_URL = "http://127.0.0.1:9/v1/messages"
SSE = Headers([("content-type", "text/event-stream")])
JSON = Headers([("content-type", "application/json")])
OFFSETS_MS = [5.0, 80.0, 160.0, 240.0]
T_END = 250.0
EVENTS = [SseEvent(data=f'{{"n":{n}}}') for n in range(3)] + [SseEvent(data="[DONE]")]
CHUNKS = [b'data: {"n": %d}\n\n' % n for n in range(3)] + [b"data: [DONE]\n\n"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


class Watcher:
    """An observer that writes down every call it gets, in order."""

    def __init__(self, error=None):
        self.calls = []
        self._error = error

    def delivered(self, number, at):
        self.calls.append(("delivered", number, at))

    def ended(self):
        self.calls.append(("ended",))

    def recorded(self, interaction):
        self.calls.append(("recorded", interaction))

    def malformed(self, problem):
        self.calls.append(("malformed", str(problem)))
        return self._error

    def problem(self, text):
        self.calls.append(("problem", text))

    def names(self):
        return [call[0] for call in self.calls]

    def deliveries(self):
        return [(call[1], call[2]) for call in self.calls if call[0] == "delivered"]


def request(stream=True, url=URL):
    return TransportRequest("POST", url, body={"stream": stream}, stream=stream)


def sse_interaction(events=None):
    docs = events or [sse_event_doc(t, e) for t, e in zip(OFFSETS_MS, EVENTS, strict=True)]
    response = RecordedResponse(200, SSE, SseBody(docs), t_headers=1.0, t_end=T_END)
    return Interaction(RecordedRequest("POST", URL, Headers(), JsonBody({})), response)


# -- replay ---------------------------------------------------------------------------------


def test_replay_tells_the_observer_each_piece_at_its_recorded_time_then_the_end():
    clock = VirtualClock(epoch=0.0)
    start = clock.now()
    watcher = Watcher()

    response = play(sse_interaction(), request(), clock, start, watcher)
    pieces = list(response.body)

    assert len(pieces) == 4
    assert watcher.names() == ["delivered"] * 4 + ["ended"]
    assert watcher.deliveries() == [
        (n, pytest.approx(start + t / 1000.0)) for n, t in enumerate(OFFSETS_MS)
    ]


@pytest.mark.anyio
async def test_async_replay_tells_the_observer_the_same_in_the_same_order():
    clock = VirtualClock(epoch=0.0)
    start = clock.now()
    watcher = Watcher()

    response = await aplay(sse_interaction(), request(), clock, start, watcher)
    pieces = [piece async for piece in response.body]

    assert len(pieces) == 4
    assert watcher.names() == ["delivered"] * 4 + ["ended"]
    assert [at for _, at in watcher.deliveries()] == [
        pytest.approx(start + t / 1000.0) for t in OFFSETS_MS
    ]


def test_a_whole_body_is_one_delivery_at_its_end_then_the_end():
    clock = VirtualClock(epoch=0.0)
    start = clock.now()
    response = RecordedResponse(200, JSON, JsonBody({"ok": True}), t_headers=10.0, t_end=40.0)
    interaction = Interaction(RecordedRequest("POST", URL, Headers(), JsonBody({})), response)
    watcher = Watcher()

    answer = play(interaction, request(stream=False), clock, start, watcher)

    assert answer.body == {"ok": True}
    assert watcher.calls == [("delivered", 0, pytest.approx(start + 0.040)), ("ended",)]


def test_a_client_that_stops_early_is_never_told_the_end():
    watcher = Watcher()
    response = play(sse_interaction(), request(), VirtualClock(epoch=0.0), 0.0, watcher)

    stream = iter(response.body)
    next(stream)
    response.body.close()

    assert watcher.names() == ["delivered"]


def test_a_broken_stored_piece_raises_the_error_the_observer_gives():
    broken = sse_interaction(events=[sse_event_doc(0.0, EVENTS[0]), "not a map"])
    chosen = CassetteFormatError("cassette x.msgpack is corrupt at interaction 0", path="x")
    watcher = Watcher(error=chosen)

    response = play(broken, request(), VirtualClock(epoch=0.0), 0.0, watcher)
    with pytest.raises(CassetteFormatError) as caught:
        list(response.body)

    assert caught.value is chosen
    assert isinstance(caught.value.__cause__, MalformedCassette)
    # Replay looks one piece ahead (to know the last), so the broken second piece is met
    # before the first is handed over.
    assert watcher.names() == ["malformed"]
    assert "an SSE event must be a map" in watcher.calls[0][1]


def test_with_no_observer_a_broken_piece_raises_as_it_is():
    broken = sse_interaction(events=["not a map"])

    response = play(broken, request(), VirtualClock(epoch=0.0), 0.0, NO_OBSERVER)

    with pytest.raises(MalformedCassette, match="an SSE event must be a map"):
        list(response.body)


def test_a_fault_reads_the_request_from_the_plan_not_from_notes():
    response = sse_interaction().response
    fault = ErrorEventFault(after_event=1)

    anthropic = Shaping((fault,))(plan_of(response, method="POST", url=ANTHROPIC_URL))
    openai = Shaping((fault,))(plan_of(response, method="POST", url=URL))

    assert anthropic.url == ANTHROPIC_URL
    assert anthropic.method == "POST"
    assert anthropic.pieces[-1][1].startswith(b"event: error\n")
    assert openai.pieces[-1][1].startswith(b"data: ")
    assert b'"error"' in openai.pieces[-1][1]


def test_replay_hands_the_shaper_a_plan_that_names_the_request():
    seen = []

    def shape(plan):
        seen.append((plan.method, plan.url))
        return plan

    list(play(sse_interaction(), request(), VirtualClock(epoch=0.0), 0.0, shape=shape).body)

    assert seen == [("POST", URL)]


# -- recording ------------------------------------------------------------------------------


def sse_live(request):
    return TransportResponse(200, SSE, ByteStream(iter(CHUNKS)))


async def async_sse_live(request):
    async def chunks():
        for chunk in CHUNKS:
            yield chunk

    return TransportResponse(200, SSE, AsyncByteStream(chunks()))


def test_recording_tells_the_observer_each_event_then_the_end_then_the_interaction():
    kept = []
    recorder = RecordingTransport(sse_live, Kept(kept))
    watcher = Watcher()
    before = real_monotonic()

    response = recorder(request(), observer=watcher)
    read = list(response.body)
    after = real_monotonic()

    assert read == CHUNKS
    assert watcher.names() == ["delivered"] * 4 + ["ended", "recorded"]
    numbers = [n for n, _ in watcher.deliveries()]
    times = [at for _, at in watcher.deliveries()]
    assert numbers == [0, 1, 2, 3]
    assert before <= times[0]
    assert times == sorted(times)
    assert times[-1] <= after
    interaction = watcher.calls[-1][1]
    assert isinstance(interaction.response.body, SseBody)
    assert len(interaction.response.body.events) == 4
    assert kept == []  # the call's observer took the interaction in place of the recorder's


@pytest.mark.anyio
async def test_async_recording_tells_the_observer_the_same_in_the_same_order():
    recorder = RecordingTransport(async_sse_live)
    watcher = Watcher()

    response = await recorder.acall(request(), observer=watcher)
    read = [chunk async for chunk in response.body]

    assert read == CHUNKS
    assert watcher.names() == ["delivered"] * 4 + ["ended", "recorded"]
    assert [n for n, _ in watcher.deliveries()] == [0, 1, 2, 3]


def test_a_recorded_stream_the_client_abandons_is_recorded_without_an_end():
    watcher = Watcher()
    response = RecordingTransport(sse_live)(request(), observer=watcher)

    stream = iter(response.body)
    next(stream)
    response.body.close()

    assert watcher.names() == ["delivered", "recorded"]
    assert watcher.calls[-1][1].response.complete is False


def test_a_stream_the_recorder_cannot_parse_is_told_to_the_observer(monkeypatch):
    def failing(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(_record_body, "sse_event_doc", failing)
    problems = []
    watcher = Watcher()

    recorder = RecordingTransport(sse_live, Kept(problems=problems))
    list(recorder(request(), observer=watcher).body)

    assert watcher.names()[-3:] == ["problem", "ended", "recorded"]
    [problem] = [call[1] for call in watcher.calls if call[0] == "problem"]
    assert problem.startswith(f"POST {URL}: RuntimeError while parsing the stream: boom")
    assert isinstance(watcher.calls[-1][1].response.body, ChunksBody)
    assert problems == []  # the call's observer took it in place of the recorder's


def test_a_call_with_no_observer_hands_the_interaction_to_the_recorders_own():
    kept = []
    problems = []

    response = RecordingTransport(sse_live, Kept(kept, problems))(request())

    assert list(response.body) == CHUNKS
    [interaction] = kept
    assert isinstance(interaction.response.body, SseBody)
    assert problems == []


def test_a_recorder_with_no_observer_at_all_still_serves_the_client():
    response = RecordingTransport(sse_live)(request())

    assert list(response.body) == CHUNKS
