"""Redaction before any write, on by default (DESIGN §5, ADR 0027 D3).

Every test records through a real loopback server with ``use_cassette(record="once")`` and no
redaction option at all, then reads the bytes that reached the disk. Credential headers and
query parameters must be gone from the file; account-identifier keys (``user_id``,
``account_id``, ``organization``, ``org_id``) must be masked at any depth of request and
response JSON, inside SSE event payloads and inside NDJSON lines, with the key kept and a
placeholder value; and the redacted cassette must still answer the live request that carries
the real values, which is what broke langchain's cassettes.
"""

import json
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from pytest_toolnexus import TransportRequest, load_cassette, use_cassette
from pytest_toolnexus._safety.redact import ACCOUNT_KEYS, CREDENTIAL_HEADERS, REDACTED, redact_url
from tests.support.servers import (
    LoopbackServer,
    write_chunk,
    write_chunked_head,
    write_response,
)

# Built at run time so that nothing secret-shaped sits in the repository's source.
BEARER = "Bearer sk-" + "live" * 8
LIVE_VALUES = {
    "authorization": BEARER,
    "proxy-authorization": "Basic " + "cHJveHk6" * 3,
    "x-api-key": "sk-ant-" + "x" * 30,
    "api-key": "azure" + "k" * 27,
    "x-goog-api-key": "AIza" + "g" * 35,
    "cookie": "session=" + "c" * 20,
    "openai-organization": "org-" + "o" * 20,
    "openai-project": "proj_" + "p" * 20,
}
RESPONSE_CREDENTIALS = {
    "set-cookie": "__cf_bm=" + "s" * 24 + "; path=/; HttpOnly",
    "openai-organization": "org-" + "r" * 20,
    "openai-project": "proj_" + "q" * 20,
}
QUERY_SECRETS = {
    "key": "AIza" + "q" * 35,
    "api_key": "qk" + "1" * 30,
    "access_token": "ya29." + "t" * 30,
    "token": "tok" + "2" * 30,
}
USER_ID = "user_2FAKE" + "u" * 16
ACCOUNT_ID = 987654321
ORG_NAME = "acme-" + "z" * 12
ORG_ID = "org_" + "i" * 16


def request_body(user_id=USER_ID, account_id=ACCOUNT_ID, stream=False):
    return {
        "model": "gpt-4o-mini",
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
        "metadata": {"user_id": user_id, "trace": {"account_id": account_id}},
        "organization": {"name": ORG_NAME, "seats": 3},
        "history": [[{"org_id": ORG_ID, "note": "kept"}]],
    }


def response_document():
    return {
        "id": "chatcmpl-1",
        "user_id": USER_ID,
        "choices": [{"message": {"content": "hello", "meta": {"account_id": ACCOUNT_ID}}}],
        "usage": {"total_tokens": 3, "billing": [{"org_id": ORG_ID, "ratio": 0.5}]},
        "organization": None,
    }


def sse_events():
    return [
        {"delta": "Hel", "user_id": USER_ID},
        {"delta": "lo", "actor": {"account_id": ACCOUNT_ID, "flags": [{"org_id": ORG_ID}]}},
        {"delta": "", "usage": {"organization": {"id": ORG_ID}}},
    ]


def ndjson_lines():
    return [
        {"message": {"content": "Hel"}, "user_id": USER_ID},
        {"message": {"content": "lo"}, "done": False, "org": {"org_id": ORG_ID}},
        {"done": True, "account_id": ACCOUNT_ID},
    ]


def handler(request, conn):
    path = urlsplit(request.target).path
    credentials = list(RESPONSE_CREDENTIALS.items())
    if path.endswith("/sse"):
        write_chunked_head(conn, 200, [("Content-Type", "text/event-stream"), *credentials])
        for event in sse_events():
            write_chunk(conn, f"data: {json.dumps(event)}\n\n".encode())
        write_chunk(conn, b"data: [DONE]\n\n")
        write_chunk(conn, b"")
    elif path.endswith("/ndjson"):
        write_chunked_head(conn, 200, [("Content-Type", "application/x-ndjson"), *credentials])
        for line in ndjson_lines():
            write_chunk(conn, (json.dumps(line) + "\n").encode())
        write_chunk(conn, b"")
    elif path.endswith("/big-json"):
        # JSON with a number msgpack cannot carry is stored as its text, and masked there too.
        body = json.dumps({"error": "bad model", "user_id": USER_ID, "n": 2**70}).encode()
        write_response(conn, 400, [("Content-Type", "application/json"), *credentials], body)
    elif path.endswith("/text"):
        body = json.dumps({"error": "upstream", "account_id": ACCOUNT_ID}).encode()
        write_response(conn, 502, [("Content-Type", "text/plain"), *credentials], body)
    else:
        body = json.dumps(response_document()).encode()
        write_response(conn, 200, [("Content-Type", "application/json"), *credentials], body)


@pytest.fixture
def server():
    with LoopbackServer(handler) as running:
        yield running


@pytest.fixture
def path(tmp_path):
    return tmp_path / "cassettes" / "redaction.msgpack"


def url_with_secrets(server, route, values=QUERY_SECRETS):
    query = "&".join(f"{k}={v}" for k, v in values.items())
    return server.url(f"/v1/{route}?{query}&model=gpt-4o-mini&alt=sse")


def record(path, server, route, *, stream=False):
    """Record one request through a real httpx client, with every default left as it is."""
    with (
        use_cassette(path, record="once") as cassette,
        httpx.Client(transport=cassette.http_transport(), headers=LIVE_VALUES) as client,
    ):
        request = client.build_request(
            "POST", url_with_secrets(server, route), json=request_body(stream=stream)
        )
        response = client.send(request, stream=stream)
        try:
            content = response.read()
        finally:
            response.close()
    assert cassette.written
    return content


def assert_none_of_the_live_values_in(data: bytes):
    every = [*LIVE_VALUES.values(), *RESPONSE_CREDENTIALS.values(), *QUERY_SECRETS.values()]
    for value in [*every, USER_ID, ORG_ID, ORG_NAME, "987654321"]:
        assert value.encode() not in data, f"{value[:6]}... reached the cassette file"


def test_credential_headers_are_redacted_in_the_written_file(path, server):
    record(path, server, "chat/completions")

    data = path.read_bytes()
    assert_none_of_the_live_values_in(data)
    (interaction,) = load_cassette(path).interactions
    sent = interaction.request.headers
    for name in LIVE_VALUES:
        assert sent.get_list(name) == [REDACTED], name
    received = interaction.response.headers
    for name in RESPONSE_CREDENTIALS:
        assert received.get_list(name) == [REDACTED], name
    # Only credentials go: the rest of the headers are kept as they were.
    assert sent["content-type"] == "application/json"
    assert received["content-type"] == "application/json"
    assert {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "cookie",
        "set-cookie",
        "openai-organization",
        "openai-project",
    } <= CREDENTIAL_HEADERS


def test_credential_query_parameters_are_masked_in_the_stored_url(path, server):
    record(path, server, "chat/completions")

    (interaction,) = load_cassette(path).interactions
    stored = dict(parse_qsl(urlsplit(interaction.request.url).query))
    assert stored == {
        "key": REDACTED,
        "api_key": REDACTED,
        "access_token": REDACTED,
        "token": REDACTED,
        "model": "gpt-4o-mini",
        "alt": "sse",
    }
    assert urlsplit(interaction.request.url).path == "/v1/chat/completions"
    assert_none_of_the_live_values_in(path.read_bytes())


def test_account_keys_are_masked_at_any_depth_in_json_bodies_keeping_the_shape(path, server):
    seen = json.loads(record(path, server, "chat/completions"))

    # The live client saw the real answer: redaction happens on the way to the disk only.
    assert seen == response_document()
    (interaction,) = load_cassette(path).interactions
    sent = interaction.request.body.value
    assert sent["metadata"] == {"user_id": REDACTED, "trace": {"account_id": 0}}
    assert sent["organization"] == REDACTED  # a map under a masked key is masked whole
    assert sent["history"] == [[{"org_id": REDACTED, "note": "kept"}]]
    assert sent["messages"] == [{"role": "user", "content": "hi"}]
    got = interaction.response.body.value
    assert got == {
        "id": "chatcmpl-1",
        "user_id": REDACTED,
        "choices": [{"message": {"content": "hello", "meta": {"account_id": 0}}}],
        "usage": {"total_tokens": 3, "billing": [{"org_id": REDACTED, "ratio": 0.5}]},
        "organization": None,  # nothing to hide, and null keeps its type
    }
    assert_none_of_the_live_values_in(path.read_bytes())


def test_account_keys_are_masked_inside_sse_event_payloads(path, server):
    record(path, server, "sse", stream=True)

    (interaction,) = load_cassette(path).interactions
    events = interaction.response.body.events
    assert [e.get("data") for e in events] == [
        {"delta": "Hel", "user_id": REDACTED},
        {"delta": "lo", "actor": {"account_id": 0, "flags": [{"org_id": REDACTED}]}},
        {"delta": "", "usage": {"organization": REDACTED}},
        None,
    ]
    assert events[-1]["text"] == "[DONE]"
    assert all(isinstance(e["t"], float) for e in events)
    assert interaction.request.body.value["metadata"]["user_id"] == REDACTED
    assert_none_of_the_live_values_in(path.read_bytes())


def test_account_keys_are_masked_inside_ndjson_lines(path, server):
    record(path, server, "ndjson", stream=True)

    (interaction,) = load_cassette(path).interactions
    assert [line["value"] for line in interaction.response.body.lines] == [
        {"message": {"content": "Hel"}, "user_id": REDACTED},
        {"message": {"content": "lo"}, "done": False, "org": {"org_id": REDACTED}},
        {"done": True, "account_id": 0},
    ]
    assert_none_of_the_live_values_in(path.read_bytes())


def test_json_kept_as_text_is_masked_too(path, server):
    seen = record(path, server, "big-json")

    assert json.loads(seen)["user_id"] == USER_ID
    (interaction,) = load_cassette(path).interactions
    assert interaction.response.status == 400
    assert json.loads(interaction.response.body.text) == {
        "error": "bad model",
        "user_id": REDACTED,
        "n": 2**70,
    }
    assert_none_of_the_live_values_in(path.read_bytes())


def test_a_whole_text_body_holding_json_is_masked(path, server):
    with use_cassette(path, record="once") as cassette:
        response = cassette.transport(
            TransportRequest("GET", url_with_secrets(server, "text"), headers=LIVE_VALUES)
        )

    assert json.loads(response.body)["account_id"] == ACCOUNT_ID
    (interaction,) = load_cassette(path).interactions
    assert json.loads(interaction.response.body.text) == {"error": "upstream", "account_id": 0}
    assert_none_of_the_live_values_in(path.read_bytes())


@pytest.mark.parametrize(
    ("route", "stream"), [("chat/completions", False), ("sse", True), ("ndjson", True)]
)
def test_a_redacted_cassette_still_matches_the_live_request(path, server, route, stream):
    recorded = record(path, server, route, stream=stream)
    server.stop()  # replay must not need it
    hits = len(server.requests)

    # The live request carries real (and different: rotated) credentials and account ids.
    rotated_query = {name: value[::-1] for name, value in QUERY_SECRETS.items()}
    rotated_headers = {name: value + "2" for name, value in LIVE_VALUES.items()}
    with (
        use_cassette(path, record="none") as cassette,
        httpx.Client(transport=cassette.http_transport(), headers=rotated_headers) as client,
    ):
        body = request_body(user_id="user_2OTHER" + "w" * 16, account_id=1234, stream=stream)
        response = client.post(url_with_secrets(server, route, rotated_query), json=body)
        replayed = response.read()

    assert response.status_code == 200
    assert [r.replayed for r in cassette.requests] == [True]
    assert cassette.unused() == []
    assert len(server.requests) == hits
    # What replays is what was written: the masked values, in the recorded framing.
    if route == "chat/completions":
        assert json.loads(recorded) == response_document()
        assert json.loads(replayed)["user_id"] == REDACTED
        assert json.loads(replayed)["choices"][0]["message"]["meta"] == {"account_id": 0}
    elif route == "sse":
        assert replayed.count(b"data: ") == 4
        assert f'"user_id":"{REDACTED}"'.encode() in replayed
    else:
        lines = [json.loads(line) for line in replayed.splitlines()]
        assert lines[0] == {"message": {"content": "Hel"}, "user_id": REDACTED}
    assert USER_ID.encode() not in replayed


def test_account_key_list_is_the_adr_0027_list():
    assert frozenset({"user_id", "account_id", "organization", "org_id"}) == ACCOUNT_KEYS


def test_a_presigned_aws_url_keeps_neither_its_signature_nor_its_token():
    url = (
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse?"
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20261201"
        "%2Fus-east-1%2Fbedrock%2Faws4_request&X-Amz-Date=20261201T120000Z"
        "&X-Amz-Security-Token=FwoGZXIvYXdzEFAKE&X-Amz-Signature=5fe840b2991f9c64"
    )

    stored = dict(parse_qsl(urlsplit(redact_url(url)).query))

    assert stored == {
        "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
        "X-Amz-Credential": REDACTED,
        "X-Amz-Date": "20261201T120000Z",
        "X-Amz-Security-Token": REDACTED,
        "X-Amz-Signature": REDACTED,
    }
