"""Replay: turning a recorded interaction back into a seam response, on a clock.

Each SSE event, NDJSON line or chunk becomes its own piece of the byte stream, released when
the clock reaches its recorded offset at the moment the client pulls it. Recorded transport
errors are raised again, at their recorded time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

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
from ._seam import AsyncByteStream, ByteStream, TransportRequest, TransportResponse

__all__ = ["Delivery", "aplay", "play"]

Delivery = Callable[[int, float], None]
"""Called as ``(piece_number, clock_time)`` each time a piece reaches the client."""

Ended = Callable[[], None]
"""Called once the client has read a replayed body to its end (or to its recorded error)."""


def _seconds(t_ms: float, clock: Clock) -> float:
    return t_ms / 1000.0 / clock.speed


def _error(recorded: RecordedError) -> TransportError:
    cls = ERROR_KINDS.get(recorded.kind, TransportError)
    return cls(f"{recorded.message} (replayed from the cassette)")


@dataclass(frozen=True, slots=True)
class _Plan:
    """What to send: the pieces with their offsets in ms, then how the body ends."""

    pieces: list[tuple[float, bytes]]
    end: float
    error: RecordedError | None
    complete: bool


def _plan(response: RecordedResponse) -> _Plan:
    """Raises :class:`MalformedCassette` when a stored piece is broken."""
    body = response.body
    if isinstance(body, SseBody | NdjsonBody | ChunksBody):
        pieces = list(body.pieces())
    elif isinstance(body, EmptyBody):
        pieces = []
    else:
        pieces = [(response.t_end, body.content())]
    return _Plan(pieces, response.t_end, response.error, response.complete)


def _incomplete(count: int) -> ReplayError:
    return ReplayError(
        f"this stream was recorded while the client stopped reading after {count} "
        "piece(s), so the rest was never recorded, and the client now reads further; "
        "record the cassette again"
    )


def _fixed(interaction: Interaction, request: TransportRequest) -> TransportResponse | None:
    """A whole (non-stream) answer, when the request did not ask for a stream."""
    response = interaction.response
    assert response is not None
    if request.stream or response.error is not None or not response.complete:
        return None
    body = response.body
    if isinstance(body, JsonBody):
        return TransportResponse(response.status, response.headers, body.value)
    if isinstance(body, SseBody | NdjsonBody | ChunksBody):
        return None
    return TransportResponse(response.status, response.headers, body.content())


def play(
    interaction: Interaction,
    request: TransportRequest,
    clock: Clock,
    start: float,
    on_deliver: Delivery | None = None,
    on_end: Ended | None = None,
) -> TransportResponse:
    """The sync response for ``interaction``; ``start`` is the clock time the request was sent."""
    cancel = request.cancel
    if interaction.error is not None:
        clock.wait_until(start + _seconds(interaction.error.t, clock), cancel)
        raise _error(interaction.error)
    response = interaction.response
    assert response is not None
    plan = _plan(response)
    clock.wait_until(start + _seconds(response.t_headers, clock), cancel)
    fixed = _fixed(interaction, request)
    if fixed is not None:
        clock.wait_until(start + _seconds(response.t_end, clock), cancel)
        if on_deliver is not None:
            on_deliver(0, clock.now())
        if on_end is not None:
            on_end()
        return fixed
    return TransportResponse(
        response.status,
        response.headers,
        ByteStream(_pieces(plan, clock, start, cancel, on_deliver, on_end)),
    )


def _pieces(
    plan: _Plan,
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
) -> TransportResponse:
    """The async mirror of :func:`play`."""
    cancel = request.cancel
    if interaction.error is not None:
        await clock.await_until(start + _seconds(interaction.error.t, clock), cancel)
        raise _error(interaction.error)
    response = interaction.response
    assert response is not None
    plan = _plan(response)
    await clock.await_until(start + _seconds(response.t_headers, clock), cancel)
    fixed = _fixed(interaction, request)
    if fixed is not None:
        await clock.await_until(start + _seconds(response.t_end, clock), cancel)
        if on_deliver is not None:
            on_deliver(0, clock.now())
        if on_end is not None:
            on_end()
        return fixed
    return TransportResponse(
        response.status,
        response.headers,
        AsyncByteStream(_apieces(plan, clock, start, cancel, on_deliver, on_end)),
    )


async def _apieces(
    plan: _Plan,
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
