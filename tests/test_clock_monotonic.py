"""The virtual clock keeps ``monotonic``'s promise (issue 27, docs/timing.md "At the edges of a
test"): no reading, in any thread, is smaller than an earlier one, across install, virtual
sleeps, uninstall and install again; other time module objects and subinterpreters keep
working; the waiting machinery keeps its own steady clock; and where the built-ins cannot be
rebound, the clock falls back to names, saying so."""

import itertools
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from pytest_toolnexus import Cassette, use_cassette
from pytest_toolnexus._timing.timepatch import install
from pytest_toolnexus._timing.virtual import VirtualClock
from tests.support.realtime import moves_with_real_time

READERS = ("monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns")


@pytest.fixture
def empty_cassette(tmp_path):
    path = tmp_path / "empty.msgpack"
    Cassette(path, []).save()
    return path


def run_python(code, *args):
    completed = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return completed.returncode, completed.stdout, completed.stderr


class Watcher(threading.Thread):
    """Reads every monotonic reader without pause, and notes each reading smaller than the
    one before it."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.backwards = []
        self.readings = 0

    def run(self):
        readers = [getattr(time, name) for name in READERS]
        last = [reader() for reader in readers]
        while not self.stop.is_set():
            for index, reader in enumerate(readers):
                value = reader()
                if value < last[index]:
                    self.backwards.append((READERS[index], last[index], value))
                last[index] = value
            self.readings += 1


def test_no_reading_is_ever_smaller_across_install_sleeps_uninstall_and_install_again():
    watcher = Watcher()
    watcher.start()
    seen = []

    def note():
        seen.append(tuple(getattr(time, name)() for name in READERS))

    try:
        for _ in range(3):
            note()
            uninstall = install(VirtualClock())
            note()
            time.sleep(100)  # virtual: instant, and reads as 100 s
            note()
            uninstall()
            note()
            # Real time is now about 100 s behind the clock's last reading.
            threading.Event().wait(0.01)
            note()
    finally:
        watcher.stop.set()
        watcher.join(10)

    for earlier, later in itertools.pairwise(seen):
        assert all(b >= a for a, b in zip(earlier, later, strict=True)), (earlier, later)
    # The three sleeps of 100 s all show, in the main thread's readings.
    assert seen[-1][0] - seen[0][0] >= 300
    assert watcher.backwards == []
    assert watcher.readings > 100


def test_a_block_that_ran_ahead_leaves_readers_that_keep_the_lead_and_move_with_real_time(
    empty_cassette,
):
    with use_cassette(empty_cassette, record="none"):
        time.sleep(100)
        inside = time.monotonic()
    after = time.monotonic()

    assert after >= inside  # the case: it was 99.93 s smaller
    assert moves_with_real_time(time.monotonic)
    assert moves_with_real_time(time.perf_counter)


def test_a_clock_that_never_ran_ahead_puts_the_builtins_back_as_they_were():
    code, out, err = run_python(
        """
        import time
        from pytest_toolnexus._timing.timepatch import install
        from pytest_toolnexus._timing.virtual import VirtualClock
        uninstall = install(VirtualClock())
        bound = time.monotonic.__self__ is not time
        uninstall()
        print(bound, time.monotonic.__self__ is time, time.perf_counter_ns.__self__ is time)
        uninstall = install(VirtualClock())
        time.sleep(1)
        uninstall()
        print(time.monotonic.__self__ is time, repr(time.monotonic))
        """
    )
    assert code == 0, err
    assert out.splitlines() == ["True True True", "False <built-in function monotonic>"]


def test_inside_a_cassette_the_builtins_keep_their_repr_identity_and_pickle_by_name(
    empty_cassette,
):
    import pickle
    from time import monotonic as held

    with use_cassette(empty_cassette, record="none"):
        time.sleep(3)
        assert held is time.monotonic
        assert repr(time.monotonic) == "<built-in function monotonic>"
        assert time.monotonic.__self__.__name__ == "time"
        assert pickle.loads(pickle.dumps(time.monotonic)) is time.monotonic


def test_a_second_time_module_object_keeps_working_while_a_cassette_is_in(empty_cassette):
    import importlib.machinery
    import importlib.util

    with use_cassette(empty_cassette, record="none"):
        time.sleep(50)
        spec = importlib.machinery.BuiltinImporter.find_spec("time")
        other = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(other)
        # Its functions are objects of their own, never rebound: they read real time.
        assert abs(other.monotonic() - time.clock_gettime(time.CLOCK_MONOTONIC)) < 0.5
        assert other.perf_counter_ns() > 0


def test_a_subinterpreter_keeps_working_while_a_cassette_is_in(tmp_path):
    import importlib.util

    module = next(
        (n for n in ("_interpreters", "_xxsubinterpreters") if importlib.util.find_spec(n)), None
    )
    if module is None:
        pytest.skip(f"Python {sys.version.split()[0]} has no _interpreters module")
    path = tmp_path / "empty.msgpack"
    Cassette(path, []).save()
    code, out, err = run_python(
        f"""
        import sys, time
        import {module} as interpreters
        from pytest_toolnexus import use_cassette
        with use_cassette(sys.argv[1], record="none"):
            time.sleep(10)
            interp = interpreters.create()
            try:
                interpreters.run_string(
                    interp, "import time; assert time.monotonic() > 0; time.perf_counter_ns()"
                )
            finally:
                interpreters.destroy(interp)
            print("ok", time.monotonic() > 0)
        """,
        str(path),
    )
    assert code == 0, err
    assert out.split() == ["ok", "True"]


def test_where_the_layout_check_fails_the_clock_patches_names_and_says_so_once(tmp_path):
    # A tracer that wrapped the time functions before the cassette started: they are no
    # longer the built-ins, so the check fails for real, and the clock falls back to names.
    path = tmp_path / "empty.msgpack"
    Cassette(path, []).save()
    code, out, err = run_python(
        """
        import sys, time, warnings
        for name in ("monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"):
            real = getattr(time, name)
            setattr(time, name, (lambda real: lambda: real())(real))
        wrapped = time.monotonic
        from pytest_toolnexus import VirtualClockWarning, use_cassette
        readings = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                with use_cassette(sys.argv[1], record="none") as session:
                    readings.append(time.monotonic())
                    time.sleep(100)
                    readings.append(time.monotonic())
                    readings.append(time.perf_counter_ns())
                readings.append(time.monotonic())
        ours = [w for w in caught if issubclass(w.category, VirtualClockWarning)]
        print(len(ours))
        print(ours[0].message)
        print(readings[1] - readings[0], readings == sorted(readings[:2]) + readings[2:])
        mono = [r for i, r in enumerate(readings) if i % 4 != 2]
        print(all(b >= a for a, b in zip(mono, mono[1:])))
        print(wrapped() > 0, time.monotonic is not wrapped)
        """,
        str(path),
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "1"
    assert "time.monotonic, time.monotonic_ns, time.perf_counter, time.perf_counter_ns" in lines[1]
    assert "through the time module only" in lines[1]
    assert "is function, not the built-in function" in lines[1]
    assert "from time import monotonic" in lines[1]
    assert lines[2].startswith("100.0 ")
    assert lines[3] == "True"  # never smaller, in the fallback too
    assert lines[4] == "True True"


# -- the machinery keeps a steady clock: things that straddle a cassette test ---------------------

STRADDLING_TESTS = """
import asyncio
import threading
import time

import httpx
import pytest

RESULTS = {}
REAL = time.clock_gettime
MONO = time.CLOCK_MONOTONIC


@pytest.fixture(scope="session")
def client(loopback):
    with httpx.Client(base_url=loopback) as client:
        yield client


def test_before(client):
    assert client.get("/hello").text == "hello 1"
    # An asyncio timeout of 1.5 s in a loop of its own thread, that runs across the next test.
    def run():
        async def wait():
            started = REAL(MONO)
            try:
                await asyncio.wait_for(asyncio.Event().wait(), timeout=1.5)
            except TimeoutError:
                RESULTS["timeout after"] = REAL(MONO) - started
        asyncio.run(wait())
    RESULTS["thread"] = threading.Thread(target=run)
    RESULTS["thread"].start()
    RESULTS["monotonic before"] = time.monotonic()


@pytest.mark.cassette
def test_cassette(cassette):
    time.sleep(100)
    asyncio.run(asyncio.sleep(200))
    assert cassette.elapsed == 300
    RESULTS["monotonic inside"] = time.monotonic()


def test_after(client):
    assert time.monotonic() >= RESULTS["monotonic inside"] >= RESULTS["monotonic before"] + 300
    assert client.get("/hello").text == "hello 2"
    RESULTS["thread"].join(10)
    # It fired after its 1.5 s of real time: not at once, and not 300 s late.
    assert 1.4 <= RESULTS["timeout after"] < 5
"""

STRADDLING_CONFTEST = """
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class Hello(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    count = 0

    def do_GET(self):
        Hello.count += 1
        body = f"hello {Hello.count}".encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def loopback():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
"""


def test_a_keep_alive_client_and_an_asyncio_timeout_straddling_a_cassette_test_behave(
    pytester,
):
    pytester.makeconftest(STRADDLING_CONFTEST)
    pytester.makepyfile(test_straddle=STRADDLING_TESTS)
    folder = pytester.path / "cassettes" / "test_straddle"
    folder.mkdir(parents=True)
    Cassette(folder / "test_cassette.msgpack", []).save()

    result = pytester.runpytest_subprocess("-p", "no:randomly", "--cassette-allow-hosts=127.0.0.1")

    result.assert_outcomes(passed=3)


# -- issue 23, row 11: anyio first imported while the clock is in ------------------------------

ANYIO_FIRST_IMPORTED = """
import asyncio, sys, time
from pytest_toolnexus import use_cassette

# The plugin imports anyio itself; its asyncio backend comes with the first use.
assert "anyio._backends._asyncio" not in sys.modules


async def main():
    import anyio

    await anyio.sleep(5)
    await asyncio.sleep(2)
    return "ok"


with use_cassette(sys.argv[1], record="none") as session:
    print(asyncio.run(main()), session.clock.elapsed)

import anyio


async def real_wait():
    await anyio.sleep(0.05)


started = time.clock_gettime(time.CLOCK_MONOTONIC)
asyncio.run(real_wait())
print(time.clock_gettime(time.CLOCK_MONOTONIC) - started >= 0.045)
"""


def test_anyio_first_imported_under_the_clock_sleeps_virtually_then_for_real_after(tmp_path):
    path = tmp_path / "empty.msgpack"
    Cassette(path, []).save()

    code, out, err = run_python(ANYIO_FIRST_IMPORTED, str(path))

    assert code == 0, err
    assert out.splitlines() == ["ok 7.0", "True"]


def test_anyio_first_imported_by_a_cassette_test_with_the_anyio_plugin_off(pytester):
    pytester.makepyfile(
        test_late_anyio="""
        import asyncio
        import sys

        import pytest


        @pytest.mark.cassette
        def test_sleeps(cassette):
            assert "anyio._backends._asyncio" not in sys.modules

            async def main():
                import anyio

                await anyio.sleep(5)

            asyncio.run(main())
            assert cassette.elapsed == 5
        """
    )
    folder = pytester.path / "cassettes" / "test_late_anyio"
    folder.mkdir(parents=True)
    Cassette(folder / "test_sleeps.msgpack", []).save()

    result = pytester.runpytest_subprocess("-p", "no:anyio", "-p", "no:randomly")

    result.assert_outcomes(passed=1)


# -- found by review: the edges of the edges ---------------------------------------------------


def test_a_sleep_too_long_for_any_clock_is_refused_as_the_real_one_is_and_moves_nothing():
    uninstall = install(VirtualClock())
    try:
        with pytest.raises(OverflowError, match="timestamp out of range"):
            time.sleep(1e300)
        with pytest.raises(ValueError, match="NaN"):
            time.sleep(float("nan"))
        inside = time.monotonic()
    finally:
        uninstall()
    after = time.monotonic()
    assert inside <= after < inside + 3600
    assert isinstance(time.monotonic_ns(), int)
    assert moves_with_real_time(time.monotonic)


def test_an_async_sleep_forever_waits_to_be_cancelled_and_moves_nothing(empty_cassette):
    import asyncio

    async def main():
        forever = asyncio.ensure_future(asyncio.sleep(float("inf")))
        await asyncio.sleep(2)
        # The main task waits on real machinery while the other sleeps forever.
        await asyncio.get_running_loop().run_in_executor(None, threading.Event().wait, 0.05)
        forever.cancel()
        with pytest.raises(asyncio.CancelledError):
            await forever

    with use_cassette(empty_cassette, record="none") as session:
        asyncio.run(main())
        assert session.elapsed == 2
        inside = time.monotonic()
    assert inside <= time.monotonic() < inside + 3600
    assert moves_with_real_time(time.monotonic)


def test_a_clock_that_already_ran_continues_from_the_current_reading():
    clock = VirtualClock()
    clock.advance(30)  # a replay before the clock was installed
    before = time.monotonic()
    uninstall = install(clock)
    try:
        at_install = time.monotonic()
        time.sleep(1)
        after_sleep = time.monotonic()
    finally:
        uninstall()
    assert before <= at_install < before + 5  # no 30 s jump
    assert after_sleep - at_install == pytest.approx(1.0)


def test_a_start_that_fails_on_its_warning_leaves_the_clock_as_it_was(tmp_path):
    # filterwarnings = error turns the fallback's VirtualClockWarning into an error: the start
    # fails, and nothing of the clock is left behind.
    path = tmp_path / "empty.msgpack"
    Cassette(path, []).save()
    code, out, err = run_python(
        """
        import sys, threading, time, warnings
        real = time.monotonic
        time.monotonic = lambda: real()
        wrapped = time.monotonic
        from pytest_toolnexus import VirtualClockWarning, use_cassette
        warnings.simplefilter("error", VirtualClockWarning)
        try:
            with use_cassette(sys.argv[1], record="none"):
                pass
        except VirtualClockWarning as exc:
            print("refused")
        first = time.monotonic()
        threading.Event().wait(0.1)
        print(time.monotonic is wrapped, time.monotonic() - first >= 0.09)
        """,
        str(path),
    )
    assert code == 0, err
    assert out.split() == ["refused", "True", "True"]


MACHINERY_IMPORTED_INSIDE = """
import multiprocessing, select, sys, time
from pytest_toolnexus import use_cassette

assert "trio" not in sys.modules


def real():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


with use_cassette(sys.argv[1], record="none") as session:
    time.sleep(60)
    import trio  # first imported while the clock is in, as anyio's trio backend does

    async def bounded():
        with trio.move_on_after(0.3):
            await trio.sleep_forever()

    started = real()
    trio.run(bounded)
    print("trio", 0.25 < real() - started < 30)
    # The child waits for real (time.sleep is the clock's in a forked child too).
    fork = multiprocessing.get_context("fork")
    process = fork.Process(target=select.select, args=([], [], [], 30))
    process.start()
    started = real()
    process.join(timeout=0.5)
    print("join", 0.45 < real() - started < 30, process.is_alive())
    process.kill()
    process.join()
"""


def test_machinery_first_imported_inside_a_cassette_keeps_real_timeouts(tmp_path):
    path = tmp_path / "empty.msgpack"
    Cassette(path, []).save()

    code, out, err = run_python(MACHINERY_IMPORTED_INSIDE, str(path))

    assert code == 0, err
    assert out.splitlines() == ["trio True", "join True True"]
