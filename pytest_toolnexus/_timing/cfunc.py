"""Point one built-in function object of the ``time`` module at Python code, for every reference
to that object.

``from time import monotonic`` in any module, a default argument, a class attribute: each holds
the same built-in function object, so replacing the module attribute reaches none of them. What
they share is that object, a ``PyCFunctionObject``: CPython calls the C function its method
definition (``m_ml``) names, with the object's ``m_self`` (the ``time`` module). :func:`bind`
gives that one object a method definition of its own, a copy of the original whose C function
is CPython's ``PyObject_CallObject(callable, args)`` (the same C signature; with ``args`` NULL
it calls ``callable()``), and points its ``m_self`` at the hook. A call of the built-in becomes
``hook()``. The function object, and so ``is`` and identity checks, never changes.

What this does not write: the static method table the object was made from. Every other
function object made from it (a second ``time`` module, a subinterpreter's) keeps calling the
original C code, and reads real time. :func:`pristine_time` makes such a second module for the
plugin itself, so real time is always one C call away.

Safety, in order:

- The layout is checked before anything is written (:func:`layout_problem`): CPython with the
  GIL, the function type's size as this module expects it, a method definition that carries the
  function's own name and the no-argument calling convention, ``m_self`` a ``time`` module.
  Every read is inside the function object itself, or the definition it points at.
- The two fields (``m_ml`` and ``m_self``, side by side) are written by one ``memmove`` called
  the way C-API functions are (``PYFUNCTYPE``), which keeps the GIL for the whole call: no other
  thread of the interpreter can call the function with one field changed and not the other. A
  free-threaded build has no GIL to make that true, and is refused: the caller then patches
  names instead.
- What the hook raises reaches the caller as from any function (``RecursionError`` at the
  recursion limit, ``KeyboardInterrupt``): no C callback sits in between.
- The hook should be a module object (an instance of a ``types.ModuleType`` subclass with a
  ``__call__``): CPython then prints the built-in as ``<built-in function monotonic>``, and
  pickles it by name, as it does the original.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.machinery
import importlib.util
import sys
import sysconfig
import threading
import time
import types
from collections.abc import Callable
from typing import Final

__all__ = ["bind", "layout_problem", "pristine_time"]

_METH_NOARGS: Final = 0x0004
_POINTER: Final = ctypes.sizeof(ctypes.c_void_p)
# PyCFunctionObject: the object header, then m_ml, m_self, m_module, m_weakreflist, vectorcall.
_FUNCTION_SIZE: Final = object.__basicsize__ + 5 * _POINTER


class _MethodDef(ctypes.Structure):
    _fields_ = (
        ("ml_name", ctypes.c_char_p),
        ("ml_meth", ctypes.c_void_p),
        ("ml_flags", ctypes.c_int),
        ("ml_doc", ctypes.c_char_p),
    )


# memmove called as a Python C-API function (PYFUNCTYPE): the call keeps the GIL, where
# ctypes.memmove, a plain C function, lets it go. So m_ml and m_self change in one step that no
# other thread of this interpreter can see halfway.
_MEMMOVE: Final = ctypes.PYFUNCTYPE(
    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t
)(ctypes.cast(ctypes.memmove, ctypes.c_void_p).value or 0)


def _store_pair(address: int, first: int, second: int) -> None:
    """Write two pointers side by side at ``address`` in one call that holds the GIL."""
    pair = (ctypes.c_void_p * 2)(first, second)
    _MEMMOVE(address, ctypes.addressof(pair), 2 * _POINTER)


@functools.cache
def _call_object_address() -> int | None:
    api = getattr(ctypes, "pythonapi", None)
    function = getattr(api, "PyObject_CallObject", None)
    if function is None:
        return None
    address: int | None = ctypes.cast(function, ctypes.c_void_p).value
    return address


_lock: Final = threading.RLock()  # re-entered: the layout read makes the pristine module
# id(function) -> (the function, the definition it was given, the hook) while bound.
_bound: dict[int, tuple[object, _MethodDef, object]] = {}
# id(function) -> (the function, the definition it is given whenever it is bound), kept for
# good: a call that read the definition just before an undo in another thread may still be on
# its way through it. One per function, the same at every bind, so a clock installed per test
# adds nothing here.
_definitions: dict[int, tuple[object, _MethodDef]] = {}
_pristine: list[types.ModuleType | None] = []


def pristine_time() -> types.ModuleType | None:
    """A second instance of the ``time`` module, made once, whose functions :func:`bind` never
    touches: its ``monotonic`` and ``perf_counter`` read the operating system's clocks at C
    speed whatever is bound. None where the interpreter hands back the same function objects
    (a module that cannot be instantiated twice)."""
    with _lock:
        if not _pristine:
            _pristine.append(_second_time_module())
        return _pristine[0]


def _second_time_module() -> types.ModuleType | None:
    spec = importlib.machinery.BuiltinImporter.find_spec("time")
    if spec is None or spec.loader is None:
        return None
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception:  # an interpreter that cannot make it: no pristine module, that is all
        return None
    if module is time or getattr(module, "monotonic", None) is time.monotonic:
        return None
    return module


@functools.cache
def _free_threaded() -> bool:
    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


# (id(function), name) -> (the function, kept so its id is not reused; the verdict on it). A
# function object's layout is fixed once it exists, so it is read once, while it is not bound
# (bound, its fields are this module's own); a clock installed per test then reads nothing.
_verdicts: dict[tuple[int, str], tuple[object, str | None]] = {}


def layout_problem(func: object, name: str) -> str | None:
    """Why :func:`bind` cannot rebind ``func`` (``time.<name>``) here, in words; None when it
    can. Reads memory only inside the function object and the definition it points at, once
    per function object."""
    key = (id(func), name)
    held = _verdicts.get(key)
    if held is not None and held[0] is func:
        return held[1]
    with _lock:  # read and kept in one step: no bind or undo can come between
        verdict = _read_layout(func, name)
        if id(func) not in _bound:
            _verdicts[key] = (func, verdict)
    return verdict


def _read_layout(func: object, name: str) -> str | None:
    if sys.implementation.name != "cpython":
        return f"this is {sys.implementation.name}, not CPython"
    if _free_threaded():
        return "this is a free-threaded build, where two stores cannot be made as one"
    if _call_object_address() is None:
        return "ctypes.pythonapi has no PyObject_CallObject here"
    if type(func) is not types.BuiltinFunctionType:
        return f"time.{name} is {type(func).__qualname__}, not the built-in function"
    if type(func).__basicsize__ != _FUNCTION_SIZE:
        return (
            f"a built-in function object is {type(func).__basicsize__} bytes here, "
            f"not the {_FUNCTION_SIZE} this layout check knows"
        )
    address = ctypes.c_void_p.from_address(id(func) + object.__basicsize__).value
    if not address:
        return f"time.{name} has no method definition"
    definition = _MethodDef.from_address(address)
    if definition.ml_name != name.encode() or definition.ml_flags != _METH_NOARGS:
        return f"time.{name}'s method definition is not the no-argument {name!r} one"
    owner = getattr(func, "__self__", None)
    if not isinstance(owner, types.ModuleType) or owner.__name__ != "time":
        return f"time.{name} is not bound to a time module"
    if ctypes.c_void_p.from_address(id(func) + object.__basicsize__ + _POINTER).value != id(owner):
        return f"time.{name} does not keep its module where this layout check looks"
    if pristine_time() is None:
        return "a second time module cannot be made here, to read real time from"
    return None


def bind(func: Callable[[], object], name: str, hook: Callable[[], object]) -> Callable[[], None]:
    """Make every call of the built-in ``func`` (``time.<name>``) call ``hook()`` instead, until
    the returned undo runs (safe to call twice). Raises ``RuntimeError`` when
    :func:`layout_problem` has a reason, or when ``func`` is bound already."""
    problem = layout_problem(func, name)
    if problem is not None:
        raise RuntimeError(f"cannot rebind time.{name}: {problem}")
    key = id(func)
    slots = id(func) + object.__basicsize__  # m_ml, then m_self
    method_slot = ctypes.c_void_p.from_address(slots)
    self_slot = ctypes.c_void_p.from_address(slots + _POINTER)
    with _lock:
        if key in _bound:
            raise RuntimeError(f"time.{name} is bound already")
        held = _definitions.get(key)
        if held is None or held[0] is not func:
            original = _MethodDef.from_address(method_slot.value or 0)
            definition = _MethodDef(
                original.ml_name, _call_object_address(), original.ml_flags, original.ml_doc
            )
            _definitions[key] = (func, definition)
        else:
            definition = held[1]
        original_address, module_address = method_slot.value, self_slot.value
        _bound[key] = (func, definition, hook)
        # m_self refers to the hook from now on: count that reference, as CPython counts the
        # module's, since the garbage collector follows m_self.
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(hook))
        _store_pair(slots, ctypes.addressof(definition), id(hook))

    def undo() -> None:
        with _lock:
            held = _bound.get(key)
            if held is None or held[2] is not hook:
                return
            _store_pair(slots, original_address or 0, module_address or 0)
            del _bound[key]
            ctypes.pythonapi.Py_DecRef(ctypes.py_object(hook))

    return undo
