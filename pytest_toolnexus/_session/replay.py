"""Replay: turning a recorded interaction back into a seam response, on a clock.

Each SSE event, NDJSON line or chunk becomes its own piece of the byte stream, released when
the clock reaches its recorded offset at the moment the client pulls it. Recorded transport
errors are raised again, at their recorded time. A :class:`Plan` is what gets sent; faults
reshape it before it is played. What happens to the request is told to its
:class:`~pytest_toolnexus._session.observer.Observer`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, overload

from pytest_toolnexus._seam.cancel import CancelToken
from pytest_toolnexus._seam.errors import ERROR_KINDS, ReplayError, TransportError, expected_error
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import (
    AsyncByteStream,
    ByteStream,
    JSONValue,
    TransportRequest,
    TransportResponse,
)
from pytest_toolnexus._store.cassette import (
    ChunksBody,
    EmptyBody,
    EventStreamBody,
    Interaction,
    JsonBody,
    MalformedCassette,
    NdjsonBody,
    RecordedError,
    RecordedResponse,
    SseBody,
    damage_reason,
)
from pytest_toolnexus._timing.clock import Clock

from .observer import NO_OBSERVER, Observer

# A tuple made once: an ``X | Y`` written in an isinstance call builds a union at every call.
_STREAM_BODIES: Final = (SseBody, NdjsonBody, ChunksBody, EventStreamBody)

__all__ = [
    "Plan",
    "Shaper",
    "aplay",
    "plan_of",
    "play",
]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error


@dataclass(frozen=True, slots=True)
class Plan:
    """What replay sends: status and headers at ``t_headers``, then each piece at its offset,
    then the end (or ``error``). Times in ms from the moment the request was sent.

    ``value`` is set when the body is one JSON document, so a client that did not ask for a
    stream gets it parsed. ``streamed`` is true when the recording was a stream. ``pieces`` of
    a stream are produced as the client pulls them; a shaper gets them as a list.
    ``method`` and ``url`` are those of the request being answered (a fault that speaks the
    provider's dialect reads them). ``content`` is ``value`` already encoded, when known; a
    shaper that changes ``value`` sets it back to None.
    """

    status: int
    headers: Headers
    t_headers: float
    pieces: Sequence[tuple[float, bytes]]
    end: float
    error: RecordedError | None = None
    complete: bool = True
    streamed: bool = False
    value: JSONValue = None
    has_value: bool = False
    method: str = ""
    url: str = ""
    content: bytes | None = None


Shaper = Callable[[Plan], Plan]
"""Reshapes a plan before it is played (what a fault does)."""


def _seconds(t_ms: float, clock: Clock) -> float:
    return t_ms / 1000.0 / clock.speed


def _error(recorded: RecordedError) -> TransportError:
    cls = ERROR_KINDS.get(recorded.kind, TransportError)
    return cls(recorded.message)


def plan_of(
    response: RecordedResponse,
    *,
    whole_bytes: bool = True,
    method: str = "",
    url: str = "",
    content: bytes | None = None,
) -> Plan:
    """The plan for a recorded response to the request ``method url``. Stream pieces are made
    lazily; a broken one raises :class:`MalformedCassette` when it is reached.
    ``whole_bytes=False`` skips encoding a JSON body that will be handed over parsed;
    ``content`` is that body already encoded (by :func:`check_playable`), if known."""
    body = response.body
    timed_json = isinstance(body, JsonBody) and body.times is not None
    streamed = timed_json or isinstance(body, _STREAM_BODIES)
    pieces: Sequence[tuple[float, bytes]]
    if isinstance(body, _STREAM_BODIES) or (isinstance(body, JsonBody) and timed_json):
        pieces = _LazyPieces(body.pieces())
    elif isinstance(body, EmptyBody) or (isinstance(body, JsonBody) and not whole_bytes):
        pieces = []
    else:
        known = content if isinstance(body, JsonBody) else None
        pieces = [(response.t_end, known if known is not None else body.content())]
    return Plan(
        status=response.status,
        headers=response.headers,
        t_headers=response.t_headers,
        pieces=pieces,
        end=response.t_end,
        error=response.error,
        complete=response.complete,
        streamed=streamed,
        value=body.value if isinstance(body, JsonBody) else None,
        has_value=isinstance(body, JsonBody),
        method=method,
        url=url,
        content=content if isinstance(body, JsonBody) and not timed_json else None,
    )


class _LazyPieces(Sequence[tuple[float, bytes]]):
    """Stream pieces made as they are iterated, so the first byte goes out before the last
    event of a long stream is encoded; asking for a length or an index makes them all."""

    def __init__(self, source: Iterator[tuple[float, bytes]]) -> None:
        self._source: Iterator[tuple[float, bytes]] | None = source
        self._made: list[tuple[float, bytes]] = []

    def __iter__(self) -> Iterator[tuple[float, bytes]]:
        made = self._made
        position = 0
        while True:
            if position < len(made):
                yield made[position]
                position += 1
                continue
            source = self._source
            if source is None:
                return
            for piece in source:
                made.append(piece)
                position += 1
                yield piece
                if position != len(made):
                    break  # another iteration made more meanwhile: hand those over first
            else:
                self._source = None
                return

    def _all(self) -> list[tuple[float, bytes]]:
        if self._source is not None:
            self._made.extend(self._source)
            self._source = None
        return self._made

    def __len__(self) -> int:
        return len(self._all())

    @overload
    def __getitem__(self, index: int) -> tuple[float, bytes]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[float, bytes]]: ...

    def __getitem__(self, index: int | slice) -> Any:
        return self._all()[index]


def _incomplete(count: int) -> ReplayError:
    return ReplayError(
        f"this stream was recorded while the client stopped reading after {count} "
        "piece(s), so the rest was never recorded, and the client now reads further; "
        "record the cassette again"
    )


def _whole(plan: Plan, request: TransportRequest) -> TransportResponse | None:
    """A whole (non-stream) answer, when the request did not ask for a stream."""
    if request.stream or plan.streamed or plan.error is not None or not plan.complete:
        return None
    if plan.has_value:
        return TransportResponse(plan.status, plan.headers, plan.value, plan.content)
    return TransportResponse(plan.status, plan.headers, b"".join(p for _, p in plan.pieces))


def _plain(
    interaction: Interaction, request: TransportRequest, shape: Shaper | None
) -> tuple[RecordedResponse, JSONValue] | None:
    """The recorded response and its value when it is one untimed JSON document, answered
    whole and unshaped to a request that did not ask for a stream: what most replayed requests
    are, played without a :class:`Plan` (as :func:`_whole` would answer it)."""
    if shape is not None or interaction.error is not None or request.stream:
        return None
    response = interaction.response
    if response is None or response.error is not None or not response.complete:
        return None
    body = response.body
    if not isinstance(body, JsonBody) or body.times is not None:
        return None
    return response, body.value


def _prepare(
    interaction: Interaction,
    request: TransportRequest,
    shape: Shaper | None,
    content: bytes | None,
) -> tuple[Plan | None, RecordedError | None]:
    if interaction.error is not None:
        return None, interaction.error
    assert interaction.response is not None
    response, method, url = interaction.response, request.method, request.url
    if shape is None:
        whole = request.stream
        return plan_of(response, whole_bytes=whole, method=method, url=url, content=content), None
    return shape(plan_of(response, method=method, url=url)), None


def play(
    interaction: Interaction,
    request: TransportRequest,
    clock: Clock,
    start: float,
    observer: Observer = NO_OBSERVER,
    shape: Shaper | None = None,
    *,
    content: bytes | None = None,
) -> TransportResponse:
    """The sync response for ``interaction``; ``start`` is the clock time the request was sent.

    ``observer`` is told of each piece delivered and of the end, and turns a broken stored
    piece, met while streaming, into the error to raise; ``shape`` reshapes the plan (faults).
    """
    cancel = request.cancel
    plain = _plain(interaction, request, shape)
    if plain is not None:
        response, value = plain
        clock.wait_until(start + _seconds(response.t_headers, clock), cancel)
        clock.wait_until(start + _seconds(response.t_end, clock), cancel)
        observer.delivered(0, clock.now())
        observer.ended()
        return TransportResponse(response.status, response.headers, value, content)
    plan, failure = _prepare(interaction, request, shape, content)
    if failure is not None:
        clock.wait_until(start + _seconds(failure.t, clock), cancel)
        raise _error(failure)
    assert plan is not None
    clock.wait_until(start + _seconds(plan.t_headers, clock), cancel)
    whole = _whole(plan, request)
    if whole is not None:
        clock.wait_until(start + _seconds(plan.end, clock), cancel)
        observer.delivered(0, clock.now())
        observer.ended()
        return whole
    return TransportResponse(
        plan.status,
        plan.headers,
        ByteStream(_pieces(_Delivery(plan, start, clock, observer), cancel)),
    )


class _Delivery:
    """One replayed body's schedule and bookkeeping; the sync and async generators below
    only wait for each deadline and hand the piece over."""

    def __init__(
        self,
        plan: Plan,
        start: float,
        clock: Clock,
        observer: Observer,
    ) -> None:
        self._plan = plan
        self._start = start
        self.clock = clock
        self._observer = observer
        self._count = 0
        self._last = False
        self._read_all = False

    def _due(self, t_ms: float) -> float:
        return self._start + _seconds(t_ms, self.clock)

    def schedule(self) -> Iterator[tuple[float, bytes | None]]:
        """``(deadline, piece)`` for each piece, then ``(deadline, None)`` for the end; a
        recorded error or an incomplete recording is raised where it happened. A broken
        stored piece is raised as the observer's error when it is reached."""
        plan = self._plan
        # One loop, not a chain of generators: a long stream pays this once per piece.
        start, speed = self._start, self.clock.speed
        pieces = iter(plan.pieces)
        current = self._pull(pieces)
        while current is not None:
            following = self._pull(pieces)
            self._last = following is None
            yield start + current[0] / 1000.0 / speed, current[1]  # as _seconds() does
            current = following
        self._read_all = plan.error is None
        if plan.error is not None:
            yield self._due(plan.error.t), None
            raise _error(plan.error)
        if not plan.complete:
            # The client closed this stream at ``end`` while it was recorded, and a live
            # server kept it open until then: so does replay. A client that is still reading
            # at that moment reads past what was recorded.
            yield self._due(plan.end), None
            raise _incomplete(self._count)
        yield self._due(plan.end), None

    def _pull(self, pieces: Iterator[tuple[float, bytes]]) -> tuple[float, bytes] | None:
        """The next stored piece, made now, or None at the end; a broken one is raised as the
        observer's error."""
        try:
            return next(pieces, None)
        except MalformedCassette as exc:
            error = self._observer.malformed(exc)
            if error is None:
                raise
            raise error from exc
        except (TypeError, ValueError, RecursionError, OverflowError) as exc:
            # A damaged stored value (bytes or NaN as event data, nesting past the recursion
            # limit) fails while its piece is encoded.
            error = self._observer.malformed(MalformedCassette(damage_reason(exc)))
            if error is None:
                raise
            raise error from exc

    def delivered(self) -> None:
        """A piece reached the client now."""
        self._observer.delivered(self._count, self.clock.now())
        self._count += 1
        self._read_all = self._last

    def finish(self) -> None:
        # A client that closes the body after its last recorded piece has read all of it:
        # SSE clients stop at their end marker without asking for more, and a recording made
        # that way ends there too.
        if self._read_all and self._plan.error is None:
            self._observer.ended()


def _pieces(delivery: _Delivery, cancel: CancelToken | None) -> Iterator[bytes]:
    clock = delivery.clock
    try:
        for deadline, data in delivery.schedule():
            clock.wait_until(deadline, cancel)
            if data is not None:
                delivery.delivered()
                yield data
    finally:
        delivery.finish()


async def aplay(
    interaction: Interaction,
    request: TransportRequest,
    clock: Clock,
    start: float,
    observer: Observer = NO_OBSERVER,
    shape: Shaper | None = None,
    *,
    content: bytes | None = None,
) -> TransportResponse:
    """The async mirror of :func:`play`."""
    cancel = request.cancel
    plain = _plain(interaction, request, shape)
    if plain is not None:
        response, value = plain
        await clock.await_until(start + _seconds(response.t_headers, clock), cancel)
        await clock.await_until(start + _seconds(response.t_end, clock), cancel)
        observer.delivered(0, clock.now())
        observer.ended()
        return TransportResponse(response.status, response.headers, value, content)
    plan, failure = _prepare(interaction, request, shape, content)
    if failure is not None:
        await clock.await_until(start + _seconds(failure.t, clock), cancel)
        raise _error(failure)
    assert plan is not None
    await clock.await_until(start + _seconds(plan.t_headers, clock), cancel)
    whole = _whole(plan, request)
    if whole is not None:
        await clock.await_until(start + _seconds(plan.end, clock), cancel)
        observer.delivered(0, clock.now())
        observer.ended()
        return whole
    return TransportResponse(
        plan.status,
        plan.headers,
        AsyncByteStream(_apieces(_Delivery(plan, start, clock, observer), cancel)),
    )


async def _apieces(delivery: _Delivery, cancel: CancelToken | None) -> AsyncIterator[bytes]:
    clock = delivery.clock
    try:
        for deadline, data in delivery.schedule():
            await clock.await_until(deadline, cancel)
            if data is not None:
                delivery.delivered()
                yield data
    finally:
        delivery.finish()
