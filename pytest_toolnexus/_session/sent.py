"""One request a session routed: its timing record, and the observer that keeps it.

:class:`SentRequest` is what a test reads back (``cassette.requests``); :class:`Turn` is how
the session answers one request, and the :class:`~pytest_toolnexus._session.observer.Observer` that
replay and recording tell what happens to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, overload

from pytest_toolnexus._seam.errors import CassetteFormatError
from pytest_toolnexus._seam.transport import RequestBody, TransportRequest, TransportResponse
from pytest_toolnexus._store.cassette import Interaction, MalformedCassette
from pytest_toolnexus._store.records import corrupt_at

from .replay import Shaper

__all__ = ["Keeper", "SentRequest", "Turn"]


class _Body:
    """:attr:`SentRequest.body`: the value given, or, for a request noted with
    :meth:`SentRequest.note_body_of`, that request's body read when first asked for (a bridge's
    request parses its bytes then: DESIGN.md section 9, D1), and kept."""

    @overload
    def __get__(self, sent: None, owner: type[Any]) -> RequestBody: ...

    @overload
    def __get__(self, sent: SentRequest, owner: type[Any]) -> RequestBody: ...

    def __get__(self, sent: SentRequest | None, owner: type[Any]) -> RequestBody:
        if sent is None:
            return None  # the field's default, as dataclass reads it
        value = sent.__dict__["_body"]
        if isinstance(value, TransportRequest):
            value = value.body
            sent.__dict__["_body"] = value
        return value  # type: ignore[no-any-return]

    def __set__(self, sent: SentRequest, value: RequestBody) -> None:
        sent.__dict__["_body"] = value


@dataclass
class SentRequest:
    """One request the code under test sent, and what answered it.

    Times are seconds on the session's clock since the session started: ``sent_at`` when the
    request was sent, each of ``deliveries`` when a piece of the response body (an SSE event,
    an NDJSON line, a chunk, or a whole body) reached the client. ``interaction`` is the
    cassette position that answered (None for an answer a fault made up), ``body`` the request
    body as the client sent it (parsed JSON, or bytes), and ``faults`` what each injected fault
    did to this request.
    """

    method: str
    url: str
    sent_at: float
    replayed: bool
    interaction: int | None = None
    status: int | None = None
    retry_after: str | None = None
    body: _Body = _Body()
    faults: list[str] = field(default_factory=list)
    deliveries: list[float] = field(default_factory=list)
    complete: bool = False
    applied_faults: tuple[object, ...] = field(default=(), repr=False, compare=False)
    """The fault objects behind ``faults``, in the order applied (a WebSocket's replay reads
    the ones that shape its frames)."""

    def note_body_of(self, request: TransportRequest) -> None:
        """Take :attr:`body` from ``request`` when it is first read, not now."""
        self.__dict__["_body"] = request

    @property
    def first_delivery(self) -> float | None:
        """When the first piece of the body reached the client, or None."""
        return self.deliveries[0] if self.deliveries else None

    @property
    def finished_at(self) -> float:
        """When the last piece reached the client (``sent_at`` when nothing was delivered)."""
        return self.deliveries[-1] if self.deliveries else self.sent_at


class Keeper(Protocol):
    """Where a recorded interaction goes: the request path that numbered the request."""

    def keep(self, number: int, sent: SentRequest, interaction: Interaction) -> None:
        """Keep ``interaction``, recorded for the ``number``-th request recorded (numbered in
        the order requests were sent), whose record is ``sent``."""


class Turn:
    """How one request will be answered, and the :class:`Observer` of its way there.

    ``interaction`` is what will be played (None: it is recorded live, and ``keeper`` keeps
    the interaction the recording makes as request ``number``), ``position`` its place in the
    cassette, ``shape`` what
    faults do to it. As the request goes, the turn fills in its timing record ``sent``:
    ``origin`` is the clock time it was sent at, so each delivery is stamped in seconds since
    the session started.
    """

    def __init__(
        self,
        sent: SentRequest,
        origin: float,
        interaction: Interaction | None,
        position: int | None,
        shape: Shaper | None,
        *,
        path: Path,
        keeper: Keeper | None,
        number: int = 0,
        problems: list[str],
        damaged: list[CassetteFormatError] | None = None,
    ) -> None:
        self.sent = sent
        self.origin = origin
        self.interaction = interaction
        self.position = position
        self.shape = shape
        self._path = path
        self._keeper = keeper
        self._number = number
        self._problems = problems
        self._damaged = damaged

    def answered(self, response: TransportResponse) -> TransportResponse:
        """Note the status (and ``Retry-After``) the client gets; returns ``response``."""
        self.sent.status = response.status
        self.sent.retry_after = response.headers.get("retry-after")
        return response

    # -- the Observer -----------------------------------------------------------------------

    def delivered(self, number: int, at: float) -> None:
        self.sent.deliveries.append(self.sent.sent_at + (at - self.origin))

    def ended(self) -> None:
        self.sent.complete = True

    def recorded(self, interaction: Interaction) -> None:
        assert self._keeper is not None, "a turn that plays an interaction records none"
        self._keeper.keep(self._number, self.sent, interaction)

    def malformed(self, problem: MalformedCassette) -> Exception:
        error = corrupt_at(self._path, self.position, str(problem))
        if self._damaged is not None:
            self._damaged.append(error)
        return error

    def problem(self, text: str) -> None:
        self._problems.append(text)
