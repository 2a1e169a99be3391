"""The monotonic readers (``time.monotonic``, ``perf_counter`` and their ``_ns`` forms) on a
virtual clock, without ever running backwards.

A virtual clock runs ahead of real time: a ``time.sleep(100)`` inside a cassette reads as 100 s
and takes none. When the clock is taken away, real time is behind the last reading by about
that much, and ``monotonic``'s one promise is that it never decreases. So the readers carry the
difference: once a clock has run ahead, each reader reads real time plus its **carry**, the
largest amount any clock ran ahead of it, for the rest of the process. The carry only grows,
and only when a clock is taken away. A clock that never ran ahead (a test that made no wait)
leaves nothing behind: the readers are put back as they were.

Each reader is a hook object (:class:`_Reader`) that the built-in function itself calls
(``cfunc.bind``), so ``from time import monotonic`` anywhere reads it too. Where that cannot be
done (PyPy, a free-threaded build, a layout this module does not know) the ``time`` module's
names are pointed at the hooks instead, and one :class:`VirtualClockWarning` says what stays
on real time.

The machinery that waits on the operating system with real timeouts (the asyncio and trio
event loops, ``threading``, ``queue``, ``subprocess``, ``concurrent.futures``) and pytest's own
timing read a **steady** clock instead, from the first virtual clock on: real time, plus the
carry as it was when that module was first seen, never changing after. A loop timer or a queue
timeout that straddles a cassette then fires when it would have without the plugin, and
``loop.time()`` differs from ``time.monotonic()`` by the carry (docs/timing.md).
"""

from __future__ import annotations

import math
import sys
import threading
import time
import types
import warnings
from collections.abc import Callable
from typing import Any, Final

from pytest_toolnexus._patching.imports import when_imported
from pytest_toolnexus._seam.errors import VirtualClockWarning

from . import cfunc as _cfunc
from .virtual import VirtualClock

__all__ = ["carries", "real_time_module", "virtualize"]

_NAMES: Final = ("monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns")
# What the time module held when this module was imported: the built-ins, read for real time
# where no pristine module can be made (the name-patching fallback never changes them).
_ORIGINALS: Final[dict[str, Callable[[], Any]]] = {name: getattr(time, name) for name in _NAMES}


def _real_reader(name: str) -> Callable[[], Any]:
    pristine = _cfunc.pristine_time()
    if pristine is not None:
        reader: Callable[[], Any] = getattr(pristine, name)
        return reader
    return _ORIGINALS[name]


class _Reader(types.ModuleType):
    """What a call of ``time.<name>`` runs once rebound: the clock's reading while a virtual
    clock is installed, real time plus the carry otherwise. A module object, so that the
    built-in keeps its repr (``<built-in function monotonic>``) and pickles by name; other
    attributes are the ``time`` module's (a module ``__getattr__``), so
    ``time.monotonic.__self__`` still answers like it.

    ``__call__`` is on the hot path of every clock reading in the process once something is
    carried: slots only, and one frame."""

    __slots__ = ("_base", "_carry", "_clock", "_floor", "_real", "_seen")

    def __init__(self, name: str, real: Callable[[], Any], zero: float) -> None:
        super().__init__("time", time.__doc__)
        self.__dict__["__getattr__"] = self._time_attribute
        self._real = real
        self._carry: Any = zero
        self._base: Any = zero
        self._floor: Any = zero
        self._clock: VirtualClock | None = None
        self._seen = name

    @staticmethod
    def _time_attribute(name: str) -> Any:
        return getattr(time, name)

    def __call__(self) -> Any:
        raise NotImplementedError

    def last(self) -> Any:
        """The reading now: what the next reading must not fall below."""
        raise NotImplementedError

    @property
    def carry(self) -> Any:
        return self._carry

    def __repr__(self) -> str:
        return f"<pytest-toolnexus reader of time.{self._seen}, carry {self._carry!r}>"


class _Seconds(_Reader):
    __slots__ = ()
    _base: float
    _carry: float
    _floor: float

    def __call__(self) -> float:
        clock = self._clock
        value: float = self._real() + self._carry if clock is None else self._base + clock.elapsed
        # A reading taken by another thread across a switch is never returned smaller than
        # one returned before it.
        if value < self._floor:
            return self._floor
        self._floor = value
        return value

    def last(self) -> float:
        clock = self._clock
        value: float = self._real() + self._carry if clock is None else self._base + clock.elapsed
        return max(value, self._floor)


class _Nanoseconds(_Reader):
    __slots__ = ()
    _base: int
    _carry: int
    _floor: int

    def __call__(self) -> int:
        clock = self._clock
        value: int = (
            self._real() + self._carry if clock is None else self._base + round(clock.elapsed * 1e9)
        )
        if value < self._floor:
            return self._floor
        self._floor = value
        return value

    def last(self) -> int:
        clock = self._clock
        value: int = (
            self._real() + self._carry if clock is None else self._base + round(clock.elapsed * 1e9)
        )
        return max(value, self._floor)


class _Family:
    """A clock's two readers (``monotonic`` and ``monotonic_ns``, or ``perf_counter`` and
    ``perf_counter_ns``), which carry one amount between them, so that they never drift
    apart."""

    def __init__(self, name: str) -> None:
        self.seconds = _Seconds(name, _real_reader(name), 0.0)
        self.nanoseconds = _Nanoseconds(f"{name}_ns", _real_reader(f"{name}_ns"), 0)

    def start(self, clock: VirtualClock) -> None:
        """Read ``clock`` from now on, continuing from the current reading whatever the clock
        has already run. Both readers start from one reading of real time, so that their
        virtual readings agree to the nanosecond."""
        nanoseconds, seconds = self.nanoseconds, self.seconds
        now_ns = max(nanoseconds._real() + nanoseconds._carry, nanoseconds._floor)
        now_s = max(now_ns / 1e9, seconds._floor)
        elapsed = clock.elapsed
        nanoseconds._base = now_ns - round(elapsed * 1e9)
        seconds._base = now_s - elapsed
        nanoseconds._clock = seconds._clock = clock

    def stop(self) -> bool:
        """Back on real time, the carry grown so that no later reading of either reader is
        smaller than any it returned. Never raises. Returns whether anything is carried."""
        seconds, nanoseconds = self.seconds, self.nanoseconds
        clock = seconds._clock
        seconds._clock = nanoseconds._clock = None  # detached first: nothing reads it after
        real_s: float = seconds._real()
        real_ns: int = nanoseconds._real()
        last_s, last_ns = seconds._floor, nanoseconds._floor
        if clock is not None:
            elapsed = clock.elapsed
            if math.isfinite(elapsed):
                last_s = max(last_s, seconds._base + elapsed)
                last_ns = max(last_ns, nanoseconds._base + round(elapsed * 1e9))
        carry_ns = max(nanoseconds._carry, last_ns - real_ns, math.ceil((last_s - real_s) * 1e9), 0)
        carry_s = max(seconds._carry, carry_ns / 1e9)
        # Rounding must not leave real + carry a hair under the last reading.
        while real_s + carry_s < last_s:
            carry_s = math.nextafter(carry_s, math.inf)
        nanoseconds._carry, seconds._carry = carry_ns, carry_s
        nanoseconds._floor, seconds._floor = last_ns, last_s
        return bool(carry_ns or carry_s)

    def readers(self) -> dict[str, _Reader]:
        return {self.seconds._seen: self.seconds, self.nanoseconds._seen: self.nanoseconds}


_lock: Final = threading.Lock()
_families: dict[str, _Family] = {}
_readers: dict[str, _Reader] = {}
# name -> the undo of the reader's binding, while time.<name> is bound to its reader
_bindings: dict[str, Callable[[], None]] = {}
_warned: list[str] = []


def _family(name: str) -> _Family:
    family = _families.get(name)
    if family is None:
        family = _families[name] = _Family(name)
        _readers.update(family.readers())
    return family


def _bind(name: str, reader: _Reader) -> str | None:
    """Point ``time.<name>`` at ``reader``; returns why it went by name, or None."""
    func = getattr(time, name)
    if func is reader:  # bound by name already
        return None
    problem = _cfunc.layout_problem(func, name)
    if problem is None:
        _bindings[name] = _cfunc.bind(func, name, reader)
        return None
    setattr(time, name, reader)

    def unbind() -> None:
        if time.__dict__.get(name) is reader:
            setattr(time, name, func)

    _bindings[name] = unbind
    return problem


def _warn(problems: dict[str, str]) -> None:
    names = ", ".join(f"time.{name}" for name in problems)
    if names in _warned:
        return
    _warned.append(names)
    reason = next(iter(problems.values()))
    warnings.warn(
        VirtualClockWarning(
            f"the virtual clock reaches {names} through the time module only here ({reason}): "
            f"code that calls time.{next(iter(problems))}() reads virtual time, but a name bound "
            "before the cassette started (from time import monotonic) reads real time. Read "
            "the clock through the time module in code that must see virtual time, or run on "
            "CPython with the GIL (docs/timing.md, 'Builds')."
        ),
        stacklevel=4,
    )


def virtualize(clock: VirtualClock) -> Callable[[], None]:
    """Make the four readers read ``clock``, each continuing from its current reading, and keep
    the waiting machinery on its steady clock (also a machinery module first imported while the
    clock is in). Returns the undo (safe to call twice), which puts the readers back on real
    time plus their carry; once no reader carries anything, every binding is taken off and the
    machinery is given back its own ``time``. Whatever fails halfway is taken off again."""
    with _lock:
        families = [_family("monotonic"), _family("perf_counter")]
        problems = {
            name: problem
            for name in _NAMES
            if name not in _bindings
            and (problem := _cfunc.layout_problem(getattr(time, name), name)) is not None
            and getattr(time, name) is not _readers[name]
        }
    if problems:
        _warn(problems)  # before anything changes: a warnings filter may make it an error
    watches: list[Callable[[], None]] = []
    done = [False]

    def undo() -> None:
        with _lock:
            if done[0]:
                return
            done[0] = True
            while watches:
                watches.pop()()
            carrying = [family.stop() for family in families]
            if not any(carrying):
                for name in _NAMES:
                    unbind = _bindings.pop(name, None)
                    if unbind is not None:
                        unbind()
                _machinery.restore()

    try:
        with _lock:
            for name in _NAMES:
                if name not in _bindings:
                    _bind(name, _readers[name])
            for family in families:
                family.start(clock)
            offsets = {name: reader.carry for name, reader in _readers.items()}
            _machinery.steady(offsets)
        for module_name in _machinery.missing():
            watches.append(when_imported(module_name, _steadying(offsets)))
    except BaseException:
        undo()
        raise
    return undo


def _steadying(offsets: dict[str, Any]) -> Callable[[], Callable[[], None]]:
    """What an import watch runs: the steady clock for a machinery module imported now. It
    stays when the watch goes, as the steady clock of every machinery module does."""

    def install() -> Callable[[], None]:
        with _lock:
            _machinery.steady(offsets)
        return lambda: None

    return install


def carries() -> dict[str, float | int]:
    """Each reader's carry now: what it adds to real time outside a virtual clock."""
    with _lock:
        return {name: reader.carry for name, reader in _readers.items()}


# -- the machinery that keeps a steady clock ------------------------------------------------------


def real_time_module() -> types.ModuleType:
    """A ``time`` module whose clock readers read real time and whose ``sleep`` sleeps for real,
    whatever is bound or patched."""
    pristine = _cfunc.pristine_time()
    if pristine is not None:
        return pristine
    module = types.ModuleType("time", "The time module, on real time (pytest-toolnexus).")
    module.__dict__.update(vars(time))
    module.__dict__.update(_ORIGINALS)
    return module


def _steady_module(offsets: dict[str, Any]) -> types.ModuleType:
    """A ``time`` module reading real time plus each reader's offset (the pristine module when
    every offset is 0)."""
    real = real_time_module()
    if not any(offsets.values()):
        return real
    module = types.ModuleType("time", "The time module, on a steady clock (pytest-toolnexus).")
    module.__dict__.update(vars(real))
    for name in _NAMES:
        module.__dict__[name] = _steady_function(name, offsets.get(name, 0))
    return module


def _steady_function(name: str, offset: Any) -> Callable[[], Any]:
    real = _real_reader(name)
    if not offset:
        return real
    return lambda: real() + offset


# (module, global, the reader it holds, or None for the time module itself): the machinery that
# waits with real timeouts, and pytest's own timing.
_MACHINERY: Final = (
    ("asyncio.base_events", "time", None),
    ("concurrent.futures._base", "time", None),
    ("subprocess", "time", None),
    ("subprocess", "_time", "monotonic"),
    ("threading", "_time", "monotonic"),
    ("queue", "time", "monotonic"),
    ("trio._core._run", "perf_counter", "perf_counter"),
    ("_pytest.timing", "perf_counter", "perf_counter"),
    ("multiprocessing.connection", "time", None),
    ("multiprocessing.synchronize", "time", None),
    ("multiprocessing.queues", "time", None),
    ("multiprocessing.managers", "time", None),
)


class _Machinery:
    """Where the machinery's globals were pointed at a steady clock, to be put back once no
    reader carries anything."""

    def __init__(self) -> None:
        self._changed: list[tuple[types.ModuleType, str, object, object]] = []

    def steady(self, offsets: dict[str, Any]) -> None:
        """Point each loaded machinery global that still holds what Python gave it at a steady
        clock: real time plus ``offsets`` (each reader's carry now, so that no reading
        jumps)."""
        for module_name, key, reader in _MACHINERY:
            module = sys.modules.get(module_name)
            usual: object = time if reader is None else _ORIGINALS[reader]
            if module is None or module.__dict__.get(key) is not usual:
                continue
            if reader is None:
                value: object = _steady_module(offsets)
            else:
                value = _steady_function(reader, offsets.get(reader, 0))
            setattr(module, key, value)
            self._changed.append((module, key, usual, value))

    def missing(self) -> list[str]:
        """The machinery modules not imported yet."""
        return sorted({name for name, _, _ in _MACHINERY if name not in sys.modules})

    def restore(self) -> None:
        changed, self._changed = self._changed, []
        for module, key, usual, value in reversed(changed):
            if module.__dict__.get(key) is value:
                setattr(module, key, usual)


_machinery: Final = _Machinery()
