"""The virtual clock: time that moves only when the code under test waits or a replayed event is
pulled, so recorded gaps and retry waits read as real and take no wall time.

This module is the clock itself. ``_timepatch`` puts it behind the ``time``, ``datetime`` and
sleep functions while a session runs; docs/timing.md lists what that covers.
"""

from __future__ import annotations

import asyncio
import math
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, final

import anyio.lowlevel

from pytest_toolnexus._seam.cancel import CancelToken

from .clock import real_monotonic, real_wall

__all__ = ["Sleep", "VirtualClock"]

_MAX_SPINS: Final = 200
_SETTLE: Final = 3
_TRIO_SETTLE_SECONDS: Final = 1.0  # real time: a bound, not a pace
_RECHECK: Final = 0.05  # real seconds between looks of a wait blocked behind an earlier one
# The longest wait the platform's clocks can express (nanoseconds in a signed 64-bit integer):
# time.sleep refuses longer, and the virtual clock never moves that far.
_LONGEST: Final = 9.2e9


async def _settle() -> None:
    """Return once no other task of the running event loop is ready to run.

    trio says so itself (``wait_all_tasks_blocked``). asyncio's ready queue is read after each
    checkpoint: at least _SETTLE of them, then until it holds nothing, at most _MAX_SPINS.
    Elsewhere, _SETTLE checkpoints. Either way the wait is bounded: a task that never blocks
    cannot hold the clock still.
    """
    if _in_trio():
        import trio.testing

        with trio.move_on_after(_TRIO_SETTLE_SECONDS):
            await trio.testing.wait_all_tasks_blocked()
        return
    for spin in range(_MAX_SPINS):
        await anyio.lowlevel.checkpoint()
        if spin + 1 >= _SETTLE and not _others_runnable():
            return


def _in_trio() -> bool:
    trio = sys.modules.get("trio")
    if trio is None:
        return False
    try:
        trio.lowlevel.current_task()
    except RuntimeError:  # not inside trio.run
        return False
    return True


def _others_runnable() -> bool:
    """Whether another task of the running asyncio loop is ready to run now (its ready queue,
    ``BaseEventLoop._ready``). Where that cannot be read (another loop), False: the caller
    then settles for its fixed number of checkpoints."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        ready = getattr(loop, "_ready", None)
        return ready is not None and len(ready) > 0
    return False


def _snapped(target: float, deadline: float) -> float:
    """``target`` (a deadline less the clock's base) at the nearest nanosecond when the two are
    apart by no more than the rounding of the large readings it came from: a deadline read as
    ``now() + 0.25`` then moves the clock by 0.25 s, not by 0.25 s give or take a few units
    in the last place of a reading in the thousands of seconds."""
    snapped = round(target, 9)
    return snapped if abs(snapped - target) <= 4 * math.ulp(deadline) else target


def _loop_idle() -> bool:
    """Whether the running asyncio loop has nothing to do before its next real wait: no
    callback ready (``BaseEventLoop._ready``) and no timer already due (``_scheduled``, a
    heap). False where that cannot be read (no running asyncio loop, trio, another loop)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    ready = getattr(loop, "_ready", None)
    scheduled = getattr(loop, "_scheduled", None)
    if ready is None or scheduled is None or ready:
        return False
    return not scheduled or scheduled[0].when() > loop.time()


@dataclass(frozen=True, slots=True)
class Sleep:
    """A wait the code under test made: where (``time.sleep``, ``asyncio.sleep`` ...), when it
    started and how long it asked for, in seconds of clock time since the clock started."""

    kind: str
    at: float
    duration: float


@final
class VirtualClock:
    """A clock that reads a virtual time and advances it instead of sleeping.

    ``now()`` is a monotonic reading; :meth:`wall` the matching Unix time, starting at
    ``epoch`` (default: the real time when the clock was made).
    """

    def __init__(self, epoch: float | None = None) -> None:
        self._base = real_monotonic()
        self._elapsed = 0.0
        self._epoch = real_wall() if epoch is None else float(epoch)
        self._lock = threading.Lock()
        self._followers: list[Callable[[float], None]] = []
        self._sleepers: dict[int, float] = {}
        # ticket -> (thread, event) of an async wait blocked until an earlier one leaves
        self._wakers: dict[int, tuple[int, anyio.Event]] = {}
        self._ticket = 0
        self.sleeps: list[Sleep] = []

    @property
    def speed(self) -> float:
        return 1.0

    @property
    def elapsed(self) -> float:
        """Virtual seconds since the clock started."""
        return self._elapsed

    def now(self) -> float:
        return self._base + self._elapsed

    def wall(self) -> float:
        return self._epoch + self._elapsed

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` (negative values are ignored, and a value no
        clock can read, infinite or NaN, is refused)."""
        if not math.isfinite(seconds):
            raise ValueError(f"the virtual clock cannot move by {seconds!r} seconds")
        if seconds > 0:
            with self._lock:
                self._elapsed += seconds
                self._tell()

    def advance_to(self, deadline: float) -> None:
        """Move the clock to ``deadline`` (a :meth:`now` reading) if that is in the future."""
        if not math.isfinite(deadline):
            raise ValueError(f"the virtual clock cannot move to {deadline!r}")
        self._move_to(_snapped(deadline - self._base, deadline))

    def _move_to(self, target: float) -> None:
        """Move the clock to ``target`` seconds since it started if that is in the future."""
        with self._lock:
            if target > self._elapsed:
                self._elapsed = target
                self._tell()

    def follow(self, follower: Callable[[float], None]) -> Callable[[], None]:
        """Call ``follower`` with the new :meth:`wall` time whenever the clock moves (and once
        now); returns the function that stops it. The wall-clock patch keeps in step this way."""
        with self._lock:
            self._followers.append(follower)
            follower(self._epoch + self._elapsed)

        def unfollow() -> None:
            with self._lock:
                if follower in self._followers:
                    self._followers.remove(follower)

        return unfollow

    def _tell(self) -> None:
        if self._followers:
            wall = self._epoch + self._elapsed
            for follower in self._followers:
                follower(wall)

    def wait_until(self, deadline: float, cancel: CancelToken | None = None) -> None:
        if cancel is not None:
            cancel.raise_if_cancelled()
        self.advance_to(deadline)

    async def await_until(self, deadline: float, cancel: CancelToken | None = None) -> None:
        if cancel is not None:
            cancel.raise_if_cancelled()
        if deadline > self.now():
            # Time moves on only once the other tasks have done what they can without it
            # (what the last piece gave them, a request they were about to send): a replayed
            # stream must not run ahead of the requests its pieces answer. The deadline joins
            # the sleepers', so that waits wake in deadline order whoever made them: a task's
            # 2 s sleep does not jump past a piece due in 80 ms.
            ticket = self._enter(deadline)
            try:
                await self._turn(ticket, settle=True)
                self.advance_to(deadline)
            finally:
                self._leave(ticket)
        else:
            self.advance_to(deadline)
        await anyio.lowlevel.checkpoint()

    def advance_alone(self, deadline: float) -> bool:
        """Move the clock to ``deadline`` at once, without yielding to the event loop, when
        :meth:`await_until` could do nothing more: no other task of the running asyncio loop
        is ready to run, no timer of it is due, and no other async wait (a sleep, another
        replayed piece) is due by ``deadline``. Returns whether it did; False (nothing moved)
        tells the caller to await :meth:`await_until`, which lets the others go first.

        A replayed WebSocket frame that nothing else could come before is then handed over as
        an item already in an ``asyncio.Queue`` is, with no trip round the event loop."""
        if not math.isfinite(deadline) or not _loop_idle():
            return False
        with self._lock:
            for due in self._sleepers.values():
                if due <= deadline:
                    return False
            target = deadline - self._base
            if target > self._elapsed:
                self._elapsed = target
                self._tell()
        return True

    # -- sleeps made by the code under test ---------------------------------------------------

    def sleep(self, seconds: float, kind: str = "time.sleep") -> None:
        """What ``time.sleep`` does on this clock: note the wait, advance, return at once.
        Refuses what the real one refuses (a negative length, NaN, one too large for the
        platform's clock), so that the clock never reads a time no clock can."""
        if math.isnan(seconds):
            raise ValueError("Invalid value NaN (not a number)")
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        if not seconds < _LONGEST:
            raise OverflowError("timestamp out of range for platform time_t")
        self.sleeps.append(Sleep(kind, self._elapsed, float(seconds)))
        self.advance(seconds)

    async def async_sleep(self, seconds: float, kind: str) -> None:
        """An async sleep: waits due earlier (other sleeps, replayed pieces) wake first, then
        the clock jumps. One longer than any clock can read (``math.inf``, what
        ``anyio.sleep_forever()`` sleeps) waits until it is cancelled, and moves nothing."""
        seconds = max(float(seconds), 0.0)
        self.sleeps.append(Sleep(kind, self._elapsed, seconds))
        if not seconds < _LONGEST:  # inf and NaN too: an event loop never fires them
            await anyio.Event().wait()
        target = self._elapsed + seconds  # a sum of the waits, as time.sleep's: exact
        ticket = self._enter(self.now() + seconds)
        try:
            await anyio.lowlevel.checkpoint()
            # As a real sleep lets every other task run first: time jumps once they are idle.
            await self._turn(ticket, settle=True)
            self._move_to(target)
        finally:
            self._leave(ticket)

    # -- the order of async waits -------------------------------------------------------------

    def _enter(self, deadline: float) -> int:
        with self._lock:
            self._ticket += 1
            self._sleepers[self._ticket] = deadline
            return self._ticket

    def _leave(self, ticket: int) -> None:
        """Drop ``ticket``'s wait, and wake every wait blocked behind it to look again."""
        with self._lock:
            self._sleepers.pop(ticket, None)
            woken, self._wakers = self._wakers, {}
        here = threading.get_ident()
        for thread, event in woken.values():
            if thread == here:  # an event of another thread's loop is not ours to set
                event.set()

    def _first(self, ticket: int) -> bool:
        with self._lock:
            earliest = min(self._sleepers.items(), key=lambda item: (item[1], item[0]))
        return earliest[0] == ticket

    async def _turn(self, ticket: int, *, settle: bool) -> None:
        """Return when ``ticket`` is the earliest wait (ties: the first made), after the other
        tasks have settled when ``settle``. A wait that is not first blocks, instead of
        spinning, until an earlier one leaves: a settle then sees it as idle. It looks again
        every _RECHECK seconds of real time at most, so a wait in another thread's loop, or
        one that went away unseen, cannot hold it for good."""
        while True:
            if self._first(ticket):
                if settle:
                    moved = self._elapsed
                    await _settle()
                    if not self._first(ticket) or self._elapsed != moved:
                        # An earlier wait came while the others settled, or one went and
                        # moved the clock: what it woke has not settled yet (trio wakes every
                        # task waiting for idleness at once, in no set order).
                        continue
                return
            event = anyio.Event()
            with self._lock:
                self._wakers[ticket] = (threading.get_ident(), event)
            if self._first(ticket):  # the earlier one left before the waker was in place
                continue
            with anyio.move_on_after(_RECHECK):
                await event.wait()

    def __repr__(self) -> str:
        return f"VirtualClock(elapsed={self._elapsed:.3f}s)"
