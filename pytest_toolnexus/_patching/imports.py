"""Installing a bridge when its library is imported, and never importing it ourselves.

:func:`when_imported` runs an install at once when the library is already imported, and
otherwise has it wait for the library: one finder, at the front of ``sys.meta_path`` while any
install waits, runs it right after the library's own module has executed. The undo stops the
wait (the last one takes the finder out again) and undoes the install if it ran. A test that
never touches the library pays one ``sys.modules`` lookup and a list append.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Final

__all__ = ["when_imported"]

Install = Callable[[], Callable[[], None]]


class _Loader(importlib.abc.Loader):
    """The library's own loader, followed by the install once the module has executed."""

    def __init__(self, loader: Any, then: Callable[[], None]) -> None:
        self._loader = loader
        self._then = then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if callable(create) else None

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._then()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _Watch:
    """One install waiting for its library: run at most once, undone by :meth:`undo`."""

    __slots__ = ("_done", "_install", "_installed", "_lock", "_undos")

    def __init__(self, install: Install) -> None:
        self._install = install
        self._undos: list[Callable[[], None]] = []
        self._done = False
        self._installed = False
        self._lock = threading.Lock()

    def run(self) -> None:
        with self._lock:
            if self._done or self._installed:
                return
            self._installed = True
            self._undos.append(self._install())
        self._take_off_if_undone()  # undone while the install ran: taken off now

    def undo(self) -> None:
        """Stop the watch, and take off what its install put on. It never waits for an
        install running in another thread (that install may itself wait for a lock the
        caller holds, the clock's for one): such an install takes itself off when it ends."""
        self._done = True
        self._take_off()

    def _take_off_if_undone(self) -> None:
        if self._done:
            self._take_off()

    def _take_off(self) -> None:
        while True:
            try:
                undo = self._undos.pop()
            except IndexError:
                return
            undo()


# module name -> the watches waiting for it, oldest first; the finder is on sys.meta_path
# exactly while this holds any.
_waiting: dict[str, list[_Watch]] = {}
_waiting_lock = threading.Lock()


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself; for a module some watch waits for, hands back the module's own
    spec with its loader wrapped, so the waiting installs run once the module has executed. A
    spec found only to probe for the library (``importlib.util.find_spec``) is never
    executed, and installs nothing. One finder serves every watch: an import that no watch
    waits for costs it one dictionary lookup."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _waiting:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            spec: importlib.machinery.ModuleSpec | None = (
                find(fullname, path, target) if callable(find) else None
            )
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, lambda: _arrived(fullname))
                return spec
        return None


_FINDER: Final = _Finder()


def _arrived(name: str) -> None:
    """The module ``name`` has executed: run what waits for it."""
    with _waiting_lock:
        ready = list(_waiting.get(name, ()))
    for watch in ready:
        watch.run()


def when_imported(name: str, install: Install) -> Callable[[], None]:
    """Run ``install`` now if the module ``name`` is imported, else as soon as it is; returns
    the undo, which stops the wait and undoes what ``install`` put on."""
    watch = _Watch(install)
    if name in sys.modules:
        watch.run()
        return watch.undo
    with _waiting_lock:
        _waiting.setdefault(name, []).append(watch)
        if _FINDER not in sys.meta_path:  # found as remove() below finds it
            sys.meta_path.insert(0, _FINDER)

    def undo() -> None:
        with _waiting_lock:
            waiting = _waiting.get(name, [])
            if watch in waiting:
                waiting.remove(watch)
                if not waiting:
                    del _waiting[name]
            if not _waiting:
                with contextlib.suppress(ValueError):
                    sys.meta_path.remove(_FINDER)
        watch.undo()

    return undo
