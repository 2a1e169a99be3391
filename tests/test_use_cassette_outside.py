"""``use_cassette`` in plain Python gives a script what the marker gives a test (issue 24, point
8): every marker option, checked the same way; every client the code builds itself served,
with the tripwire armed; and everything undone on exit, however the block ends.

A loopback server answers while recording; each replay runs with it stopped.
"""

import asyncio
import json
import socket
import warnings

import aiohttp
import httpx
import pytest
import requests

from pytest_toolnexus import CassetteMissError, NetworkBlockedError, use_cassette
from pytest_toolnexus._patching.install import installed
from pytest_toolnexus._plugin.settings import OPTION_NAMES
from pytest_toolnexus._seam.errors import CassetteSetAsideWarning
from pytest_toolnexus._store.cassette import load_cassette
from tests.support.servers import Fixed, LoopbackServer

ANSWER = json.dumps({"answer": 42}).encode()


def _json_server():
    return LoopbackServer(Fixed(200, [("Content-Type", "application/json")], ANSWER))


def _originals():
    """What the patches replace, read now, to compare after the block."""
    return (
        httpx.HTTPTransport.handle_request,
        httpx.AsyncHTTPTransport.handle_async_request,
        socket.socket.connect,
        socket.getaddrinfo,
    )


def _record(path, url):
    """One GET recorded by a plain httpx client that was handed nothing."""
    with use_cassette(path, record="once"), httpx.Client() as client:
        assert client.get(url).json() == {"answer": 42}


def test_a_client_the_code_builds_itself_records_and_replays_with_the_server_stopped(tmp_path):
    path = tmp_path / "plain.msgpack"
    with _json_server() as server:
        url = server.url("/v1/answer")
        _record(path, url)
        assert len(server.requests) == 1
    (interaction,) = load_cassette(path).interactions
    assert interaction.request.url == url

    with use_cassette(path) as cassette:  # the server is gone: only the cassette can answer
        assert httpx.get(url).json() == {"answer": 42}
    assert [sent.replayed for sent in cassette.requests] == [True]


def test_requests_and_aiohttp_are_served_too(tmp_path):
    path = tmp_path / "libraries.msgpack"
    with _json_server() as server:
        url = server.url("/v1/answer")
        with use_cassette(path, record="once", allow_repeats=True):
            assert requests.get(url, timeout=5).json() == {"answer": 42}

    async def fetch():
        async with aiohttp.ClientSession() as client, client.get(url) as response:
            return await response.json()

    with use_cassette(path, allow_repeats=True) as cassette:
        assert requests.get(url, timeout=5).json() == {"answer": 42}
        assert asyncio.run(fetch()) == {"answer": 42}
    assert len(cassette.requests) == 2
    assert all(sent.replayed for sent in cassette.requests)


def test_every_patch_comes_off_at_the_end_and_when_the_block_raises(tmp_path):
    path = tmp_path / "off.msgpack"
    with _json_server() as server:
        _record(path, server.url("/v1/answer"))
    before = _originals()
    with use_cassette(path, unused="ignore"):
        assert _originals() != before  # served while the block runs
        assert installed() is not None
    assert _originals() == before
    assert installed() is None

    with pytest.raises(ZeroDivisionError), use_cassette(path, unused="ignore"):
        1 / 0  # noqa: B018
    assert _originals() == before
    assert installed() is None


def test_a_connection_around_the_cassette_is_refused_while_it_replays(tmp_path):
    path = tmp_path / "tripwire.msgpack"
    with _json_server() as server:
        _record(path, server.url("/v1/answer"))
        with (
            use_cassette(path, unused="ignore"),
            socket.socket() as raw,
            pytest.raises(NetworkBlockedError, match=r"127\.0\.0\.1"),
        ):
            raw.connect(("127.0.0.1", server.port))


def test_patch_clients_false_serves_only_the_clients_handed_the_transport(tmp_path):
    path = tmp_path / "explicit.msgpack"
    with _json_server() as server:
        url = server.url("/v1/answer")
        _record(path, url)
        with use_cassette(path, patch_clients=False) as cassette:
            with httpx.Client(transport=cassette.http_transport()) as served:
                assert served.get(url).json() == {"answer": 42}
            assert httpx.get(url).json() == {"answer": 42}  # unserved: it reached the server
        assert len(server.requests) == 2
        assert [sent.replayed for sent in cassette.requests] == [True]


def _fail_after_a_request(path, url, error=RuntimeError, **options):
    with pytest.raises(error), use_cassette(path, record="once", **options):  # noqa: PT012
        httpx.get(url)
        raise error("the script failed after its request")


def test_a_block_that_fails_while_recording_writes_nothing_unless_asked(tmp_path):
    with _json_server() as server:
        url = server.url("/v1/answer")
        dropped = tmp_path / "dropped.msgpack"
        _fail_after_a_request(dropped, url)
        assert not dropped.exists()

        kept = tmp_path / "kept.msgpack"
        _fail_after_a_request(kept, url, record_on_error=True)
        assert len(load_cassette(kept).interactions) == 1


def test_unused_fail_raises_at_the_end_naming_what_was_never_played(tmp_path):
    path = tmp_path / "unused.msgpack"
    with _json_server() as server:
        _record(path, server.url("/v1/answer"))
    with pytest.raises(CassetteMissError, match=r"never played: #0 GET"):
        use_cassette(path, unused="fail").__enter__().close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with use_cassette(path, unused="ignore"):
            pass


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("unused", "loudly", "unused='loudly'"),
        ("speed", -1, "speed must be a positive, finite number"),
        ("max_age", "soon", "max_age must be"),
        ("record_on_error", "yes", "record_on_error must be True or False"),
        ("unserved", "never", "unserved='never'"),
        ("allow_hosts", [1], "allow_hosts must be a list of strings"),
        ("frobnicate", 1, "unknown cassette option 'frobnicate'"),
    ],
)
def test_a_bad_option_is_refused_before_anything_is_installed(tmp_path, option, value, named):
    with pytest.raises(TypeError, match=f"use_cassette: .*{named}"):
        use_cassette(tmp_path / "x.msgpack", **{option: value})
    assert installed() is None


def test_every_marker_option_but_the_name_is_taken(tmp_path):
    path = tmp_path / "options.msgpack"
    with _json_server() as server:
        _record(path, server.url("/v1/answer"))
    given = {
        "speed": 2.0,
        "ignore_body": ["a"],
        "match_headers": ["x-a"],
        "match_on": "default",
        "ignore_query": ["q"],
        "ignore_headers": ["x-b"],
        "allow_repeats": True,
        "allow_hosts": ["example.invalid"],
        "unused": "ignore",
        "meta": {"note": "outside"},
        "faults": (),
        "allow_secrets": ["fake"],
        "wire_check": False,
        "record_on_error": True,
        "max_age": "3650d",
        "on_expired": "warn",
        "unserved": "warn",
    }
    # Every option of the marker is listed here but the cassette's name and the two
    # use_cassette takes as named arguments of its own.
    assert set(given) == set(OPTION_NAMES) - {"name", "record", "timing"}
    with use_cassette(path, **given) as cassette:
        assert cassette.replay_only
    with pytest.raises(TypeError, match="name= is the marker's"):
        use_cassette(path, name="other")


def test_a_block_cut_short_by_ctrl_c_keeps_the_recording_beside_the_cassette(tmp_path):
    path = tmp_path / "cut.msgpack"
    with _json_server() as server:
        url = server.url("/v1/answer")
        with pytest.warns(CassetteSetAsideWarning, match="KeyboardInterrupt"):
            _fail_after_a_request(path, url, error=KeyboardInterrupt)
    assert not path.exists()
    (kept,) = tmp_path.glob("cut.msgpack.interrupted*")
    assert len(load_cassette(kept).interactions) == 1
    assert installed() is None
