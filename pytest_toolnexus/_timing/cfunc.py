"""Point a built-in function of the ``time`` module at Python code, for every reference to it.

``from time import monotonic`` in any module, a default argument, a class attribute: each holds
the same built-in function object, so replacing the module attribute reaches none of them. What
they share is that object: CPython calls its C method definition's ``ml_meth`` pointer with the
object's ``m_self`` (the ``time`` module). :func:`rebind` points ``ml_meth`` at CPython's own
``PyObject_CallObject(callable, args)``, which has the same C signature, and ``m_self`` at the
replacement, so a call of the built-in becomes ``replacement()``. Undoing puts both back. The
function objects, and so ``is`` and identity checks, never change. time-machine does the same
for the wall-clock functions in C; this module covers the argument-less clock readers it leaves
alone (``monotonic``, ``perf_counter`` and their ``_ns`` forms).

No Python code runs between the caller and the replacement, so whatever the replacement raises
reaches the caller as it would from any function: a ``RecursionError`` when the clock is read
at the recursion limit, a ``KeyboardInterrupt``. (A ctypes callback, the first way this module
did it, cannot raise: at the recursion limit it handed CPython an unset return value, and the
process crashed.)

Before writing anything the layout is checked: the definition must carry the function's own
name and the no-argument calling convention, and ``m_self`` must be the ``time`` module. Where
the check fails, for example on an interpreter laid out differently, :func:`rebind` returns
None and the caller falls back to replacing module attributes.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

__all__ = ["original", "rebind", "supported"]

_T = TypeVar("_T", float, int)
_METH_NOARGS: Final = 0x0004
_POINTER: Final = ctypes.sizeof(ctypes.c_void_p)


class _MethodDef(ctypes.Structure):
    _fields_ = (
        ("ml_name", ctypes.c_char_p),
        ("ml_meth", ctypes.c_void_p),
        ("ml_flags", ctypes.c_int),
        ("ml_doc", ctypes.c_char_p),
    )


_CALL_ORIGINAL: Final = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p)
# PyObject *PyObject_CallObject(PyObject *callable, PyObject *args): the PyCFunction signature,
# and with args NULL it calls ``callable()``.
_CALL_SELF: Final = ctypes.cast(ctypes.pythonapi.PyObject_CallObject, ctypes.c_void_p).value
_lock = threading.Lock()


@dataclass(frozen=True)
class _Entry:
    definition: _MethodDef
    pointer: int  # the original ml_meth
    self_slot: ctypes.c_void_p  # the function object's m_self field
    module: int  # what m_self held: the address of the time module
    call: Callable[[], object]  # runs the original C code whatever is installed


# id(function) -> its entry
_known: dict[int, _Entry] = {}
# id(function) -> the replacement now installed (held here, and counted once for m_self)
_active: dict[int, object] = {}


def _entry(func: Callable[[], object]) -> _Entry | None:
    entry = _known.get(id(func))
    if entry is not None:
        return entry
    if (
        sys.implementation.name != "cpython"
        or type(func).__name__ != "builtin_function_or_method"
        or not _CALL_SELF
    ):
        return None
    # A PyCFunctionObject: the object header, then the PyMethodDef pointer, then m_self.
    address = ctypes.c_void_p.from_address(id(func) + object.__basicsize__).value
    if not address:
        return None
    definition = _MethodDef.from_address(address)
    name = getattr(func, "__name__", "")
    self_slot = ctypes.c_void_p.from_address(id(func) + object.__basicsize__ + _POINTER)
    if (
        definition.ml_name != name.encode()
        or definition.ml_flags != _METH_NOARGS
        or definition.ml_meth is None
        or self_slot.value != id(time)
    ):
        return None
    pointer = int(definition.ml_meth)
    caller = _CALL_ORIGINAL(pointer)
    entry = _Entry(definition, pointer, self_slot, id(time), lambda: caller(None, None))
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
    key, fast, call = id(func), func, entry.call

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

    What ``replacement`` raises reaches the caller of ``func``. Rebinding a function that is
    already rebound raises.
    """
    with _lock:
        entry = _entry(func)
        if entry is None:
            return None
        key = id(func)
        if key in _active:
            raise RuntimeError(f"time.{getattr(func, '__name__', '?')} is already rebound")
        _active[key] = replacement
        # m_self now refers to the replacement: count that reference, as CPython counts the
        # module's, so that the garbage collector, which follows m_self, sees it right.
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(replacement))
        # m_self first, then ml_meth (and the reverse in undo): a call in between, from
        # another thread, runs the original C code, which ignores m_self.
        entry.self_slot.value = id(replacement)
        entry.definition.ml_meth = _CALL_SELF

    def undo() -> None:
        with _lock:
            if _active.get(key) is not replacement:
                return
            entry.definition.ml_meth = entry.pointer
            entry.self_slot.value = entry.module
            del _active[key]
            ctypes.pythonapi.Py_DecRef(ctypes.py_object(replacement))

    return undo
