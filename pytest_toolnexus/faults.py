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

The ``ws_*`` faults act on WebSocket sessions (Realtime and Live APIs) and count only WebSocket
handshakes: ``nth=1`` is the first connection opened. "Server frame k" counts the server's
messages from 0: ``after_frame=k`` lets frames ``0 … k-1`` through (docs/faults.md).

Each function checks its arguments, their types as well as their values, and refuses one it
cannot use with a ``ValueError`` or ``TypeError`` that names it: these are the only checks,
which ``pytest-toolnexus serve``'s control API applies to the faults another language asks for
as JSON (docs/serve.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, Literal

from ._realtime.faults import (
    RESERVED_CODES,
    CloseFault,
    DropFault,
    ErrorFault,
    RefuseFault,
    SlowHandshakeFault,
)
from ._realtime.faults import StallFault as WebSocketStallFault
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
    "ws_close",
    "ws_drop",
    "ws_error",
    "ws_refuse",
    "ws_slow_handshake",
    "ws_stall",
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


# -- WebSocket sessions ---------------------------------------------------------------------


def _after_frame(after_frame: int) -> int:
    if isinstance(after_frame, bool) or not isinstance(after_frame, int) or after_frame < 0:
        raise ValueError(
            f"after_frame counts the server's frames from 0 (after_frame=k lets frames 0 to "
            f"k-1 through), got {after_frame!r}"
        )
    return after_frame


def ws_drop(*, after_frame: int, url: str | None = None, nth: int | None = 1) -> Fault:
    """The connection drops without a close frame after server frames ``0 … after_frame-1``:
    the client's next read fails with close code 1006 (websockets' ``ConnectionClosedError``,
    aiohttp's ``CLOSE`` message with 1006)."""
    return DropFault(url=url, nth=nth, after_frame=_after_frame(after_frame))


def ws_close(
    code: int = 1011,
    reason: str = "",
    *,
    after_frame: int,
    url: str | None = None,
    nth: int | None = 1,
) -> Fault:
    """The server closes the connection with ``code`` and ``reason`` after server frames
    ``0 … after_frame-1`` (1000 and 1001 read as a clean close, ``ConnectionClosedOK``)."""
    if isinstance(code, bool) or not isinstance(code, int) or not 1000 <= code <= 4999:
        raise ValueError(f"a close code is 1000 to 4999, got {code!r}")
    if code in RESERVED_CODES:
        fix = (
            "use faults.ws_drop(after_frame=k) for a connection that drops without one"
            if code == 1006
            else "choose 1000 (normal), 1001 (going away), 1008 (policy), 1011 (server error) "
            "or a code of your own from 4000"
        )
        raise ValueError(f"close code {code} is never sent in a close frame: {fix}")
    if len(reason.encode("utf-8")) > 123:
        raise ValueError("a close frame's reason is at most 123 bytes of UTF-8")
    return CloseFault(
        url=url, nth=nth, code=code, reason=reason, after_frame=_after_frame(after_frame)
    )


def ws_stall(
    seconds: float = math.inf,
    *,
    after_frame: int,
    url: str | None = None,
    nth: int | None = 1,
) -> Fault:
    """Server frame ``after_frame`` and those after it that answer the same client frame come
    ``seconds`` late; by default the server sends nothing more, so the client's own timeout
    (``recv(timeout=...)``, on the virtual clock) is what ends the wait."""
    if not seconds >= 0:
        raise ValueError(f"a stall lasts 0 seconds or more (math.inf: for ever), got {seconds!r}")
    return WebSocketStallFault(
        url=url, nth=nth, seconds=seconds, after_frame=_after_frame(after_frame)
    )


def ws_error(
    *,
    after_frame: int,
    message: str = "The server had an error while processing your request.",
    error_type: str = "server_error",
    code: str | None = None,
    url: str | None = None,
    nth: int | None = 1,
) -> Fault:
    """An OpenAI Realtime ``error`` event (``{"type": "error", "error": {"type", "code",
    "message", ...}}``) after server frames ``0 … after_frame-1``; the recorded frames follow
    it. Gemini Live has none: a Live session is refused with the fix (``ws_close``)."""
    return ErrorFault(
        url=url,
        nth=nth,
        after_frame=_after_frame(after_frame),
        message=message,
        error_type=error_type,
        code=code,
    )


def ws_slow_handshake(seconds: float, *, url: str | None = None, nth: int | None = 1) -> Fault:
    """The server answers the handshake ``seconds`` late (on the virtual clock); the session's
    frames all move with it."""
    if not 0 <= seconds < math.inf:
        raise ValueError(f"a slow handshake takes a finite number of seconds, got {seconds!r}")
    return SlowHandshakeFault(url=url, nth=nth, seconds=seconds)


def ws_refuse(
    status: int = 403,
    *,
    count: int = 1,
    body: Literal["json", "html"] | str | bytes | Mapping[str, Any] = "json",
    headers: Mapping[str, str] | None = None,
    url: str | None = None,
    nth: int = 1,
) -> Fault:
    """The server refuses ``count`` handshakes with ``status`` (websockets raises
    ``InvalidStatus``, aiohttp ``WSServerHandshakeError``); the recorded session stays for the
    attempt after them. ``body`` is as :func:`prepend`'s."""
    if status == 101 or not 100 <= status <= 599:
        raise ValueError(
            f"a refused handshake answers an HTTP status other than 101 (401, 403, 429, 503 "
            f"...), got {status!r}"
        )
    if count < 1 or nth < 1:
        raise ValueError(f"count and nth start at 1, got count={count} and nth={nth}")
    return RefuseFault(
        url=url,
        nth=nth,
        status=status,
        count=count,
        body=body,
        headers=dict(headers or {}),
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
