"""A cassette in use: replay what matches, record what the mode allows, write once at the end.

This is the object the pytest plugin hands to tests as the ``cassette`` fixture, and what
``use_cassette`` returns for plain Python code.

Why one module of just under 600 lines: what is left is the lifecycle (the constructor that checks
the modes, loads the file and picks the clock; start, close and the write; the reports at the
end), and the answers of the :class:`~.route.RequestPath` it holds, passed through one by one
so that the public surface is written down here. Each request's record is in :mod:`.sent`.
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import os
import types
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from pytest_toolnexus._patching.install import Installation, SessionClosedError, State
from pytest_toolnexus._realtime.log import WebSocketLog
from pytest_toolnexus._seam.errors import (
    CassetteFormatError,
    CassetteMissError,
    CassetteSetAsideWarning,
    CassetteWriteError,
    RecorderWarning,
    expected_error,
)
from pytest_toolnexus._seam.transport import (
    AsyncTransport,
    DualTransport,
    Transport,
    async_side,
)
from pytest_toolnexus._store.cassette import (
    Cassette,
    Interaction,
    MalformedCassette,
    RecordedRequest,
    damage_reason,
    load_cassette,
)
from pytest_toolnexus._store.read import unusable
from pytest_toolnexus._store.records import corrupt_at
from pytest_toolnexus._store.write import fingerprint
from pytest_toolnexus._timing.clock import Clock, InstantClock, RealClock, real_wall
from pytest_toolnexus._timing.virtual import Sleep, VirtualClock

from .collector import freeze, paused
from .faults import Fault, FaultSet
from .interruption import interruption
from .match import Index, Matcher, MatchRules
from .miss import missing_message
from .modes import RECORD_MODES, TIMING_MODES, RecordMode, TimingMode
from .replay_check import DAMAGE
from .route import Leftovers, RequestPath
from .sent import SentRequest

if TYPE_CHECKING:
    # Each imported where it is used, not here: a session that only replays through the seam
    # (serve's) never needs httpx, the writer and its secret scan, nor the clock's patches.
    from pytest_toolnexus._answers.views import ProviderView
    from pytest_toolnexus._bridges.httpx import HTTPBridge
    from pytest_toolnexus._store.recording import RecordingWriter

__all__ = [
    "RECORD_MODES",
    "TIMING_MODES",
    "CassetteSession",
    "RecordMode",
    "SentRequest",
    "TimingMode",
    "UnusedInteractionsWarning",
]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error


_SECRET_FIX: Final = (
    "Redact them with the pytest_toolnexus_redact hook (redact= on a CassetteSession), or, "
    "for a value that is a known fake, list it in allow_secrets."
)
"""The fix a write the secret scan refuses suggests."""


def _stay() -> None:
    """Nothing to give back: this session froze nothing."""


class UnusedInteractionsWarning(UserWarning):
    """A cassette closed with recorded interactions that no request played."""


class CassetteSession:
    """One cassette in use, with a record mode and a clock.

    ``record`` is one of ``none`` (replay only; a miss is an error), ``once`` (record when the
    file does not exist yet, otherwise replay only), ``new`` (replay what matches and record the
    rest) and ``all`` (record everything again). Hand :attr:`transport`, :attr:`async_transport`
    or :meth:`http_transport` to clients, then :meth:`close` to write what was recorded.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        record: RecordMode = "none",
        timing: TimingMode = "virtual",
        speed: float = 1.0,
        clock_modules: Iterable[types.ModuleType] = (),
        ignore_body: Iterable[str] = (),
        match_headers: Iterable[str] = (),
        match_on: str | Iterable[str] = "default",
        ignore_query: Iterable[str] = (),
        ignore_headers: Iterable[str] = (),
        allow_repeats: bool = False,
        live: Transport | DualTransport | None = None,
        async_live: AsyncTransport | None = None,
        meta: Mapping[str, Any] | None = None,
        on_unused: Literal["warn", "error", "ignore"] = "warn",
        redact: Callable[[Interaction], Interaction | None] | None = None,
        matcher: Matcher | None = None,
        before_write: Callable[[Cassette], None] | None = None,
        run_id: str | None = None,
        note: str | None = None,
        allow_secrets: Iterable[str] = (),
        wire_check: bool = True,
        faults: Iterable[Fault] = (),
    ) -> None:
        if record not in RECORD_MODES:
            raise ValueError(f"record mode {record!r} is not one of {', '.join(RECORD_MODES)}")
        self.path = Path(path)
        self.record_mode: RecordMode = record
        self.rules = MatchRules.build(
            ignore_body=ignore_body,
            match_headers=match_headers,
            match_on=match_on,
            ignore_query=ignore_query,
            ignore_headers=ignore_headers,
        )
        self._meta = dict(meta or {})
        self._on_unused = on_unused
        self.written = False
        self.rescued: Path | None = None
        """Where a recording cut short (:meth:`mark_interrupted`) was kept instead of in the
        cassette, once :meth:`close` saved it."""
        self._discard = False
        self._interrupted: str | None = None
        self._state = State.CREATED
        problem = unusable(self.path)
        if problem is not None:
            # No file can be at this path: say so now, not as a miss or an OSError later.
            refused = CassetteFormatError if record == "none" else CassetteWriteError
            raise refused(f"cannot use cassette path {self.path}: {problem}", path=str(self.path))
        self.existed = self.path.exists()
        loaded: list[Interaction] = []
        # A missing file is only an error once a request needs it: a test that sends nothing
        # passes with no cassette, as it would with no plugin, and recording it writes none.
        not_found: str | None = None
        # What the file was when it was read whole (record mode "new"): the write merges
        # what was read instead of reading it again, while the file is still that one.
        read_as: tuple[int, int, int] | None = None
        index = Index(self.rules, [], allow_repeats, matcher)
        # The file decoded and its requests indexed with the collector paused: they are all
        # containers that live as long as the session (see .collector).
        with paused() as worth_freezing:
            if record == "none" and not self.existed:
                not_found = missing_message(self.path, note)
            elif record == "none" or (record in ("once", "new") and self.existed):
                # Only a recording that merges ("new") needs to know the file it read is
                # still the one there at the write; a replay reads it and is done with it.
                before = fingerprint(self.path) if record == "new" else None
                cassette = self._load(record)
                if before is not None and fingerprint(self.path) == before:
                    read_as = before
                loaded = cassette.interactions
                self._meta = {**cassette.meta, **self._meta}
            for position, interaction in enumerate(loaded):
                try:
                    index.add(interaction, played=False)
                except (MalformedCassette, *DAMAGE) as exc:
                    # A URL with a port out of range or a broken IPv6 literal, a request body
                    # with bytes or NaN, or nested deeper than a cassette holds: the request
                    # cannot be matched, so the file is damaged.
                    reason = f"its request cannot be matched ({damage_reason(exc)})"
                    raise corrupt_at(self.path, position, reason) from exc
            # Frozen before the collector is back on, or its next young collection would
            # traverse all of them at once.
            unfreeze = (freeze(worth_freezing()) if loaded else None) or _stay
        try:
            self._open(
                record,
                timing,
                speed,
                clock_modules,
                loaded,
                index,
                read_as,
                not_found,
                run_id,
                before_write,
                live,
                async_live,
                redact,
                allow_secrets,
                faults,
                wire_check,
                note,
            )
        except BaseException:
            unfreeze()
            raise
        self._unfreeze: Callable[[], None] = unfreeze
        if unfreeze is not _stay:
            # A session dropped without close() (a helper that forgot it) gives the freeze back
            # when it is freed, instead of leaving the process's heap frozen for good.
            weakref.finalize(self, unfreeze)

    def _open(
        self,
        record: RecordMode,
        timing: TimingMode,
        speed: float,
        clock_modules: Iterable[types.ModuleType],
        loaded: list[Interaction],
        index: Index,
        read_as: tuple[int, int, int] | None,
        not_found: str | None,
        run_id: str | None,
        before_write: Callable[[Cassette], None] | None,
        live: Transport | DualTransport | None,
        async_live: AsyncTransport | None,
        redact: Callable[[Interaction], Interaction | None] | None,
        allow_secrets: Iterable[str],
        faults: Iterable[Fault],
        wire_check: bool,
        note: str | None,
    ) -> None:
        """The rest of the constructor, once the file is read: the writer, the clock and the
        request path."""
        self._may_record = record in ("new", "all") or (record == "once" and not self.existed)
        # Made before any request is sent: it refuses a path no write can succeed at, and
        # notes what the file is now, to tell at the write whether another writer wrote it.
        self._writer: RecordingWriter | None = None
        if self._may_record:
            from pytest_toolnexus._store.recording import RecordingWriter

            self._writer = RecordingWriter(
                self.path,
                run_id=run_id,
                merge_always=record == "new",
                replace_unreadable=record == "all",
                before_write=before_write,
                fix=_SECRET_FIX,
                loaded=None if read_as is None or record != "new" else (read_as, loaded),
            )
        if timing not in TIMING_MODES:
            raise ValueError(f"timing mode {timing!r} is not one of {', '.join(TIMING_MODES)}")
        self.timing: TimingMode = timing
        self.clock: Clock = self._make_clock(timing, speed, loaded)
        self._clock_modules = tuple(clock_modules)
        self._uninstall: Callable[[], object] | None = None
        self._installation: Installation | None = None  # the one this session opened itself
        self._sleeps: list[Sleep] = []
        self._websockets: list[WebSocketLog] = []
        self._t0 = self.clock.now()
        self._elapsed0 = self.clock.elapsed if isinstance(self.clock, VirtualClock) else 0.0
        if self._may_record:
            self._meta.setdefault("clock_epoch", round(real_wall(), 3))
        self._route = RequestPath(
            self.path,
            record_mode=record,
            rules=self.rules,
            clock=self.clock,
            t0=self._t0,
            index=index,
            loaded_count=len(loaded),
            may_record=self._may_record,
            not_found=not_found,
            faults=FaultSet(faults),
            wire_check=wire_check,
            live=live,
            # A dual transport given as ``live`` serves async requests too (its acall).
            async_live=(
                async_live
                if async_live is not None or async_side(live) is None
                else cast(DualTransport, live)
            ),
            redact=redact,
            allow_secrets=tuple(allow_secrets),
            meta=self._meta,
            note=note,
        )

    def _load(self, record: RecordMode) -> Cassette:
        try:
            cassette = load_cassette(self.path)
            if record == "new":
                # Decoded whole before any live call, so that a damaged part refuses the
                # recording now (and the write that keeps them all cannot fail halfway).
                # Replay-only ("none", or "once" on a file that exists) decodes each response
                # when it plays it.
                cassette.decode()
            return cassette
        except CassetteFormatError as exc:
            if record == "none":
                raise
            # Refused before any live call: recording into a file that cannot be read would
            # make every call, then fail at the write and lose them all.
            raise type(exc)(
                f"{exc}. Record mode {record!r} records into the file that is there, and this "
                "one cannot be read. Record mode 'all' (pytest: --cassette-record=all) records "
                "it again from scratch and keeps the unreadable file beside it.",
                path=exc.path,
            ) from exc

    def _make_clock(self, timing: TimingMode, speed: float, loaded: list[Interaction]) -> Clock:
        if timing == "instant":
            return InstantClock()
        if timing == "real" or self._may_record:
            # Recording runs on real time: the live server answers in it.
            return RealClock(speed)
        return VirtualClock(epoch=_epoch_of(self._meta, loaded))

    @property
    def replay_only(self) -> bool:
        """True when nothing this session serves may come from the network."""
        return not self._may_record

    # -- the request path (what :class:`RequestPath` serves and keeps) ---------------------

    @property
    def transport(self) -> Transport:
        """The sync seam transport serving this cassette (live traffic via a default client).
        It is made on first use, and every read gives that same transport."""
        return self._route.transport

    @property
    def async_transport(self) -> AsyncTransport:
        """The async seam transport serving this cassette; made once, like :attr:`transport`."""
        return self._route.async_transport

    def http_transport(self) -> HTTPBridge:
        """An httpx/httpx2 transport for ``httpx2.Client(transport=...)`` and friends."""
        return self._route.http_transport()

    def transport_for(self, live: Transport | None) -> Transport:
        """A sync seam transport that records through ``live`` (default: its own client)."""
        return self._route.transport_for(live)

    def async_transport_for(self, live: AsyncTransport | DualTransport | None) -> AsyncTransport:
        """An async seam transport that records through ``live`` (default: its own client)."""
        return self._route.async_transport_for(live)

    def inject(self, *faults: Fault) -> None:
        """Add faults (from :mod:`pytest_toolnexus.faults`); they count requests from now on."""
        self._route.inject(*faults)

    @property
    def requests(self) -> list[SentRequest]:
        """Every request sent through this cassette, in order, as a :class:`SentRequest`."""
        return self._route.requests

    @property
    def websockets(self) -> list[WebSocketLog]:
        """Every WebSocket connection opened through this cassette, in order, as a
        :class:`~pytest_toolnexus.WebSocketLog`: the frames sent and delivered both ways, each
        with its time (docs/realtime.md, "What the test can assert")."""
        return self._websockets

    @property
    def misses(self) -> list[CassetteMissError]:
        """The misses raised to the client, whether or not the code under test caught them."""
        return self._route.misses

    @property
    def damaged(self) -> list[CassetteFormatError]:
        """Damage found while replaying (a part decoded on first read, a stream event), as
        raised to the client: the plugin fails the test with it even if the code under test
        caught it, or an SDK wrapped it in an error of its own."""
        return self._route.damaged

    @property
    def recorder_problems(self) -> list[str]:
        """What the recorder could not parse (the client's stream was not touched)."""
        return self._route.recorder_problems

    def unused(self) -> list[tuple[int, RecordedRequest]]:
        """Loaded interactions that no request played, with their positions."""
        return self._route.unused()

    def view(self, request: int = -1) -> ProviderView:
        """What the model answered to the ``request``-th request sent (the last by default),
        in the provider-neutral shape of :mod:`pytest_toolnexus.views`."""
        return self._route.view(request)

    def unconsumed(self) -> list[SentRequest]:
        """Replayed successful responses the client stopped reading while data remained that
        it would have read (see :meth:`RequestPath.unconsumed` for what is not counted)."""
        return self._route.unconsumed()

    def unread(self) -> list[tuple[SentRequest, str]]:
        """:meth:`unconsumed`, each with a short label of what was left."""
        return self._route.unread()

    def leftovers(self, *, unused: bool = True) -> Leftovers:
        """What the code under test left of this cassette: interactions never played (unless
        ``unused`` is false) and replayed responses never read to the end."""
        return self._route.leftovers(unused=unused)

    @property
    def play_count(self) -> int:
        """How many responses were replayed from the cassette (pytest-recording's
        ``vcr.play_count``)."""
        return self._route.play_count

    @property
    def all_played(self) -> bool:
        """True when every loaded interaction was played (pytest-recording's
        ``vcr.all_played``)."""
        return self._route.all_played

    @property
    def recorded(self) -> list[Interaction]:
        """Interactions recorded in this session so far, in the order their requests were sent."""
        return self._route.recorded

    @property
    def interactions(self) -> list[Interaction]:
        """Every interaction known to this session: loaded, then recorded."""
        return self._route.interactions

    # -- the clock ------------------------------------------------------------------------

    @property
    def state(self) -> State:
        """``State.CREATED`` until :meth:`start`, ``State.OPEN`` while started, then
        ``State.CLOSED`` for good once :meth:`close` (or :meth:`aclose`) ran."""
        return self._state

    def start(self, installation: Installation | None = None) -> CassetteSession:
        """Install the virtual clock (or, with other clocks, a watch on sleeps).

        ``with`` and the pytest plugin call this for you. The clock goes into
        ``installation`` when one is given (the plugin's, which also holds its http patches
        and network tripwire, and takes them all off together), else into one this session
        opens and :meth:`close` closes; either way one cassette at a time can be installed in
        a process (:class:`~pytest_toolnexus._seam.errors.AlreadyInstalledError` names both).
        Starting a started session does nothing; starting a closed one raises
        :class:`SessionClosedError`, since a session serves one block (one test).
        """
        if self._state is State.CLOSED:
            raise SessionClosedError(
                f"the cassette session for {self.path} is closed and cannot be started again: "
                "a session serves one block (one test). Open a new one with "
                "use_cassette(...) or CassetteSession(...)."
            )
        if self._state is State.OPEN:
            return self
        own: Installation | None = None
        if installation is None:
            own = installation = Installation(self._owner()).open()
        try:
            from pytest_toolnexus._timing.timepatch import install as install_clock
            from pytest_toolnexus._timing.timepatch import observe_sleeps

            if isinstance(self.clock, VirtualClock):
                self._uninstall = install_clock(self.clock, self._clock_modules, installation)
            else:
                self._uninstall = observe_sleeps(self._sleeps, self._t0, installation)
        except BaseException:
            if own is not None:
                own.close()
            raise
        self._installation = own
        self._state = State.OPEN
        return self

    def _owner(self) -> str:
        """How the error of a second installation names this session."""
        during = os.environ.get("PYTEST_CURRENT_TEST")
        return f"the cassette {self.path}" + (f" (started in {during})" if during else "")

    def _uninstall_all(self) -> None:
        """Take off what :meth:`start` installed: the clock (its undo is safe to call twice,
        so an installation of the plugin's that took it off already is no matter), then the
        installation this session opened, if it opened one."""
        uninstall, self._uninstall = self._uninstall, None
        own, self._installation = self._installation, None
        try:
            if uninstall is not None:
                uninstall()
        finally:
            if own is not None:
                own.close()

    @property
    def elapsed(self) -> float:
        """Seconds on the session's clock since it started (virtual seconds when virtual)."""
        if isinstance(self.clock, VirtualClock):
            # Exact: a sum of the waits, not a difference of two large readings.
            return self.clock.elapsed - self._elapsed0
        return self.clock.now() - self._t0

    @property
    def sleeps(self) -> list[Sleep]:
        """The waits the code under test made while the session was started, in order."""
        return (
            list(self.clock.sleeps) if isinstance(self.clock, VirtualClock) else list(self._sleeps)
        )

    def discard_recording(self) -> None:
        """Write nothing at :meth:`close`: what was recorded is dropped (the plugin does this
        when a test fails while recording, unless ``record_on_error=True``)."""
        self._discard = True

    def mark_interrupted(self, why: str) -> None:
        """Leave the cassette as it is at :meth:`close`: ``why`` (``"KeyboardInterrupt"``)
        cut the recording short, so what was recorded is kept beside the cassette instead
        (:attr:`rescued`), and a :class:`CassetteSetAsideWarning` names that file. ``with``
        does this for an exception that is not an ``Exception``; the plugin, for a test the
        run stopped in."""
        self._interrupted = why

    def close(self) -> None:
        """Take off the clock, save streams still open, write the cassette if anything was
        recorded, report unused. The clock comes off first, and each later step runs whatever
        an earlier one raised; closing twice does nothing."""
        if self._state is State.CLOSED:
            return
        self._state = State.CLOSED
        self._route.shut()
        # Each step runs whatever an earlier one raised, the clock coming off first; they are
        # registered in the reverse of the order they run in.
        with contextlib.ExitStack() as steps:
            steps.callback(self._unfreeze)
            steps.callback(self._report_unused)
            steps.callback(self._report_recorder_problems)
            steps.callback(self._write)
            steps.callback(self._route.finish)
            steps.callback(self._uninstall_all)

    async def aclose(self) -> None:
        """:meth:`close`, also closing async clients this session opened. The clock comes off
        before any of them is closed, and each of them, then :meth:`close`, runs whatever an
        earlier one raised (a ``CancelledError``, say)."""
        async with contextlib.AsyncExitStack() as steps:
            steps.callback(self.close)
            steps.push_async_callback(self._route.aclose_clients)
            steps.callback(self._uninstall_all)

    def _write(self) -> None:
        recorded = self.recorded
        if not recorded or self._discard or self._writer is None:
            return
        if self._interrupted is not None:
            self._keep_beside(recorded)
            return
        set_aside = self._writer.write(recorded, self._meta, self._route.scanner())
        self.written = True
        if set_aside is not None:
            warnings.warn(set_aside, stacklevel=4)

    def _keep_beside(self, recorded: list[Interaction]) -> None:
        """Save an interrupted recording beside the cassette, and say where. Nothing is
        raised: the interruption is what the caller must see."""
        assert self._writer is not None
        head = f"cassette {self.path} was not written: {self._interrupted} stopped the recording"
        try:
            self.rescued = self._writer.keep_beside(recorded, self._meta, self._route.scanner())
        except CassetteWriteError as exc:  # the gate failed unexpectedly: saved elsewhere
            self.rescued = None if exc.rescued is None else Path(exc.rescued)
            message = f"{head}, and keeping it beside the cassette failed: {exc}"
        except Exception as exc:  # a secret the gate refused, a hook that raised: none is kept
            message = f"{head}, and it was not kept: {exc}"
        else:
            if self.rescued is None:
                message = f"{head}, and saving it beside the cassette failed, so it is lost"
            else:
                message = (
                    f"{head}, perhaps halfway through a stream, so the cassette is left as it "
                    f"was. The recording is kept as {self.rescued}: look at it (pytest-toolnexus "
                    f"show), then move it to {self.path} to use it, or record again."
                )
        warnings.warn(CassetteSetAsideWarning(message), stacklevel=5)

    def _report_recorder_problems(self) -> None:
        for problem in self.recorder_problems:
            warnings.warn(
                RecorderWarning(
                    self._route.scanner().mask(f"cassette {self.path}: recording {problem}")
                ),
                stacklevel=3,
            )

    def _report_unused(self) -> None:
        if self._on_unused == "ignore":
            return
        problems = self.leftovers(unused=self.record_mode != "all").sentences(shown=10)
        if not problems:
            return
        message = f"cassette {self.path}: " + " | ".join(problems)
        if self._on_unused == "error":
            raise CassetteMissError(message, path=str(self.path))
        warnings.warn(UnusedInteractionsWarning(message), stacklevel=3)

    def __enter__(self) -> CassetteSession:
        return self.start()

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        why = interruption(error)
        if why is not None:
            self.mark_interrupted(why)
        self.close()

    async def __aenter__(self) -> CassetteSession:
        return self.start()

    async def __aexit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        why = interruption(error)
        if why is not None:
            self.mark_interrupted(why)
        await self.aclose()


@functools.lru_cache(maxsize=256)
def _http_date(text: str) -> float:
    """An HTTP date as a POSIX time (cached: a suite's cassettes share few distinct dates)."""
    return email.utils.parsedate_to_datetime(text).timestamp()


def _epoch_of(meta: Mapping[str, Any], interactions: list[Interaction]) -> float | None:
    """The wall time at which virtual replay starts: the first recorded ``Date`` header, else
    the recording's start, so HTTP-date ``Retry-After`` values read as they did live."""
    for interaction in interactions[:1]:
        try:
            response = interaction.response
        except CassetteFormatError:
            break  # damaged: the test that plays it is told, not one that never does
        date = response.headers.get("date") if response is not None else None
        if date:
            try:
                return _http_date(date)
            except (TypeError, ValueError, OverflowError):
                break
    epoch = meta.get("clock_epoch")
    if isinstance(epoch, int | float) and not isinstance(epoch, bool):
        return float(epoch)
    return None
