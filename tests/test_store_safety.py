"""Safety lives in the store (issue 10, point 5): every write of a cassette redacts and scans.

The recorder (the private ``_record.RecordingTransport``) used on its own hands its callback the
interaction as it was sent and received, credentials and all. These tests record real traffic
from a loopback server through it (sync and async), save what it handed over with a plain
``Cassette.save()``, and read the file back raw: no credential header, no key in a query string
and no account id may be in its bytes. A secret no rule can name (a key inside a JSON string)
must stop the write with ``SecretFoundError``, which never echoes it. Writing as given takes the
named ``unsafe_verbatim=True``. The builder and a session's ``before_write`` hook go through the
same gate.
"""

import json
from urllib.parse import parse_qsl, urlsplit

import msgpack
import pytest

from pytest_toolnexus import (
    Cassette,
    Interaction,
    LiveTransport,
    RecordedRequest,
    RecordedResponse,
    SecretFoundError,
    TransportRequest,
    use_cassette,
)
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._session.record import RecordingTransport
from pytest_toolnexus._store.cassette import JsonBody, SseBody
from pytest_toolnexus.build import build_cassette
from tests.support.observers import Kept
from tests.support.servers import LoopbackServer, write_chunk, write_chunked_head, write_response

# Built at run time so that nothing secret-shaped sits in the repository's source.
PROJECT_KEY = "sk-proj-" + "Pq7_" * 8
GOOGLE_KEY = "AIza" + "Gk3x" * 8 + "abc"
REQUEST_CREDENTIALS = {
    "authorization": "Bearer " + PROJECT_KEY,
    "x-api-key": "sk-ant-" + "a1" * 15,
    "api-key": "azure" + "z9" * 14,
    "x-goog-api-key": "AIza" + "h" * 35,
    "cookie": "session=" + "c4" * 12,
    "openai-organization": "org-" + "w" * 22,
    "openai-project": "proj_" + "j" * 22,
}
RESPONSE_CREDENTIALS = {
    "set-cookie": "__cf_bm=" + "s8" * 14 + "; path=/; HttpOnly",
    "openai-organization": "org-" + "v" * 22,
    "openai-project": "proj_" + "k" * 22,
}
USER_ID = "user_" + "Uu5" * 8
ACCOUNT_ID = "acct_" + "Aa6" * 8
ORG_ID = "org_" + "Oo7" * 8


def request_body(stream):
    return {
        "model": "gpt-4o-mini",
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
        "metadata": {"user_id": USER_ID},
    }


def handler(request, conn):
    credentials = list(RESPONSE_CREDENTIALS.items())
    if urlsplit(request.target).path.endswith("/sse"):
        write_chunked_head(conn, 200, [("Content-Type", "text/event-stream"), *credentials])
        for event in ({"delta": "Hel", "user_id": USER_ID}, {"delta": "lo", "org_id": ORG_ID}):
            write_chunk(conn, f"data: {json.dumps(event)}\n\n".encode())
        write_chunk(conn, b"data: [DONE]\n\n")
        write_chunk(conn, b"")
    else:
        document = {"id": "chatcmpl-1", "user_id": USER_ID, "owner": {"account_id": ACCOUNT_ID}}
        body = json.dumps(document).encode()
        write_response(conn, 200, [("Content-Type", "application/json"), *credentials], body)


@pytest.fixture
def server():
    with LoopbackServer(handler) as running:
        yield running


@pytest.fixture
def anyio_backend():
    return "asyncio"


def live_request(server, route, stream):
    url = server.url(f"/v1/{route}?key={GOOGLE_KEY}&alt=sse")
    return TransportRequest(
        "POST",
        url,
        headers=[("content-type", "application/json"), *REQUEST_CREDENTIALS.items()],
        body=request_body(stream),
        stream=stream,
    )


EVERY_SECRET = [
    *REQUEST_CREDENTIALS.values(),
    *RESPONSE_CREDENTIALS.values(),
    PROJECT_KEY,
    GOOGLE_KEY,
    USER_ID,
    ACCOUNT_ID,
    ORG_ID,
]


def raw_document(path):
    """The written file, read with msgpack alone (no loader of ours in between)."""
    data = path.read_bytes()
    return data, msgpack.unpackb(data, raw=False)


def assert_nothing_secret_in(path):
    data, document = raw_document(path)
    for value in EVERY_SECRET:
        assert value.encode() not in data, f"{value[:8]}... reached {path.name}"
    for interaction in document["interactions"]:
        request = interaction["request"]
        sent = {name.lower(): value for name, value in request["headers"]}
        for name in REQUEST_CREDENTIALS:
            assert sent[name] == "REDACTED", name
        query = dict(parse_qsl(urlsplit(request["url"]).query))
        assert query == {"key": "REDACTED", "alt": "sse"}
        assert request["body"]["value"]["metadata"] == {"user_id": "REDACTED"}
        received = {name.lower(): value for name, value in interaction["response"]["headers"]}
        for name in RESPONSE_CREDENTIALS:
            assert received[name] == "REDACTED", name
        # What is not a credential stays as it was.
        assert sent["content-type"] == "application/json"
        assert request["body"]["value"]["messages"] == [{"role": "user", "content": "hi"}]
    return document


def record_sync(server, route, stream):
    recorded = []
    with LiveTransport() as live:
        recorder = RecordingTransport(live, Kept(recorded))
        response = recorder(live_request(server, route, stream))
        if stream:
            b"".join(response.body)
    return recorded


async def record_async(server, route, stream):
    recorded = []
    async with LiveTransport() as live:
        recorder = RecordingTransport(live, Kept(recorded))
        response = await recorder.acall(live_request(server, route, stream))
        if stream:
            async for _ in response.body:
                pass
    return recorded


@pytest.mark.parametrize(("route", "stream"), [("chat/completions", False), ("sse", True)])
def test_recording_transport_and_save_write_no_credential_key_or_account_id(
    tmp_path, server, route, stream
):
    recorded = record_sync(server, route, stream)
    # The recorder hands over what crossed the wire: the credentials are there in memory.
    assert recorded[0].request.headers["authorization"] == REQUEST_CREDENTIALS["authorization"]
    path = tmp_path / "recorded.msgpack"

    Cassette(path, recorded, {}).save()

    document = assert_nothing_secret_in(path)
    body = document["interactions"][0]["response"]["body"]
    if stream:
        assert [e["data"] for e in body["events"][:2]] == [
            {"delta": "Hel", "user_id": "REDACTED"},
            {"delta": "lo", "org_id": "REDACTED"},
        ]
    else:
        assert body["value"] == {
            "id": "chatcmpl-1",
            "user_id": "REDACTED",
            "owner": {"account_id": "REDACTED"},
        }
    # Saving redacts what is written, not the caller's objects.
    assert recorded[0].request.headers["authorization"] == REQUEST_CREDENTIALS["authorization"]


@pytest.mark.anyio
@pytest.mark.parametrize(("route", "stream"), [("chat/completions", False), ("sse", True)])
async def test_async_recording_transport_and_save_write_no_credential_key_or_account_id(
    tmp_path, server, route, stream
):
    recorded = await record_async(server, route, stream)
    path = tmp_path / "recorded-async.msgpack"

    Cassette(path, recorded, {}).save()

    assert_nothing_secret_in(path)


def test_the_named_opt_out_writes_the_interactions_as_they_are(tmp_path, server):
    recorded = record_sync(server, "chat/completions", False)
    path = tmp_path / "verbatim.msgpack"

    Cassette(path, recorded, {}).save(unsafe_verbatim=True)

    data, _ = raw_document(path)
    for value in [*REQUEST_CREDENTIALS.values(), *RESPONSE_CREDENTIALS.values(), USER_ID]:
        assert value.encode() in data
    assert GOOGLE_KEY.encode() in data


def test_the_opt_out_cannot_be_passed_by_position(tmp_path):
    cassette = Cassette(tmp_path / "c.msgpack", [], {})

    with pytest.raises(TypeError):
        cassette.save(True)

    assert not cassette.path.exists()


def leaky_interaction():
    """An interaction whose only secret sits where no redaction rule looks: a JSON string."""
    return Interaction(
        RecordedRequest(
            "POST",
            "https://api.example.invalid/v1/chat/completions",
            Headers([("content-type", "application/json")]),
            JsonBody({"messages": [{"role": "user", "content": f"my key is {PROJECT_KEY}"}]}),
        ),
        RecordedResponse(200, Headers(), JsonBody({"ok": True}), 1.0, 1.0),
    )


def test_a_secret_no_rule_names_is_refused_without_echoing_it(tmp_path):
    path = tmp_path / "leaky.msgpack"

    with pytest.raises(SecretFoundError) as caught:
        Cassette(path, [leaky_interaction()], {}).save()

    message = str(caught.value)
    assert PROJECT_KEY not in message
    assert "Pq7_" not in message
    assert f"cassette {path} was not written: it would hold 1 secret(s)" in message
    assert (
        "interaction #0, request.body.value['messages'][0]['content']: "
        "an OpenAI project key (sk-proj-...)" in message
    )
    assert "allow_secrets" in message
    assert caught.value.path == str(path)
    assert list(tmp_path.iterdir()) == []  # no file, no temp file


def test_a_refused_save_leaves_the_previous_cassette_byte_for_byte(tmp_path):
    path = tmp_path / "kept.msgpack"
    Cassette(path, [], {"generation": 1}).save()
    before = path.read_bytes()

    with pytest.raises(SecretFoundError):
        Cassette(path, [leaky_interaction()], {"generation": 2}).save()

    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["kept.msgpack"]


def test_allow_secrets_lets_a_known_fake_through_a_save(tmp_path):
    path = tmp_path / "fake.msgpack"

    Cassette(path, [leaky_interaction()], {}).save(allow_secrets=[PROJECT_KEY])

    assert PROJECT_KEY.encode() in path.read_bytes()


def test_the_builder_redacts_and_scans_what_it_writes(tmp_path):
    interaction = Interaction(
        RecordedRequest(
            "POST",
            f"https://generativelanguage.googleapis.com/v1beta/models/m:generateContent?key={GOOGLE_KEY}",
            Headers([("x-goog-api-key", GOOGLE_KEY)]),
            JsonBody({"user_id": USER_ID}),
        ),
        RecordedResponse(200, Headers([("set-cookie", "a=" + "b" * 20)]), JsonBody({}), 1.0, 1.0),
    )
    path = tmp_path / "built.msgpack"

    build_cassette(path, [interaction])

    data, document = raw_document(path)
    assert GOOGLE_KEY.encode() not in data
    assert USER_ID.encode() not in data
    assert b"b" * 20 not in data
    assert document["interactions"][0]["request"]["headers"] == [["x-goog-api-key", "REDACTED"]]
    with pytest.raises(SecretFoundError):
        build_cassette(tmp_path / "leaky.msgpack", [leaky_interaction()])
    assert not (tmp_path / "leaky.msgpack").exists()


def test_what_a_before_write_hook_adds_is_redacted_too(tmp_path, server):
    path = tmp_path / "hooked.msgpack"

    def add_a_hand_made_interaction(cassette):
        cassette.interactions.append(
            Interaction(
                RecordedRequest("GET", f"https://example.invalid/?key={GOOGLE_KEY}"),
                RecordedResponse(
                    200,
                    Headers([("set-cookie", RESPONSE_CREDENTIALS["set-cookie"])]),
                    JsonBody({"org_id": ORG_ID}),
                    1.0,
                    1.0,
                ),
            )
        )

    with use_cassette(path, record="once", before_write=add_a_hand_made_interaction) as session:
        session.transport(live_request(server, "chat/completions", False))

    data, document = raw_document(path)
    for value in EVERY_SECRET:
        assert value.encode() not in data, f"{value[:8]}... reached {path.name}"
    assert len(document["interactions"]) == 2
    assert document["interactions"][1]["request"]["url"] == "https://example.invalid/?key=REDACTED"


def test_account_keys_nested_past_the_recursion_limit_are_masked_at_save(tmp_path):
    value = {"user_id": USER_ID}
    for _ in range(480):
        value = {"wrap": [value]}  # 960 levels: msgpack carries it, Python recursion does not
    interaction = Interaction(
        RecordedRequest("POST", "https://api.example.invalid/v1/x", Headers(), JsonBody(value)),
        RecordedResponse(200, Headers(), SseBody([{"t": 1.0, "data": value}]), 1.0, 2.0),
    )
    path = tmp_path / "deep.msgpack"

    Cassette(path, [interaction], {}).save()

    data = path.read_bytes()
    assert USER_ID.encode() not in data
    assert data.count(b"REDACTED") == 2
