"""What the http bridge does per request to stay cheap, and that none of it shows (DESIGN.md
section 9, D1): a request's body parsed only when read, header sets translated once and kept,
and a whole answer handed over as a response that is already read.

Every transport here is an in-process function or a cassette: no sockets.
"""

import dataclasses
import json
import re

import httpx
import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_toolnexus import (
    Cassette,
    CassetteSession,
    Headers,
    HTTPBridge,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    TransportRequest,
    TransportResponse,
)
from pytest_toolnexus._bridges.compat import read_response
from pytest_toolnexus._seam.bodies import (
    body_may_ask_stream,
    decode_body,
    wants_stream,
    wire_body,
    wire_suspect,
)
from pytest_toolnexus._store.cassette import JsonBody

URL = "https://api.example.com/v1/chat/completions"
JSON_HEADERS = Headers([("content-type", "application/json")])

LIBRARIES = pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])


def write_cassette(path, exchanges):
    """A cassette of JSON exchanges: (method, url, request body, status, answer, headers)."""
    interactions = [
        Interaction(
            RecordedRequest(method, url, JSON_HEADERS, JsonBody(body)),
            RecordedResponse(
                status,
                Headers([*headers, ("content-type", "application/json")]),
                JsonBody(answer),
            ),
        )
        for method, url, body, status, answer, headers in exchanges
    ]
    Cassette(path, interactions).save()
    return path


# -- a whole answer, handed over already read ------------------------------------------------


def _state(response):
    """What a reader of a response can see of it, and its attributes but the two that differ
    by construction (the stream object, and a decoder made on first use)."""
    seen = {k: v for k, v in vars(response).items() if k not in ("stream", "_decoder")}
    seen["headers"] = response.headers.multi_items()
    seen["content"] = response.content
    seen["text"] = response.text
    seen["chunks"] = list(response.iter_bytes(7))
    seen["num_bytes_downloaded"] = response.num_bytes_downloaded
    seen["stream type"] = type(response.stream).__name__
    try:
        seen["elapsed"] = response.elapsed
    except RuntimeError as exc:
        seen["elapsed"] = str(exc)
    return seen


@LIBRARIES
@pytest.mark.parametrize(
    "content",
    [b'{"id":"x","n":[1,2,3]}', b"", "déjà vu".encode(), b"<html>502</html>"],
    ids=["json", "empty", "utf-8", "html"],
)
def test_a_read_response_is_what_the_content_path_makes(lib, content):
    request = lib.Request("POST", URL, content=b"{}")
    pairs = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(content))]
    expected = lib.Response(200, headers=pairs, content=content, request=request)
    made = read_response(lib, 200, pairs, content, request)
    assert _state(made) == _state(expected)
    assert made.is_closed
    assert made.is_stream_consumed


@LIBRARIES
def test_a_read_response_takes_the_librarys_headers_and_copies_them(lib):
    request = lib.Request("GET", URL)
    headers = lib.Headers([(b"x-a", b"1"), (b"content-length", b"2")])
    first = read_response(lib, 200, headers, b"{}", request)
    first.headers["x-a"] = "changed"
    second = read_response(lib, 200, headers, b"{}", request)
    assert headers["x-a"] == "1"
    assert second.headers["x-a"] == "1"


@LIBRARIES
def test_a_replayed_answer_reads_as_a_mock_transports_does(lib, tmp_path):
    # The same answer from a cassette and from the library's own MockTransport: the client
    # sees the same response, read and closed, whatever it asks of it.
    answer = {"id": "chatcmpl-1", "choices": [{"message": {"content": "héllo"}}]}
    path = write_cassette(
        tmp_path / "c.msgpack",
        [("POST", URL, {"q": 1}, 200, answer, [("x-request-id", "req_1")])],
    )
    session = CassetteSession(path, record="none", timing="instant")
    with lib.Client(transport=session.http_transport()) as client:
        replayed = client.post(URL, json={"q": 1})
    session.close()
    body = json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode()

    def handler(request):
        return lib.Response(
            200,
            headers=[("x-request-id", "req_1"), ("content-type", "application/json")],
            content=body,
        )

    with lib.Client(transport=lib.MockTransport(handler)) as client:
        mocked = client.post(URL, json={"q": 1})
    for response in (replayed, mocked):
        assert response.is_closed
        assert response.is_stream_consumed
    assert replayed.json() == mocked.json() == answer
    assert replayed.content == mocked.content
    assert sorted(replayed.headers.multi_items()) == sorted(mocked.headers.multi_items())
    assert list(replayed.iter_text(5)) == list(mocked.iter_text(5))


def test_an_answer_with_a_content_encoding_is_still_decoded_by_the_library():
    import gzip

    plain = b'{"ok":true}'
    squeezed = gzip.compress(plain)

    def transport(request):
        return TransportResponse(200, [("content-encoding", "gzip")], squeezed)

    with httpx.Client(transport=HTTPBridge(transport)) as client:
        response = client.get(URL)
    assert response.content == plain
    assert response.headers["content-length"] == str(len(squeezed))


def test_each_answer_gets_its_own_headers_when_one_recorded_answer_plays_again():
    # One Headers object answers every request (as a replayed interaction's does); the
    # translation kept for it must follow the length, the status and the method, and a client
    # that changes one response's headers changes no other.
    recorded = Headers([("content-type", "application/json"), ("x-n", "1")])
    bodies = iter([b'{"a":1}', b'{"a":12345}', b"", b'{"a":2}'])
    statuses = iter([200, 200, 204, 200])

    def transport(request):
        return TransportResponse(next(statuses), recorded, next(bodies))

    with httpx.Client(transport=HTTPBridge(transport)) as client:
        seen = [client.get(URL) for _ in range(3)]
        seen[0].headers["x-n"] = "changed"
        seen.append(client.get(URL))
    assert [r.headers["content-length"] for r in seen] == ["7", "11", "0", "7"]
    assert [r.status_code for r in seen] == [200, 200, 204, 200]
    assert [r.headers["x-n"] for r in seen] == ["changed", "1", "1", "1"]
    for response in seen[1:]:
        expected, content = wire_body(
            TransportResponse(response.status_code, recorded, response.content), "GET"
        )
        assert response.headers.multi_items() == expected
        assert response.content == content


# -- requests: header sets kept, the body parsed when read -----------------------------------


def test_each_request_carries_its_own_headers_through_the_bridge():
    seen = []

    def transport(request):
        seen.append(request)
        return TransportResponse(200, body={"ok": True})

    with httpx.Client(transport=HTTPBridge(transport)) as client:
        client.post(URL, json={"a": 1}, headers={"x-trace": "1"})
        client.post(URL, json={"a": 1}, headers={"x-trace": "2"})
        client.post(URL, json={"a": 1}, headers={"x-trace": "1"})
        client.post(URL, json={"a": 22}, headers={"x-trace": "1"})
    assert [r.headers["x-trace"] for r in seen] == ["1", "2", "1", "1"]
    assert [r.headers["content-length"] for r in seen] == ["7", "7", "7", "8"]
    assert [r.body for r in seen] == [{"a": 1}, {"a": 1}, {"a": 1}, {"a": 22}]


def test_a_request_from_the_wire_reads_as_one_made_with_its_body():
    content = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"n":1.5}'
    lazy = TransportRequest.from_wire(
        "post", URL, JSON_HEADERS, content, parse=decode_body, stream=False
    )
    eager = TransportRequest(
        "POST", URL, JSON_HEADERS, decode_body(JSON_HEADERS, content), content=content
    )
    assert lazy.body == json.loads(content)
    assert lazy.body is lazy.body  # parsed once, then kept
    assert lazy == eager
    assert repr(lazy) == repr(eager)
    assert dataclasses.replace(lazy, url=URL + "?x=1").body == eager.body
    assert lazy.method == "POST"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        lazy.nope  # noqa: B018


@pytest.mark.parametrize(
    ("headers", "content", "expected"),
    [
        (JSON_HEADERS, b"not json", b"not json"),
        (JSON_HEADERS, b"", b""),
        (Headers([("content-type", "text/plain")]), b'{"a":1}', b'{"a":1}'),
        (JSON_HEADERS, '{"a":"é"}'.encode("utf-16"), {"a": "é"}),
    ],
    ids=["invalid", "empty", "not-json-type", "utf-16"],
)
def test_a_request_from_the_wire_parses_its_body_as_decode_body_does(headers, content, expected):
    request = TransportRequest.from_wire(
        "POST", URL, headers, content, parse=decode_body, stream=False
    )
    assert request.body == expected


def test_a_session_notes_the_body_of_a_request_it_matched_by_its_bytes(tmp_path):
    path = write_cassette(tmp_path / "c.msgpack", [("POST", URL, {"q": [1, 2]}, 200, {}, [])])
    with CassetteSession(path, record="none", timing="instant") as session:
        with httpx.Client(transport=session.http_transport()) as client:
            client.post(URL, json={"q": [1, 2]})
        assert session.requests[0].body == {"q": [1, 2]}


_STREAM_BODIES = [
    b'{"stream":true}',
    b'{"stream" : true,"model":"m"}',
    b'{"model":"m",\n "stream":\ttrue}',
    b'{"stream":false}',
    b'{"stream":true,"stream":false}',
    b'{"a":{"stream":true}}',
    b'{"\\u0073tream":true}',
    b'{"str\\u0065am":true}',
    b'["stream",true]',
    b'{"a":"\\"stream\\":true"}',
    '{"stream":true}'.encode("utf-16"),
    '{"stream":true}'.encode("utf-32"),
    b'\xef\xbb\xbf{"stream":true}',
    b'{"model":"m"}',
    b"",
]


@pytest.mark.parametrize("content", _STREAM_BODIES)
def test_a_body_said_not_to_ask_for_a_stream_never_does(content):
    asks = wants_stream(URL, JSON_HEADERS, decode_body(JSON_HEADERS, content))
    if not body_may_ask_stream(content):
        assert not asks
    if asks:
        assert body_may_ask_stream(content)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(["stream", "model", "s"]), inner, max_size=3)
        ),
        max_leaves=8,
    ),
    st.booleans(),
    st.sampled_from(["utf-8", "utf-16", "utf-32"]),
)
def test_body_may_ask_stream_misses_no_body_that_asks(value, ascii_only, encoding):
    text = json.dumps(value, ensure_ascii=ascii_only)
    content = text.encode(encoding)
    if wants_stream(URL, JSON_HEADERS, decode_body(JSON_HEADERS, content)):
        assert body_may_ask_stream(content)


_SUSPECT = re.compile(rb"NaN|Infinity|[0-9]{16}")


@given(st.binary(max_size=64) | st.text(alphabet="0123456789NaInfity,.-x ", max_size=64))
def test_wire_suspect_agrees_with_a_regular_expression(content):
    if isinstance(content, str):
        content = content.encode()
    expected = b"\x00" in content or _SUSPECT.search(content) is not None
    assert wire_suspect(content) is expected
