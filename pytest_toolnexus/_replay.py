"""Replay: turning a recorded interaction back into a seam response, on a clock.

Each SSE event, NDJSON line or chunk becomes its own piece of the byte stream, released when
the clock reaches its recorded offset at the moment the client pulls it. Recorded transport
errors are raised again, at their recorded time. A :class:`Plan` is what gets sent; faults
reshape it before it is played.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

from ._cancel import CancelToken
from ._cassette import (
    ChunksBody,
    EmptyBody,
    Interaction,
    JsonBody,
    NdjsonBody,
    RecordedError,
    RecordedResponse,
    SseBody,
)
from ._clock import Clock
from ._errors import ERROR_KINDS, ReplayError, TransportError
from ._headers import Headers
from ._seam import AsyncByteStream, ByteStream, JSONValue, TransportRequest, TransportResponse

__all__ = ["Delivery", "Ended", "Plan", "Shaper", "aplay", "plan_of", "play"]

Delivery = Callable[[int, float], None]
"""Called as ``(piece_number, clock_time)`` each time a piece reaches the client."""

Ended = Callable[[], None]
"""Called once the client has read a replayed body to its end (or to its recorded error)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What replay sends: status and headers at ``t_headers``, then each piece at its offset,
    then the end (or ``error``). Times in ms from the moment the request was sent.

    ``value`` is set when the body is one JSON document, so a client that did not ask for a
    stream gets it parsed. ``streamed`` is true when the recording was a stream.
    """

    status: int
    headers: Headers
    t_headers: float
    pieces: list[tuple[float, bytes]]
    end: float
    error: RecordedError | None = None
    complete: bool = True
    streamed: bool = False
    value: JSONValue = None
    has_value: bool = False
    notes: list[str] = field(default_factory=list)


Shaper = Callable[[Plan], Plan]
"""Reshapes a plan before it is played (what a fault does)."""


def _seconds(t_ms: float, clock: Clock) -> float:
    return t_ms / 1000.0 / clock.speed


def _error(recorded: RecordedError) -> TransportError:
    cls = ERROR_KINDS.get(recorded.kind, TransportError)
    return cls(recorded.message)


def plan_of(response: RecordedResponse) -> Plan:
    """The plan for a recorded response. Raises :class:`MalformedCassette` for broken pieces."""
    body = response.body
    streamed = isinstance(body, SseBody | NdjsonBody | ChunksBody)
    if isinstance(body, SseBody | NdjsonBody | ChunksBody):
        pieces = list(body.pieces())
    elif isinstance(body, EmptyBody):
        pieces = []
    else:
        pieces = [(response.t_end, body.content())]
    is_json = isinstance(body, JsonBody)
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
        has_value=is_json,
    )


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
        return TransportResponse(plan.status, plan.headers, plan.value)
    return TransportResponse(plan.status, plan.headers, b"".join(p for _, p in plan.pieces))


def _prepare(
    interaction: Interaction, shape: Shaper | None
) -> tuple[Plan | None, RecordedError | None]:
    if interaction.error is not None:
        return None, interaction.error
    assert interaction.response is not None
    plan = plan_of(interaction.response)
    return (shape(plan) if shape is not None else plan), None


def play(
    interaction: Interaction,
    request: TransportRequest,
    clock: Clock,
    start: float,
    on_deliver: Delivery | None = None,
    on_end: Ended | None = None,
    shape: Shaper | None = None,
) -> TransportResponse:
    """The sync response for ``interaction``; ``start`` is the clock time the request was sent."""
    cancel = request.cancel
    plan, failure = _prepare(interaction, shape)
    if failure is not None:
        clock.wait_until(start + _seconds(failure.t, clock), cancel)
        raise _error(failure)
    assert plan is not None
    clock.wait_until(start + _seconds(plan.t_headers, clock), cancel)
    whole = _whole(plan, request)
    if whole is not None:
        clock.wait_until(start + _seconds(plan.end, clock), cancel)
        if on_deliver is not None:
            on_deliver(0, clock.now())
        if on_end is not None:
            on_end()
        return whole
    return TransportResponse(
        plan.status,
        plan.headers,
        ByteStream(_pieces(plan, clock, start, cancel, on_deliver, on_end)),
    )


def _pieces(
    plan: Plan,
    clock: Clock,
    start: float,
    cancel: CancelToken | None,
    on_deliver: Delivery | None,
    on_end: Ended | None,
) -> Iterator[bytes]:
    delivered = 0
    try:
        for number, (t_ms, data) in enumerate(plan.pieces):
            clock.wait_until(start + _seconds(t_ms, clock), cancel)
            if on_deliver is not None:
                on_deliver(number, clock.now())
            delivered += 1
            yield data
        if plan.error is not None:
            clock.wait_until(start + _seconds(plan.error.t, clock), cancel)
            raise _error(plan.error)
        if not plan.complete:
            raise _incomplete(len(plan.pieces))
        clock.wait_until(start + _seconds(plan.end, clock), cancel)
    finally:
        # A client that closes the body after its last recorded piece has read all of it:
        # SSE clients stop at their end marker without asking for more, and a recording made
        # that way ends there too.
        if on_end is not None and delivered == len(plan.pieces) and plan.error is None:
            on_end()


async def aplay(
    interaction: Interaction,
    request: TransportRequest,
    clock: Clock,
    start: float,
    on_deliver: Delivery | None = None,
    on_end: Ended | None = None,
    shape: Shaper | None = None,
) -> TransportResponse:
    """The async mirror of :func:`play`."""
    cancel = request.cancel
    plan, failure = _prepare(interaction, shape)
    if failure is not None:
        await clock.await_until(start + _seconds(failure.t, clock), cancel)
        raise _error(failure)
    assert plan is not None
    await clock.await_until(start + _seconds(plan.t_headers, clock), cancel)
    whole = _whole(plan, request)
    if whole is not None:
        await clock.await_until(start + _seconds(plan.end, clock), cancel)
        if on_deliver is not None:
            on_deliver(0, clock.now())
        if on_end is not None:
            on_end()
        return whole
    return TransportResponse(
        plan.status,
        plan.headers,
        AsyncByteStream(_apieces(plan, clock, start, cancel, on_deliver, on_end)),
    )


async def _apieces(
    plan: Plan,
    clock: Clock,
    start: float,
    cancel: CancelToken | None,
    on_deliver: Delivery | None,
    on_end: Ended | None,
) -> AsyncIterator[bytes]:
    delivered = 0
    try:
        for number, (t_ms, data) in enumerate(plan.pieces):
            await clock.await_until(start + _seconds(t_ms, clock), cancel)
            if on_deliver is not None:
                on_deliver(number, clock.now())
            delivered += 1
            yield data
        if plan.error is not None:
            await clock.await_until(start + _seconds(plan.error.t, clock), cancel)
            raise _error(plan.error)
        if not plan.complete:
            raise _incomplete(len(plan.pieces))
        await clock.await_until(start + _seconds(plan.end, clock), cancel)
    finally:
        if on_end is not None and delivered == len(plan.pieces) and plan.error is None:
            on_end()
