"""The request path of a session: each request matched, played or recorded, in turn.

A :class:`RequestPath` is the object a
:class:`~pytest_toolnexus._session.session.CassetteSession` holds to serve requests: the
transports it hands to clients, the routing of one request (the closed and missing-file checks,
the wire check, faults, the match, the miss), the keeping of what was recorded, and the
questions a test asks afterwards (what played, what was left unused). It is made from what the
session decided (the file read, the match index, the clock, whether it may record) and knows
nothing of the session's lifecycle: the session tells it when to refuse requests
(:meth:`RequestPath.shut`) and when to let go of its clients (:meth:`RequestPath.finish`).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_toolnexus._patching.install import SessionClosedError
from pytest_toolnexus._safety.mask import credential_environment
from pytest_toolnexus._safety.redact import redact_url
from pytest_toolnexus._safety.redact_interaction import redacted
from pytest_toolnexus._seam.bodies import wire_problem, wire_suspect
from pytest_toolnexus._seam.errors import (
    CassetteFormatError,
    CassetteMissError,
    VcrpyMissError,
    WireCheckError,
    expected_error,
)
from pytest_toolnexus._seam.transport import (
    AsyncTransport,
    DualTransport,
    Transport,
    TransportRequest,
    TransportResponse,
)
from pytest_toolnexus._store.cassette import (
    Interaction,
    MalformedCassette,
    RecordedRequest,
    damage_reason,
)
from pytest_toolnexus._store.records import corrupt_at
from pytest_toolnexus._timing.clock import Clock

from .faults import Fault, FaultSet, Shaping
from .match import Index, MatchRules
from .miss import miss_error, missing_error
from .replay import aplay, play
from .replay_check import DAMAGE, check_playable
from .sent import SentRequest, Turn
from .unread import describe_unread, left_unread

if TYPE_CHECKING:
    # Each imported where it is used, not here: a session that only replays through the seam
    # (serve's) never needs httpx and httpx2 (the bridges), the recorder or the views.
    from pytest_toolnexus._answers.views import ProviderView
    from pytest_toolnexus._bridges.httpx import HTTPBridge
    from pytest_toolnexus._bridges.live import LiveTransport
    from pytest_toolnexus._safety.secrets import SecretScanner

    from .record import RecordingTransport

__all__ = ["Leftovers", "RequestPath"]


@dataclass(frozen=True)
class Leftovers:
    """What a test left of its cassette: each unused interaction (``#1 POST https://...``)
    and each replayed response never read to the end, as a short label."""

    unused: list[str]
    unread: list[str]

    def sentences(self, where: str | None = None, shown: int = 5) -> list[str]:
        """One sentence for each kind left, listing the first ``shown``; ``where`` names the
        cassette in the first."""
        found = []
        if self.unused:
            place = f" in {where}" if where else ""
            found.append(
                f"{len(self.unused)} recorded interaction(s){place} were never played: "
                + _listed(self.unused, shown)
            )
        if self.unread:
            found.append(
                f"{len(self.unread)} replayed response(s) were never read to the end: "
                + _listed(self.unread, shown)
            )
        return found


def _listed(labels: list[str], shown: int) -> str:
    more = f" and {len(labels) - shown} more" if len(labels) > shown else ""
    return "; ".join(labels[:shown]) + more


# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error


class RequestPath:
    """Serving requests from a cassette: the transports, the routing, what was played.

    ``index`` holds the interactions loaded (the first ``loaded_count`` of it); ``t0`` is the
    clock reading requests are timed from; ``not_found`` is the sentence a request gets when
    the cassette it needs is missing. The lists below are the session's record of the test:
    the misses and the damage raised to the client, what the recorder could not parse, and
    every request sent.
    """

    def __init__(
        self,
        path: Path,
        *,
        record_mode: str,
        rules: MatchRules,
        clock: Clock,
        t0: float,
        index: Index,
        loaded_count: int,
        may_record: bool,
        not_found: str | None,
        faults: FaultSet,
        wire_check: bool,
        live: Transport | None,
        async_live: AsyncTransport | DualTransport | None,
        redact: Callable[[Interaction], Interaction | None] | None,
        allow_secrets: tuple[str, ...],
        meta: dict[str, Any],
        note: str | None,
    ) -> None:
        self.path = path
        self.record_mode = record_mode
        self.rules = rules
        self.clock = clock
        self._t0 = t0
        self._index = index
        self._loaded_count = loaded_count
        self._may_record = may_record
        self._not_found = not_found
        self._faults = faults
        self._wire_check = wire_check
        self._live = live
        self._async_live = async_live
        self._redact_hook = redact
        self._allow_secrets = allow_secrets
        self._meta = meta
        self._note = note
        self._lock = threading.RLock()
        self._shut = False
        self.misses: list[CassetteMissError] = []
        self.damaged: list[CassetteFormatError] = []
        self.recorder_problems: list[str] = []
        self.requests: list[SentRequest] = []
        self._owned_live: list[LiveTransport] = []
        self._owned_async_live: list[LiveTransport] = []
        self._recorders: list[RecordingTransport] = []
        self._recorded: dict[int, Interaction] = {}
        self._sequence = 0
        # ids of interactions checked (they live as long), with the encoded answer the check made
        self._playable: dict[int, bytes | None] = {}
        # Credential values in the environment when each request was sent (recording only):
        # the scan at write time must find a key a test set and a monkeypatch took away.
        self._seen_env: set[tuple[str, str]] = set()

    def shut(self) -> None:
        """Refuse every request from now on with :class:`SessionClosedError`: the block or
        test that used the cassette is over."""
        self._shut = True

    def finish(self) -> None:
        """Save the streams a recording left open, then close the clients this path opened;
        each step runs whatever an earlier one raised."""
        with contextlib.ExitStack() as steps:
            for live in self._owned_live:
                steps.callback(live.close)
            for recorder in self._recorders:
                steps.callback(recorder.finish_pending)

    async def aclose_clients(self) -> None:
        """Close the async clients this path opened, each whatever an earlier one raised."""
        async with contextlib.AsyncExitStack() as steps:
            for live in self._owned_async_live:
                steps.push_async_callback(live.aclose)

    # -- transports -----------------------------------------------------------------------

    @functools.cached_property
    def transport(self) -> Transport:
        """The sync seam transport serving this cassette (live traffic via a default client).
        It is made on first use, and every read gives that same transport."""
        return self.transport_for(None)

    @functools.cached_property
    def async_transport(self) -> AsyncTransport:
        """The async seam transport serving this cassette; made once, like :attr:`transport`."""
        return self.async_transport_for(None)

    def http_transport(self) -> HTTPBridge:
        """An httpx/httpx2 transport for ``httpx2.Client(transport=...)`` and friends."""
        from pytest_toolnexus._bridges.httpx import HTTPBridge

        sync, asynchronous = self._bridged
        return HTTPBridge(sync, async_transport=asynchronous)

    @functools.cached_property
    def _bridged(self) -> tuple[Transport, AsyncTransport]:
        """The seam transports behind :meth:`http_transport`, made once. A client behind the
        bridge reads the bytes itself, so unless a live transport was given, this session's own
        hands on the server's bytes and streams every answer the response names a stream (an
        event stream, NDJSON, a body of unannounced length: ``stream_kind``), as the plugin's
        patched clients do, whether or not the request asked for one."""
        given = self._live if self._live not in self._owned_live else None
        given_async = self._async_live if self._async_live not in self._owned_async_live else None
        bridged = None
        if given is None or given_async is None:
            from pytest_toolnexus._bridges.live import LiveTransport

            bridged = LiveTransport(exact=True)
            self._owned_live.append(bridged)
            self._owned_async_live.append(bridged)
        return (
            self.transport_for(given or bridged),
            self.async_transport_for(given_async or bridged),
        )

    def transport_for(self, live: Transport | None) -> Transport:
        """A sync seam transport that records through ``live`` (default: its own client)."""
        # Made before any request is timed, since opening a client takes a while.
        recorder: RecordingTransport | None = None
        if self._may_record:
            from .record import RecordingTransport

            recorder = RecordingTransport(live or self._default_live())
            self._recorders.append(recorder)

        def handle(request: TransportRequest) -> TransportResponse:
            turn = self._begin(request, recorder)
            if turn.interaction is not None:
                try:
                    encoded = self._check_once(turn.interaction)
                    response = play(
                        turn.interaction,
                        request,
                        self.clock,
                        turn.origin,
                        turn,
                        turn.shape,
                        content=encoded,
                    )
                except CassetteFormatError as exc:  # a part of it decoded on first read
                    self.damaged.append(exc)
                    raise
                except (MalformedCassette, *DAMAGE) as exc:
                    raise self._corrupt(turn.position, exc) from exc
                return turn.answered(response)
            assert recorder is not None  # _begin raised the miss otherwise
            return turn.answered(recorder(request, observer=turn))

        return handle

    def async_transport_for(self, live: AsyncTransport | DualTransport | None) -> AsyncTransport:
        """An async seam transport that records through ``live`` (default: its own client)."""
        recorder: RecordingTransport | None = None
        if self._may_record:
            from .record import RecordingTransport

            recorder = RecordingTransport(live or self._default_async_live())
            self._recorders.append(recorder)

        async def handle(request: TransportRequest) -> TransportResponse:
            turn = self._begin(request, recorder, asynchronous=True)
            if turn.interaction is not None:
                try:
                    encoded = self._check_once(turn.interaction)
                    response = await aplay(
                        turn.interaction,
                        request,
                        self.clock,
                        turn.origin,
                        turn,
                        turn.shape,
                        content=encoded,
                    )
                except CassetteFormatError as exc:  # a part of it decoded on first read
                    self.damaged.append(exc)
                    raise
                except (MalformedCassette, *DAMAGE) as exc:
                    raise self._corrupt(turn.position, exc) from exc
                return turn.answered(response)
            assert recorder is not None  # _begin raised the miss otherwise
            return turn.answered(await recorder.acall(request, observer=turn))

        return handle

    def _corrupt(self, position: int | None, exc: BaseException) -> CassetteFormatError:
        error = corrupt_at(self.path, position, damage_reason(exc))
        self.damaged.append(error)
        return error

    def _default_live(self) -> Transport:
        if self._live is not None:
            return self._live
        from pytest_toolnexus._bridges.live import LiveTransport

        transport = LiveTransport()
        self._owned_live.append(transport)
        self._live = transport
        return transport

    def _default_async_live(self) -> AsyncTransport | DualTransport:
        if self._async_live is not None:
            return self._async_live
        from pytest_toolnexus._bridges.live import LiveTransport

        transport = LiveTransport()
        self._owned_async_live.append(transport)
        self._async_live = transport
        return transport

    # -- the request path -----------------------------------------------------------------

    def inject(self, *faults: Fault) -> None:
        """Add faults (from :mod:`pytest_toolnexus.faults`); they count requests from now on."""
        for fault in faults:
            self._faults.add(fault)

    def _check_once(self, interaction: Interaction) -> bytes | None:
        """:func:`check_playable`, once per interaction however often it plays (repeats,
        faults), so a replay pays for the check only the first time; returns the encoded JSON
        answer the check made, kept for every later play."""
        key = id(interaction)
        if key in self._playable:
            return self._playable[key]
        encoded = check_playable(interaction)
        self._playable[key] = encoded
        return encoded

    def scanner(self) -> SecretScanner:
        """The secret scan for this cassette's write: the allowed values, and the credentials
        the environment held while requests were sent."""
        # Imported here: the scan's rules are compiled only by a session that needs them.
        from pytest_toolnexus._safety.secrets import SecretScanner

        return SecretScanner(allow=self._allow_secrets, seen=self._seen_env)

    def _begin(
        self,
        request: TransportRequest,
        recorder: RecordingTransport | None = None,
        *,
        asynchronous: bool = False,
    ) -> Turn:
        if self._may_record:
            self._seen_env.update(credential_environment().items())
        if self._shut:
            raise SessionClosedError(
                f"cassette {self.path} is closed; {request.method} {request.url} came after "
                "the end of the block or test that used it"
            )
        if self._not_found is not None:
            error = self._as_vcrpy_did(missing_error(self._not_found, self.path, request))
            self.misses.append(error)
            raise error
        if (
            self._wire_check
            and wire_suspect(request.content)  # before the body, which may be parsed on read
            and not isinstance(request.body, bytes)
        ):
            problem = wire_problem(request.body)
            if problem is not None:
                raise WireCheckError(
                    f"{request.method} {redact_url(request.url)}: the request body cannot be "
                    f"sent: {problem}. A real client could never have sent this request, so "
                    "the test would describe something that cannot happen. Fix the value, or "
                    "turn the check off with wire_check=False (on the marker or the session)."
                )
        substitute, shapers = self._faults.apply(request) if self._faults else (None, [])
        faults = tuple(fault for fault, _ in shapers) if shapers else ()
        with self._lock:
            position = None if substitute is not None else self._index.take(request)
            if substitute is None and position is None and not self._may_record:
                miss = self._as_vcrpy_did(self._miss(request))
                self.misses.append(miss)
                raise miss
            if recorder is not None and substitute is None and position is None:
                # Recorded: its client is made before the request is timed (it is not the
                # server), and only for a request that goes to it.
                recorder.prepare(asynchronous=asynchronous)
            now = self.clock.now()
            sent = SentRequest(
                request.method,
                redact_url(request.url),
                now - self._t0,
                replayed=substitute is not None or position is not None,
                interaction=position,
                faults=[description for _, description in shapers],
                applied_faults=faults,
            )
            sent.note_body_of(request)
            self.requests.append(sent)
            # Numbered in the order requests were sent: the cassette keeps that order.
            recording = substitute is None and position is None
            number = 0
            if recording:
                self._sequence += 1
                number = self._sequence
        interaction = substitute
        if interaction is None and position is not None:
            interaction = self._index.interactions[position]
        shape = Shaping(faults) if faults and substitute is None else None
        return Turn(
            sent,
            now,
            interaction,
            position,
            shape,
            path=self.path,
            keeper=self if recording else None,
            number=number,
            problems=self.recorder_problems,
            damaged=self.damaged,
        )

    def keep(self, number: int, sent: SentRequest, interaction: Interaction) -> None:
        """Keep what request ``number`` recorded (the :class:`~.sent.Keeper` of its turn):
        through the redact hook and the redaction, under that number, so the cassette keeps
        the order requests were sent in whatever order their streams end in."""
        if self._redact_hook is not None:
            changed = self._redact_hook(interaction)
            if changed is None:
                return  # the redact step said not to record it
            interaction = changed
        safe = redacted(interaction)
        with self._lock:
            self._recorded[number] = safe
            sent.interaction = self._index.add(safe, played=True)

    def _as_vcrpy_did(self, miss: CassetteMissError) -> CassetteMissError:
        """``miss`` as an ``Exception`` too when requests match as vcrpy's did, whose miss
        ``except Exception`` catches (docs/misses.md, "A miss the code catches")."""
        if self.rules.preset != "vcrpy":
            return miss
        return VcrpyMissError(str(miss), path=miss.path)

    def _miss(self, request: TransportRequest) -> CassetteMissError:
        return miss_error(
            request,
            path=self.path,
            index=self._index,
            record_mode=self.record_mode,
            meta=self._meta,
            note=self._note,
            scanner=self.scanner(),
        )

    # -- end of use -----------------------------------------------------------------------

    def unused(self) -> list[tuple[int, RecordedRequest]]:
        """Loaded interactions that no request played, with their positions."""
        with self._lock:
            return [
                (i, self._index.interactions[i].request)
                for i in self._index.unused()
                if i < self._loaded_count
            ]

    def view(self, request: int = -1) -> ProviderView:
        """What the model answered to the ``request``-th request sent (the last by default),
        in the provider-neutral shape of :mod:`pytest_toolnexus.views`."""
        from pytest_toolnexus._answers.views import ViewError, view

        with self._lock:
            sent = self.requests[request]
            if sent.interaction is None:
                raise ViewError(
                    f"request {request} ({sent.method} {sent.url}) was answered by an injected "
                    "fault or recorded live without a cassette position; there is nothing to view"
                )
            interaction = self._index.interactions[sent.interaction]
        return view(interaction)

    def unconsumed(self) -> list[SentRequest]:
        """Replayed successful responses the client stopped reading while data remained that
        it would have read (:func:`~pytest_toolnexus._session.unread.left_unread`).

        Error answers (a client may close a 429 unread before it retries), answers that never
        came (a transport error), answers a fault made up or cut short, a body with nothing
        in it, a rest of keep-alives, and an event stream whose JSON-RPC response has come (an
        MCP client over streamable HTTP closes it there) are not counted.
        """
        return [sent for sent, _ in self.unread()]

    def unread(self) -> list[tuple[SentRequest, str]]:
        """:meth:`unconsumed`, each with a short label of what was left: ``#2 POST
        https://host/mcp (JSON-RPC tools/call): 1 of 4 events read``."""
        with self._lock:
            candidates = [
                r
                for r in self.requests
                if r.replayed
                and not r.complete
                and r.status is not None
                and r.status < 400
                and not r.faults
                and r.interaction is not None
            ]
        found = []
        for sent in candidates:
            assert sent.interaction is not None
            left = left_unread(sent, self._index.interactions[sent.interaction])
            if left is not None:
                found.append((sent, describe_unread(sent, left)))
        return found

    def leftovers(self, *, unused: bool = True) -> Leftovers:
        """What the code under test left of this cassette: interactions never played (unless
        ``unused`` is false: a shared cassette, or one recorded again whole) and replayed
        responses never read to the end. The session reports them when it closes, and the
        plugin when the test is over, in the same words."""
        listed = [f"#{i} {r.method} {r.url}" for i, r in self.unused()] if unused else []
        return Leftovers(listed, [label for _, label in self.unread()])

    @property
    def play_count(self) -> int:
        """How many responses were replayed from the cassette (pytest-recording's
        ``vcr.play_count``)."""
        with self._lock:
            return sum(1 for r in self.requests if r.replayed)

    @property
    def all_played(self) -> bool:
        """True when every loaded interaction was played (pytest-recording's
        ``vcr.all_played``)."""
        return not self.unused()

    @property
    def recorded(self) -> list[Interaction]:
        """Interactions recorded in this session so far, in the order their requests were sent."""
        with self._lock:
            return [self._recorded[k] for k in sorted(self._recorded)]

    @property
    def interactions(self) -> list[Interaction]:
        """Every interaction known to this session: loaded, then recorded."""
        with self._lock:
            return list(self._index.interactions)
