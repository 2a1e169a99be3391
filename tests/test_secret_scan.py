"""The secret scan before every write (DESIGN §5).

Each secret kind in ``PATTERNS`` is planted in each place a cassette holds text: a JSON string,
an SSE payload (JSON and plain text), an NDJSON line, a byte chunk (whole, and split across
two chunks), a text body, a response header that is not a credential header, a transport error
message and a request. The write must fail with ``SecretFoundError`` naming the cassette, the
interaction and the path inside it, never the value; nothing may be written.

Every secret here is a fake built at run time, so that nothing secret-shaped sits in the source.
"""

import contextlib
import json
import os

import pytest

from pytest_toolnexus import (
    ByteStream,
    CassetteSession,
    ConnectError,
    Headers,
    ReadError,
    SecretFoundError,
    TransportRequest,
    TransportResponse,
    load_cassette,
)
from pytest_toolnexus._safety.mask import HEADER_TOKEN
from pytest_toolnexus._safety.secrets import PATTERNS, SecretScanner

# kind (as PATTERNS describes it) -> a fake value of that shape
FAKES = {
    "an OpenAI-style API key (sk-...)": "sk-" + "a1B2" * 6,
    "an OpenAI project key (sk-proj-...)": "sk-proj-" + "Ab3_" * 6,
    "an Anthropic API key (sk-ant-...)": "sk-ant-api03-" + "Zz9-" * 6,
    "a Google API key (AIza...)": "AIza" + "Sy" + "B7" * 16 + "x",
    "a bearer token": "Bearer " + "abc.DEF_123~xyz" + "Q" * 10,
    "an AWS access key id": "AKIA" + "Q7" * 8,
    "a JSON Web Token": "eyJ"
    + "hbGciOiJIUzI1NiJ9"
    + ".eyJ"
    + "zdWIiOiIxMjM0NTY3ODkwIn0"
    + "."
    + "s" * 22,
    "a private key block": "-----BEGIN " + "RSA PRIVATE" + " KEY-----",
}

JSON = Headers([("content-type", "application/json")])
SSE = Headers([("content-type", "text/event-stream")])
NDJSON = Headers([("content-type", "application/x-ndjson")])
BYTES = Headers([("content-type", "application/octet-stream")])
TEXT = Headers([("content-type", "text/plain; charset=utf-8")])


def test_every_pattern_has_a_fake():
    # These are the first eight kinds; tests/test_secret_families.py has a fake of every other
    # family the rule set knows.
    assert set(FAKES) <= {kind for kind, _ in PATTERNS}
    scanner = SecretScanner(environ={})
    for kind, fake in FAKES.items():
        assert scanner.kind_of(f"xx {fake} yy") == kind


def split(secret: str) -> tuple[bytes, bytes]:
    data = f"prefix {secret} suffix".encode()
    middle = len(b"prefix ") + len(secret) // 2
    return data[:middle], data[middle:]


# location -> (how the live transport answers the secret request, the path the hit names)
def answer(location: str, secret: str) -> TransportResponse:
    """The live answer that carries ``secret`` in ``location`` (raises for the error cases)."""
    if location == "json-body":
        return TransportResponse(200, JSON, {"choices": [{"text": f"the key is {secret}."}]})
    if location == "sse-json":
        chunk = f"data: {json.dumps({'delta': f'key={secret}'})}\n\n"
        return TransportResponse(200, SSE, ByteStream([b"data: {}\n\n", chunk.encode()]))
    if location == "sse-text":
        return TransportResponse(200, SSE, ByteStream([f"data: token {secret}\n\n".encode()]))
    if location == "ndjson":
        line = json.dumps({"message": {"content": f"<{secret}>"}}) + "\n"
        return TransportResponse(200, NDJSON, ByteStream([b'{"done":false}\n', line.encode()]))
    if location == "chunk":
        # Two chunks, the secret whole in the second: a stream the request did not ask for
        # that came in one chunk would be stored whole, as text.
        pieces = [b"prefix ", f"{secret} suffix".encode()]
        return TransportResponse(200, BYTES, ByteStream(pieces))
    if location == "split-chunks":
        return TransportResponse(200, BYTES, ByteStream(list(split(secret))))
    if location == "text-body":
        return TransportResponse(502, TEXT, f"<html>upstream said {secret}</html>".encode())
    if location == "response-header":
        headers = Headers([("content-type", "application/json"), ("x-debug-echo", secret)])
        return TransportResponse(200, headers, {"ok": True})
    if location == "error-message":
        raise ConnectError(f"proxy refused credentials {secret}")
    if location == "stream-error":

        def cut():
            yield b"data: {}\n\n"
            raise ReadError(f"connection reset while sending {secret}")

        return TransportResponse(200, SSE, ByteStream(cut()))
    raise AssertionError(location)


WHERE = {
    "json-body": "response.body.value['choices'][0]['text']",
    "sse-json": "response.body.events[1]['data']['delta']",
    "sse-text": "response.body.events[0]['text']",
    "ndjson": "response.body.lines[1]['value']['message']['content']",
    "chunk": "response.body.chunks",
    "split-chunks": "response.body.chunks",
    "text-body": "response.body.text",
    "response-header": "response.headers['x-debug-echo']",
    "error-message": "error.message",
    "stream-error": "response.error.message",
}


class Live:
    """A live transport: requests to /clean get a clean answer, /leak gets ``respond()``."""

    def __init__(self, respond):
        self.respond = respond

    def __call__(self, request):
        if request.url.endswith("/clean"):
            return TransportResponse(200, JSON, {"ok": True, "n": 1})
        return self.respond()


def drive(session, urls):
    """Send each request through the session and read every answer to its end."""
    for url in urls:
        try:
            response = session.transport(TransportRequest("POST", url, body={"q": 1}))
        except (ConnectError, ReadError):
            continue
        if isinstance(response.body, ByteStream):
            with contextlib.suppress(ReadError):
                response.body.read()


URLS = ["https://api.example.invalid/v1/clean"] * 2 + ["https://api.example.invalid/v1/leak"]


@pytest.mark.parametrize("location", list(WHERE))
@pytest.mark.parametrize("kind", list(FAKES))
def test_a_secret_anywhere_fails_the_write_and_names_where(tmp_path, kind, location):
    secret = FAKES[kind]
    path = tmp_path / "leak.msgpack"
    session = CassetteSession(
        path, record="all", timing="instant", live=Live(lambda: answer(location, secret))
    )
    drive(session, URLS)
    if location == "response-header" and HEADER_TOKEN.search(secret):
        # A token inside any header's value is redacted, not refused (test_secret_headers.py).
        session.close()
        assert secret.encode() not in path.read_bytes()
        return

    with pytest.raises(SecretFoundError) as caught:
        session.close()

    message = str(caught.value)
    assert secret not in message
    assert secret not in repr(caught.value)
    assert caught.value.path == str(path)
    assert str(path) in message
    assert f"interaction #2, {WHERE[location]}: {kind}" in message
    assert "interaction #0" not in message
    assert "interaction #1" not in message
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []  # no temp file left behind either


@pytest.mark.parametrize(
    ("where", "request_args"),
    [
        ("request.url", {"url": "https://api.example.invalid/v1/x?debug={s}"}),
        ("request.headers['x-trace']", {"headers": {"x-trace": "{s}"}}),
        (
            "request.body.value['messages'][0]['content']",
            {"body": {"messages": [{"content": "{s}"}]}},
        ),
    ],
)
def test_a_secret_in_the_request_fails_the_write(tmp_path, where, request_args):
    secret = FAKES["an OpenAI-style API key (sk-...)"]
    args = {"url": "https://api.example.invalid/v1/x", "body": None, "headers": {}}
    args.update(json.loads(json.dumps(request_args).replace("{s}", secret)))
    path = tmp_path / "leak.msgpack"
    live = Live(lambda: TransportResponse(200, JSON, {"ok": True}))
    session = CassetteSession(path, record="all", timing="instant", live=live)
    session.transport(TransportRequest("POST", args["url"], args["headers"], args["body"]))

    with pytest.raises(SecretFoundError) as caught:
        session.close()

    assert f"interaction #0, {where}: an OpenAI-style API key" in str(caught.value)
    assert secret not in str(caught.value)
    assert not path.exists()


def test_a_secret_used_as_a_map_key_is_not_printed_either(tmp_path):
    secret = FAKES["an Anthropic API key (sk-ant-...)"]
    path = tmp_path / "leak.msgpack"
    session = CassetteSession(
        path,
        record="all",
        timing="instant",
        live=Live(lambda: TransportResponse(200, JSON, {"keys": {secret: "active"}})),
    )
    drive(session, URLS[2:])

    with pytest.raises(SecretFoundError) as caught:
        session.close()

    message = str(caught.value)
    assert secret not in message
    assert "interaction #0, response.body.value['keys'][" in message
    assert "(key): an Anthropic API key" in message


@pytest.mark.parametrize("suffix", ["_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD"])
def test_the_value_of_a_credential_environment_variable_is_caught(tmp_path, monkeypatch, suffix):
    # Nothing about this value looks like a secret; only the environment says it is one.
    value = "plain" + "Value" * 3 + suffix.lower()
    name = "ACME_SERVICE" + suffix
    monkeypatch.setenv(name, value)
    path = tmp_path / "env.msgpack"
    session = CassetteSession(
        path,
        record="all",
        timing="instant",
        live=Live(lambda: TransportResponse(200, JSON, {"config": {"echo": f"[{value}]"}})),
    )
    drive(session, URLS)

    with pytest.raises(SecretFoundError) as caught:
        session.close()

    message = str(caught.value)
    assert value not in message
    assert (
        f"interaction #2, response.body.value['config']['echo']: the value of the "
        f"environment variable {name}" in message
    )
    assert not path.exists()
    assert SecretScanner(environ={}).kind_of(value) is None


def test_a_refused_write_leaves_the_previous_cassette_intact(tmp_path):
    path = tmp_path / "kept.msgpack"
    first = CassetteSession(path, record="once", timing="instant", live=Live(None))
    drive(first, URLS[:1])
    first.close()
    before = path.read_bytes()

    secret = FAKES["a JSON Web Token"]
    again = CassetteSession(
        path,
        record="all",
        timing="instant",
        live=Live(lambda: TransportResponse(200, JSON, {"id_token": secret})),
    )
    drive(again, URLS[1:])
    with pytest.raises(SecretFoundError):
        again.close()

    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.msgpack"]
    assert [i.request.url for i in load_cassette(path).interactions] == URLS[:1]


def test_allow_secrets_lets_a_known_fake_through(tmp_path):
    fake = FAKES["an OpenAI-style API key (sk-...)"]
    other = FAKES["an AWS access key id"]
    path = tmp_path / "fake.msgpack"
    live = Live(lambda: TransportResponse(200, JSON, {"example_key": fake}))
    session = CassetteSession(path, record="all", timing="instant", live=live, allow_secrets=[fake])
    drive(session, URLS)
    session.close()

    assert session.written
    assert load_cassette(path).interactions[2].response.body.value == {"example_key": fake}

    # Allowing one fake does not allow another secret.
    live = Live(lambda: TransportResponse(200, JSON, {"example_key": fake, "aws": other}))
    session = CassetteSession(
        tmp_path / "two.msgpack", record="all", timing="instant", live=live, allow_secrets=[fake]
    )
    drive(session, URLS)
    with pytest.raises(SecretFoundError) as caught:
        session.close()
    assert "response.body.value['aws']: an AWS access key id" in str(caught.value)
    assert "['example_key']" not in str(caught.value)


PLUGIN_TEST = """
import os

import pytest

from pytest_toolnexus import Headers, TransportRequest, TransportResponse

JSON = Headers([("content-type", "application/json")])


def live(request):
    return TransportResponse(200, JSON, {"echo": os.environ["FAKE_LEAKED_VALUE"]})


@pytest.mark.cassette(record="once")
def test_talks_to_a_model(cassette):
    send = cassette.transport_for(live)
    answer = send(TransportRequest("POST", "https://api.example.invalid/v1/chat", body={}))
    assert answer.status == 200
"""


def test_the_plugin_fails_the_test_without_printing_the_secret(pytester, monkeypatch):
    secret = FAKES["an OpenAI project key (sk-proj-...)"]
    monkeypatch.setenv("FAKE_LEAKED_VALUE", secret)
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_leaky=PLUGIN_TEST)

    result = pytester.runpytest("-p", "no:cacheprovider", "--cassette-record=once", "-rA")

    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) + outcomes.get("failed", 0) == 1
    assert "SecretFoundError" in output
    assert "was not written" in output
    assert os.path.join("test_leaky", "test_talks_to_a_model.msgpack") in output
    assert "interaction #0, response.body.value['echo']: an OpenAI project key" in output
    assert secret not in output
    assert not list(pytester.path.rglob("*.msgpack"))
