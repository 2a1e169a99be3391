"""The urllib3 bridge in process: faults, errors, pooled connections, bodies and allowed hosts.

Each test records against the loopback emulator through requests or urllib3, unmodified, then
replays the cassette with the emulator stopped (and, where it matters, a fault injected), and
checks what the client saw.
"""

import contextlib
import io
import ipaddress
import json
import socket
import time

import pytest
import requests
import urllib3
from urllib3.util.retry import Retry

from pytest_toolnexus import CassetteMissError, CassetteSession, NetworkBlockedError, faults
from pytest_toolnexus._patching.urllib3 import patch_urllib3
from pytest_toolnexus._safety.tripwire import arm_tripwire
from tests.support.emulator import Emulator
from tests.support.realtime import wall

BODY = {"model": "m", "messages": [{"role": "user", "content": "Count."}]}
STREAM = {**BODY, "stream": True}


@contextlib.contextmanager
def served(path, allow_hosts=(), **options):
    """A cassette session serving every urllib3 pool, as the plugin installs it."""
    session = CassetteSession(path, **options)
    undo = patch_urllib3(session, allow_hosts)
    try:
        session.start()
        yield session
    finally:
        undo()
        session.close()


@pytest.fixture
def live():
    with Emulator(events=4, delay=0.05) as emulator:
        yield emulator


@pytest.fixture
def recorded_stream(tmp_path, live):
    """A cassette holding one streamed chat completion, and the emulator's URL (stopped)."""
    path = tmp_path / "stream.msgpack"
    url = live.base_url + "/v1/chat/completions"
    with served(path, record="all"), requests.post(url, json=STREAM, stream=True) as response:
        lines = [line for line in response.iter_lines() if line]
    live.stop()
    return path, url, lines


def test_a_disconnect_fault_cuts_the_stream_where_requests_expects_it(recorded_stream):
    path, url, lines = recorded_stream
    seen = []

    def read(response):
        seen.extend(line for line in response.iter_lines() if line)

    with served(path, faults=[faults.disconnect(after_event=2)]) as cassette:
        response = requests.post(url, json=STREAM, stream=True)
        with pytest.raises(requests.exceptions.ChunkedEncodingError, match="Connection broken"):
            read(response)
        response.close()
    assert seen == lines[:2]
    assert cassette.requests[0].faults


def test_a_prepended_429_is_retried_by_urllib3_after_retry_after_on_the_virtual_clock(
    recorded_stream,
):
    path, url, lines = recorded_stream
    retry = Retry(total=2, status_forcelist=[429], allowed_methods=None)
    started = wall()
    with (
        served(path, faults=[faults.prepend(429, retry_after="2")]) as cassette,
        urllib3.PoolManager(retries=retry) as pool,
    ):
        response = pool.request("POST", url, json=STREAM)
        assert response.status == 200
        assert [line for line in response.data.split(b"\n") if line] == lines
    first, second = cassette.requests
    assert (first.status, second.status) == (429, 200)
    assert second.sent_at - first.sent_at == pytest.approx(2.0, abs=0.01)
    assert wall() - started < 1.5


def test_a_read_timeout_fault_is_a_requests_read_timeout_at_its_virtual_time(recorded_stream):
    path, url, _ = recorded_stream
    read_timeout = faults.read_timeout(seconds=5)
    with served(path, faults=[read_timeout], on_unused="ignore") as cassette:
        started = time.monotonic()
        with pytest.raises(requests.exceptions.ReadTimeout):
            requests.post(url, json=STREAM, stream=True, timeout=5)
        assert time.monotonic() - started == pytest.approx(5.0, abs=0.01)
    assert cassette.requests[0].faults


def test_a_connect_timeout_fault_is_a_requests_connect_timeout(recorded_stream):
    path, url, _ = recorded_stream
    with served(path, faults=[faults.connect_timeout(seconds=3)]):
        with pytest.raises(requests.exceptions.ConnectTimeout):
            requests.post(url, json=STREAM, stream=True, timeout=3)
        # The recorded answer is kept for the retry.
        with requests.post(url, json=STREAM, stream=True) as response:
            assert response.status_code == 200


def test_a_miss_names_the_request_before_any_socket_is_opened(recorded_stream):
    path, url, _ = recorded_stream
    with served(path, on_unused="ignore") as cassette:
        with pytest.raises(CassetteMissError, match=r"GET http://127\.0\.0\.1:\d+/v1/models"):
            requests.get(url.replace("/chat/completions", "/models"))
        cassette.misses.clear()


def test_replayed_responses_give_their_pooled_connection_back(recorded_stream):
    path, url, lines = recorded_stream
    host, port = urllib3.util.parse_url(url).host, urllib3.util.parse_url(url).port
    with served(path, allow_repeats=True):
        pool = urllib3.HTTPConnectionPool(host, port, maxsize=1, block=True)
        for _ in range(3):
            # A connection kept by a replayed response would leave the next one waiting for
            # the pool, and EmptyPoolError after a second.
            response = pool.urlopen(
                "POST",
                "/v1/chat/completions",
                body=json.dumps(STREAM).encode(),
                headers={"content-type": "application/json"},
                preload_content=False,
                pool_timeout=1,
            )
            assert [line for line in b"".join(response.stream()).split(b"\n") if line] == lines
            response.release_conn()


def test_a_file_body_is_recorded_parsed_and_still_sent_in_full(tmp_path, live):
    path = tmp_path / "file.msgpack"
    url = live.base_url + "/v1/chat/completions"
    with served(path, record="all") as cassette:
        reply = requests.post(
            url,
            data=io.BytesIO(json.dumps(BODY).encode()),
            headers={"content-type": "application/json"},
        )
    assert reply.status_code == 200
    assert live.requests[0].body == BODY
    assert cassette.recorded[0].request.body.value == BODY


def test_a_gzipped_stream_is_recorded_decoded_and_replayed_without_its_encoding(tmp_path, live):
    live.configure(gzip=True)
    path = tmp_path / "gzip.msgpack"
    url = live.base_url + "/v1/chat/completions"
    with served(path, record="all"), requests.post(url, json=STREAM, stream=True) as response:
        # The body the client reads is decoded, so the encoding is no longer announced.
        assert "content-encoding" not in response.headers
        lines = [line for line in response.iter_lines() if line]
    assert live.responses[0].gzip
    live.stop()

    with served(path), requests.post(url, json=STREAM, stream=True) as response:
        assert "content-encoding" not in response.headers
        assert [line for line in response.iter_lines() if line] == lines
    assert len(lines) == 4 + 3


def test_an_allowed_host_goes_to_the_network_unrecorded(tmp_path, live):
    url = live.base_url + "/v1/chat/completions"
    with served(tmp_path / "none.msgpack", allow_hosts=["127.0.0.1"], record="all") as cassette:
        assert requests.post(url, json=BODY).status_code == 200
    assert cassette.requests == []
    assert len(live.requests) == 1


def test_a_second_urllib3_patch_is_refused_and_a_stale_undo_releases_nothing(tmp_path):
    pool_class = urllib3.connectionpool.HTTPConnectionPool
    original = pool_class.__dict__["_make_request"]
    first = CassetteSession(tmp_path / "first.msgpack", record="all")
    second = CassetteSession(tmp_path / "second.msgpack", record="all")

    undo_first = patch_urllib3(first)
    with pytest.raises(RuntimeError, match=r"second\.msgpack.*first\.msgpack already does"):
        patch_urllib3(second)
    undo_first()
    undo_second = patch_urllib3(second)  # free again
    undo_first()  # a stale second undo of the first must not release the second's hold
    with pytest.raises(RuntimeError, match="already does"):
        patch_urllib3(first)
    undo_second()

    assert pool_class.__dict__["_make_request"] is original


def test_a_stream_closed_halfway_while_recording_is_kept_incomplete_and_replays_so(tmp_path):
    with Emulator(events=5, delay=0.05) as emulator:
        path = tmp_path / "half.msgpack"
        url = emulator.base_url + "/v1/chat/completions"
        with served(path, record="all") as cassette:
            response = requests.post(url, json=STREAM, stream=True)
            lines = response.iter_lines()
            first = [next(lines), next(lines)]
            response.close()  # the client lets go: the live connection is closed, not reused
        assert cassette.requests[0].complete is False
        assert cassette.recorded[0].response.complete is False
        assert emulator.wait_idle(5)

    with served(path) as cassette, requests.post(url, json=STREAM, stream=True) as response:
        lines = response.iter_lines()
        assert [next(lines), next(lines)] == first
    assert cassette.requests[0].replayed


@pytest.fixture
def loopback_name():
    """A host name that is not a loopback name but resolves to loopback (the machine's own)."""
    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
    except OSError:
        pytest.skip(f"the host name {name!r} does not resolve")
    if name.lower() == "localhost" or not ipaddress.ip_address(address).is_loopback:
        pytest.skip(f"the host name {name!r} resolves to {address}, not to loopback")
    return name


def test_the_bridge_s_own_live_traffic_passes_the_recording_tripwire(tmp_path, live, loopback_name):
    url = f"http://{loopback_name}:{live.port}/v1/chat/completions"
    disarm = arm_tripwire(cassette="c.msgpack", mode="all", recording=True)
    try:
        # Not served: the name lookup is stopped, naming who asked.
        with pytest.raises(requests.ConnectionError, match=f"connection to {loopback_name}"):
            requests.post(url, json=BODY, timeout=5)
        with served(tmp_path / "c.msgpack", record="all") as cassette:
            # Served: the bridge's own send is marked, and goes through ...
            assert requests.post(url, json=BODY, timeout=5).status_code == 200
            # ... while a connection of the test's own is still stopped.
            with pytest.raises(NetworkBlockedError, match="a raw socket opened a connection"):
                socket.getaddrinfo(loopback_name, live.port)
    finally:
        disarm()
    assert len(live.requests) == 1
    assert cassette.recorded[0].request.url == url
