"""The network tripwire (DESIGN §5): while a replay-only cassette is active, nothing connects.

Every attempt here targets 203.0.113.5 (TEST-NET-3, never routed) or ``example.invalid`` (a
reserved name that never resolves), and the tripwire must stop it before any packet leaves:
the tests assert ``NetworkBlockedError`` and pass short timeouts only as a safety net. The
loopback servers the allow-list tests need are started before arming and stopped after
disarming, in this process, on 127.0.0.1.
"""

import _socket
import asyncio
import os
import shutil
import socket
import tempfile
import threading
import urllib.error
import urllib.request

import aiohttp
import pytest
import requests

from pytest_toolnexus import Cassette, NetworkBlockedError
from pytest_toolnexus._safety.tripwire import arm_tripwire
from tests.support.servers import Fixed, LoopbackServer

TEST_NET = "203.0.113.5"
NO_SUCH_HOST = "example.invalid"
CASSETTE = "cassettes/test_x/replay.msgpack"


def originals():
    return (
        socket.socket.connect,
        socket.socket.connect_ex,
        socket.getaddrinfo,
        _socket.socket,
        _socket.SocketType,
    )


@pytest.fixture
def armed():
    """Arm the tripwire (with the given options); always disarmed after the test."""
    before = originals()
    disarms = []

    def arm(**options):
        options.setdefault("cassette", CASSETTE)
        options.setdefault("mode", "none")
        disarm = arm_tripwire(**options)
        disarms.append(disarm)
        return disarm

    try:
        yield arm
    finally:
        for disarm in disarms:
            disarm()
    assert originals() == before


@pytest.fixture
def server():
    with LoopbackServer(Fixed(200, [("Content-Type", "text/plain")], b"hello")) as running:
        yield running


def blocked_error(exc: BaseException) -> NetworkBlockedError:
    """The NetworkBlockedError in ``exc``'s cause/context chain."""
    seen = set()
    current: BaseException | None = exc
    pending = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, NetworkBlockedError):
            return current
        pending += [current.__cause__, current.__context__]
    raise AssertionError(f"no NetworkBlockedError behind {exc!r}")


def assert_blocked(exc: BaseException, host: str, port: int) -> None:
    found = blocked_error(exc)
    message = str(found)
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"  # IPv6 is bracketed
    assert f"blocked a connection to {where}" in message
    assert CASSETTE in message
    assert "replay-only" in message
    assert isinstance(found, OSError)  # so code that handles network errors handles it


@pytest.mark.parametrize("host", [TEST_NET, NO_SUCH_HOST])
def test_socket_create_connection_is_blocked(armed, host):
    armed()
    with pytest.raises(NetworkBlockedError) as caught:
        socket.create_connection((host, 443), timeout=1)
    assert_blocked(caught.value, host, 443)


def test_socket_connect_is_blocked(armed):
    armed()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        with pytest.raises(NetworkBlockedError) as caught:
            sock.connect((TEST_NET, 80))
    assert_blocked(caught.value, TEST_NET, 80)


def test_socket_connect_ex_is_blocked(armed):
    armed()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        with pytest.raises(NetworkBlockedError) as caught:
            sock.connect_ex((TEST_NET, 8443))
    assert_blocked(caught.value, TEST_NET, 8443)


def test_ipv6_connect_is_blocked(armed):
    armed()
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        with pytest.raises(NetworkBlockedError) as caught:
            sock.connect(("2001:db8::5", 443, 0, 0))  # the documentation prefix
    assert_blocked(caught.value, "2001:db8::5", 443)


def test_a_socket_made_from_the_c_type_is_blocked(armed):
    armed()
    sock = _socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.settimeout(1)
        with pytest.raises(NetworkBlockedError) as caught:
            sock.connect((TEST_NET, 80))
        with pytest.raises(NetworkBlockedError):
            sock.connect_ex((TEST_NET, 81))
    finally:
        sock.close()
    assert_blocked(caught.value, TEST_NET, 80)


def test_a_c_type_socket_obeys_the_tripwire_armed_when_it_connects(server, armed):
    # One guarded type serves every arming (a type made per test is garbage for the full
    # collections), so a socket made under one arming is checked by the one armed when it
    # connects: blocked under a second arming, free once none is armed.
    disarm = armed()
    made_first = _socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    guarded = _socket.socket
    disarm()
    assert _socket.socket is not guarded  # put back at disarming
    disarm = armed(cassette="cassettes/test_x/second.msgpack")
    assert _socket.socket is guarded
    try:
        made_first.settimeout(1)
        with pytest.raises(NetworkBlockedError) as caught:
            made_first.connect((TEST_NET, 80))
        assert "second.msgpack" in str(caught.value)
        disarm()
        made_first.settimeout(5)
        made_first.connect(("127.0.0.1", server.port))  # nothing armed: it connects
    finally:
        made_first.close()


@pytest.mark.parametrize("method", ["connect", "connect_ex"])
def test_the_c_types_own_connect_called_on_a_socket_is_blocked(armed, method):
    armed()
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        with pytest.raises(NetworkBlockedError) as caught:
            getattr(_socket.socket, method)(sock, ("2001:db8::7", 443, 0, 0))
    assert_blocked(caught.value, "2001:db8::7", 443)
    assert "[2001:db8::7]:443" in str(caught.value)


def test_a_socket_connected_before_arming_still_talks_which_is_documented(server, armed):
    # The limit docs/security.md states: the tripwire stops connections, and a socket that
    # was already connected (at import time, say) is not one. This pins that behaviour, so a
    # change to it is seen and the page is kept true.
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        armed()
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        reply = b""
        while not reply.endswith(b"hello"):  # the server keeps the connection open
            chunk = sock.recv(4096)
            assert chunk, f"the server closed after {reply!r}"
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200")
    assert reply.endswith(b"hello")


def test_getaddrinfo_is_blocked(armed):
    armed()
    with pytest.raises(NetworkBlockedError) as caught:
        socket.getaddrinfo(NO_SUCH_HOST, 443)
    assert_blocked(caught.value, NO_SUCH_HOST, 443)


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [
        (f"http://{TEST_NET}:8080/v1", TEST_NET, 8080),
        (f"https://{NO_SUCH_HOST}/v1", NO_SUCH_HOST, 443),
    ],
)
def test_urllib_is_blocked(armed, url, host, port):
    armed()
    with pytest.raises(urllib.error.URLError) as caught:
        urllib.request.urlopen(url, timeout=1)
    assert_blocked(caught.value, host, port)


def test_requests_is_blocked(armed):
    armed()
    with pytest.raises(requests.ConnectionError) as caught:
        requests.get(f"http://{TEST_NET}:8080/v1/models", timeout=1)
    assert_blocked(caught.value, TEST_NET, 8080)


@pytest.mark.parametrize(("host", "port"), [(TEST_NET, 8080), (NO_SUCH_HOST, 443)])
def test_aiohttp_is_blocked(armed, host, port):
    armed()
    scheme = "http" if port == 8080 else "https"

    async def fetch():
        timeout = aiohttp.ClientTimeout(total=2)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(f"{scheme}://{host}:{port}/v1") as response,
        ):
            return await response.read()

    with pytest.raises(aiohttp.ClientConnectionError) as caught:
        asyncio.run(fetch())
    assert_blocked(caught.value, host, port)


@pytest.mark.parametrize("host", [TEST_NET, NO_SUCH_HOST])
def test_asyncio_open_connection_is_blocked(armed, host):
    armed()

    async def open_it():
        return await asyncio.wait_for(asyncio.open_connection(host, 443), timeout=2)

    with pytest.raises(NetworkBlockedError) as caught:
        asyncio.run(open_it())
    assert_blocked(caught.value, host, 443)


def test_a_thread_the_test_starts_is_blocked_too(armed):
    armed()
    errors = []

    def worker():
        try:
            socket.create_connection((TEST_NET, 443), timeout=1)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(timeout=10)

    assert not thread.is_alive()
    (error,) = errors
    assert isinstance(error, NetworkBlockedError)
    assert_blocked(error, TEST_NET, 443)


def test_loopback_is_blocked_unless_allowed(server, armed):
    disarm = armed()
    with pytest.raises(NetworkBlockedError) as caught:
        socket.create_connection(("127.0.0.1", server.port), timeout=1)
    assert_blocked(caught.value, "127.0.0.1", server.port)
    with pytest.raises(urllib.error.URLError) as caught:
        urllib.request.urlopen(f"http://localhost:{server.port}/", timeout=1)
    assert_blocked(caught.value, "localhost", server.port)
    assert server.requests == []
    disarm()

    armed(allow_loopback=True)
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/", timeout=5) as response:
        assert response.read() == b"hello"
    with pytest.raises(NetworkBlockedError):
        socket.create_connection((TEST_NET, 443), timeout=1)
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", ["localhost", "localhost.", "LOCALHOST."])
def test_a_loopback_name_with_or_without_its_final_dot_is_loopback(armed, name):
    disarm = armed()
    with pytest.raises(NetworkBlockedError):
        socket.getaddrinfo(name, 80)  # loopback is blocked unless allowed
    disarm()

    armed(allow_loopback=True)
    try:
        socket.getaddrinfo(name, 80)
    except NetworkBlockedError:
        pytest.fail(f"{name!r} is loopback, and loopback is allowed")
    except socket.gaierror:
        pass  # let through: whether this machine's resolver knows the dotted form is its own


def test_allow_hosts_accepts_a_hostname(server, armed):
    armed(allow_hosts=["localhost"])

    response = requests.get(f"http://localhost:{server.port}/v1/models", timeout=5)

    assert response.status_code == 200
    assert response.text == "hello"
    assert [r.target for r in server.requests] == ["/v1/models"]
    with pytest.raises(requests.ConnectionError) as caught:
        requests.get(f"http://{TEST_NET}:8080/", timeout=1)
    assert_blocked(caught.value, TEST_NET, 8080)


def test_a_hostname_entry_lets_the_address_it_resolves_to_through(server, armed):
    # pytest-recording #40: the allow-list named "localhost", the socket saw "127.0.0.1".
    armed(allow_hosts=["LocalHost"])

    resolved = socket.getaddrinfo("localhost", server.port, socket.AF_INET, socket.SOCK_STREAM)
    address = resolved[0][4]
    assert address[0].startswith("127.")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(address)  # by the resolved IP, not the name
        sock.sendall(b"GET /by-ip HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n")
        assert sock.recv(1024).startswith(b"HTTP/1.1 200")
    assert [r.target for r in server.requests] == ["/by-ip"]


def test_disarm_restores_the_socket_functions_exactly(server, armed):
    before = originals()
    disarm = armed()
    during = originals()
    assert all(now is not then for now, then in zip(during, before, strict=True))

    disarm()

    after = originals()
    assert all(now is then for now, then in zip(after, before, strict=True))
    with socket.socket() as sock:  # and they work: no tripwire left behind
        sock.settimeout(5)
        assert sock.connect_ex(("127.0.0.1", server.port)) == 0
    armed()  # and it can be armed again


def test_a_second_disarm_does_not_undo_a_later_arming(armed):
    first = armed()
    first()
    armed()

    first()

    # Loopback, so that even a broken tripwire sends nothing off the machine.
    with pytest.raises(NetworkBlockedError):
        socket.create_connection(("127.0.0.1", 9), timeout=1)
    with pytest.raises(RuntimeError, match="already armed"):
        arm_tripwire(cassette=CASSETTE, mode="none")


def test_disarm_restores_another_tools_wrappers(armed, monkeypatch):
    # A wrapper installed before arming (pytest-socket, another recorder) must survive.
    real_connect, _, real_getaddrinfo, *_ = originals()
    calls = []

    def their_connect(self, address):
        calls.append(address)
        return real_connect(self, address)

    def their_getaddrinfo(*args, **kwargs):
        return real_getaddrinfo(*args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", their_connect)
    monkeypatch.setattr(socket, "getaddrinfo", their_getaddrinfo)
    disarm = armed()
    with pytest.raises(NetworkBlockedError), socket.socket() as sock:
        sock.connect((TEST_NET, 80))
    assert calls == []  # blocked before their wrapper saw it

    disarm()

    assert socket.socket.connect is their_connect
    assert socket.getaddrinfo is their_getaddrinfo


def test_arming_twice_is_refused(armed):
    armed()
    with pytest.raises(RuntimeError, match="already armed"):
        arm_tripwire(cassette=CASSETTE, mode="none")


def test_unix_sockets_are_not_blocked(armed):
    folder = tempfile.mkdtemp(prefix="tn-", dir="/tmp")  # short: AF_UNIX paths are limited
    try:
        address = os.path.join(folder, "s.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(address)
            listener.listen(1)
            armed()
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.settimeout(5)
                client.connect(address)
                conn, _ = listener.accept()
                with conn:
                    client.sendall(b"ping")
                    assert conn.recv(4) == b"ping"
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as other:
                other.settimeout(5)
                assert other.connect_ex(address) == 0
                listener.accept()[0].close()
        left, right = socket.socketpair()
        with left, right:
            left.sendall(b"pong")
            assert right.recv(4) == b"pong"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


INNER = """
import _socket
import asyncio
import os
import socket
import threading
import urllib.error
import urllib.request

import aiohttp
import pytest
import requests

from pytest_toolnexus import CassetteMissError, NetworkBlockedError

PORT = int(os.environ["TOOLNEXUS_TEST_PORT"])


@pytest.mark.cassette("replay")
def test_socket_is_blocked():
    with pytest.raises(NetworkBlockedError) as caught:
        socket.create_connection(("203.0.113.5", 443), timeout=1)
    assert "203.0.113.5:443" in str(caught.value)
    assert os.path.join("cassettes", "test_inner", "replay.msgpack") in str(caught.value)


@pytest.mark.cassette("replay")
def test_requests_is_served_not_blocked(cassette):
    # Served through urllib3: a miss in the cassette, before any socket is opened.
    with pytest.raises(CassetteMissError, match="GET http://example.invalid/v1/models"):
        requests.get("http://example.invalid/v1/models", timeout=1)
    cassette.misses.clear()  # seen and asserted, not hidden


@pytest.mark.cassette("replay")
def test_urllib_is_blocked():
    with pytest.raises(urllib.error.URLError) as caught:
        urllib.request.urlopen("http://203.0.113.5:8080/", timeout=1)
    assert isinstance(caught.value.reason, NetworkBlockedError)


@pytest.mark.cassette("replay")
def test_asyncio_is_blocked():
    async def connect():
        with pytest.raises(NetworkBlockedError):
            await asyncio.wait_for(asyncio.open_connection("203.0.113.5", 443), 2)

    asyncio.run(connect())


@pytest.mark.cassette("replay")
def test_aiohttp_is_served_not_blocked(cassette):
    async def get():
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            await session.get("http://example.invalid:8080/")

    # Served by the cassette: the request is a miss there, before any socket is opened.
    with pytest.raises(CassetteMissError, match="GET http://example.invalid:8080/"):
        asyncio.run(get())
    cassette.misses.clear()  # seen and asserted, not hidden


@pytest.mark.cassette("replay")
def test_a_thread_is_blocked():
    errors = []

    def worker():
        try:
            socket.create_connection(("203.0.113.5", 443), timeout=1)
        except OSError as exc:
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(10)
    assert [type(e) for e in errors] == [NetworkBlockedError]


@pytest.mark.cassette("replay")
def test_loopback_is_blocked():
    with pytest.raises(NetworkBlockedError):
        socket.create_connection(("127.0.0.1", PORT), timeout=1)


@pytest.mark.cassette("replay", allow_hosts=["localhost"])
def test_localhost_is_allowed():
    with urllib.request.urlopen(f"http://localhost:{PORT}/allowed", timeout=5) as response:
        assert response.read() == b"hello"


def test_without_a_cassette_nothing_is_armed():
    with socket.create_connection(("127.0.0.1", PORT), timeout=5):
        pass
"""


def test_the_plugin_arms_the_tripwire_for_a_replay_only_cassette(pytester, server, monkeypatch):
    monkeypatch.setenv("TOOLNEXUS_TEST_PORT", str(server.port))
    pytester.makepyfile(test_inner=INNER)
    Cassette(pytester.path / "cassettes" / "test_inner" / "replay.msgpack").save()
    before = originals()

    result = pytester.runpytest("-p", "no:cacheprovider", "--cassette-record=none")

    result.assert_outcomes(passed=9)
    assert originals() == before
    assert [r.target for r in server.requests] == ["/allowed"]
