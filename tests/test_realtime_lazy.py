"""The realtime machinery is imported at a test's first WebSocket connection, not when a
WebSocket library is: the openai SDK imports aiohttp, so without this every cassette test of a
suite that imports it paid for the realtime modules (about 9 ms, once a process) and a
session's WebSocket side, whether or not it opened a connection."""

from tests.support.plugin_projects import CHAT_CONFTEST

LAZY_PROBE = """
import sys

import aiohttp
import pytest
import websockets.asyncio.client
import websockets.sync.client


@pytest.mark.cassette
def test_http_only(chat):
    assert chat("hi")
    print(f"REALTIME_LOADED={'pytest_toolnexus._realtime.hub' in sys.modules}")


@pytest.mark.cassette
def test_a_connection_imports_it():
    assert "pytest_toolnexus._realtime.hub" not in sys.modules
    # This cassette holds no connection: the realtime machinery answers with a miss, which
    # fails the test (as a miss does), after saying what was imported.
    try:
        websockets.sync.client.connect("ws://127.0.0.1:9/v1/realtime")
    finally:
        print(f"AFTER_CONNECT={'pytest_toolnexus._realtime.hub' in sys.modules}")
"""


def test_no_connection_no_realtime_machinery(pytester, emulator):
    pytester.makeconftest(CHAT_CONFTEST)
    pytester.makepyfile(test_probe=LAZY_PROBE)
    recorded = pytester.runpytest_subprocess(
        "-p", "no:hypothesispytest", "--cassette-record=once", "-k", "http_only"
    )
    recorded.assert_outcomes(passed=1)

    # A fresh interpreter for each test, so that nothing else of the run imported it first.
    result = pytester.runpytest_subprocess("-p", "no:hypothesispytest", "-s", "-k", "http_only")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*REALTIME_LOADED=False*"])

    result = pytester.runpytest_subprocess("-p", "no:hypothesispytest", "-s", "-k", "connection")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*AFTER_CONNECT=True*", "*CassetteMissError*GET ws://127.0.0.1:9/v1/realtime*"]
    )
