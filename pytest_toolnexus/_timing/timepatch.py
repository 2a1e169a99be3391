"""Put a virtual clock behind Python's time functions for a while, and take it away again.

No class is ever replaced: ``datetime.datetime``, ``datetime.date`` and ``time.struct_time`` stay
the objects pydantic and every ``isinstance`` check know. Three mechanisms, one per kind of name:

- **Wall clock** (``time.time``, ``time_ns``, ``datetime.now``, ``utcnow``, ``today``,
  ``date.today``, ``gmtime``/``localtime``/``strftime`` with no argument, ``uuid1``): time-machine,
  which rewires those built-ins in C, travelling to the clock's wall time and following it as the
  clock moves.
- **Monotonic readers** (``monotonic``, ``perf_counter`` and their ``_ns`` forms): ``readers``
  points the built-ins themselves at readers of the clock (``cfunc``), so ``from time import
  monotonic`` anywhere reads virtual time, and carries what the clock ran ahead when it goes,
  so that no reading is ever smaller than an earlier one.
- **Sleeps** (``time.sleep``, ``asyncio.sleep``, ``anyio.sleep``, ``trio.sleep``): they must be
  able to raise, so they are swapped by name, wherever a loaded module holds one as a global.
  Modules are scanned once each and remembered (:class:`_SleepSites`), which keeps the per-test
  cost to a few dictionary look-ups.

The machinery that waits on the operating system with a real timeout (the asyncio and trio event
loops, ``threading``, ``queue``, ``subprocess``, ``concurrent.futures``) and pytest's own timing
read a steady clock (``readers``): a timeout there must neither hang on a clock that is not
moving nor fire at once.

Every part goes on through one :class:`~pytest_toolnexus._patching.install.Installation` (a
session's, or one of the clock's own), which takes off whatever went in when a later part fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime
import sys
import threading
import time as _time
import types
import weakref
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Final

from pytest_toolnexus._patching.install import Installation

from . import readers as _readers
from .clock import real_monotonic
from .virtual import Sleep, VirtualClock

__all__ = ["install", "observe_sleeps"]

_REAL_SLEEP: Final = _time.sleep
_REAL_ASYNCIO_SLEEP: Final = asyncio.sleep
# Modules a scan never rewrites: ours, the test runner's, and the async libraries' own, whose
# internal ``sleep(0)`` checkpoints are not waits of the code under test. The libraries' public
# entry points are patched by name instead (``_ENTRY_POINTS``).
_NEVER_SCANNED: Final = (
    "asyncio",
    "anyio",
    "trio",
    "sniffio",
    "pytest_toolnexus",
    "_pytest",
    "pytest",
    "pluggy",
    "xdist",
    "execnet",
    "time_machine",
    "freezegun",
    "coverage",
)


def _is_watched(value: object, watched: dict[int, Any]) -> bool:
    """Whether ``value`` is one of the watched functions (by identity, not by a reused id)."""
    return id(value) in watched and watched[id(value)] is value


class _SleepSites:
    """Where loaded modules hold one of the watched functions as a global.

    Each module is scanned once and remembered; a later call re-checks the remembered places
    (a global may have been rebound) and scans only modules loaded since. New modules go to
    the end of ``sys.modules``, so when its length and its last name are unchanged nothing was
    imported, and the walk over it is skipped: the path most tests take. The watched set grows
    when anyio or trio is imported, and then everything is scanned again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: frozenset[int] = frozenset()
        # name -> the module scanned under it, weakly: a new module object under an old name
        # (a re-import) is scanned again, and an id reused after a module died cannot fool it.
        self._scanned: dict[str, weakref.ref[types.ModuleType]] = {}
        self._sites: list[tuple[types.ModuleType, str]] = []
        self._shape: tuple[int, str | None] = (0, None)

    def find(self, watched: dict[int, Any]) -> list[tuple[types.ModuleType, str, Any]]:
        """(module, global, current value) for every global bound to a watched function."""
        with self._lock:
            if frozenset(watched) != self._watched:
                self._watched = frozenset(watched)
                self._scanned.clear()
                self._sites.clear()
                self._shape = (0, None)
            modules = sys.modules
            shape = (len(modules), next(reversed(modules.keys()), None))
            if shape != self._shape:
                self._shape = shape
                for name, module in list(modules.items()):
                    seen = self._scanned.get(name)
                    if seen is None or seen() is not module:
                        self._scan(name, module, watched)
                        with contextlib.suppress(TypeError):  # not weakly referenceable
                            self._scanned[name] = weakref.ref(module)
            found = []
            for module, key in self._sites:
                value = module.__dict__.get(key)
                if _is_watched(value, watched):
                    found.append((module, key, value))
            return found

    def _scan(self, name: str, module: object, watched: dict[int, Any]) -> None:
        if not isinstance(module, types.ModuleType) or name.startswith(_NEVER_SCANNED):
            return
        namespace = getattr(module, "__dict__", None)
        if type(namespace) is not dict:
            return
        # The common case, no watched function at all, is decided in C.
        if watched.keys().isdisjoint(map(id, list(namespace.values()))):
            return
        for key, value in list(namespace.items()):
            if _is_watched(value, watched):
                self._sites.append((module, key))


_sites: Final = _SleepSites()
_ENTRY_POINTS: Final = (
    ("time", "sleep"),
    ("asyncio", "sleep"),
    ("asyncio.tasks", "sleep"),
    ("anyio", "sleep"),
    ("trio", "sleep"),
)


def _sleep_sites(watched: dict[int, Any]) -> list[tuple[types.ModuleType, str, Any]]:
    """The libraries' own sleep entry points, then every other global bound to one."""
    sites = []
    for module_name, key in _ENTRY_POINTS:
        module = sys.modules.get(module_name)
        value = None if module is None else module.__dict__.get(key)
        if module is not None and _is_watched(value, watched):
            sites.append((module, key, value))
    return sites + _sites.find(watched)


def _watched_sleeps() -> dict[int, Any]:
    """id -> the real sleep functions of the loaded libraries."""
    real: list[Any] = [_REAL_SLEEP, _REAL_ASYNCIO_SLEEP]
    for name in ("anyio", "trio"):
        module = sys.modules.get(name)
        if module is not None:
            real.append(_real_library_sleep(module))
    return {id(function): function for function in real}


_library_sleeps: dict[str, Any] = {}


def _real_library_sleep(module: types.ModuleType) -> Any:
    """``anyio.sleep`` or ``trio.sleep`` as the library defines it (remembered the first time,
    so a sleep left patched by somebody else is not taken for the real one later)."""
    if module.__name__ not in _library_sleeps:
        _library_sleeps[module.__name__] = module.sleep
    return _library_sleeps[module.__name__]


def _kind_of(function: Any) -> str:
    if function is _REAL_SLEEP:
        return "time.sleep"
    if function is _REAL_ASYNCIO_SLEEP:
        return "asyncio.sleep"
    return f"{function.__module__.split('.')[0]}.sleep"


def _swap(owner: Any, name: str, value: Any) -> Callable[[], None]:
    """Set ``owner.name`` to ``value``; returns what puts the old value back."""
    previous = owner.__dict__[name]
    setattr(owner, name, value)
    return lambda: setattr(owner, name, previous)


def _claim(what: str, installation: Installation | None) -> Installation:
    """Where the parts of a clock or a sleep watch go: a part of ``installation`` (the
    session's, which holds the process), or an installation of their own, which claims it."""
    if installation is None:
        return Installation(what).open()
    return installation.part(what)


def _travel(clock: VirtualClock) -> Callable[[], None]:
    """Send the wall clock (via time-machine) to the clock's wall time, and keep it there."""
    import time_machine

    if "freezegun" in sys.modules and datetime.datetime.__name__ == "FakeDatetime":
        raise RuntimeError(
            "cannot start the virtual clock: freezegun.freeze_time() is active, and it replaces "
            "datetime.datetime, which the virtual clock leaves alone. Start the cassette first "
            "and freeze inside the test (the freeze then wins for its block), or give this "
            "test timing='real' or timing='instant'."
        )
    journey = time_machine.travel(clock.wall(), tick=False)
    traveller = journey.start()
    applied = [round(clock.wall() * 1e9)]

    def stop() -> None:
        stack_now = time_machine.traveller_stack
        if stack_now and stack_now[-1] is traveller:
            journey.stop()
        elif traveller in stack_now:
            # A travel the code under test started and never stopped is still on top: take
            # ours out from under it, and time-machine unpatches when that one stops.
            stack_now.remove(traveller)

    def follow(wall: float) -> None:
        target = round(wall * 1e9)
        if target != applied[0]:
            traveller.shift((target - applied[0]) / 1e9)
            applied[0] = target

    try:
        unfollow = clock.follow(follow)
    except BaseException:
        stop()
        raise

    def undo() -> None:
        try:
            unfollow()
        finally:
            stop()

    return undo


def install(
    clock: VirtualClock,
    modules: Iterable[types.ModuleType] = (),
    installation: Installation | None = None,
) -> Callable[[], None]:
    """Put ``clock`` behind the time functions; returns the undo, which is safe to call twice.

    Its parts go into ``installation`` as a part that can come off first (a session's, which
    holds the process), or into an installation of their own, which claims the process: either
    way installing while another clock (or sleep watch, or cassette) is in raises and changes
    nothing. ``modules`` are scanned for sleep functions bound as globals even when they are not
    in ``sys.modules``. Everything is restored in reverse order, on every path.
    """
    parts = _claim(f"the virtual clock {clock!r}", installation)
    try:
        parts.add(_travel, clock)
        parts.add(_readers.virtualize, clock)
        replacements = _virtual_sleeps(clock)
        watched = _watched_sleeps()
        sites = _sleep_sites(watched)
        for module in modules:
            namespace = vars(module)
            # Most modules hold no sleep at all, which is decided in C (as _SleepSites does).
            if watched.keys().isdisjoint(map(id, list(namespace.values()))):
                continue
            sites += [
                (module, key, value)
                for key, value in list(namespace.items())
                if _is_watched(value, watched)
            ]
        shape = _modules_shape()
        parts.add(lambda: partial(_forget_captured, replacements, watched, shape))
        for module, key, value in sites:
            if module.__dict__.get(key) is value:
                parts.add(_swap, module, key, replacements[_kind_of(value)])
    except BaseException:
        parts.close()
        raise
    return parts.close


def _modules_shape() -> tuple[int, str | None]:
    return len(sys.modules), next(reversed(sys.modules.keys()), None)


def _imported_since(shape: tuple[int, str | None]) -> list[types.ModuleType]:
    """The modules imported since ``sys.modules`` had ``shape``: new names go to the end of
    it, so they are the ones after the name that was last then (all of them, should that one
    have been removed meanwhile)."""
    if _modules_shape() == shape:
        return []
    names = list(sys.modules)
    last = shape[1]
    if last is not None and sys.modules.get(last) is not None:
        for position in range(len(names) - 1, -1, -1):
            if names[position] == last:
                names = names[position + 1 :]
                break
    return [module for name in names if (module := sys.modules.get(name)) is not None]


def _forget_captured(
    replacements: dict[str, Any], watched: dict[int, Any], shape: tuple[int, str | None]
) -> None:
    """Give every module imported while the clock was in the real sleep it meant to take.

    A module imported meanwhile that did ``from asyncio import sleep`` (anyio's asyncio
    backend does) took the clock's replacement, which would outlive the clock: look through
    them, the libraries' own included, when anything was imported at all."""
    imported = _imported_since(shape)
    if not imported:
        return
    real = {_kind_of(value): value for value in watched.values()}
    # id(replacement) -> (the replacement, the real sleep it stands for)
    back = {id(mine): (mine, real[kind]) for kind, mine in replacements.items() if kind in real}
    for module in imported:
        namespace = getattr(module, "__dict__", None)
        if type(namespace) is not dict or back.keys().isdisjoint(map(id, list(namespace.values()))):
            continue
        for key, value in list(namespace.items()):
            mine, meant = back.get(id(value), (None, None))
            if mine is not None and value is mine:
                namespace[key] = meant


_inside_clock: Final = contextvars.ContextVar("_inside_clock", default=False)
"""True while a virtual async sleep runs: a sleep the clock's own checkpoints make through a
library that took the replacement at import (anyio's asyncio backend, imported while the clock
was in) is then the real one, instead of the clock calling itself without end."""


def _virtual_sleeps(clock: VirtualClock) -> dict[str, Any]:
    def sleep(seconds: float) -> None:
        clock.sleep(seconds)

    async def wait(delay: float, kind: str) -> None:
        token = _inside_clock.set(True)
        try:
            await clock.async_sleep(delay, kind)
        finally:
            _inside_clock.reset(token)

    async def asyncio_sleep(delay: float, result: Any = None) -> Any:
        if _inside_clock.get():
            return await _REAL_ASYNCIO_SLEEP(delay, result)
        await wait(delay, "asyncio.sleep")
        return result

    async def anyio_sleep(delay: float) -> None:
        await wait(delay, "anyio.sleep")

    async def trio_sleep(seconds: float) -> None:
        await wait(seconds, "trio.sleep")

    return {
        "time.sleep": sleep,
        "asyncio.sleep": asyncio_sleep,
        "anyio.sleep": anyio_sleep,
        "trio.sleep": trio_sleep,
    }


def observe_sleeps(
    log: list[Sleep], origin: float, installation: Installation | None = None
) -> Callable[[], None]:
    """Note every ``time.sleep``, ``asyncio.sleep``, ``anyio.sleep`` and ``trio.sleep`` in
    ``log`` (times in seconds since ``origin``, a real monotonic reading) while still sleeping
    for real. Returns the undo; ``installation`` as for :func:`install`. Used with the real and
    instant clocks."""
    parts = _claim("a sleep watch", installation)
    try:
        watched = _watched_sleeps()
        noting = {
            id(real): _noting_sleep(real, _kind_of(real), log, origin) for real in watched.values()
        }
        by_kind = {_kind_of(watched[key]): sleep for key, sleep in noting.items()}
        shape = _modules_shape()
        parts.add(lambda: partial(_forget_captured, by_kind, watched, shape))
        for module, key, value in _sleep_sites(watched):
            parts.add(_swap, module, key, noting[id(value)])
    except BaseException:
        parts.close()
        raise
    return parts.close


def _noting_sleep(real: Any, kind: str, log: list[Sleep], origin: float) -> Any:
    def noted(seconds: float) -> None:
        log.append(Sleep(kind, real_monotonic() - origin, float(seconds)))

    if real is _REAL_SLEEP:

        def sleep(seconds: float) -> None:
            noted(seconds)
            _REAL_SLEEP(seconds)

        return sleep
    if real is _REAL_ASYNCIO_SLEEP:

        async def asyncio_sleep(delay: float, result: Any = None) -> Any:
            noted(delay)
            return await _REAL_ASYNCIO_SLEEP(delay, result)

        return asyncio_sleep

    async def library_sleep(delay: float) -> None:
        # anyio.sleep on trio calls trio.sleep: note the outermost sleep only.
        if _watched_sleep.get():
            await real(delay)
            return
        noted(delay)
        token = _watched_sleep.set(True)
        try:
            await real(delay)
        finally:
            _watched_sleep.reset(token)

    return library_sleep


_watched_sleep: Final = contextvars.ContextVar("_watched_sleep", default=False)
"""True inside a sleep that the sleep watch has already noted."""
