"""Faults: the failures nobody can record on demand, applied to a recording at replay.

Two kinds. A *substitute* answers a request in place of the recording (prepended error
responses, a connect timeout, a read timeout before the headers) without using up the
recorded interaction, so the client's retry still finds it. A *shaper* changes how the
recorded answer is played (re-chunked, stalled, cut off, or carrying an error event). Faults
compose: every applicable fault applies, in the order given.

Why one module of over 400 lines: every fault is a small frozen dataclass, and the set that
counts the requests each one targets (:class:`FaultSet`) must know which faults answer in place
of the recording and which shape it; kept together, the two kinds are read side by side.
"""

from __future__ import annotations

import email.utils
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from pytest_toolnexus._providers import ANTHROPIC, OPENAI_CHAT, provider_of
from pytest_toolnexus._seam.errors import expected_error
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import TransportRequest
from pytest_toolnexus._store.cassette import (
    BytesBody,
    EmptyBody,
    Interaction,
    JsonBody,
    RecordedError,
    RecordedRequest,
    RecordedResponse,
    TextBody,
)

from .replay import Plan

__all__ = [
    "ConnectTimeoutFault",
    "DisconnectFault",
    "ErrorEventFault",
    "Fault",
    "FaultSet",
    "PrependFault",
    "ReadTimeoutFault",
    "RechunkFault",
    "Shaping",
    "StallFault",
    "error_body",
    "is_websocket",
]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error

RETRYABLE: Final = (429, 500, 502, 503, 504, 529)
_REASONS: Final = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}
_PEER_CLOSED: Final = "peer closed connection without sending complete message body"


def error_body(status: int, url: str, message: str | None = None) -> dict[str, Any]:
    """The JSON error body the provider behind ``url`` sends with ``status``, in the shape its
    SDK parses (the OpenAI shape for a URL no provider dialect claims)."""
    reason = _REASONS.get(status, "Error")
    text = message or f"{reason} (injected by pytest-toolnexus)"
    dialect = provider_of("POST", url) or provider_of("GET", url) or OPENAI_CHAT
    return dialect.error_body(status, text)


def _html(status: int) -> str:
    reason = _REASONS.get(status, "Error")
    return (
        f"<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n"
        f"<center><h1>{status} {reason}</h1></center>\r\n<hr><center>nginx</center>\r\n"
        "</body>\r\n</html>\r\n"
    )


def is_websocket(request: TransportRequest) -> bool:
    """Whether ``request`` is a WebSocket's handshake."""
    return request.url[:6].lower().startswith(("ws://", "wss://"))


@dataclass(frozen=True, slots=True)
class Fault:
    """What every fault shares: which requests it targets.

    ``url`` (a substring) and ``method`` narrow the requests the fault counts; ``nth`` picks
    which of those (1 is the first) it applies to, or ``None`` for every one. A WebSocket
    handshake (a ``ws://`` or ``wss://`` URL) is counted by the WebSocket faults alone.
    """

    url: str | None = None
    method: str | None = None
    nth: int | None = 1

    def targets(self, request: TransportRequest) -> bool:
        if is_websocket(request):
            return False
        return self.matches(request)

    def matches(self, request: TransportRequest) -> bool:
        """Whether ``url`` and ``method`` name ``request``."""
        if self.method is not None and request.method != self.method.upper():
            return False
        return self.url is None or self.url in request.url

    def hits(self, number: int) -> bool:
        """Whether the ``number``-th targeted request (1-based) is affected."""
        return self.nth is None or number == self.nth

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class PrependFault(Fault):
    """``count`` error responses with ``status`` before the ``nth`` targeted request's answer."""

    status: int = 429
    count: int = 1
    retry_after: str | float | int | None = None
    body: Literal["json", "html"] | str | bytes | Mapping[str, Any] = "json"
    headers: Mapping[str, str] = field(default_factory=dict)

    def hits(self, number: int) -> bool:
        first = self.nth if self.nth is not None else 1
        return first <= number < first + self.count

    def describe(self) -> str:
        after = "" if self.retry_after is None else f", Retry-After: {self.retry_after}"
        return f"prepended {self.status}{after}"

    def interaction(self, request: TransportRequest) -> Interaction:
        headers: list[tuple[str, str]] = []
        if self.body == "html":
            body: Any = TextBody(_html(self.status))
            headers.append(("content-type", "text/html"))
        elif self.body == "json":
            body = JsonBody(error_body(self.status, request.url))
            headers.append(("content-type", "application/json"))
        elif isinstance(self.body, Mapping):
            body = JsonBody(dict(self.body))
            headers.append(("content-type", "application/json"))
        elif isinstance(self.body, bytes):
            try:
                body = TextBody(self.body.decode()) if self.body else EmptyBody()
                headers.append(("content-type", "text/plain"))
            except UnicodeDecodeError:
                # Not text: served as the bytes given.
                body = BytesBody(self.body)
                headers.append(("content-type", "application/octet-stream"))
        else:
            body = TextBody(self.body)
            headers.append(("content-type", "text/plain"))
        if self.retry_after is not None:
            headers.append(("retry-after", str(self.retry_after)))
        headers.extend(self.headers.items())
        recorded = RecordedRequest(request.method, request.url, request.headers, EmptyBody())
        response = RecordedResponse(self.status, Headers(headers), body, 1.0, 1.0)
        return Interaction(recorded, response)


@dataclass(frozen=True, slots=True)
class ConnectTimeoutFault(Fault):
    """The connection never opens: ``httpx.ConnectTimeout`` after ``seconds``."""

    seconds: float = 5.0

    def describe(self) -> str:
        return f"connect timeout after {self.seconds:g} s"

    def interaction(self, request: TransportRequest) -> Interaction:
        recorded = RecordedRequest(request.method, request.url, request.headers, EmptyBody())
        error = RecordedError(
            "ConnectTimeout", "timed out (injected connect timeout)", self.seconds * 1000
        )
        return Interaction(recorded, error=error)


@dataclass(frozen=True, slots=True)
class ReadTimeoutFault(Fault):
    """No bytes for ``seconds``: ``httpx.ReadTimeout`` before the headers (``after_event`` is
    None) or after event ``after_event`` of the body."""

    seconds: float = 5.0
    after_event: int | None = None

    def describe(self) -> str:
        where = (
            "before the headers" if self.after_event is None else f"after event {self.after_event}"
        )
        return f"read timeout {where}"

    def interaction(self, request: TransportRequest) -> Interaction:
        recorded = RecordedRequest(request.method, request.url, request.headers, EmptyBody())
        error = RecordedError(
            "ReadTimeout", "timed out (injected read timeout)", self.seconds * 1000
        )
        return Interaction(recorded, error=error)

    def shape(self, plan: Plan) -> Plan:
        k = min(self.after_event or 0, len(plan.pieces))
        kept = plan.pieces[:k]
        at = (kept[-1][0] if kept else plan.t_headers) + self.seconds * 1000
        error = RecordedError("ReadTimeout", "timed out (injected read timeout)", at)
        return replace(plan, pieces=kept, error=error, end=at, streamed=True, has_value=False)


@dataclass(frozen=True, slots=True)
class StallFault(Fault):
    """A pause of ``seconds`` before the headers (``after_event`` None) or after event k."""

    seconds: float = 1.0
    after_event: int | None = None

    def describe(self) -> str:
        where = (
            "before the headers" if self.after_event is None else f"after event {self.after_event}"
        )
        return f"stall {self.seconds:g} s {where}"

    def shape(self, plan: Plan) -> Plan:
        delay = self.seconds * 1000
        k = 0 if self.after_event is None else self.after_event
        pieces = [(t + delay if i >= k else t, data) for i, (t, data) in enumerate(plan.pieces)]
        error = plan.error
        if error is not None:
            error = replace(error, t=error.t + delay)
        t_headers = plan.t_headers + delay if self.after_event is None else plan.t_headers
        return replace(plan, pieces=pieces, end=plan.end + delay, error=error, t_headers=t_headers)


@dataclass(frozen=True, slots=True)
class DisconnectFault(Fault):
    """The server closes the connection after event ``after_event`` of the body, as httpx
    reports a peer that closes mid-body (``RemoteProtocolError``)."""

    after_event: int = 1

    def describe(self) -> str:
        return f"disconnect after event {self.after_event}"

    def shape(self, plan: Plan) -> Plan:
        kept = plan.pieces[: self.after_event]
        at = kept[-1][0] if kept else plan.t_headers
        error = RecordedError(
            "RemoteProtocolError", f"{_PEER_CLOSED} (incomplete chunked read)", at
        )
        return replace(plan, pieces=kept, error=error, end=at, streamed=True, has_value=False)


@dataclass(frozen=True, slots=True)
class ErrorEventFault(Fault):
    """An error event inside a 200 stream after event ``after_event``; the stream then ends.

    ``style`` is ``"anthropic"`` (``event: error``), ``"openai"`` (a ``data:`` chunk carrying
    ``error``), or ``"auto"``: the error event of the dialect the URL speaks (the provider
    layer's ``error_event``), or the ``"openai"`` chunk for one that has none.
    """

    after_event: int = 1
    style: Literal["auto", "anthropic", "openai"] = "auto"
    message: str = "Overloaded"

    def describe(self) -> str:
        return f"error event after event {self.after_event}"

    def shape(self, plan: Plan) -> Plan:
        kept = plan.pieces[: self.after_event]
        at = kept[-1][0] if kept else plan.t_headers
        event: bytes | None = None
        if self.style == "anthropic":
            event = ANTHROPIC.error_event(self.message)
        elif self.style == "auto":
            # The dialect of the request answered; a plan with no method is read as a POST.
            dialect = provider_of(plan.method, plan.url) or provider_of("POST", plan.url)
            event = None if dialect is None else dialect.error_event(self.message)
        if event is None:  # "openai", or a dialect with no error event of its own
            event = OPENAI_CHAT.error_event(self.message)
        pieces = [*kept, (at, event)]
        return replace(plan, pieces=pieces, end=at, streamed=True, has_value=False, error=None)


Mode = Literal["bytes", "lines", "utf8", "merge"]


def _split_lines(data: bytes) -> list[bytes]:
    parts: list[bytes] = []
    start = 0
    while True:
        end = data.find(b"\n", start)
        if end < 0:
            break
        middle = start + max((end - start) // 2, 1) if end > start else end
        if start < middle < end:
            parts.append(data[start:middle])
            parts.append(data[middle : end + 1])
        else:
            parts.append(data[start : end + 1])
        start = end + 1
    if start < len(data):
        parts.append(data[start:])
    return [p for p in parts if p]


def _split_utf8(data: bytes) -> list[bytes]:
    for index, byte in enumerate(data):
        if byte >= 0xC0:
            return [data[: index + 1], data[index + 1 :]]
    middle = len(data) // 2
    return [data[:middle], data[middle:]] if middle else [data]


@dataclass(frozen=True, slots=True)
class RechunkFault(Fault):
    """Deliver the same bytes in other chunks, keeping each event's time.

    ``bytes``: one byte per chunk. ``lines``: every line split in the middle. ``utf8``: each
    chunk split inside its first multi-byte character (or in the middle). ``merge``: every
    ``size`` consecutive pieces joined into one, delivered when the last of them was.
    """

    mode: Mode = "lines"
    size: int = 2
    nth: int | None = None

    def describe(self) -> str:
        return f"re-chunked ({self.mode})"

    def shape(self, plan: Plan) -> Plan:
        pieces: list[tuple[float, bytes]] = []
        if self.mode == "merge":
            step = max(self.size, 2)
            for start in range(0, len(plan.pieces), step):
                group = plan.pieces[start : start + step]
                pieces.append((group[-1][0], b"".join(d for _, d in group)))
        else:
            for t, data in plan.pieces:
                if self.mode == "bytes":
                    parts = [data[i : i + 1] for i in range(len(data))]
                elif self.mode == "lines":
                    parts = _split_lines(data)
                else:
                    parts = _split_utf8(data)
                pieces.extend((t, part) for part in parts if part)
        return replace(plan, pieces=pieces, streamed=True, has_value=False)


class FaultSet:
    """The faults of one session, counting the requests each one targets."""

    def __init__(self, faults: Iterable[Fault] = ()) -> None:
        self._faults: list[Fault] = []
        self._counts: list[int] = []
        self._lock = threading.Lock()
        for fault in faults:
            self.add(fault)

    def add(self, fault: Fault) -> None:
        if not isinstance(fault, Fault):
            raise TypeError(f"{fault!r} is not a fault; build one with pytest_toolnexus.faults")
        with self._lock:
            self._faults.append(fault)
            self._counts.append(0)

    def __bool__(self) -> bool:
        return bool(self._faults)

    def apply(
        self, request: TransportRequest
    ) -> tuple[Interaction | None, list[tuple[Fault, str]]]:
        """For one request: a substitute answer (or None), and the shapers that apply.

        Only one substitute can answer a request: the first, in the order given, whose turn
        it is. The other substitutes do not count that request, so their turn comes with a
        later one. Shapers change a recorded answer, so they count only the requests that get
        one: a request answered by a substitute is neither shaped nor counted by them.
        """
        substitute: Interaction | None = None
        applied: list[tuple[Fault, str]] = []
        with self._lock:
            for position, fault in enumerate(self._faults):
                answering = _substitute(fault)
                if answering is None or not fault.targets(request):
                    continue
                self._counts[position] += 1
                if fault.hits(self._counts[position]):
                    substitute = answering.interaction(request)
                    applied.append((fault, fault.describe()))
                    break
            if substitute is not None:
                return substitute, applied
            for position, fault in enumerate(self._faults):
                if _substitute(fault) is not None or not fault.targets(request):
                    continue
                self._counts[position] += 1
                if fault.hits(self._counts[position]):
                    applied.append((fault, fault.describe()))
        return substitute, applied


def _substitute(fault: Fault) -> PrependFault | ConnectTimeoutFault | ReadTimeoutFault | None:
    """``fault`` when it answers a request in place of the recording; None for a shaper."""
    if isinstance(fault, PrependFault | ConnectTimeoutFault):
        return fault
    if isinstance(fault, ReadTimeoutFault) and fault.after_event is None:
        return fault
    return None


@dataclass(frozen=True, slots=True)
class Shaping:
    """The faults that apply to one request's recorded answer, as the ``shape`` replay takes:
    called with the plan, it applies each shaping fault in the order given."""

    faults: tuple[Fault, ...]

    def __call__(self, plan: Plan) -> Plan:
        for fault in self.faults:
            shape = getattr(fault, "shape", None)
            if shape is not None:
                plan = shape(plan)
        return plan


def http_date(seconds_from_now: float, now: float) -> str:
    """An HTTP-date ``seconds_from_now`` after the Unix time ``now`` (for Retry-After)."""
    return email.utils.formatdate(now + seconds_from_now, usegmt=True)
