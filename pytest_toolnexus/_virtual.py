"""The virtual clock: time that moves only when the code under test waits or a replayed event is
pulled, so recorded gaps and retry waits read as real and take no wall time.

While installed, the ``time`` module's clocks and ``time.sleep``, ``datetime.datetime.now``
and ``utcnow``, ``datetime.date.today``, ``asyncio.sleep``, ``anyio.sleep`` and ``trio.sleep``
run on the clock. The asyncio event loop keeps real time, so its own timers never hang on a
clock that does not move. docs/timing.md lists what is patched and what is not.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime as _datetime
import sys
import threading
import time as _time
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, final

import anyio.lowlevel

from ._cancel import CancelToken
from ._clock import real_monotonic

__all__ = ["Sleep", "VirtualClock", "install", "observe_sleeps"]

_REAL: Final = types.SimpleNamespace(
    time=_time.time,
    time_ns=_time.time_ns,
    monotonic=_time.monotonic,
    monotonic_ns=_time.monotonic_ns,
    perf_counter=_time.perf_counter,
    perf_counter_ns=_time.perf_counter_ns,
    sleep=_time.sleep,
    asyncio_sleep=asyncio.sleep,
    datetime=_datetime.datetime,
    date=_datetime.date,
)
_MAX_SPINS: Final = 200


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
        self._epoch = _REAL.time() if epoch is None else float(epoch)
        self._lock = threading.Lock()
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

    def advance_to(self, deadline: float) -> None:
        """Move the clock to ``deadline`` (a :meth:`now` reading) if that is in the future."""
        with self._lock:
            target = deadline - self._base
            if target > self._elapsed:
                self._elapsed = target

    def wait_until(self, deadline: float, cancel: CancelToken | None = None) -> None:
        if cancel is not None:
            cancel.raise_if_cancelled()
        self.advance_to(deadline)

    async def await_until(self, deadline: float, cancel: CancelToken | None = None) -> None:
        if cancel is not None:
            cancel.raise_if_cancelled()
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


class _VirtualMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        real: type = cls.__dict__["_real"]
        return isinstance(obj, real)

    def __subclasscheck__(cls, sub: type) -> bool:
        real: type = cls.__dict__["_real"]
        return issubclass(sub, real)


def _datetime_type(clock: VirtualClock) -> type[_datetime.datetime]:
    class VirtualDatetime(_datetime.datetime, metaclass=_VirtualMeta):
        _real = _REAL.datetime

        @classmethod
        def now(cls, tz: _datetime.tzinfo | None = None) -> VirtualDatetime:
            return cls.fromtimestamp(clock.wall(), tz)

        @classmethod
        def utcnow(cls) -> VirtualDatetime:
            return cls.fromtimestamp(clock.wall(), _datetime.UTC).replace(tzinfo=None)

        @classmethod
        def today(cls) -> VirtualDatetime:
            return cls.now()

    VirtualDatetime.__name__ = VirtualDatetime.__qualname__ = "datetime"
    VirtualDatetime.__module__ = "datetime"
    return VirtualDatetime


def _date_type(clock: VirtualClock) -> type[_datetime.date]:
    class VirtualDate(_datetime.date, metaclass=_VirtualMeta):
        _real = _REAL.date

        @classmethod
        def today(cls) -> VirtualDate:
            moment = _REAL.datetime.fromtimestamp(clock.wall())
            return cls(moment.year, moment.month, moment.day)

    VirtualDate.__name__ = VirtualDate.__qualname__ = "date"
    VirtualDate.__module__ = "datetime"
    return VirtualDate


def _replacements(clock: VirtualClock) -> dict[int, Any]:
    """Real object id -> its virtual stand-in."""

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)

    async def asyncio_sleep(delay: float, result: Any = None) -> Any:
        await clock.async_sleep(delay, "asyncio.sleep")
        return result

    async def anyio_sleep(delay: float) -> None:
        await clock.async_sleep(delay, "anyio.sleep")

    async def trio_sleep(seconds: float) -> None:
        await clock.async_sleep(seconds, "trio.sleep")

    table: dict[int, Any] = {
        id(_REAL.time): clock.wall,
        id(_REAL.time_ns): lambda: int(clock.wall() * 1e9),
        id(_REAL.monotonic): clock.now,
        id(_REAL.monotonic_ns): lambda: int(clock.now() * 1e9),
        id(_REAL.perf_counter): clock.now,
        id(_REAL.perf_counter_ns): lambda: int(clock.now() * 1e9),
        id(_REAL.sleep): sleep,
        id(_REAL.asyncio_sleep): asyncio_sleep,
        id(_REAL.datetime): _datetime_type(clock),
        id(_REAL.date): _date_type(clock),
    }
    anyio_module = sys.modules.get("anyio")
    if anyio_module is not None:
        table[id(anyio_module.sleep)] = anyio_sleep
    trio_module = sys.modules.get("trio")
    if trio_module is not None:
        table[id(trio_module.sleep)] = trio_sleep
    return table


def _targets() -> list[tuple[Any, str]]:
    """(module, attribute) pairs patched on every install: the public entry points."""
    pairs: list[tuple[Any, str]] = [
        (_time, name)
        for name in (
            "time",
            "time_ns",
            "monotonic",
            "monotonic_ns",
            "perf_counter",
            "perf_counter_ns",
            "sleep",
        )
    ]
    pairs += [(_datetime, "datetime"), (_datetime, "date"), (asyncio, "sleep")]
    tasks = sys.modules.get("asyncio.tasks")
    if tasks is not None:
        pairs.append((tasks, "sleep"))
    for name in ("anyio", "trio"):
        module = sys.modules.get(name)
        if module is not None:
            pairs.append((module, "sleep"))
    return pairs


def install(clock: VirtualClock, modules: Iterable[types.ModuleType] = ()) -> Callable[[], None]:
    """Put ``clock`` behind the patched functions; returns the function that undoes it.

    ``modules`` are scanned for names bound to the real functions or classes before the clock
    started (``from time import monotonic``, ``from datetime import datetime``) and those names
    are patched too. Installs do not nest: installing while another clock is installed raises.
    """
    global _installed
    with _install_lock:
        if _installed:
            raise RuntimeError(
                "a virtual clock is already installed; finish the test or block that installed "
                "it first (virtual clocks do not nest)"
            )
        _installed = True
    table = _replacements(clock)
    saved: list[tuple[Any, str, Any]] = []
    try:
        for module, name in _targets():
            original = module.__dict__.get(name)
            replacement = table.get(id(original))
            if replacement is not None:
                saved.append((module, name, original))
                setattr(module, name, replacement)
        for module in modules:
            for name, value in list(vars(module).items()):
                replacement = table.get(id(value))
                if replacement is not None:
                    saved.append((module, name, value))
                    setattr(module, name, replacement)
        # The event loop keeps real time: its timers must not wait on a clock that may not move.
        base_events = sys.modules.get("asyncio.base_events")
        if base_events is not None:
            saved.append((base_events, "time", vars(base_events)["time"]))
            vars(base_events)["time"] = _REAL_TIME_MODULE
    except BaseException:
        _restore(saved)
        raise

    def uninstall() -> None:
        if saved:
            _restore(saved)

    return uninstall


def observe_sleeps(log: list[Sleep], origin: float) -> Callable[[], None]:
    """Note every ``time.sleep``, ``asyncio.sleep``, ``anyio.sleep`` and ``trio.sleep`` in
    ``log`` (times in seconds since ``origin``, a real monotonic reading) while still sleeping
    for real. Returns the undo. Used with the real and instant clocks."""
    global _installed
    with _install_lock:
        if _installed:
            raise RuntimeError("a virtual clock or sleep watch is already installed")
        _installed = True

    def noted(kind: str, seconds: float) -> None:
        log.append(Sleep(kind, real_monotonic() - origin, float(seconds)))

    def sleep(seconds: float) -> None:
        noted("time.sleep", seconds)
        _REAL.sleep(seconds)

    async def asyncio_sleep(delay: float, result: Any = None) -> Any:
        noted("asyncio.sleep", delay)
        return await _REAL.asyncio_sleep(delay, result)

    saved: list[tuple[Any, str, Any]] = []

    def put(module: Any, name: str, replacement: Any) -> None:
        saved.append((module, name, module.__dict__[name]))
        setattr(module, name, replacement)

    put(_time, "sleep", sleep)
    put(asyncio, "sleep", asyncio_sleep)
    tasks = sys.modules.get("asyncio.tasks")
    if tasks is not None and tasks.__dict__.get("sleep") is _REAL.asyncio_sleep:
        put(tasks, "sleep", asyncio_sleep)
    for name in ("anyio", "trio"):
        module = sys.modules.get(name)
        if module is not None:
            real = module.sleep

            async def library_sleep(
                delay: float, _real: Any = real, _kind: str = f"{name}.sleep"
            ) -> None:
                # anyio.sleep on trio calls trio.sleep: note the outermost sleep only.
                if _watched_sleep.get():
                    await _real(delay)
                    return
                noted(_kind, delay)
                token = _watched_sleep.set(True)
                try:
                    await _real(delay)
                finally:
                    _watched_sleep.reset(token)

            put(module, "sleep", library_sleep)

    def uninstall() -> None:
        if saved:
            _restore(saved)

    return uninstall


def _restore(saved: list[tuple[Any, str, Any]]) -> None:
    global _installed
    for module, name, original in reversed(saved):
        setattr(module, name, original)
    saved.clear()
    with _install_lock:
        _installed = False


_REAL_TIME_MODULE: Final = types.SimpleNamespace(
    monotonic=_REAL.monotonic,
    time=_REAL.time,
    perf_counter=_REAL.perf_counter,
    get_clock_info=_time.get_clock_info,
)
_install_lock = threading.Lock()
_installed = False
_watched_sleep: Final = contextvars.ContextVar("_watched_sleep", default=False)
"""True inside a sleep that the sleep watch has already noted."""
