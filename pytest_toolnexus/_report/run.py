"""What one test did with its cassette, as plain data for the run report: each request's
recorded arrivals against their delivery to the client, its headers, end and error, with the
test's misses, leftovers, faults and sleeps on one time axis (docs/report.md, the ``test``
object).

Read from a closed :class:`~pytest_toolnexus._session.session.CassetteSession` through its public
attributes only; nothing here changes it.
"""

from __future__ import annotations

from typing import Any

from pytest_toolnexus._session.sent import SentRequest
from pytest_toolnexus._session.session import CassetteSession
from pytest_toolnexus._store.cassette import Interaction
from pytest_toolnexus._timing.clock import InstantClock
from pytest_toolnexus._timing.virtual import VirtualClock

from .timeline import interaction_timeline

__all__ = ["request_timeline", "run_entry"]


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


def request_timeline(sent: SentRequest, interaction: Interaction | None) -> dict[str, Any]:
    """One request the test sent: when (ms since the cassette started), what answered it (the
    recorded interaction, with its pieces' recorded arrivals), and when each piece reached the
    client (``delivered``, ms since the request was sent, beside the pieces' recorded ``t``)."""
    found: dict[str, Any] = (
        interaction_timeline(sent.interaction, interaction)
        if interaction is not None
        else {
            "position": None,
            "method": sent.method,
            "url": sent.url,
            "status": None,
            "kind": None,
            "headers_at": None,
            "end_at": None,
            "complete": None,
            "headers": [],
            "pieces": [],
            "error": None,
        }
    )
    found.update(
        method=sent.method,
        url=sent.url,
        sent_at=_ms(sent.sent_at),
        replayed=sent.replayed,
        answered=sent.status,
        delivered=[_ms(at - sent.sent_at) for at in sent.deliveries],
        read_to_end=sent.complete,
        faults=list(sent.faults),
    )
    return found


def run_entry(
    session: CassetteSession, *, cassette: str, wall: float, shared: bool
) -> dict[str, Any]:
    """The ``test`` object of the run document for one test's ``session`` (closed), whose
    cassette the report names ``cassette``; ``wall`` is the real seconds the session was open.
    A ``shared`` cassette (named by the marker) lists no unused interactions, as the teardown
    check does not: another test may play them. The outcome is the caller's to add."""
    interactions = session.interactions
    requests = []
    for sent in list(session.requests):
        position = sent.interaction
        answered = (
            interactions[position]
            if position is not None and 0 <= position < len(interactions)
            else None
        )
        requests.append(request_timeline(sent, answered))
    left = session.leftovers(unused=not shared and session.record_mode != "all")
    clock = (
        "virtual"
        if isinstance(session.clock, VirtualClock)
        else "instant"
        if isinstance(session.clock, InstantClock)
        else "real"
    )
    clock_ms = _ms(session.elapsed)
    wall_ms = _ms(wall)
    return {
        "cassette": cassette,
        "record_mode": session.record_mode,
        "timing": session.timing,
        "clock": clock,
        "replayed": sum(1 for r in session.requests if r.replayed),
        "recorded": len(session.recorded),
        "written": session.written,
        "misses": [str(miss) for miss in session.misses],
        "damaged": [str(error) for error in session.damaged],
        "unused": left.unused,
        "unread": left.unread,
        "faults": sum(len(r.faults) for r in session.requests),
        "sleeps": [
            {"kind": s.kind, "at": _ms(s.at), "duration": _ms(s.duration)} for s in session.sleeps
        ],
        "clock_ms": clock_ms,
        "wall_ms": wall_ms,
        "saved_ms": round(max(clock_ms - wall_ms, 0.0), 3) if clock == "virtual" else 0.0,
        "requests": requests,
    }
