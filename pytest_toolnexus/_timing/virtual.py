"""The virtual clock: time that moves only when the code under test waits or a replayed event is
pulled, so recorded gaps and retry waits read as real and take no wall time.

This module is the clock itself. ``_timepatch`` puts it behind the ``time``, ``datetime`` and
sleep functions while a session runs; docs/timing.md lists what that covers.
"""

from __future__ import annotations

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
        """Move the clock forward by ``seconds`` (negative values are ignored)."""
        if seconds > 0:
            with self._lock:
                self._elapsed += seconds
                self._tell()

    def advance_to(self, deadline: float) -> None:
        """Move the clock to ``deadline`` (a :meth:`now` reading) if that is in the future."""
        with self._lock:
            target = deadline - self._base
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
            # Let the other tasks finish what the last piece gave them before time moves on.
            for _ in range(_SETTLE):
                await anyio.lowlevel.checkpoint()
        self.advance_to(deadline)
        await anyio.lowlevel.checkpoint()

    # -- sleeps made by the code under test ---------------------------------------------------

    def sleep(self, seconds: float, kind: str = "time.sleep") -> None:
        """What ``time.sleep`` does on this clock: note the wait, advance, return at once."""
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        self.sleeps.append(Sleep(kind, self._elapsed, float(seconds)))
        self.advance(seconds)

    async def async_sleep(self, seconds: float, kind: str) -> None:
        """An async sleep: other tasks that slept earlier wake first, then the clock jumps."""
        seconds = max(float(seconds), 0.0)
        self.sleeps.append(Sleep(kind, self._elapsed, seconds))
        deadline = self.now() + seconds
        with self._lock:
            self._ticket += 1
            ticket = self._ticket
            self._sleepers[ticket] = deadline
        try:
            await anyio.lowlevel.checkpoint()
            for _ in range(_MAX_SPINS):
                with self._lock:
                    earliest = min(self._sleepers.items(), key=lambda item: (item[1], item[0]))
                if earliest[0] == ticket:
                    break
                await anyio.lowlevel.checkpoint()
            self.advance_to(deadline)
        finally:
            with self._lock:
                self._sleepers.pop(ticket, None)

    def __repr__(self) -> str:
        return f"VirtualClock(elapsed={self._elapsed:.3f}s)"
