"""Nothing patched process-wide outlives the test or block that put it on, whatever goes wrong:
a cassette that fails to start, a session reopened after it closed, a transport that raises
while the session closes. Each case makes the failure happen, then checks that every patched
object is the original again and that the next test in the same process runs clean.
"""

import asyncio
import datetime
import time

import pytest

from pytest_toolnexus import CassetteSession, build
from pytest_toolnexus._live import LiveTransport
from pytest_toolnexus._timepatch import install
from pytest_toolnexus._virtual import VirtualClock
from tests.support.plugin_projects import CHAT_CONFTEST

# The objects the plugin may patch, captured before any test runs, and how to tell the virtual
# clock is still in: the clock readers keep their identity, so they are judged by what they read.
PATCHED = """
import datetime
import socket
import sys
import time

import aiohttp
import httpx
import httpx2
import urllib3.connectionpool

def current():
    return {
        "aiohttp.ClientSession._request": aiohttp.ClientSession.__dict__["_request"],
        "urllib3.HTTPConnectionPool._make_request":
            urllib3.connectionpool.HTTPConnectionPool.__dict__["_make_request"],
        "httpx.Client._transport_for_url": httpx.Client.__dict__["_transport_for_url"],
        "httpx2.AsyncClient._transport_for_url":
            httpx2.AsyncClient.__dict__["_transport_for_url"],
        "socket.getaddrinfo": socket.getaddrinfo,
        "httpx.HTTPTransport.handle_request": httpx.HTTPTransport.__dict__["handle_request"],
        "httpx.AsyncHTTPTransport.handle_async_request":
            httpx.AsyncHTTPTransport.__dict__["handle_async_request"],
        "httpx2.HTTPTransport.handle_request": httpx2.HTTPTransport.__dict__["handle_request"],
        "httpx2.AsyncHTTPTransport.handle_async_request":
            httpx2.AsyncHTTPTransport.__dict__["handle_async_request"],
        "socket.socket.connect": socket.socket.connect,
        "time.sleep": time.sleep,
        "time.monotonic": time.monotonic,
        "datetime.datetime": datetime.datetime,
    }


ORIGINAL = current()


def leaked():
    left = [name for name, value in current().items() if value is not ORIGINAL[name]]
    if any(type(f).__module__.startswith("pytest_toolnexus") for f in sys.meta_path):
        left.append("an import watch on sys.meta_path")
    if abs(time.monotonic() - time.clock_gettime(time.CLOCK_MONOTONIC)) > 5:
        left.append("time.monotonic reads a virtual clock")
    return left
"""

NEXT_TEST = """
import socket
import threading

import httpx

from patched import leaked


def test_the_next_test_runs_clean():
    assert leaked() == []
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
        assert httpx.get(f"http://127.0.0.1:{port}/").text == "ok"
    finally:
        thread.join(5)
        server.close()
"""


@pytest.fixture
def leak_project(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(patched=PATCHED, test_z_next=NEXT_TEST)
    return pytester


def test_a_cassette_that_fails_to_start_takes_off_what_it_put_on(leak_project):
    # Given: a module-scoped use_cassette already holds the clock, so the marked test's own
    # cassette cannot start its clock after patching the http clients and arming the tripwire.
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
    result.stdout.fnmatch_lines(["*cannot install VirtualClock*is already installed*"])


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
    return abs(time.monotonic() - time.clock_gettime(time.CLOCK_MONOTONIC)) < 5


def test_a_closed_session_cannot_be_reopened(empty):
    session = CassetteSession(empty)
    with session:
        time.sleep(1)
    with pytest.raises(RuntimeError, match=r"is closed and cannot be started again.*new one"):
        session.__enter__()
    with pytest.raises(RuntimeError, match="is closed"):
        session.start()
    # Nothing was installed by the refused start.
    assert real_monotonic_ok()
    install(VirtualClock())()


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


class CancellingLive(LiveTransport):
    async def aclose(self):
        raise asyncio.CancelledError


def test_a_cancelled_aclose_still_removes_the_clock(tmp_path, monkeypatch):
    monkeypatch.setattr(LiveTransport, "aclose", CancellingLive.aclose)
    sleep_before = time.sleep
    session = CassetteSession(tmp_path / "new.msgpack", record="all")

    async def main():
        async with session:
            assert time.sleep is not sleep_before  # the real clock's sleep watch is in
            assert session.async_transport is not None  # opens an async client of its own

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())

    assert time.sleep is sleep_before
    assert real_monotonic_ok()
    install(VirtualClock())()  # the next session can install its clock


# -- one owner for the http patch ---------------------------------------------------------------


def test_a_second_http_patch_is_refused_and_out_of_order_undos_leave_the_originals(tmp_path):
    import httpx
    import httpx2

    from pytest_toolnexus._patch import patch_http_clients

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
