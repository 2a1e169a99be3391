"""Nothing patched process-wide outlives the test or block that put it on, whatever goes wrong:
a cassette that fails to start, a session reopened after it closed, a transport that raises
while the session closes, two sessions closed out of order, a teardown that raises,
KeyboardInterrupt. Each case makes the failure happen, then checks that every patched object
is the original again and that the next test (or the next request) in the same process runs
clean: an httpx request with no cassette reaches a loopback server and gets its answer.
"""

import asyncio
import datetime
import threading
import time
import types

import pytest

from pytest_toolnexus import CassetteSession, build, use_cassette
from pytest_toolnexus._bridges.live import LiveTransport
from pytest_toolnexus._patching.httpx import patch_http_clients
from pytest_toolnexus._patching.install import (
    AlreadyInstalledError,
    Installation,
    SessionClosedError,
    State,
    installed,
)
from pytest_toolnexus._safety.tripwire import arm_tripwire
from pytest_toolnexus._timing.timepatch import install
from pytest_toolnexus._timing.virtual import VirtualClock
from pytest_toolnexus.conformance import served
from tests.support.plugin_projects import CHAT_CONFTEST
from tests.support.realtime import moves_with_real_time

# The objects the plugin may patch, captured before any test runs, and how to tell the virtual
# clock is still in: the clock readers keep their identity, so they are judged by what they read.
PATCHED = """
import _socket
import asyncio
import datetime
import socket
import sys
import time

import aiohttp
import httpx
import httpx._client
import httpx._transports.default
import httpx2
import httpx2._client
import httpx2._transports.default
import urllib3.connectionpool

def current():
    return {
        "aiohttp.ClientSession._request": aiohttp.ClientSession.__dict__["_request"],
        "urllib3.HTTPConnectionPool._make_request":
            urllib3.connectionpool.HTTPConnectionPool.__dict__["_make_request"],
        "httpx.Client._transport_for_url": httpx.Client.__dict__["_transport_for_url"],
        "httpx2.AsyncClient._transport_for_url":
            httpx2.AsyncClient.__dict__["_transport_for_url"],
        "httpx create_ssl_context": httpx._transports.default.create_ssl_context,
        "httpx2 create_ssl_context": httpx2._transports.default.create_ssl_context,
        "httpx get_environment_proxies": httpx._client.get_environment_proxies,
        "httpx2 get_environment_proxies": httpx2._client.get_environment_proxies,
        "socket.getaddrinfo": socket.getaddrinfo,
        "httpx.HTTPTransport.handle_request": httpx.HTTPTransport.__dict__["handle_request"],
        "httpx.AsyncHTTPTransport.handle_async_request":
            httpx.AsyncHTTPTransport.__dict__["handle_async_request"],
        "httpx2.HTTPTransport.handle_request": httpx2.HTTPTransport.__dict__["handle_request"],
        "httpx2.AsyncHTTPTransport.handle_async_request":
            httpx2.AsyncHTTPTransport.__dict__["handle_async_request"],
        "socket.socket.connect": socket.socket.connect,
        "socket.socket.connect_ex": socket.socket.connect_ex,
        "_socket.socket": _socket.socket,
        "time.sleep": time.sleep,
        "asyncio.sleep": asyncio.sleep,
        "time.monotonic": time.monotonic,
        "datetime.datetime": datetime.datetime,
    }


ORIGINAL = current()


def leaked():
    left = [name for name, value in current().items() if value is not ORIGINAL[name]]
    if any(type(f).__module__.startswith("pytest_toolnexus") for f in sys.meta_path):
        left.append("an import watch on sys.meta_path")
    # Outside a clock, time.monotonic reads real time plus what earlier clocks ran ahead
    # (docs/timing.md): it must move with real time, whatever it reads.
    import threading

    first, started = time.monotonic(), time.clock_gettime(time.CLOCK_MONOTONIC)
    threading.Event().wait(0.05)
    moved, took = time.monotonic() - first, time.clock_gettime(time.CLOCK_MONOTONIC) - started
    if abs(moved - took) >= took / 2:
        left.append("time.monotonic reads a virtual clock")
    time_machine = sys.modules.get("time_machine")
    if time_machine is not None and time_machine.traveller_stack:
        left.append("a time-machine travel")
    from pytest_toolnexus._patching.install import installed

    if installed() is not None:
        left.append(f"the installation of {installed()}")
    return left


# What an httpx request with no cassette gets from a loopback server.
def loopback_answer():
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer():
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\\r\\ncontent-length: 2\\r\\nconnection: close\\r\\n\\r\\nok")
        conn.close()

    thread = threading.Thread(target=answer)
    thread.start()
    try:
        return httpx.get(f"http://127.0.0.1:{port}/").text
    finally:
        thread.join(5)
        server.close()
"""

NEXT_TEST = """
from patched import leaked, loopback_answer


def test_the_next_test_runs_clean():
    assert leaked() == []
    assert loopback_answer() == "ok"
"""

# The same checks in this process, for the cases that do not need a second test to show.
patched = types.ModuleType("patched")
exec(compile(PATCHED, "patched", "exec"), patched.__dict__)


def assert_clean():
    """Every patched object is the original, and a request with no cassette gets through."""
    assert patched.leaked() == []
    assert patched.loopback_answer() == "ok"


@pytest.fixture
def leak_project(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(patched=PATCHED, test_z_next=NEXT_TEST)
    return pytester


def test_a_cassette_that_fails_to_start_takes_off_what_it_put_on(leak_project):
    # Given: a module-scoped use_cassette already holds the process, so the marked test's own
    # cassette is refused, naming both.
    cassettes = leak_project.path / "cassettes" / "test_a_holder"
    cassettes.mkdir(parents=True)
    build.build_cassette(cassettes / "test_cannot_start.msgpack", [])
    build.build_cassette(leak_project.path / "held.msgpack", [])
    leak_project.makepyfile(
        test_a_holder="""
        import pytest

        from pytest_toolnexus import use_cassette


        @pytest.fixture(scope="module")
        def held_clock():
            with use_cassette("held.msgpack"):
                yield


        @pytest.mark.cassette
        def test_cannot_start(held_clock):
            pass
        """
    )

    # The modules run in name order: the failing one, then the next test.
    result = leak_project.runpytest_subprocess("-p", "no:randomly")

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "E   *AlreadyInstalledError: cannot install the cassette "
            "cassettes/test_a_holder/test_cannot_start.msgpack of test "
            "test_a_holder.py::test_cannot_start: the cassette held.msgpack (started in "
            "test_a_holder.py::test_cannot_start (setup)) is installed in this process already."
            " Cassettes do not nest*"
        ]
    )


def test_a_clock_that_fails_after_the_http_patch_and_tripwire_takes_them_off(leak_project):
    # Given: a clock installed outside any cassette: it claims the process as a cassette does,
    # so the marked test's cassette is refused before it patches the http clients or arms the
    # tripwire.
    cassettes = leak_project.path / "cassettes" / "test_a_raw_clock"
    cassettes.mkdir(parents=True)
    build.build_cassette(cassettes / "test_cannot_start.msgpack", [])
    leak_project.makepyfile(
        test_a_raw_clock="""
        import socket

        import httpx
        import pytest

        from patched import ORIGINAL
        from pytest_toolnexus._timing.virtual import VirtualClock
        from pytest_toolnexus._timing.timepatch import install


        @pytest.fixture(scope="module")
        def raw_clock():
            undo = install(VirtualClock())
            yield
            undo()


        @pytest.mark.cassette
        def test_cannot_start(raw_clock):
            pass


        def test_the_http_patch_and_the_tripwire_are_off_while_the_clock_is_held(raw_clock):
            assert httpx.HTTPTransport.__dict__["handle_request"] is ORIGINAL[
                "httpx.HTTPTransport.handle_request"
            ]
            assert socket.socket.connect is ORIGINAL["socket.socket.connect"]
            assert socket.getaddrinfo is ORIGINAL["socket.getaddrinfo"]
        """
    )

    result = leak_project.runpytest_subprocess("-p", "no:randomly")

    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        ["E*cannot install the cassette *: the virtual clock VirtualClock(*) is installed in *"]
    )


def test_keyboard_interrupt_in_a_cassette_test_takes_off_what_it_put_on(leak_project):
    # Given: a marked test interrupted by Ctrl-C; pytest stops the run and tears down, and
    # what the process holds then is checked at the very end, with a request of its own.
    leak_project.makeconftest(
        """
        from patched import leaked, loopback_answer


        def pytest_unconfigure(config):
            print(f"after the run: leaked {leaked()}, loopback {loopback_answer()!r}")
        """
    )
    leak_project.makepyfile(
        test_a_interrupted="""
        import time

        import pytest


        @pytest.mark.cassette(record="all")
        def test_interrupted():
            time.sleep(0.01)
            raise KeyboardInterrupt
        """
    )

    result = leak_project.runpytest_subprocess("-p", "no:randomly", "-s")

    result.stdout.fnmatch_lines(["*KeyboardInterrupt*", "after the run: leaked [], loopback 'ok'"])


def test_a_teardown_that_raises_takes_off_what_it_put_on(leak_project, emulator):
    # Given: a recording whose write hook raises, so the cassette's teardown fails.
    leak_project.makeconftest(
        CHAT_CONFTEST
        + """

@pytest.hookimpl
def pytest_toolnexus_before_write(cassette, item):
    raise RuntimeError("the write hook broke")
"""
    )
    leak_project.makepyfile(
        test_a_recording="""
        import pytest


        @pytest.mark.cassette(record="all")
        def test_records(chat):
            assert chat("hello")
        """
    )

    result = leak_project.runpytest_subprocess("-p", "no:randomly")

    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_records*", "*the write hook broke*"])


# -- sessions have states -----------------------------------------------------------------------


@pytest.fixture
def empty(tmp_path):
    path = tmp_path / "empty.msgpack"
    build.build_cassette(path, [])
    return path


def real_monotonic_ok():
    return moves_with_real_time(time.monotonic)


def test_a_closed_session_cannot_be_reopened(empty):
    session = CassetteSession(empty)
    assert session.state is State.CREATED
    with session:
        assert session.state is State.OPEN
        time.sleep(1)
    assert session.state is State.CLOSED
    reopened = pytest.raises(SessionClosedError, match=r"is closed and cannot be started again")
    with reopened, session:
        pass
    with pytest.raises(RuntimeError, match="is closed"):
        session.start()
    # Nothing was installed by the refused starts.
    assert session.state is State.CLOSED
    assert real_monotonic_ok()
    assert_clean()
    install(VirtualClock())()


def test_a_closed_session_refuses_requests_with_a_typed_error(empty):
    session = CassetteSession(empty)
    transport = session.transport
    session.close()

    from pytest_toolnexus import TransportRequest

    with pytest.raises(SessionClosedError, match=r"is closed; GET https://x\.test/ came after"):
        transport(TransportRequest("GET", "https://x.test/"))


def test_starting_twice_installs_once(empty):
    session = CassetteSession(empty)
    session.start()
    try:
        session.start()
        time.sleep(2)
        assert session.elapsed == 2.0
    finally:
        session.close()
    assert real_monotonic_ok()
    assert datetime.datetime.now().year >= 2026
    assert_clean()


@pytest.mark.parametrize(
    "error", [asyncio.CancelledError, RuntimeError("the connection pool broke")], ids=repr
)
def test_an_aclose_that_raises_still_removes_the_clock(tmp_path, monkeypatch, error):
    async def failing_aclose(self):
        raise error

    monkeypatch.setattr(LiveTransport, "aclose", failing_aclose)
    sleep_before = time.sleep
    session = CassetteSession(tmp_path / "new.msgpack", record="all")

    async def main():
        async with session:
            assert time.sleep is not sleep_before  # the real clock's sleep watch is in
            assert session.async_transport is not None  # opens an async client of its own

    expected = error if isinstance(error, type) else type(error)
    with pytest.raises(expected):
        asyncio.run(main())

    assert session.state is State.CLOSED
    assert time.sleep is sleep_before
    assert real_monotonic_ok()
    assert_clean()
    install(VirtualClock())()  # the next session can install its clock


def test_keyboard_interrupt_in_a_block_takes_off_its_clock(empty):
    def interrupted():
        with use_cassette(empty):
            time.sleep(3)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted()

    assert_clean()


# -- one installation at a time, undone newest first on every path ------------------------------


def installed_like_the_plugin(session):
    """An installation holding the http patch and the session's clock, as the plugin's does."""
    installation = Installation(f"the cassette {session.path.name}").open()
    try:
        installation.add(patch_http_clients, session)
        session.start(installation)
    except BaseException:
        installation.close()
        raise
    return installation


def test_a_second_installation_is_refused_naming_both_and_changing_nothing(empty, tmp_path):
    other = tmp_path / "other.msgpack"
    build.build_cassette(other, [])
    first = installed_like_the_plugin(CassetteSession(empty))
    try:
        during = patched.current()
        second = CassetteSession(other)
        with pytest.raises(AlreadyInstalledError) as refused:
            installed_like_the_plugin(second)
        assert str(refused.value).startswith(
            "cannot install the cassette other.msgpack: the cassette empty.msgpack is installed "
            "in this process already. Cassettes do not nest"
        )
        with pytest.raises(AlreadyInstalledError, match=r"cannot install the cassette .*other"):
            second.start()  # the session's own installation is refused the same way
        assert second.state is State.CREATED
        assert patched.current() == during  # the refusals put nothing on
        assert installed() == "the cassette empty.msgpack"
    finally:
        first.close()
    assert_clean()


def test_two_sessions_on_two_threads_closed_out_of_order_leave_the_originals(empty, tmp_path):
    other = tmp_path / "other.msgpack"
    build.build_cassette(other, [])
    first, second = CassetteSession(empty), CassetteSession(other)
    steps = {name: threading.Event() for name in ("first in", "second tried", "first out")}
    seen: dict[str, object] = {}
    installations: dict[str, Installation] = {}

    def one():
        installations["first"] = installed_like_the_plugin(first)
        steps["first in"].set()
        steps["second tried"].wait(10)
        installations["first"].close()
        steps["first out"].set()

    def two():
        steps["first in"].wait(10)
        try:
            installed_like_the_plugin(second)
        except AlreadyInstalledError as exc:
            seen["refused"] = str(exc)
        steps["second tried"].set()
        steps["first out"].wait(10)
        installations["second"] = installed_like_the_plugin(second)  # free again

    threads = [threading.Thread(target=one), threading.Thread(target=two)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    assert "the cassette empty.msgpack is installed" in str(seen["refused"])
    # A stale second close of the first (from its thread, after the second went in) must not
    # take off or release what the second installed.
    installations["first"].close()
    first.close()
    assert installed() == "the cassette other.msgpack"
    assert patched.leaked() != []
    installations["second"].close()
    second.close()
    assert_clean()


def test_every_undo_runs_newest_first_though_one_raises(empty):
    order = []

    def patch(name, fail=False):
        def undo():
            order.append(name)
            if fail:
                raise RuntimeError(f"undoing {name} broke")

        return undo

    installation = Installation("a test").open()
    installation.add(patch_http_clients, CassetteSession(empty))
    installation.add(arm_tripwire, cassette="c.msgpack", mode="none")
    installation.add(patch, "first")
    installation.add(patch, "second", fail=True)
    installation.add(patch, "third")

    with pytest.raises(RuntimeError, match="undoing second broke"):
        installation.close()

    assert order == ["third", "second", "first"]
    assert installation.state is State.CLOSED
    assert_clean()  # the http patch and the tripwire came off, and the claim is given up


def test_a_patch_that_fails_to_go_on_takes_off_those_before_it(empty):
    def interrupted():
        raise KeyboardInterrupt

    installation = Installation("a test")

    def install_all():
        with installation:
            installation.add(patch_http_clients, CassetteSession(empty))
            installation.add(arm_tripwire, cassette="c.msgpack", mode="none")
            installation.add(interrupted)

    with pytest.raises(KeyboardInterrupt):
        install_all()

    assert_clean()
    with pytest.raises(SessionClosedError, match="cannot install a test again"):
        installation.open()
    with pytest.raises(RuntimeError, match="a test: it is closed, not open"):
        installation.add(patch_http_clients, CassetteSession(empty))
    assert_clean()


def test_the_conformance_kit_takes_off_its_http_patch_when_its_clock_is_refused(tmp_path):
    # Given: a clock installed outside any cassette: it claims the process as a cassette does,
    # so served() is refused before it patches anything, naming the clock.
    undo_clock = install(VirtualClock())
    try:
        refused = pytest.raises(
            RuntimeError,
            match=r"cannot install the conformance kit's cassette .*: the virtual clock "
            r"VirtualClock\(elapsed=0\.000s\) is installed in this process already",
        )
        with refused, served([build.openai_chat("hi")], tmp_path):
            pass
        assert (
            patched.current()["httpx.HTTPTransport.handle_request"]
            is (patched.ORIGINAL["httpx.HTTPTransport.handle_request"])
        )
        assert installed() == "the virtual clock VirtualClock(elapsed=0.000s)"  # still the clock's
    finally:
        undo_clock()
    assert_clean()


def test_the_conformance_kit_is_refused_while_a_cassette_is_installed(tmp_path, empty):
    refused = pytest.raises(AlreadyInstalledError, match=r"the conformance kit's cassette .*empty")
    with use_cassette(empty), refused, served([build.openai_chat("hi")], tmp_path):
        pass
    assert_clean()


def test_the_conformance_kit_takes_everything_off_when_its_block_raises(tmp_path):
    def failing_block():
        with served([build.openai_chat("hi")], tmp_path):
            assert patched.leaked() != []
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        failing_block()
    assert_clean()


def test_a_second_http_patch_is_refused_and_out_of_order_undos_leave_the_originals(tmp_path):
    import httpx
    import httpx2

    originals = [
        httpx.HTTPTransport.__dict__["handle_request"],
        httpx2.AsyncHTTPTransport.__dict__["handle_async_request"],
    ]
    first_path, second_path = tmp_path / "first.msgpack", tmp_path / "second.msgpack"
    build.build_cassette(first_path, [])
    build.build_cassette(second_path, [])
    first, second = CassetteSession(first_path), CassetteSession(second_path)

    undo_first = patch_http_clients(first)
    with pytest.raises(RuntimeError, match=r"second\.msgpack.*first\.msgpack already does"):
        patch_http_clients(second)
    undo_first()
    undo_second = patch_http_clients(second)  # free again
    undo_first()  # a stale second undo of the first must not release the second's hold
    with pytest.raises(RuntimeError, match="already does"):
        patch_http_clients(first)
    undo_second()

    assert [
        httpx.HTTPTransport.__dict__["handle_request"],
        httpx2.AsyncHTTPTransport.__dict__["handle_async_request"],
    ] == originals
    patch_http_clients(first)()
    assert_clean()


def test_an_aiohttp_stream_cancelled_mid_read_takes_off_what_it_put_on(leak_project, emulator):
    # Given: a recording whose aiohttp stream is cancelled after its first chunk, and a test
    # that imports nothing and fails at setup while its cassette is in.
    emulator.configure(events=5, delay=0.2)
    leak_project.makepyfile(
        test_a_cancelled="""
        import asyncio
        import os

        import aiohttp
        import pytest


        @pytest.mark.cassette(record="all")
        def test_cancelled(cassette):
            async def read():
                async with aiohttp.ClientSession() as session:
                    body = {"model": "m", "stream": True,
                            "messages": [{"role": "user", "content": "hi"}]}
                    url = os.environ["EMULATOR_URL"] + "/v1/chat/completions"
                    async with session.post(url, json=body) as response:
                        async for line in response.content:
                            if line.strip():
                                started.set()

            async def main():
                task = asyncio.ensure_future(read())
                await started.wait()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task

            started = asyncio.Event()
            asyncio.run(main())
            assert cassette.requests[0].replayed is False


        @pytest.fixture
        def broken():
            raise RuntimeError("setup broke")


        @pytest.mark.cassette(record="all")
        def test_setup_fails(cassette, broken):
            pass
        """
    )

    result = leak_project.runpytest_subprocess("-p", "no:randomly")

    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*setup broke*"])
