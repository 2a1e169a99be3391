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

Each function checks its arguments, their types as well as their values, and refuses one it
cannot use with a ``ValueError`` or ``TypeError`` that names it: these are the only checks,
which ``pytest-toolnexus serve``'s control API applies to the faults another language asks for
as JSON (docs/serve.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, Literal

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


_MODES: Final = ("bytes", "lines", "utf8", "merge")
_STYLES: Final = ("auto", "anthropic", "openai")


def _whole(name: str, value: object, *, least: int | None = None) -> int:
    """``value`` as a whole number (of at least ``least``), or the error that says why not."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a whole number, got {value!r}")
    if least is not None and value < least:
        raise ValueError(f"{name} must be {least} or more, got {value}")
    return value


def _seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    return float(value)


def _text(name: str, value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {value!r}")


def _aim(url: object, method: object, nth: object) -> None:
    """The checks of the arguments every fault takes: which requests it counts, and which
    of them it applies to (``nth`` from 1, or None for every one)."""
    _text("url", url)
    _text("method", method)
    if nth is not None:
        _whole("nth", nth, least=1)


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
    _text("url", url)
    _text("method", method)
    if nth is None:
        raise TypeError("prepend answers the nth request: nth must be a whole number, got None")
    for name, value in (("status", status), ("count", count), ("nth", nth)):
        _whole(name, value)
    if not 100 <= status <= 599:
        raise ValueError(f"status {status} is not an HTTP status")
    if count < 1 or nth < 1:
        raise ValueError(f"count and nth start at 1, got count={count} and nth={nth}")
    if retry_after is not None and (
        isinstance(retry_after, bool) or not isinstance(retry_after, str | int | float)
    ):
        raise TypeError(f"retry_after must be a string or a number, got {retry_after!r}")
    if not isinstance(body, str | bytes | Mapping):
        raise TypeError(f"body must be 'json', 'html', a string, bytes or a mapping, got {body!r}")
    if headers is not None and not (
        isinstance(headers, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    ):
        raise TypeError(f"headers must be a mapping of strings to strings, got {headers!r}")
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
    _aim(url, method, nth)
    if mode not in _MODES:
        raise ValueError(f"rechunk mode {mode!r} is not one of bytes, lines, utf8, merge")
    _whole("size", size, least=1)
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
    _aim(url, method, nth)
    if _seconds("seconds", seconds) < 0:
        raise ValueError("a stall cannot be negative")
    _after(after_event)
    return StallFault(url=url, method=method, nth=nth, seconds=seconds, after_event=after_event)


def disconnect(
    *, after_event: int, url: str | None = None, method: str | None = None, nth: int | None = 1
) -> Fault:
    """Close the connection after event ``after_event``: the client gets the error httpx
    raises for a peer that closes mid-body (``RemoteProtocolError``)."""
    _aim(url, method, nth)
    if after_event is None:
        raise TypeError("disconnect needs after_event, the event it closes after (from 0)")
    _after(after_event)
    return DisconnectFault(url=url, method=method, nth=nth, after_event=after_event)


def connect_timeout(
    seconds: float = 5.0, *, url: str | None = None, method: str | None = None, nth: int | None = 1
) -> Fault:
    """The connection never opens: ``ConnectTimeout`` after ``seconds`` (virtual seconds on
    the virtual clock). The recorded answer is kept for the retry."""
    _aim(url, method, nth)
    if _seconds("seconds", seconds) < 0:
        raise ValueError("a timeout cannot be negative")
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
    _aim(url, method, nth)
    if _seconds("seconds", seconds) < 0:
        raise ValueError("a timeout cannot be negative")
    _after(after_event)
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
    _aim(url, method, nth)
    if after_event is None:
        raise TypeError("error_event needs after_event, the event it follows (from 0)")
    _after(after_event)
    if style not in _STYLES:
        raise ValueError(f"error_event style {style!r} is not one of auto, anthropic, openai")
    if not isinstance(message, str):
        raise TypeError(f"message must be a string, got {message!r}")
    return ErrorEventFault(
        url=url, method=method, nth=nth, after_event=after_event, style=style, message=message
    )


def _after(after_event: object) -> None:
    """``after_event`` counts events from 0; None (where a fault allows it) means before the
    headers."""
    if after_event is None:
        return
    if isinstance(after_event, bool) or not isinstance(after_event, int):
        raise TypeError(f"after_event must be a whole number, got {after_event!r}")
    if after_event < 0:
        raise ValueError("after_event counts events from 0")
