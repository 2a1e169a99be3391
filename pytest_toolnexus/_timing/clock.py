"""Clocks that replay recorded timing: real sleeps, scaled; or no waiting at all.

Replay asks the clock to wait until each event's recorded offset at the moment the client pulls
that event. The virtual clock, which reads and advances time without sleeping, builds on the
same interface.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import Final, Protocol, final

import anyio

from pytest_toolnexus._seam.cancel import CancelToken

from . import cfunc as _cfunc

__all__ = ["Clock", "InstantClock", "RealClock", "real_monotonic", "real_wall"]


def _real_perf_counter() -> Callable[[], float]:
    pristine = _cfunc.pristine_time()
    reader: Callable[[], float] = time.perf_counter if pristine is None else pristine.perf_counter
    return reader


real_monotonic: Final = _real_perf_counter()
"""The process's own monotonic clock: it reads real time even while the virtual clock is
installed, which rebinds ``time.perf_counter`` itself (see ``_cfunc``); where it cannot, the
clock patches the name, and this is the built-in taken before any patch."""


def real_wall() -> float:
    """The real Unix time, even while time-machine (the virtual wall clock) is travelling."""
    machine = sys.modules.get("time_machine")
    if machine is not None and machine.escape_hatch.is_travelling():
        wall: float = machine.escape_hatch.time.time()
        return wall
    return time.time()


_real_sleep: Final = time.sleep
_SLICE: Final = 0.05


async def _real_async_sleep(seconds: float) -> None:
    """Wait on the event loop's own clock without calling ``asyncio.sleep``, ``anyio.sleep``
    or ``trio.sleep``: the sleep watch of the real and instant modes patches those to note the
    waits of the code under test, and replay's own waits are not among them.

    On asyncio a timer on the loop settles a future (what ``asyncio.sleep`` itself does), so
    the first wait does not load anyio's asyncio backend, some 70 ms of imports that ``serve``
    would otherwise spend on its first answer; on any other loop (trio), anyio waits."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio's loop: trio
        with anyio.move_on_after(seconds):
            await anyio.Event().wait()
        return
    woken = loop.create_future()
    timer = loop.call_later(seconds, _wake, woken)
    try:
        await woken
    finally:
        timer.cancel()


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


class Clock(Protocol):
    """What replay needs of time: a reading, and waits to a deadline on that reading.

    ``speed`` divides recorded offsets: 2.0 replays a recorded second in half a second.
    """

    @property
    def speed(self) -> float: ...

    def now(self) -> float: ...

    def wait_until(self, deadline: float, cancel: CancelToken | None = None) -> None: ...

    async def await_until(self, deadline: float, cancel: CancelToken | None = None) -> None: ...


@final
class RealClock:
    """Waits for real, so recorded gaps take wall time (divided by ``speed``)."""

    def __init__(self, speed: float = 1.0) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be a positive number, got {speed!r}")
        self._speed = float(speed)

    @property
    def speed(self) -> float:
        return self._speed

    def now(self) -> float:
        return real_monotonic()

    def wait_until(self, deadline: float, cancel: CancelToken | None = None) -> None:
        while True:
            remaining = deadline - real_monotonic()
            if remaining <= 0:
                return
            if cancel is not None:
                if cancel.wait(remaining):
                    cancel.raise_if_cancelled()
            else:
                _real_sleep(remaining)

    async def await_until(self, deadline: float, cancel: CancelToken | None = None) -> None:
        while True:
            if cancel is not None:
                cancel.raise_if_cancelled()
            remaining = deadline - real_monotonic()
            if remaining <= 0:
                return
            await _real_async_sleep(min(remaining, _SLICE) if cancel is not None else remaining)

    def __repr__(self) -> str:
        return f"RealClock(speed={self._speed})"


@final
class InstantClock:
    """Ignores recorded timing: every event is available at once."""

    @property
    def speed(self) -> float:
        return 1.0

    def now(self) -> float:
        return real_monotonic()

    def wait_until(self, deadline: float, cancel: CancelToken | None = None) -> None:
        if cancel is not None:
            cancel.raise_if_cancelled()

    async def await_until(self, deadline: float, cancel: CancelToken | None = None) -> None:
        if cancel is not None:
            cancel.raise_if_cancelled()

    def __repr__(self) -> str:
        return "InstantClock()"
