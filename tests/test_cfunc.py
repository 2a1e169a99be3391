"""Rebinding a built-in at its C definition (``_cfunc``): every reference follows, identity
never changes, the original stays reachable, and every undo restores the exact pointer."""

import time

import pytest

from pytest_toolnexus._timing import cfunc as _cfunc
from pytest_toolnexus._timing.timepatch import install
from pytest_toolnexus._timing.virtual import VirtualClock

HELD = {"monotonic": time.monotonic, "perf_counter_ns": time.perf_counter_ns}


def real_now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def test_every_reference_follows_and_the_undo_restores_it():
    undo = _cfunc.rebind(time.monotonic, lambda: 42.5)
    assert undo is not None
    try:
        assert time.monotonic() == 42.5
        assert HELD["monotonic"]() == 42.5
        assert HELD["monotonic"] is time.monotonic
    finally:
        undo()
    assert abs(time.monotonic() - real_now()) < 0.5
    undo()  # a second undo changes nothing
    assert abs(HELD["monotonic"]() - real_now()) < 0.5


def test_the_original_reads_real_time_while_rebound():
    original = _cfunc.original(time.perf_counter_ns)
    undo = _cfunc.rebind(time.perf_counter_ns, lambda: 7)
    assert undo is not None
    try:
        assert HELD["perf_counter_ns"]() == 7
        assert abs(original() / 1e9 - real_now()) < 0.5
        assert isinstance(original(), int)
    finally:
        undo()
    assert abs(original() / 1e9 - real_now()) < 0.5


def test_rebinding_twice_is_refused_and_keeps_the_first():
    undo = _cfunc.rebind(time.monotonic, lambda: 1.0)
    assert undo is not None
    try:
        with pytest.raises(RuntimeError, match=r"time\.monotonic is already rebound"):
            _cfunc.rebind(time.monotonic, lambda: 2.0)
        assert time.monotonic() == 1.0
    finally:
        undo()


def test_only_argument_free_builtins_are_supported():
    assert _cfunc.supported(time.monotonic)
    assert not _cfunc.supported(time.sleep)  # takes an argument, and must be able to raise
    assert not _cfunc.supported(lambda: 1.0)
    assert _cfunc.rebind(time.sleep, lambda: None) is None
    assert _cfunc.original(len) is len


def test_where_rebinding_is_unsupported_the_clock_patches_the_names(monkeypatch):
    monkeypatch.setattr(_cfunc, "rebind", lambda func, replacement: None)
    clock = VirtualClock(epoch=0.0)
    uninstall = install(clock)
    try:
        assert time.monotonic is not HELD["monotonic"]
        time.sleep(3)
        assert time.monotonic() == clock.now()
        assert time.perf_counter_ns() == int(clock.now() * 1e9)
    finally:
        uninstall()
    assert time.monotonic is HELD["monotonic"]
    assert time.perf_counter_ns is HELD["perf_counter_ns"]


def _run_isolated(code):
    """``code`` in a fresh interpreter: what it printed, and how it ended (a crash there must
    not take the test run down with it)."""
    import subprocess
    import sys

    completed = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True
    )
    return completed.returncode, completed.stdout.strip(), completed.stderr


def test_a_rebound_clock_read_at_the_recursion_limit_raises_there_instead_of_crashing():
    # Found by CI: the first rebinding went through a ctypes callback, which cannot raise; read
    # at the recursion limit it handed CPython an unset result, and the worker segfaulted.
    code = (
        "import time\n"
        "from pytest_toolnexus._timing import cfunc\n"
        "undo = cfunc.rebind(time.monotonic, lambda: 123.0)\n"
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

    assert (code_, out.splitlines()) == (0, ["RecursionError", "True"]), err


def test_what_the_replacement_raises_reaches_the_caller():
    class Stop(Exception):
        pass

    def failing():
        raise Stop("the clock refused")

    undo = _cfunc.rebind(time.perf_counter, failing)
    assert undo is not None
    try:
        with pytest.raises(Stop, match="the clock refused"):
            HELD_PERF()
    finally:
        undo()
    assert abs(time.perf_counter() - time.perf_counter()) < 0.5


HELD_PERF = time.perf_counter


def test_the_builtin_keeps_its_module_and_repr_once_undone():
    undo = _cfunc.rebind(time.monotonic_ns, lambda: 5)
    assert undo is not None
    assert time.monotonic_ns() == 5
    undo()

    assert time.monotonic_ns.__self__ is time
    assert repr(time.monotonic_ns) == "<built-in function monotonic_ns>"
