"""A replay-only test's httpx and httpx2 clients share one default TLS context, made once:
building one per client cost ~20 ms, more than the rest of a replayed test together. Any
other TLS set-up, a recording test, and a test with allowed hosts are left as they were."""

import ssl

import httpx
import httpx2
import pytest

from pytest_toolnexus._patching import tls
from tests.support.plugin_projects import CHAT_CONFTEST


@pytest.fixture
def made(monkeypatch):
    """Every default context httpx's own code builds (certifi's bundle loaded)."""
    calls = []
    real = ssl.create_default_context

    def counted(*args, **kwargs):
        calls.append(kwargs.get("cafile") or kwargs.get("capath"))
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counted)
    monkeypatch.setattr(tls, "_made", {})  # as a fresh process has it
    return calls


def context_of(client):
    return client._transport._pool._ssl_context  # httpcore's pool keeps the one it was given


def test_clients_made_while_shared_get_one_default_context_made_once(made):
    undo = tls.share_default_tls()
    try:
        clients = [httpx.Client() for _ in range(3)] + [httpx2.Client() for _ in range(2)]
    finally:
        undo()

    sync = {id(context_of(c)) for c in clients[:3]}
    assert len(sync) == 1
    assert len({id(context_of(c)) for c in clients[3:]}) == 1
    assert len(made) == 2  # one per library, however many clients
    context = context_of(clients[0])
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    for client in clients:
        client.close()


def test_another_tls_set_up_is_left_to_httpx(made):
    own = ssl.create_default_context()
    made.clear()
    undo = tls.share_default_tls()
    try:
        given = httpx.Client(verify=own)
        unverified = httpx.Client(verify=False)
        default = httpx.Client()
    finally:
        undo()

    assert context_of(given) is own
    assert context_of(unverified).verify_mode == ssl.CERT_NONE
    assert context_of(unverified) is not context_of(default)
    for client in (given, unverified, default):
        client.close()


def test_a_certificate_source_from_the_environment_gets_its_own_context(made, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    undo = tls.share_default_tls()
    try:
        first = httpx.Client()
        monkeypatch.setenv("SSL_CERT_FILE", ssl.get_default_verify_paths().openssl_cafile)
        other = httpx.Client()
        ignoring = httpx.Client(trust_env=False)
    finally:
        undo()

    assert context_of(first) is not context_of(other)
    assert context_of(ignoring) is context_of(first)  # it does not read the environment
    for client in (first, other, ignoring):
        client.close()


def test_the_undo_puts_httpx_own_function_back(made):
    from httpx._transports import default

    original = default.create_ssl_context
    undo = tls.share_default_tls()
    assert default.create_ssl_context is not original
    undo()
    undo()  # a second undo changes nothing

    assert default.create_ssl_context is original
    httpx.Client().close()
    httpx.Client().close()
    assert len(made) == 2  # each client makes its own again


SHARED_PROBE = """
import httpx
import pytest


@pytest.mark.cassette({options})
def test_probe(chat):
    one, two = httpx.Client(), httpx.Client()
    shared = one._transport._pool._ssl_context is two._transport._pool._ssl_context
    print(f"SHARED={{shared}}")
    assert chat("hi")
"""


@pytest.mark.parametrize(
    ("options", "record", "expected"),
    [
        ("", "none", "SHARED=True"),
        ("allow_hosts=['example.invalid']", "none", "SHARED=False"),
        ("", "all", "SHARED=False"),
    ],
    ids=["replay only", "allowed hosts", "recording"],
)
def test_the_plugin_shares_only_where_no_connection_can_open(
    pytester, emulator, options, record, expected
):
    pytester.makeconftest(CHAT_CONFTEST)
    pytester.makepyfile(test_probe=SHARED_PROBE.format(options=options))
    assert pytester.runpytest("-p", "no:hypothesispytest", "--cassette-record=once").ret == 0

    result = pytester.runpytest("-p", "no:hypothesispytest", "-s", f"--cassette-record={record}")

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*{expected}*"])
