"""Real time for tests that measure it, whatever clock the code under test runs on.

The virtual clock rebinds ``time.monotonic`` and ``time.perf_counter`` themselves (every
reference to them reads virtual time while it is installed), so a test cannot use them as its
oracle for wall time. ``wall()`` reads the kernel's monotonic clock through
``time.clock_gettime``, which nothing in the plugin touches (time-machine only redirects
``CLOCK_REALTIME``). On Linux it is the clock the session's own real readings come from. Outside a
virtual clock ``time.monotonic`` reads it plus what earlier clocks ran ahead (docs/timing.md, "At
the edges of a test"), so a test checks that it moves with real time
(:func:`moves_with_real_time`), not that it equals it.

A real-clock test asserts what holds on any machine, and nothing else:

- nothing arrives early, and the order is exact: checked on every run;
- lateness is bounded by how late this machine wakes a plain ``time.sleep`` right now, never
  by a fixed constant. Load comes in bursts (on a 2-core machine running four busy processes
  a sleeper wakes 0.1 ms late, then 40 ms late a moment later), so the baseline is measured
  both just before the run (:func:`sleep_lateness`) and all through it (:class:`LatenessWatch`,
  a thread that sleeps short gaps while the code runs). A run later than that allows is run
  again (:func:`paced`), up to three runs in all: a replay that is late by design (it sleeps
  too long, or holds pieces back) is late on every run and fails.

A virtual replay takes next to no real time. A test may check that, and only that: a replay
of a recording whose gaps total a few seconds took well under those seconds
(:func:`assert_did_not_sleep`). How much less is the machine's business.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

__all__ = [
    "LatenessWatch",
    "allowance",
    "apaced",
    "assert_did_not_sleep",
    "assert_paced",
    "assert_stamped_in_flight",
    "moves_with_real_time",
    "paced",
    "sleep_lateness",
    "typical_allowance",
    "wall",
]

T = TypeVar("T")

_CLOCK = time.CLOCK_MONOTONIC
_SLEEP = {"real": time.sleep}  # in a dict, so no module scan can swap it for a virtual sleep
# How late the code may be beyond a plain sleep: its own work per piece (parsing, the SDK),
# and the scheduler's slack between the baseline and the run.
_WORK_ALLOWANCE = 0.03
_JITTER_FACTOR = 3.0
# The same for the median of many arrivals, against the median sleep lateness. Most of it is
# the code's own work: an SDK parses each event before it pulls the next, which on a machine
# short of CPU takes several ms even when sleepers wake at once.
_TYPICAL_WORK_ALLOWANCE = 0.010
_WATCH_GAP = 0.005
_ATTEMPTS = 3
# A recording this long cannot be confused with a replay that only ran slowly: a loaded machine
# stretches a virtual replay to a few hundred ms at worst.
_MIN_RECORDED = 2.0


def wall() -> float:
    """Real seconds on the kernel's monotonic clock."""
    return time.clock_gettime(_CLOCK)


def sleep_lateness(gaps: Sequence[float], repeats: int = 2) -> float:
    """The worst lateness, in seconds, of plain ``time.sleep`` calls of each of ``gaps``, run
    ``repeats`` times in a row: how late this machine wakes a sleeper right now."""
    worst = 0.0
    for _ in range(repeats):
        for gap in gaps:
            started = wall()
            _SLEEP["real"](gap)
            worst = max(worst, wall() - started - gap)
    return worst


def allowance(baseline: float) -> float:
    """How late, in seconds, one arrival may be when a plain sleep is ``baseline`` late."""
    return _JITTER_FACTOR * baseline + _WORK_ALLOWANCE


def typical_allowance(typical: float) -> float:
    """How late the median of many arrivals may be when the median sleep is ``typical`` late."""
    return _JITTER_FACTOR * typical + _TYPICAL_WORK_ALLOWANCE


class LatenessWatch:
    """A thread that sleeps ``gap`` again and again while the ``with`` block runs, and keeps how
    late each sleep woke: the machine's jitter during the run, not only before it.

    It costs the code under test next to nothing (a wake-up every few ms), sleeps on the real
    ``time.sleep`` (so a session's sleep watch does not note it) and is joined on exit.
    """

    def __init__(self, gap: float = _WATCH_GAP) -> None:
        self._gap = gap
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="lateness-watch", daemon=True)

    def __enter__(self) -> LatenessWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.is_set():
            started = wall()
            _SLEEP["real"](self._gap)
            self._samples.append(wall() - started - self._gap)

    @property
    def worst(self) -> float:
        """The latest wake-up seen, in seconds."""
        return max(self._samples, default=0.0)

    @property
    def typical(self) -> float:
        """The median wake-up lateness, in seconds."""
        return statistics.median(self._samples) if self._samples else 0.0


def _check_count_order_and_early(
    arrivals: Sequence[float], expected: Sequence[float], early: float, what: str
) -> None:
    assert len(arrivals) == len(expected), (
        f"{len(arrivals)} {what}s arrived, the recording has {len(expected)}"
    )
    assert list(arrivals) == sorted(arrivals), f"{what}s arrived out of order: {list(arrivals)}"
    too_early = [
        (n, round(got, 4), round(want, 4))
        for n, (got, want) in enumerate(zip(arrivals, expected, strict=True))
        if got < want - early
    ]
    assert too_early == [], f"{what}s arrived before their recorded offsets: {too_early}"


def _too_late(
    arrivals: Sequence[float], expected: Sequence[float], allowed: float
) -> list[tuple[int, float, float]]:
    return [
        (n, round(got, 4), round(want, 4))
        for n, (got, want) in enumerate(zip(arrivals, expected, strict=True))
        if got - want > allowed
    ]


def assert_paced(
    arrivals: Sequence[float],
    expected: Sequence[float],
    *,
    baseline: float,
    early: float = 0.001,
    what: str = "piece",
) -> None:
    """Each arrival (seconds from the request) is at or after its expected offset, they come
    in order, and none is later than the machine's own sleep lateness allows.

    ``baseline`` is :func:`sleep_lateness` (or a :class:`LatenessWatch`) measured in the same
    test; the allowance is a multiple of it plus a small share for the code's own work.
    ``early`` absorbs the gap between the test's clock reading and the session's (both real,
    read microseconds apart).
    """
    _check_count_order_and_early(arrivals, expected, early, what)
    allowed = allowance(baseline)
    too_late = _too_late(arrivals, expected, allowed)
    assert too_late == [], (
        f"{what}s arrived more than {allowed * 1000:.0f} ms after their recorded offsets "
        f"(a plain sleep is {baseline * 1000:.1f} ms late on this machine now): {too_late}"
    )


Expected = Sequence[float] | Callable[[Any], Sequence[float]]


class _Runs:
    """The bookkeeping of :func:`paced` and :func:`apaced`: one call per run."""

    def __init__(self, expected: Expected, gaps: Sequence[float], early: float, what: str):
        self._expected = expected
        self._gaps = gaps
        self._early = early
        self._what = what
        self.reports: list[str] = []

    def baseline(self) -> float:
        return sleep_lateness(self._gaps)

    def on_time(self, arrivals: Sequence[float], result: Any, before: float, during: float) -> bool:
        """Count, order and earliness fail at once; lateness only fails this run."""
        expected = self._expected(result) if callable(self._expected) else self._expected
        _check_count_order_and_early(arrivals, expected, self._early, self._what)
        baseline = max(before, during)
        allowed = allowance(baseline)
        late = _too_late(arrivals, expected, allowed)
        if not late:
            return True
        self.reports.append(
            f"run {len(self.reports) + 1}: over {allowed * 1000:.0f} ms late (a plain sleep was "
            f"{baseline * 1000:.1f} ms late): {late}"
        )
        return False

    def fail(self) -> AssertionError:
        return AssertionError(
            f"{self._what}s arrived too late after their recorded offsets in every run "
            f"((number, arrived, expected) in seconds):\n" + "\n".join(self.reports)
        )


def paced(
    run: Callable[[], tuple[Sequence[float], T]],
    expected: Expected,
    *,
    gaps: Sequence[float],
    attempts: int = _ATTEMPTS,
    early: float = 0.001,
    what: str = "piece",
) -> T:
    """Run a real-clock exchange until one run is on time, and return that run's result.

    ``run()`` does the whole exchange once (its own session, server, client) and returns the
    arrivals, in seconds from the request, and anything else the test checks afterwards.
    ``expected`` is the recorded offsets, or a function of the result that gives them.
    ``gaps`` are the sleeps that measure the baseline before each run: the exchange's own gaps.

    Every run must have the expected count, in order, none early: the first that does not
    fails the test. A run later than :func:`allowance` allows, against the worse of the
    baseline before it and a :class:`LatenessWatch` during it, is run again, up to
    ``attempts`` runs; when none is on time the test fails with every run's lateness.
    """
    runs = _Runs(expected, gaps, early, what)
    for _ in range(attempts):
        before = runs.baseline()
        with LatenessWatch() as watch:
            arrivals, result = run()
        if runs.on_time(arrivals, result, before, watch.worst):
            return result
    raise runs.fail()


async def apaced(
    run: Callable[[], Awaitable[tuple[Sequence[float], T]]],
    expected: Expected,
    *,
    gaps: Sequence[float],
    attempts: int = _ATTEMPTS,
    early: float = 0.001,
    what: str = "piece",
) -> T:
    """:func:`paced` for an async ``run``. (The baseline's sleeps block the event loop for a
    moment before each run; nothing else runs on it then.)"""
    runs = _Runs(expected, gaps, early, what)
    for _ in range(attempts):
        before = runs.baseline()
        with LatenessWatch() as watch:
            arrivals, result = await run()
        if runs.on_time(arrivals, result, before, watch.worst):
            return result
    raise runs.fail()


def assert_did_not_sleep(took: float, recorded: float, *, what: str) -> None:
    """``what``, which would take ``recorded`` seconds if it slept its recorded gaps for real,
    took ``took`` real seconds: clearly less, under half.

    ``recorded`` must be a few seconds, so that a replay made slow by a loaded machine (a few
    hundred ms at worst) is never taken for one that slept, while a broken run still ends soon.
    Pass the recorded time of the last piece from the request's send, all a sleeping replay
    waits: unlike the span between two stamps, a loaded machine can only lengthen it.
    """
    assert recorded >= _MIN_RECORDED, (
        f"{what} is recorded over {recorded:.2f} s: too short to tell sleeping from a slow "
        f"machine; record at least {_MIN_RECORDED:.0f} s of gaps"
    )
    assert took < recorded / 2, (
        f"{what} took {took:.2f} s of real time, recorded over {recorded:.2f} s: it slept the "
        f"recorded gaps (a virtual replay waits for none of them)"
    )


def assert_stamped_in_flight(
    began: Sequence[float], stamps: Sequence[float], had: Sequence[float], *, what: str
) -> None:
    """Each recorded stamp lies between when the server began writing its piece (``began``)
    and when the client had it (``had``), all in seconds on one time base.

    A recorder stamps a piece as it passes, so this holds on any machine however loaded, and
    fails for a recorder that stamps on completion (late) or from the wrong origin (early).
    Callers put both sides on the stamps' base, the request's send time, with bounds that only
    widen the window: ``began - received_at`` (the server had the request no sooner than it
    was sent) and ``had - before`` (read just before the call).
    """
    assert len(began) == len(stamps) == len(had), (what, len(began), len(stamps), len(had))
    rounding = 1e-6  # stamps are kept to the microsecond
    outside = [
        (n, round(b, 4), round(t, 4), round(h, 4))
        for n, (b, t, h) in enumerate(zip(began, stamps, had, strict=True))
        if not b - rounding <= t <= h + rounding
    ]
    assert outside == [], (
        f"{what}: stamps outside (server began writing, client had it), in seconds: {outside}"
    )


def moves_with_real_time(reader: Callable[[], float] = time.monotonic) -> bool:
    """Whether ``reader`` moves with real time: across a real wait of 50 ms it moves by about
    as much (a virtual clock, frozen unless something waits on it, moves by nothing). Half the
    wait is allowed either way, for a scheduler that parks this thread between two readings."""
    first, started = reader(), wall()
    threading.Event().wait(0.05)  # threading keeps real time, whatever clock is installed
    moved, took = reader() - first, wall() - started
    return abs(moved - took) < took / 2
