"""While a cassette records, traffic that goes around it fails the test, naming who sent it.

The recording-side twin of the replay tripwire (same implementation, tests/test_tripwire.py):
a connection that no served client makes would not be recorded, and the replay would fail
without it. The check runs before the host name is looked up, so no test here needs a network.
"""

import pytest

pytest_plugins = ["pytester"]


def literal(text):
    """``text`` as an fnmatch pattern that matches only itself."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


RAW = """
import http.client
import socket

import pytest


@pytest.mark.cassette(record="all")
def test_http_client():
    connection = http.client.HTTPConnection("api.example.com", 80, timeout=2)
    connection.request("GET", "/v1/models")


@pytest.mark.cassette(record="all")
def test_caught():
    try:
        socket.create_connection(("api.example.com", 443), timeout=2)
    except OSError:
        pass  # the code under test swallows the error: the teardown still fails
"""


@pytest.fixture
def project(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    return pytester


def test_a_raw_http_client_call_while_recording_fails_with_the_library_host_and_fix(project):
    project.makepyfile(test_raw=RAW)

    result = project.runpytest("-p", "no:randomly")

    result.assert_outcomes(failed=1, passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "E *NetworkBlockedError: "
            + literal(
                "pytest-toolnexus: http.client opened a connection to "
                "api.example.com:80 that cassette cassettes/test_raw/test_http_client.msgpack does "
                "not serve, while it records (record mode 'all'): the traffic would not be "
                "recorded, and the replay would fail without it. Send the request through a client "
                "the cassette serves (httpx, httpx2, aiohttp, urllib3, requests, botocore), or let "
                "the host through with "
                "--cassette-allow-hosts=api.example.com (allow_hosts=['api.example.com'] on the "
                "marker), or make this a warning with unserved='warn' on the marker (ini: "
                "cassette_unserved = warn)."
            ),
        ]
    )
    # A swallowed error is still reported, at teardown, naming the raw socket.
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_caught*",
            "*test_raw.py::test_caught: pytest-toolnexus: a raw socket opened a connection to "
            "api.example.com:443 that cassette cassettes/test_raw/test_caught.msgpack does not "
            "serve*",
        ]
    )


def test_warn_lets_the_connection_through_and_warns(project):
    project.makepyfile(
        test_warn="""
        import socket

        import pytest


        @pytest.mark.cassette(record="all", unserved="warn")
        def test_warned():
            try:  # let through: whether anything answers there is the network's business
                socket.create_connection(("203.0.113.7", 9), timeout=0.2).close()
            except OSError:
                pass
        """
    )

    result = project.runpytest("-p", "no:randomly")

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*UnservedTrafficWarning: test_warn.py::test_warned: pytest-toolnexus: a raw socket "
            "opened a connection to 203.0.113.7:9 that cassette *",
        ]
    )


def test_the_ini_key_sets_warn_and_loopback_and_allowed_hosts_pass(project):
    project.makeini("[pytest]\ncassette_unserved = warn\n")
    project.makepyfile(
        test_exempt="""
        import socket

        import pytest


        @pytest.mark.cassette(record="all")
        def test_loopback_is_exempt():
            server = socket.create_server(("127.0.0.1", 0))
            with server, socket.create_connection(server.getsockname(), timeout=2):
                pass


        @pytest.mark.cassette(record="all", allow_hosts=["203.0.113.8"], unserved="fail")
        def test_allowed_host_is_exempt():
            try:
                socket.create_connection(("203.0.113.8", 9), timeout=0.2).close()
            except OSError as exc:
                assert "pytest-toolnexus" not in str(exc)


        @pytest.mark.cassette(record="all")
        def test_warned_by_the_ini():
            try:
                socket.create_connection(("203.0.113.9", 9), timeout=0.2).close()
            except OSError:
                pass
        """
    )

    result = project.runpytest("-p", "no:randomly", "-W", "error::UserWarning")

    # The exempt tests pass; the warning, made an error by -W, names the one that was not.
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        ["*ERROR at teardown of test_warned_by_the_ini*", "*UnservedTrafficWarning*203.0.113.9:9*"]
    )


def test_an_unknown_policy_is_a_usage_error(project):
    project.makepyfile(
        test_bad="""
        import pytest


        @pytest.mark.cassette(record="all", unserved="ignore")
        def test_it():
            pass
        """
    )

    result = project.runpytest("-p", "no:randomly")

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*unserved='ignore' is not one of fail, warn*"])
