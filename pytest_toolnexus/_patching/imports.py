"""Installing a bridge when its library is imported, and never importing it ourselves.

:func:`when_imported` runs an install at once when the library is already imported, and
otherwise puts a finder at the front of ``sys.meta_path`` that runs it right after the library's
own module has executed. The finder is taken out again by the undo, which also undoes the
install if it ran. A test that never touches the library pays one ``sys.modules`` lookup and
one list insertion.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

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


class _Watch(importlib.abc.MetaPathFinder):
    """Finds nothing itself; hands back the library's own spec with its loader wrapped, so the
    install runs once the module has executed. A spec found only to probe for the library
    (``importlib.util.find_spec``) is never executed, and installs nothing."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self._name = name
        self._then = then

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self._name:
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
                    spec.loader = _Loader(spec.loader, self._then)
                return spec
        return None


def when_imported(name: str, install: Install) -> Callable[[], None]:
    """Run ``install`` now if the module ``name`` is imported, else as soon as it is; returns
    the undo, which removes the watch and undoes what ``install`` put on."""
    undos: list[Callable[[], None]] = []
    done = [False]
    lock = threading.Lock()
    installed = [False]

    def run() -> None:
        with lock:
            if done[0] or installed[0]:
                return
            installed[0] = True
            undos.append(install())

    if name in sys.modules:
        run()
        watch = None
    else:
        watch = _Watch(name, run)
        sys.meta_path.insert(0, watch)

    def undo() -> None:
        if done[0]:
            return
        done[0] = True
        if watch is not None:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(watch)
        while undos:
            undos.pop()()

    return undo
