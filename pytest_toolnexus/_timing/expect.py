"""Assertion helpers for timing: incremental delivery, time to first event, waits and attempts.

Each takes plain numbers (seconds, as the test read them from ``time.monotonic()``) or what a
:class:`CassetteSession` observed, and fails with a sentence that says what happened, with
times given as offsets from the request. ``assert_incremental`` and
``assert_time_to_first_event`` also take a WebSocket connection's log
(``cassette.websockets[i]``) and judge its server frames, chosen by event name (``events=``),
in seconds since the handshake was sent.

The same assertion holds while recording and on replay: given what the session observed, the
default tolerance is exact (1 ms) when the times come from a replay on the virtual or instant
clock, and :data:`REAL_TIME_TOLERANCE` when they were measured on real time (a recording run,
or ``timing="real"``), where the network and the scheduler add their own milliseconds.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Final

from pytest_toolnexus._realtime.log import WebSocketFrame, WebSocketLog
from pytest_toolnexus._session.session import CassetteSession, SentRequest

from .clock import RealClock

__all__ = [
    "EXACT_TOLERANCE",
    "REAL_TIME_TOLERANCE",
    "assert_attempts",
    "assert_incremental",
    "assert_time_to_first_event",
    "assert_waits",
]

EXACT_TOLERANCE: Final = 0.001
"""The default tolerance, in seconds, for times replayed on the virtual or instant clock."""
REAL_TIME_TOLERANCE: Final = 0.25
"""The default tolerance, in seconds, for times measured on real time: a recording run, or a
replay with ``timing="real"``."""


def _s(value: float) -> str:
    return f"{value:.3f} s"


def _wanted(value: float) -> str:
    """An expected duration as given: 2.0 as "2.0 s", 0.25 as "0.25 s" (not "0.2 s")."""
    return f"{value:.1f} s" if round(value, 1) == value else f"{value:g} s"


def _times(source: Sequence[float] | SentRequest) -> list[float]:
    if isinstance(source, SentRequest):
        return list(source.deliveries)
    return [float(t) for t in source]


def _requests(source: CassetteSession | Sequence[SentRequest]) -> list[SentRequest]:
    return list(source.requests) if isinstance(source, CassetteSession) else list(source)


def _names(events: str | Sequence[str] | None) -> tuple[str, ...]:
    if events is None:
        return ()
    return (events,) if isinstance(events, str) else tuple(events)


def _named(names: tuple[str, ...], what: str | None, plural: bool) -> str:
    """What the server frames chosen by ``names`` are called in a message."""
    if what is not None:
        return what
    if not names:
        return "server frames" if plural else "server frame"
    return " or ".join(names) + (" frames" if plural else "")


def _answered(log: WebSocketLog, first: WebSocketFrame) -> tuple[float, str]:
    """The time (s since the handshake) and name of the client frame ``first`` answers: the
    last one sent before it (the handshake when none was)."""
    origin, name = 0.0, "the handshake"
    for number, frame in enumerate(f for f in log.frames if f.sender == "client"):
        if frame.t > first.t:
            break
        origin = frame.t / 1000.0
        name = f"client frame #{number}" + (f" ({frame.event})" if frame.event else "")
    return origin, name


def _tolerance(
    given: float | None,
    source: CassetteSession | Sequence[SentRequest] | SentRequest | WebSocketLog | None,
) -> float:
    """``given``, or the default for where the times came from (see the module docstring)."""
    if given is not None:
        return given
    if isinstance(source, WebSocketLog):
        real = not source.replayed
    elif isinstance(source, CassetteSession):
        real = isinstance(source.clock, RealClock)
    elif isinstance(source, SentRequest):
        real = not source.replayed
    elif source is not None:
        real = any(not request.replayed for request in source)
    else:
        real = False
    return REAL_TIME_TOLERANCE if real else EXACT_TOLERANCE


def assert_incremental(
    arrivals: Sequence[float] | WebSocketLog,
    *,
    expected: Sequence[float] | None = None,
    tolerance: float | None = None,
    min_spread: float | None = None,
    sent_at: float | None = None,
    what: str | None = None,
    events: str | Sequence[str] | None = None,
) -> None:
    """Fail unless the pieces of a stream reached the client's code one by one, over time.

    ``arrivals`` are the times each piece (delta, event, line) reached the code that consumes
    the stream, read there (``time.monotonic()`` in the loop over the stream): only those
    catch a client that buffers, since a client that reads the whole stream before handing it
    on still pulls each piece from the transport at its own time. A :class:`SentRequest` is
    refused with a ``TypeError`` for that reason; its ``deliveries`` (the times the plugin
    handed each piece to the HTTP library) may be passed on purpose, to check the replayed or
    recorded cadence itself. With ``expected``, each arrival must equal its expected time
    within ``tolerance`` (default 1 ms); both lists must be read on the same clock, from the
    same origin. ``min_spread`` asks for at least that long between first and last. Messages
    give times from ``sent_at`` when given, else as the caller's clock read them.

    A WebSocket connection's log (``cassette.websockets[i]``) is judged by the server frames
    named in ``events`` (OpenAI's ``type``, Gemini Live's first key: every server message when
    none is named), each at the time ``recv`` handed it to the client, in seconds since the
    handshake was sent; ``expected`` is given from the same origin, and the default tolerance
    is exact on a replay.
    """
    names = _names(events)
    log: WebSocketLog | None = None
    if isinstance(arrivals, WebSocketLog):
        log = arrivals
        arrivals = log.arrivals(*names)
        what = _named(names, what, plural=True)
    elif names:
        raise TypeError("events= chooses a WebSocket log's frames: pass cassette.websockets[i]")
    what = what or "events"
    if isinstance(arrivals, SentRequest):
        raise TypeError(
            "assert_incremental() takes the times each piece reached your code, not a "
            "SentRequest: its deliveries are when the plugin handed each piece to the HTTP "
            "library, so a client that buffers the stream (list(stream), or a request without "
            "stream=True that reads an event stream) still shows them spread out. Read "
            "time.monotonic() in the loop that consumes the stream and pass those times; to "
            "check the replayed cadence itself, pass request.deliveries (docs/timing.md)"
        )
    times = _times(arrivals)
    # Buffering and order are judged at 1 ms unless told otherwise, even on real time: a
    # buffered client hands over every piece within microseconds.
    instant = EXACT_TOLERANCE if tolerance is None else tolerance
    tolerance = _tolerance(tolerance, log)
    if len(times) < 2:
        raise AssertionError(
            f"cannot judge incremental delivery from {len(times)} {what}; "
            "a stream needs two or more"
        )
    one = what[:-1] if what.endswith("s") else what

    def at(value: float) -> str:
        # From the request when its send time is known; else as the caller's clock read it.
        return f"{_s(value - sent_at)} after the request" if sent_at is not None else _s(value)

    spread = times[-1] - times[0]
    if max(times) - min(times) <= instant:
        when = f", {at(times[0])}" if sent_at is not None else ""
        raise AssertionError(
            f"all {len(times)} {what} reached the client at once{when}: "
            "the stream was buffered, not delivered incrementally"
        )
    for number, (before, after) in enumerate(itertools.pairwise(times), start=2):
        if after < before - instant:
            raise AssertionError(
                f"{what} arrived out of order: #{number} reached the client "
                f"{_s(before - after)} before #{number - 1}"
            )
    if min_spread is not None and spread < min_spread - tolerance:
        raise AssertionError(
            f"the {len(times)} {what} arrived within {_s(spread)}, "
            f"expected them spread over at least {_s(min_spread)}"
        )
    if expected is not None:
        wanted = [float(t) for t in expected]
        if len(wanted) != len(times):
            raise AssertionError(f"{len(times)} {what} reached the client, expected {len(wanted)}")
        for number, (got, want) in enumerate(zip(times, wanted, strict=True), start=1):
            if abs(got - want) > tolerance:
                late = "late" if got > want else "early"
                raise AssertionError(
                    f"{one} #{number} reached the client {abs(got - want) * 1000:.1f} ms {late}: "
                    f"at {at(got)}, expected {_s(want - (sent_at or 0.0))} "
                    f"(tolerance {tolerance * 1000:g} ms)"
                )


def assert_time_to_first_event(
    arrivals: Sequence[float] | SentRequest | WebSocketLog,
    *,
    sent_at: float | None = None,
    equals: float | None = None,
    at_most: float | None = None,
    at_least: float | None = None,
    tolerance: float | None = None,
    what: str | None = None,
    events: str | Sequence[str] | None = None,
) -> float:
    """Check the time from sending the request (``sent_at``, or the request's own send time)
    to the first piece of the body, and return it.

    For a WebSocket connection's log (``cassette.websockets[i]``) it is the time to the first
    server frame named in ``events`` (time to first audio: ``events=("response.output_audio.
    delta", "response.audio.delta")``), from the client frame it answers (the last one sent
    before it, or the handshake), or from ``sent_at`` seconds after the handshake was sent.
    """
    names = _names(events)
    if isinstance(arrivals, WebSocketLog):
        return _websocket_first(
            arrivals, names, sent_at, equals, at_most, at_least, tolerance, what
        )
    if names:
        raise TypeError("events= chooses a WebSocket log's frames: pass cassette.websockets[i]")
    what = what or "event"
    tolerance = _tolerance(tolerance, arrivals if isinstance(arrivals, SentRequest) else None)
    if isinstance(arrivals, SentRequest):
        origin = arrivals.sent_at if sent_at is None else sent_at
    elif sent_at is None:
        raise TypeError("pass sent_at= with a list of arrival times")
    else:
        origin = sent_at
    times = _times(arrivals)
    if not times:
        raise AssertionError(f"no {what} reached the client, so there is no time to first {what}")
    first = times[0] - origin
    if equals is not None and abs(first - equals) > tolerance:
        raise AssertionError(
            f"the first {what} reached the client {_s(first)} after the request was sent, "
            f"expected {_s(equals)}"
        )
    if at_most is not None and first > at_most + tolerance:
        raise AssertionError(
            f"time to first {what} was {_s(first)}, more than the allowed {_s(at_most)}"
        )
    if at_least is not None and first < at_least - tolerance:
        raise AssertionError(f"time to first {what} was {_s(first)}, less than {_s(at_least)}")
    return first


def _websocket_first(
    log: WebSocketLog,
    names: tuple[str, ...],
    sent_at: float | None,
    equals: float | None,
    at_most: float | None,
    at_least: float | None,
    tolerance: float | None,
    what: str | None,
) -> float:
    tolerance = _tolerance(tolerance, log)
    named = _named(names, what, plural=False)
    chosen = log.events(*names)
    if not chosen:
        seen = sorted({f.event or f.kind for f in log.events()})
        raise AssertionError(
            f"no {named} reached the client on the WebSocket {log.url}, so there is no time "
            f"to the first one (the server's frames: {', '.join(seen) or 'none'})"
        )
    first = chosen[0]
    if sent_at is None:
        origin, since = _answered(log, first)
    else:
        origin, since = sent_at, f"{_s(sent_at)} after the handshake"
    took = first.t / 1000.0 - origin
    if equals is not None and abs(took - equals) > tolerance:
        raise AssertionError(
            f"the first {named} reached the client {_s(took)} after {since}, expected "
            f"{_s(equals)} (tolerance {tolerance * 1000:g} ms)"
        )
    if at_most is not None and took > at_most + tolerance:
        raise AssertionError(
            f"time to the first {named} was {_s(took)} after {since}, more than the allowed "
            f"{_s(at_most)}"
        )
    if at_least is not None and took < at_least - tolerance:
        raise AssertionError(
            f"time to the first {named} was {_s(took)} after {since}, less than {_s(at_least)}"
        )
    return took


def assert_attempts(
    source: CassetteSession | Sequence[SentRequest], count: int, *, url: str | None = None
) -> None:
    """Fail unless exactly ``count`` requests were sent (to URLs containing ``url``, if given)."""
    requests = [r for r in _requests(source) if url is None or url in r.url]
    if len(requests) != count:
        statuses = ", ".join(str(r.status) for r in requests) or "none"
        where = f" to {url}" if url else ""
        raise AssertionError(
            f"expected {count} attempt(s){where}, saw {len(requests)} (statuses: {statuses})"
        )


def assert_waits(
    source: CassetteSession | Sequence[SentRequest],
    expected: Sequence[float] | None = None,
    *,
    at_least: Sequence[float] | None = None,
    tolerance: float | None = None,
) -> list[float]:
    """Check the wait before each retry, and return the waits.

    The wait before attempt ``n`` is the time from the end of attempt ``n - 1``'s response to
    the sending of attempt ``n``. ``expected`` asks for each wait to equal its value within
    ``tolerance``; ``at_least`` for each to be no shorter. The default tolerance is exact on
    a virtual replay and :data:`REAL_TIME_TOLERANCE` on real time, so one test passes in its
    recording run and in every replay.
    """
    tolerance = _tolerance(tolerance, source)
    requests = _requests(source)
    waits = [later.sent_at - earlier.finished_at for earlier, later in itertools.pairwise(requests)]
    wanted = expected if expected is not None else at_least
    if wanted is None:
        raise TypeError("pass the expected waits, or at_least=")
    if len(wanted) != len(waits):
        raise AssertionError(
            f"expected {len(wanted)} wait(s) between {len(wanted) + 1} attempts, "
            f"saw {len(requests)} attempt(s) and so {len(waits)} wait(s)"
        )
    for number, (seen, want) in enumerate(zip(waits, wanted, strict=True), start=2):
        previous = requests[number - 2]
        because = f" (Retry-After: {previous.retry_after})" if previous.retry_after else ""
        if expected is not None and abs(seen - want) > tolerance:
            raise AssertionError(
                f"expected a wait of {_wanted(want)} before attempt {number}{because}, "
                f"saw {_s(seen)} (tolerance {tolerance * 1000:g} ms)"
            )
        if expected is None and seen < want - tolerance:
            raise AssertionError(
                f"expected a wait of \u2265 {_wanted(want)} before attempt {number}{because}, "
                f"saw {_s(seen)}"
            )
    return waits
