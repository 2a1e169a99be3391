"""A replay-only test's httpx and httpx2 clients read the proxy settings once per environment:
httpx walks every environment variable for each client made without a transport. What a
client gets is what httpx would have read, whatever the test sets, and the undo gives httpx its
own function back."""

import urllib.request

import httpx
import httpx2
import pytest

from pytest_toolnexus._patching import proxies
from tests.support.plugin_projects import CHAT_CONFTEST

PROXY_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture
def readings(monkeypatch):
    """How often urllib walked the environment for proxies, from a clean proxy set-up."""
    for name in PROXY_NAMES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    calls = []
    real = urllib.request.getproxies

    def counted():
        calls.append(1)
        return real()

    # httpx's and httpx2's _utils each bound getproxies by name at import.
    monkeypatch.setattr(httpx._utils, "getproxies", counted)
    monkeypatch.setattr(httpx2._utils, "getproxies", counted)
    monkeypatch.setattr(proxies, "_last", {})  # as a fresh process has it
    monkeypatch.setattr(proxies, "_scanned", [(), ()])
    return calls


def proxied(client):
    """The URL patterns the client sends through a proxy transport, and those it sends direct."""
    return sorted(
        (pattern.pattern, None if transport is None else transport._pool._proxy_url.host)
        for pattern, transport in client._mounts.items()
    )


def test_clients_of_one_environment_read_it_once(readings):
    undo = proxies.remember_env_proxies()
    try:
        clients = [httpx.Client() for _ in range(3)] + [httpx2.Client() for _ in range(2)]
    finally:
        undo()

    assert len(readings) == 2  # once per library, however many clients
    assert all(proxied(client) == [] for client in clients)
    for client in clients:
        client.close()


def test_a_changed_environment_is_read_again_and_gives_what_httpx_gives(readings, monkeypatch):
    undo = proxies.remember_env_proxies()
    try:
        before = httpx.Client()
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
        monkeypatch.setenv("NO_PROXY", "localhost")
        during = httpx.Client()
        again = httpx.Client()
        monkeypatch.delenv("HTTPS_PROXY")
        monkeypatch.delenv("NO_PROXY")
        after = httpx.Client()
    finally:
        undo()
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "localhost")
    unpatched = httpx.Client()

    assert len(readings) == 4  # before, the change, the change back, and the unpatched client
    assert proxied(before) == proxied(after) == []
    assert proxied(during) == proxied(again) == proxied(unpatched)
    assert proxied(during) == [("all://localhost", None), ("https://", b"127.0.0.1")]
    for client in (before, during, again, after, unpatched):
        client.close()


def test_other_variables_changing_do_not_make_clients_read_again(readings, monkeypatch):
    undo = proxies.remember_env_proxies()
    try:
        first = httpx.Client()
        # pytest sets PYTEST_CURRENT_TEST anew for each test; other variables come and go.
        monkeypatch.setenv("PYTEST_CURRENT_TEST", "test_x.py::test_one (call)")
        monkeypatch.setenv("TOOLNEXUS_UNRELATED", "1")
        second = httpx.Client()
        monkeypatch.setenv("PYTEST_CURRENT_TEST", "test_x.py::test_two (call)")
        monkeypatch.delenv("TOOLNEXUS_UNRELATED")
        third = httpx.Client()
        monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")  # urllib reads any case
        fourth = httpx.Client()
    finally:
        undo()

    assert len(readings) == 2  # the first client, and the one after the proxy was set
    assert proxied(first) == proxied(second) == proxied(third) == []
    assert proxied(fourth) == [("https://", b"127.0.0.1")]
    for client in (first, second, third, fourth):
        client.close()


def test_a_proxy_changing_value_or_the_cgi_rule_is_read_again(readings, monkeypatch):
    undo = proxies.remember_env_proxies()
    try:
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
        first = httpx.Client()
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.2:9")  # the same names, a new value
        second = httpx.Client()
        monkeypatch.setenv("REQUEST_METHOD", "GET")  # a CGI script: urllib drops HTTP_PROXY
        third = httpx.Client()
    finally:
        undo()

    assert len(readings) == 3
    assert proxied(first) == [("http://", b"127.0.0.1")]
    assert proxied(second) == [("http://", b"127.0.0.2")]
    assert proxied(third) == []
    for client in (first, second, third):
        client.close()


def test_each_client_gets_a_dict_of_its_own(readings):
    undo = proxies.remember_env_proxies()
    try:
        answers = []
        for _ in range(3):  # a reading, then two from the one kept
            answer = httpx._client.get_environment_proxies()
            answers.append(dict(answer))
            answer["https://"] = "http://changed.invalid"
    finally:
        undo()

    assert answers == [{}, {}, {}]
    assert len(readings) == 1


def test_a_reading_answers_only_for_the_function_that_made_it(readings, monkeypatch):
    def fake():
        return {"https://": "http://fake.invalid:1"}

    real = httpx._client.get_environment_proxies
    monkeypatch.setattr(httpx._client, "get_environment_proxies", fake)
    undo = proxies.remember_env_proxies()
    try:
        assert httpx._client.get_environment_proxies() == fake()
    finally:
        undo()
    monkeypatch.setattr(httpx._client, "get_environment_proxies", real)
    undo = proxies.remember_env_proxies()
    try:
        answer = httpx._client.get_environment_proxies()
    finally:
        undo()

    assert answer == {}  # not the fake's, though the environment is the same
    assert len(readings) == 1


def test_a_reading_taken_while_the_environment_changed_is_not_kept(readings, monkeypatch):
    real = urllib.request.getproxies
    changed = []

    def racing():
        # Another thread sets a proxy just as urllib reads: the reading has it, the key not.
        if not changed:
            changed.append(1)
            monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
        readings.append(1)
        return real()

    monkeypatch.setattr(httpx._utils, "getproxies", racing)
    undo = proxies.remember_env_proxies()
    try:
        during = httpx._client.get_environment_proxies()
        monkeypatch.delenv("HTTPS_PROXY")
        back = httpx._client.get_environment_proxies()
    finally:
        undo()

    assert during == {"https://": "http://127.0.0.1:9"}
    assert back == {}  # read again: the first reading was not kept for the proxy-less key
    assert len(readings) == 2


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_where_urllib_reads_system_settings_nothing_is_kept(readings, monkeypatch, platform):
    monkeypatch.setattr(proxies.sys, "platform", platform)
    original = httpx._client.get_environment_proxies
    undo = proxies.remember_env_proxies()
    try:
        assert httpx._client.get_environment_proxies is original
        for _ in range(2):
            httpx.Client().close()
    finally:
        undo()

    assert len(readings) == 2


def test_the_undo_puts_httpx_own_function_back(readings):
    original = httpx._client.get_environment_proxies
    undo = proxies.remember_env_proxies()
    assert httpx._client.get_environment_proxies is not original
    undo()
    undo()  # a second undo changes nothing

    assert httpx._client.get_environment_proxies is original
    httpx.Client().close()
    httpx.Client().close()
    assert len(readings) == 2  # each client reads the environment again


def test_without_the_environment_store_every_client_reads_it(readings, monkeypatch):
    monkeypatch.setattr(proxies, "_environment", lambda: None)  # not CPython's os.environ
    undo = proxies.remember_env_proxies()
    try:
        for _ in range(3):
            httpx.Client().close()
    finally:
        undo()

    assert len(readings) == 3


PROXY_PROBE = """
import httpx
import httpx._client
import pytest


@pytest.mark.cassette({options})
def test_probe(chat):
    remembered = hasattr(httpx._client.get_environment_proxies, "__wrapped__")
    print(f"REMEMBERED={{remembered}}")
    assert chat("hi")
"""


@pytest.mark.parametrize(
    ("options", "record", "expected"),
    [
        ("", "none", "REMEMBERED=True"),
        ("allow_hosts=['example.invalid']", "none", "REMEMBERED=False"),
        ("", "all", "REMEMBERED=False"),
    ],
    ids=["replay only", "allowed hosts", "recording"],
)
def test_the_plugin_remembers_only_where_no_connection_can_open(
    pytester, emulator, options, record, expected
):
    pytester.makeconftest(CHAT_CONFTEST)
    pytester.makepyfile(test_probe=PROXY_PROBE.format(options=options))
    assert pytester.runpytest("-p", "no:hypothesispytest", "--cassette-record=once").ret == 0

    result = pytester.runpytest("-p", "no:hypothesispytest", "-s", f"--cassette-record={record}")

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*{expected}*"])
