"""Rebinding one built-in function object (``_cfunc``): every reference to it follows, its
identity, repr and pickling never change, nothing shared with other function objects is
written (a second ``time`` module, a subinterpreter), and every undo restores it exactly."""

import importlib.machinery
import importlib.util
import subprocess
import sys
import sysconfig
import time
import types

import pytest

from pytest_toolnexus._timing import cfunc as _cfunc


class Hook(types.ModuleType):
    """A module object that answers calls, as the clock's readers are."""

    def __init__(self, answer):
        super().__init__("time")
        self.answer = answer

    def __call__(self):
        return self.answer()


def real_now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def second_time_module():
    spec = importlib.machinery.BuiltinImporter.find_spec("time")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def clock_module():
    """A time module of this test's own: the process's ``time.monotonic`` may be bound to the
    virtual clock's reader by an earlier test (it carries what clocks ran ahead), while these
    tests bind function objects themselves."""
    return second_time_module()


def test_every_reference_follows_and_the_undo_restores_it(clock_module):
    held = {"monotonic": clock_module.monotonic}
    undo = _cfunc.bind(clock_module.monotonic, "monotonic", Hook(lambda: 42.5))
    try:
        assert clock_module.monotonic() == 42.5
        assert held["monotonic"]() == 42.5
        assert held["monotonic"] is clock_module.monotonic
    finally:
        undo()
    assert abs(clock_module.monotonic() - real_now()) < 0.5
    undo()  # a second undo changes nothing
    assert abs(held["monotonic"]() - real_now()) < 0.5


def test_while_bound_the_builtin_keeps_its_repr_name_and_doc(clock_module):
    reader = clock_module.monotonic_ns
    undo = _cfunc.bind(reader, "monotonic_ns", Hook(lambda: 5))
    try:
        assert reader() == 5
        assert repr(reader) == "<built-in function monotonic_ns>"
        assert reader.__name__ == "monotonic_ns"
        assert reader.__self__.__name__ == "time"
        assert reader.__doc__ == time.monotonic_ns.__doc__
    finally:
        undo()
    assert reader.__self__ is clock_module
    assert repr(reader) == "<built-in function monotonic_ns>"


def test_the_pristine_module_reads_real_time_while_time_is_bound():
    pristine = _cfunc.pristine_time()
    assert pristine is not None
    assert pristine is not time
    assert pristine.perf_counter_ns is not time.perf_counter_ns
    assert abs(pristine.perf_counter_ns() / 1e9 - real_now()) < 0.5
    assert abs(pristine.monotonic() - real_now()) < 0.5


def test_a_second_time_module_object_keeps_working_on_real_time_while_bound(clock_module):
    # The static method table is never written: a time module made again (a re-import, an
    # importlib reload of a copy) has function objects of its own, untouched.
    undo = _cfunc.bind(clock_module.monotonic, "monotonic", Hook(lambda: 1.0))
    try:
        other = second_time_module()
        assert other.monotonic is not clock_module.monotonic
        assert abs(other.monotonic() - real_now()) < 0.5
        assert clock_module.monotonic() == 1.0
    finally:
        undo()


def test_binding_again_and_again_follows_each_hook_and_keeps_one_definition(clock_module):
    """A clock installed per test binds the same four functions each time: each hook is the
    one called, and what is kept for good (the definitions) does not grow with the binds."""
    func = clock_module.monotonic
    _cfunc.bind(func, "monotonic", Hook(lambda: -1.0))()
    kept = len(_cfunc._definitions)
    for n in range(50):
        undo = _cfunc.bind(func, "monotonic", Hook(lambda n=n: float(n)))
        try:
            assert func() == float(n)
        finally:
            undo()
        assert abs(func() - real_now()) < 0.5
    assert len(_cfunc._definitions) == kept


class OtherHook(types.ModuleType):
    """A hook that is no ``time`` module: while it is bound, the layout reads as unbindable."""

    def __init__(self):
        super().__init__("hook")

    def __call__(self):
        return 7.0


def test_a_layout_read_while_bound_is_not_kept_for_after_the_undo(clock_module):
    func = clock_module.monotonic
    undo = _cfunc.bind(func, "monotonic", OtherHook())
    try:
        _cfunc._verdicts.clear()  # read now, while bound, not from what was kept before
        assert _cfunc.layout_problem(func, "monotonic") is not None
    finally:
        undo()
    assert _cfunc.layout_problem(func, "monotonic") is None
    _cfunc.bind(func, "monotonic", Hook(lambda: 8.0))()


def test_binding_twice_is_refused_and_keeps_the_first(clock_module):
    undo = _cfunc.bind(clock_module.monotonic, "monotonic", Hook(lambda: 1.0))
    try:
        with pytest.raises(RuntimeError, match=r"time\.monotonic is bound already"):
            _cfunc.bind(clock_module.monotonic, "monotonic", Hook(lambda: 2.0))
        assert clock_module.monotonic() == 1.0
    finally:
        undo()


@pytest.mark.parametrize(
    ("func", "name", "reason"),
    [
        (time.sleep, "sleep", "not the no-argument 'sleep' one"),
        (lambda: 1.0, "monotonic", "is function, not the built-in function"),
        (len, "monotonic", "not the no-argument 'monotonic' one"),
        (time.perf_counter, "monotonic", "not the no-argument 'monotonic' one"),
    ],
)
def test_the_layout_check_says_why_a_function_cannot_be_bound(func, name, reason):
    problem = _cfunc.layout_problem(func, name)
    assert problem is not None
    assert reason in problem
    with pytest.raises(RuntimeError, match=f"cannot rebind time.{name}: "):
        _cfunc.bind(func, name, Hook(lambda: 0.0))


def test_the_layout_check_passes_for_the_four_readers_of_a_time_module_here(clock_module):
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        problem = _cfunc.layout_problem(clock_module.monotonic, "monotonic")
        assert problem is not None
        assert "free-threaded" in problem
        return
    for name in ("monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"):
        assert _cfunc.layout_problem(getattr(clock_module, name), name) is None


def _run_isolated(code):
    """``code`` in a fresh interpreter: what it printed, and how it ended (a crash there must
    not take the test run down with it)."""
    completed = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True
    )
    return completed.returncode, completed.stdout.strip(), completed.stderr


HOOK_SOURCE = (
    "import time, types\n"
    "from pytest_toolnexus._timing import cfunc\n"
    "class Hook(types.ModuleType):\n"
    "    def __call__(self):\n"
    "        return 123.0\n"
)


def test_a_rebound_clock_read_at_the_recursion_limit_raises_there_instead_of_crashing():
    code = HOOK_SOURCE + (
        "undo = cfunc.bind(time.monotonic, 'monotonic', Hook('time'))\n"
        "def deep(n):\n"
        "    try:\n"
        "        return deep(n + 1)\n"
        "    except RecursionError:\n"
        "        try:\n"
        "            return repr(time.monotonic())\n"
        "        except RecursionError:\n"
        "            return 'RecursionError'\n"
        "print(deep(0))\n"
        "undo()\n"
        "print(time.monotonic() > 0)\n"
    )
    code_, out, err = _run_isolated(code)

    assert code_ == 0, err
    assert out.splitlines()[-1] == "True"
    assert out.splitlines()[0] in {"RecursionError", "123.0"}


def test_a_subinterpreter_keeps_working_while_a_reader_is_bound():
    module = next(
        (name for name in ("_interpreters", "_xxsubinterpreters") if _has_module(name)), None
    )
    if module is None:
        pytest.skip(f"Python {sys.version.split()[0]} has no _interpreters module")
    code = HOOK_SOURCE + (
        f"import {module} as interpreters\n"
        "undo = cfunc.bind(time.monotonic, 'monotonic', Hook('time'))\n"
        "interp = interpreters.create()\n"
        "try:\n"
        "    interpreters.run_string(interp, 'import time; assert 0 < time.monotonic() != 123.0')\n"
        "finally:\n"
        "    interpreters.destroy(interp)\n"
        "print(time.monotonic())\n"
        "undo()\n"
    )
    code_, out, err = _run_isolated(code)

    assert (code_, out) == (0, "123.0"), err


def _has_module(name):
    return importlib.util.find_spec(name) is not None


def test_what_the_hook_raises_reaches_the_caller(clock_module):
    class Stop(Exception):
        pass

    def failing():
        raise Stop("the clock refused")

    held = clock_module.perf_counter
    undo = _cfunc.bind(held, "perf_counter", Hook(failing))
    try:
        with pytest.raises(Stop, match="the clock refused"):
            held()
    finally:
        undo()
    assert abs(held() - real_now()) < 0.5
