"""Recording never changes what the client sees (issue 14, items 1 to 4): header bytes that
are not ASCII, a JSON body's exact bytes, SSE bytes that are not UTF-8, and a recorder that
fails on a chunk. Each is tried over its class against a loopback server, through a real
httpx client served by the plugin's patch, then replayed with the server gone."""

import asyncio
import contextlib
import json
import warnings

import aiohttp
import httpx
import httpx2
import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_toolnexus import (
    CassetteSession,
    HTTPBridge,
    LiveTransport,
    RecorderWarning,
    load_cassette,
    use_cassette,
)
from pytest_toolnexus._patching.httpx import patch_http_clients
from pytest_toolnexus._safety.rules import is_credential_field
from pytest_toolnexus._seam.depth import MAX_DEPTH
from pytest_toolnexus._store.cassette import ChunksBody, JsonBody, TextBody
from tests.support.fuzzing import counted, report_examples, scaled
from tests.support.servers import Drip, Fixed, LoopbackServer

STREAM = {"model": "m", "stream": True}  # a request the recorder times as a stream
PROPERTY = settings(
    max_examples=scaled(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module", autouse=True)
def _examples_report():
    yield
    report_examples("recording fidelity")


@contextlib.contextmanager
def served(path, record):
    """A session for ``path``, with every httpx client in the process served by it."""
    session = CassetteSession(path, record=record, timing="instant", on_unused="ignore")
    undo = patch_http_clients(session)
    try:
        with session:
            yield session
    finally:
        undo()


def record_and_replay(tmp_path, handler, read):
    """``read(client, url)`` while recording against ``handler``, then again while replaying
    with the server stopped; both results."""
    path = tmp_path / "c.msgpack"
    path.unlink(missing_ok=True)
    with LoopbackServer(handler) as server:
        url = server.url("/v1/x")
        with served(path, "all"), httpx.Client() as client:
            live = read(client, url)
    with served(path, "none"), httpx.Client() as client:
        again = read(client, url)
    return live, again, path


# -- 1: header bytes ----------------------------------------------------------------------------


def header_bytes():
    text = (
        st.text(
            st.characters(min_codepoint=0x20, max_codepoint=0x2FF, exclude_characters="\x7f"),
            min_size=1,
            max_size=12,
        )
        .map(str.strip)
        .filter(bool)
    )
    utf8 = text.map(lambda t: t.encode("utf-8"))
    latin1 = text.filter(lambda t: max(map(ord, t)) <= 0xFF).map(lambda t: t.encode("latin-1"))
    return utf8 | latin1


@PROPERTY
@given(value=header_bytes())
@counted("non-ASCII header bytes")
def test_a_header_that_is_not_ascii_reaches_the_client_byte_for_byte(tmp_path, value):
    def read(client, url):
        response = client.get(url)
        return response.status_code, dict(response.headers.raw)[b"x-name"]

    handler = Fixed(200, [("x-name", value.decode("latin-1"))], b"ok")
    live, again, _ = record_and_replay(tmp_path, handler, read)

    assert live == (200, value)
    assert again == (200, value)


# -- 2: the server's exact JSON bytes -----------------------------------------------------------


def json_texts():
    values = st.recursive(
        st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3)
            # no credential-named key ("pwd"): an opaque value under one is refused at the write
            | st.dictionaries(
                st.text(max_size=4).filter(lambda key: not is_credential_field(key)),
                inner,
                max_size=3,
            )
        ),
        max_leaves=8,
    )
    styles = st.sampled_from(
        [
            lambda v: json.dumps(v),
            lambda v: json.dumps(v, indent=2) + "\n",
            lambda v: json.dumps(v, ensure_ascii=True),
            lambda v: json.dumps(v, separators=(",", ":")),
            lambda v: " " + json.dumps(v, indent="\t") + "\r\n",
        ]
    )
    return st.tuples(values, styles).map(lambda pair: pair[1](pair[0]).encode())


@PROPERTY
@given(
    body=json_texts() | st.sampled_from([b'{"n": 1E2, "f": 1.10}', b"null\n", b'{"a": "\\u00e9"}'])
)
@counted("exact JSON bytes")
def test_while_recording_the_client_reads_the_servers_exact_json_bytes(tmp_path, body):
    def read(client, url):
        response = client.get(url)
        return response.content, response.json()

    handler = Fixed(200, [("content-type", "application/json")], body)
    (live_bytes, live_value), (_, replayed_value), path = record_and_replay(tmp_path, handler, read)

    assert live_bytes == body
    assert replayed_value == live_value == json.loads(body)
    [interaction] = load_cassette(path).interactions
    assert isinstance(interaction.response.body, JsonBody)


# -- 3: SSE bytes that are not UTF-8 ------------------------------------------------------------


@PROPERTY
@given(
    bad=st.binary(min_size=1, max_size=4).filter(lambda b: not _utf8(b)),
    at=st.integers(0, 2),
)
@counted("SSE bytes that are not UTF-8")
def test_sse_bytes_that_are_not_utf8_replay_byte_for_byte(tmp_path, bad, at):
    events = [b"data: one\n\n", b"data: two\n\n", b"data: three\n\n"]
    events[at] = events[at][:6] + bad + events[at][6:]

    def read(client, url):
        with client.stream("POST", url, json=STREAM) as response:
            return b"".join(response.iter_bytes())

    live, again, path = record_and_replay(tmp_path, Drip(events, interval=0.001), read)

    assert live == again == b"".join(events)
    [interaction] = load_cassette(path).interactions
    assert isinstance(interaction.response.body, ChunksBody)


@PROPERTY
@given(
    bad=st.binary(min_size=1, max_size=4).filter(lambda b: not _utf8(b)),
    at=st.integers(0, 2),
)
@counted("NDJSON bytes that are not UTF-8")
def test_ndjson_bytes_that_are_not_utf8_replay_byte_for_byte(tmp_path, bad, at):
    lines = [b'{"n": 1}\n', b'{"n": 2}\n', b'{"done": true}\n']
    lines[at] = lines[at][:3] + bad + lines[at][3:]

    def read(client, url):
        with client.stream("POST", url, json=STREAM) as response:
            return b"".join(response.iter_bytes())

    ndjson = [("Content-Type", "application/x-ndjson")]
    live, again, path = record_and_replay(
        tmp_path, Drip(lines, interval=0.001, headers=ndjson), read
    )

    assert live == again == b"".join(lines)
    [interaction] = load_cassette(path).interactions
    assert isinstance(interaction.response.body, ChunksBody)


def _utf8(data):
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# -- 4: a recorder that fails -------------------------------------------------------------------


def test_a_payload_nested_past_the_recursion_limit_is_kept_as_text(tmp_path):
    deep = "[" * 5000 + "]" * 5000
    events = [b"data: " + deep.encode() + b"\n\n", b"data: [DONE]\n\n"]

    def read(client, url):
        with client.stream("POST", url, json=STREAM) as response:
            return list(response.iter_lines())

    with warnings.catch_warnings():
        warnings.simplefilter("error", RecorderWarning)
        live, again, path = record_and_replay(tmp_path, Drip(events, interval=0.001), read)

    assert live == again == ["data: " + deep, "", "data: [DONE]", ""]
    [interaction] = load_cassette(path).interactions
    assert interaction.response.body.events[0]["text"] == deep


def _at_depth(frames, call):
    """``call()`` run ``frames`` frames deeper than here, as code under test runs it."""
    return call() if frames <= 0 else _at_depth(frames - 1, call)


@pytest.mark.parametrize("extra", [0, 1], ids=["at MAX_DEPTH", "one level deeper"])
def test_json_is_stored_parsed_to_max_depth_and_as_the_text_it_came_as_deeper(tmp_path, extra):
    # The limit is the product's own, so the same on every Python and from deep in the
    # caller's stack: 3.12 and 3.13 parse 995 levels in C, where 3.11 stops near its
    # recursion limit less the caller's frames.
    nested = ("[" * (MAX_DEPTH + extra) + "1" + "]" * (MAX_DEPTH + extra)).encode()
    json_type = {"content-type": "application/json"}

    def read(client, url):
        answer = _at_depth(200, lambda: client.post(url, content=nested, headers=json_type))
        return answer.content

    handler = Fixed(200, [("content-type", "application/json")], nested)
    live, again, path = record_and_replay(tmp_path, handler, read)

    assert live == again == nested
    [interaction] = load_cassette(path).interactions
    kind = JsonBody if extra == 0 else TextBody
    assert type(interaction.request.body) is kind
    assert type(interaction.response.body) is kind
    assert interaction.response.body.content() == nested


@pytest.mark.parametrize("error", [RuntimeError("boom"), RecursionError("deep"), KeyError("k")])
def test_a_recorder_that_fails_never_breaks_the_clients_stream(tmp_path, monkeypatch, error):
    from pytest_toolnexus._session import record_body as _record_body

    def failing(*args, **kwargs):
        raise error

    monkeypatch.setattr(_record_body, "sse_event_doc", failing)
    events = [b"data: one\n\n", b"data: two\n\n", b"data: three\n\n"]

    def read(client, url):
        with client.stream("POST", url, json=STREAM) as response:
            return b"".join(response.iter_bytes())

    with pytest.warns(RecorderWarning, match=r"recording POST http://127\.0\.0\.1:\d+/v1/x: "):
        live, again, path = record_and_replay(tmp_path, Drip(events, interval=0.01), read)

    assert live == again == b"".join(events)
    [interaction] = load_cassette(path).interactions
    body = interaction.response.body
    assert isinstance(body, ChunksBody)
    assert [chunk["data"] for chunk in body.chunks] == events
    times = [chunk["t"] for chunk in body.chunks]
    assert times == sorted(times)  # each chunk keeps the time it reached the recorder


@PROPERTY
@given(value=header_bytes())
@counted("non-ASCII request header bytes")
def test_a_request_header_that_is_not_ascii_reaches_the_server_byte_for_byte(tmp_path, value):
    path = tmp_path / "c.msgpack"
    path.unlink(missing_ok=True)
    with LoopbackServer(Fixed(200, [("content-type", "text/plain")], b"ok")) as server:
        with served(path, "all"), httpx.Client() as client:
            assert client.get(server.url("/v1/x"), headers={b"x-user": value}).status_code == 200
        [received] = server.requests
    assert b"\r\nx-user: " + value + b"\r\n" in received.raw
    with served(path, "none"), httpx.Client() as client:
        assert client.get(server.url("/v1/x"), headers={b"x-user": value}).text == "ok"


# -- 5: a live transport the user passes, and the other bridges ---------------------------------
#
# The patched httpx clients always handed on the server's JSON bytes while recording. A
# ``LiveTransport()`` passed in by the user (as the session's ``live=``, or under a bridge of
# its own) parsed the answer and the bridge encoded it again, and so did the requests and
# aiohttp bridges: the client read ``{"a":1}`` where the server sent ``{ "a" : 1 }``.

ODD_JSON = [
    pytest.param(b'{ "b" : 1 ,\n  "a" : [ 1 , 2 ] }', id="spaces"),
    pytest.param(b'{"z":1,"a":{"y":2,"b":3}}', id="key-order"),
    pytest.param(b'{"s": "\\u00e9\\u2603\\ud83d\\ude00", "t": "caf\xc3\xa9"}', id="unicode"),
    pytest.param(b'{"one": 1.0, "int": 1, "e": 1E2, "f": 1.10, "z": -0.0}', id="one-point-zero"),
    pytest.param(b'{"max": 1.7976931348623157e308, "pi": 3.14159265358979323846264}', id="floats"),
    pytest.param(b'{"k": 1, "k": 2}', id="duplicate-key"),
    pytest.param(b"\t[null, true, false]\r\n", id="framed-array"),
]


def user_session(path):
    """A recording session that sends through a ``LiveTransport()`` the user made."""
    return CassetteSession(
        path, record="all", timing="instant", on_unused="ignore", live=LiveTransport()
    )


def through_session_live(path, url):
    with (
        user_session(path) as session,
        httpx.Client(transport=session.http_transport()) as client,
    ):
        return client.get(url).content


def through_a_bridge_of_ones_own(path, url):
    with CassetteSession(path, record="all", timing="instant", on_unused="ignore") as session:
        bridge = HTTPBridge(session.transport_for(LiveTransport()))
        with httpx2.Client(transport=bridge) as client:
            return client.get(url).content


def through_session_live_async(path, url):
    async def read():
        async with (
            user_session(path) as session,
            httpx.AsyncClient(transport=session.http_transport()) as client,
        ):
            return (await client.get(url)).content

    return asyncio.run(read())


def through_requests(path, url):
    with use_cassette(path, record="all", timing="instant"):
        return requests.get(url, timeout=10).content


def through_aiohttp(path, url):
    async def read():
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            return await response.read()

    with use_cassette(path, record="all", timing="instant"):
        return asyncio.run(read())


PATHS = [
    pytest.param(through_session_live, id="session-live"),
    pytest.param(through_a_bridge_of_ones_own, id="own-bridge"),
    pytest.param(through_session_live_async, id="session-live-async"),
    pytest.param(through_requests, id="requests"),
    pytest.param(through_aiohttp, id="aiohttp"),
]


@pytest.mark.parametrize("record", PATHS)
@pytest.mark.parametrize("body", ODD_JSON)
def test_every_path_hands_the_client_the_servers_json_bytes_and_stores_the_value(
    tmp_path, record, body
):
    path = tmp_path / "c.msgpack"
    with LoopbackServer(Fixed(200, [("content-type", "application/json")], body)) as server:
        seen = record(path, server.url("/v1/x"))

    assert seen == body
    [interaction] = load_cassette(path).interactions
    assert isinstance(interaction.response.body, JsonBody)
    assert interaction.response.body.value == json.loads(body)


SSE_EVENTS = [b'data: { "n" : 1.0 }\n\n', b'data: {"s":"\\u00e9"}\r\n\r\n', b"data: [DONE]\n\n"]


@pytest.mark.parametrize("asked", [True, False], ids=["asked", "not-asked"])
def test_an_event_stream_reaches_the_client_byte_for_byte_through_a_users_live_transport(
    tmp_path, asked
):
    # A stream was never re-encoded; this keeps it so. A request that does not ask for a
    # stream is answered whole by a LiveTransport() (the seam's promise), so only an asked-for
    # stream is stored as timed events.
    path = tmp_path / "c.msgpack"
    with (
        LoopbackServer(Drip(SSE_EVENTS, interval=0.001)) as server,
        user_session(path) as session,
        httpx.Client(transport=session.http_transport()) as client,
    ):
        body = STREAM if asked else {"model": "m"}
        with client.stream("POST", server.url("/v1/x"), json=body) as response:
            seen = b"".join(response.iter_bytes())

    assert seen == b"".join(SSE_EVENTS)
    if asked:
        [interaction] = load_cassette(path).interactions
        events = interaction.response.body.events
        assert [event.get("data", event.get("text")) for event in events] == [
            {"n": 1.0},
            {"s": "\u00e9"},
            "[DONE]",
        ]
