"""Point a built-in function of the ``time`` module at Python code, for every reference to it.

``from time import monotonic`` in any module, a default argument, a class attribute: each holds
the same built-in function object, so replacing the module attribute reaches none of them. What
they share is the function's C method definition (``PyMethodDef``), whose ``ml_meth`` pointer is
what CPython calls. Swapping that pointer for a ctypes callback makes every reference read the
virtual clock, and swapping it back restores the original exactly; the function objects, and so
``is`` and identity checks, never change. time-machine does the same for the wall-clock
functions in C; this module covers the argument-less clock readers it leaves alone
(``monotonic``, ``perf_counter`` and their ``_ns`` forms).

Only functions that take no arguments and cannot fail are rebound: a ctypes callback cannot hand
an exception back to its caller. Before writing anything the layout is checked (the definition
must carry the function's own name and the no-argument calling convention); where the check
fails, for example on an interpreter laid out differently, :func:`rebind` returns None and the
caller falls back to replacing module attributes.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable
from typing import Final, TypeVar

__all__ = ["original", "rebind", "supported"]

_T = TypeVar("_T", float, int)
_METH_NOARGS: Final = 0x0004


class _MethodDef(ctypes.Structure):
    _fields_ = (
        ("ml_name", ctypes.c_char_p),
        ("ml_meth", ctypes.c_void_p),
        ("ml_flags", ctypes.c_int),
        ("ml_doc", ctypes.c_char_p),
    )


_NOARGS: Final = ctypes.CFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p)
_CALL_ORIGINAL: Final = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p)
_lock = threading.Lock()
# id(function) -> (its method definition, the original C pointer, a caller of that pointer)
_known: dict[int, tuple[_MethodDef, int, Callable[[], object]]] = {}
# id(function) -> the callback now installed (kept alive while CPython may call it)
_active: dict[int, object] = {}


def _definition(func: Callable[[], object]) -> _MethodDef | None:
    if sys.implementation.name != "cpython" or type(func).__name__ != "builtin_function_or_method":
        return None
    # A PyCFunctionObject starts with the object header, then the PyMethodDef pointer.
    address = ctypes.c_void_p.from_address(id(func) + object.__basicsize__).value
    if not address:
        return None
    definition = _MethodDef.from_address(address)
    name = getattr(func, "__name__", "")
    if definition.ml_name != name.encode() or definition.ml_flags != _METH_NOARGS:
        return None
    return definition


def _entry(func: Callable[[], object]) -> tuple[_MethodDef, int, Callable[[], object]] | None:
    entry = _known.get(id(func))
    if entry is None:
        definition = _definition(func)
        if definition is None or definition.ml_meth is None:
            return None
        pointer = int(definition.ml_meth)
        call = _CALL_ORIGINAL(pointer)
        entry = (definition, pointer, lambda: call(None, None))
        _known[id(func)] = entry
    return entry


def supported(func: Callable[[], object]) -> bool:
    """Whether ``func`` can be rebound here (a no-argument built-in on CPython)."""
    with _lock:
        return _entry(func) is not None


def original(func: Callable[[], _T]) -> Callable[[], _T]:
    """A function that always runs ``func``'s own C code, rebound or not.

    Falls back to ``func`` itself where rebinding is not supported (nothing can rebind it).
    """
    with _lock:
        entry = _entry(func)
    if entry is None:
        return func
    _, _, call = entry
    key, fast = id(func), func

    def read() -> _T:
        # Unbound (the usual case): the built-in itself, at the cost of one dict look-up.
        if key not in _active:
            return fast()
        value: _T = call()  # type: ignore[assignment]
        return value

    read.__name__ = f"original_{getattr(func, '__name__', 'function')}"
    return read


def rebind(func: Callable[[], _T], replacement: Callable[[], _T]) -> Callable[[], None] | None:
    """Make every call of ``func`` run ``replacement``; returns the undo, or None when this
    interpreter does not allow it (the caller then patches names instead).

    ``replacement`` must not raise: an exception inside it cannot reach the caller and would
    surface as a ``SystemError``. Rebinding a function that is already rebound raises.
    """
    with _lock:
        entry = _entry(func)
        if entry is None:
            return None
        definition, pointer, _ = entry
        key = id(func)
        if key in _active:
            raise RuntimeError(f"time.{getattr(func, '__name__', '?')} is already rebound")

        def trampoline(_self: int | None, _unused: int | None) -> object:
            return replacement()

        callback = _NOARGS(trampoline)
        _active[key] = callback
        definition.ml_meth = ctypes.cast(callback, ctypes.c_void_p).value

    def undo() -> None:
        with _lock:
            if _active.get(key) is callback:
                definition.ml_meth = pointer
                del _active[key]

    return undo
