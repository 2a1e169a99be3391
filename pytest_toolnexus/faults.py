"""Faults to inject into a replay: one call each, composable.

    from pytest_toolnexus import faults

    @pytest.mark.cassette(faults=[faults.prepend(429, retry_after="1"), faults.rechunk("utf8")])
    def test_client_survives(cassette): ...

or, during a test, ``cassette.inject(faults.rechunk("utf8"))``. Each fault counts the requests
it targets (all of them, or those whose URL contains ``url=`` and whose method is ``method=``)
and applies to the ``nth`` one (1 is the first; ``None`` means every one). A request answered
in place of the recording (a prepended error, a connect timeout, a read timeout before the
headers) is not counted by the faults that reshape recorded answers, and a second such fault
waits for the next request, so faults compose in the order given. What each fault did shows in
``cassette.requests[i].faults``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ._session.faults import (
    ConnectTimeoutFault,
    DisconnectFault,
    ErrorEventFault,
    Fault,
    PrependFault,
    ReadTimeoutFault,
    RechunkFault,
    StallFault,
    error_body,
)

__all__ = [
    "Fault",
    "connect_timeout",
    "disconnect",
    "error_body",
    "error_event",
    "prepend",
    "read_timeout",
    "rechunk",
    "stall",
]


def prepend(
    status: int = 429,
    *,
    count: int = 1,
    retry_after: str | float | None = None,
    body: Literal["json", "html"] | str | bytes | Mapping[str, Any] = "json",
    headers: Mapping[str, str] | None = None,
    url: str | None = None,
    method: str | None = None,
    nth: int = 1,
) -> Fault:
    """Answer ``count`` requests with ``status``, from the ``nth`` targeted request on, before
    the recorded answer is given (to the request after them).

    ``retry_after`` is sent verbatim as the ``Retry-After`` header: delay-seconds (``"2"``),
    fractional (``"0.5"``), an HTTP-date, or a negative or garbage value, since clients disagree
    on those. ``body`` is ``"json"`` (the provider's own error shape, chosen from the URL),
    ``"html"`` (a load balancer's page), or your own text, bytes or mapping.
    """
    if not 100 <= status <= 599:
        raise ValueError(f"status {status} is not an HTTP status")
    if count < 1 or nth < 1:
        raise ValueError(f"count and nth start at 1, got count={count} and nth={nth}")
    return PrependFault(
        url=url,
        method=method,
        nth=nth,
        status=status,
        count=count,
        retry_after=retry_after,
        body=body,
        headers=dict(headers or {}),
    )


def rechunk(
    mode: Literal["bytes", "lines", "utf8", "merge"] = "lines",
    *,
    size: int = 2,
    url: str | None = None,
    method: str | None = None,
    nth: int | None = None,
) -> Fault:
    """Deliver a stream's bytes in other chunks, keeping each event's recorded time: one byte
    at a time (``bytes``), every line split in the middle (``lines``), split inside a
    multi-byte UTF-8 character (``utf8``), or ``size`` events merged into one chunk
    (``merge``)."""
    if mode not in ("bytes", "lines", "utf8", "merge"):
        raise ValueError(f"rechunk mode {mode!r} is not one of bytes, lines, utf8, merge")
    if mode == "merge" and size < 2:
        raise ValueError(f"merge joins size >= 2 events into one chunk, got size={size}")
    return RechunkFault(url=url, method=method, nth=nth, mode=mode, size=size)


def stall(
    seconds: float,
    *,
    after_event: int | None = None,
    url: str | None = None,
    method: str | None = None,
    nth: int | None = 1,
) -> Fault:
    """Pause ``seconds`` before the headers (``after_event=None``) or after event k."""
    if seconds < 0:
        raise ValueError("a stall cannot be negative")
    return StallFault(url=url, method=method, nth=nth, seconds=seconds, after_event=after_event)


def disconnect(
    *, after_event: int, url: str | None = None, method: str | None = None, nth: int | None = 1
) -> Fault:
    """Close the connection after event ``after_event``: the client gets the error httpx
    raises for a peer that closes mid-body (``RemoteProtocolError``)."""
    if after_event < 0:
        raise ValueError("after_event counts events from 0")
    return DisconnectFault(url=url, method=method, nth=nth, after_event=after_event)


def connect_timeout(
    seconds: float = 5.0, *, url: str | None = None, method: str | None = None, nth: int | None = 1
) -> Fault:
    """The connection never opens: ``ConnectTimeout`` after ``seconds`` (virtual seconds on
    the virtual clock). The recorded answer is kept for the retry."""
    return ConnectTimeoutFault(url=url, method=method, nth=nth, seconds=seconds)


def read_timeout(
    seconds: float = 5.0,
    *,
    after_event: int | None = None,
    url: str | None = None,
    method: str | None = None,
    nth: int | None = 1,
) -> Fault:
    """No bytes for ``seconds``: ``ReadTimeout`` before the headers, or after event k."""
    return ReadTimeoutFault(
        url=url, method=method, nth=nth, seconds=seconds, after_event=after_event
    )


def error_event(
    *,
    after_event: int,
    style: Literal["auto", "anthropic", "openai"] = "auto",
    message: str = "Overloaded",
    url: str | None = None,
    method: str | None = None,
    nth: int | None = 1,
) -> Fault:
    """An error inside a 200 stream after event k (Anthropic ``event: error``, or an OpenAI
    chunk carrying ``error``); the stream ends there."""
    return ErrorEventFault(
        url=url, method=method, nth=nth, after_event=after_event, style=style, message=message
    )
