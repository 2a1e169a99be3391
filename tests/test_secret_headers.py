"""Secrets in headers beyond the credential list (issue 23, rows 3 and 5): a key used as a
header's *name* is refused at the write and by ``check``; a bearer token or a JSON Web Token
inside the value of any header (``Sec-WebSocket-Protocol: base64url.bearer.authorization.k8s.io.
<JWT>``) is redacted at record time, as ``Authorization`` is.

Every secret here is a fake built at run time.
"""

import base64
import json

import pytest

from pytest_toolnexus import (
    Cassette,
    CassetteSession,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    SecretFoundError,
    TransportRequest,
    TransportResponse,
    load_cassette,
)
from pytest_toolnexus._cli.main import main as cli
from pytest_toolnexus._store.cassette import JsonBody
from tests.test_secret_scan import FAKES, JSON

URL = "https://api.example.invalid/v1/chat"
KEY = FAKES["an OpenAI project key (sk-proj-...)"]


def answering(headers):
    def live(request):
        return TransportResponse(200, Headers([*JSON.multi_items(), *headers]), {"ok": True})

    return live


# -- 3: a key used as a header name ----------------------------------------------------------


@pytest.mark.parametrize("side", ["request", "response"])
def test_a_key_used_as_a_header_name_is_refused_without_printing_it(tmp_path, side):
    path = tmp_path / "c.msgpack"
    sent = {KEY: "1"} if side == "request" else {}
    live = answering([(KEY, "1")] if side == "response" else [])
    session = CassetteSession(path, record="all", timing="instant", live=live)
    session.transport(TransportRequest("POST", URL, sent, {"q": 1}))

    with pytest.raises(SecretFoundError) as caught:
        session.close()

    message = str(caught.value)
    assert KEY not in message
    assert f"interaction #0, {side}.headers['<secret>'] (name): an OpenAI project key" in message
    assert not path.exists()


def test_check_refuses_a_key_used_as_a_header_name(tmp_path, capsys):
    path = tmp_path / "leaky.msgpack"
    interaction = Interaction(
        RecordedRequest("POST", URL, Headers([(KEY.lower(), "x"), (KEY, "y")]), JsonBody({})),
        RecordedResponse(200, JSON, JsonBody({"ok": True})),
    )
    Cassette(path, [interaction], {}).save(unsafe_verbatim=True)
    capsys.readouterr()

    assert cli(["check", str(path)]) == 1

    out = capsys.readouterr().out
    assert f"FAIL {path}: " in out
    assert "request.headers['<secret>'] (name): an OpenAI project key" in out
    assert KEY not in out
    assert KEY.lower() not in out


# -- 5: a token inside any header's value --------------------------------------------------------


def b64url(text):
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def jwt(subject):
    header = b64url(json.dumps({"alg": "RS256", "kid": "k1"}))
    claims = b64url(json.dumps({"sub": subject, "aud": "kubernetes"}))
    return f"{header}.{claims}.{b64url('signature-of-' + subject) * 2}"


def k8s_protocol(subject):
    return f"base64url.bearer.authorization.k8s.io.{b64url(jwt(subject))}"


OPAQUE = "tok_" + "9fQ2xLm7" * 4

# header name -> (the value sent, what the cassette keeps)
TOKEN_HEADERS = {
    "Sec-WebSocket-Protocol": (
        f"{k8s_protocol('alice')}, base64.channel.k8s.io",
        "base64url.bearer.authorization.k8s.io.REDACTED, base64.channel.k8s.io",
    ),
    "X-Upstream-Authorization": (f"Bearer {OPAQUE}", "Bearer REDACTED"),
    "X-Id-Token": (jwt("alice"), "REDACTED"),
    "X-Forwarded-Jwt": (f"v1;{b64url(jwt('alice'))}", "v1;REDACTED"),
}


@pytest.mark.parametrize("name", list(TOKEN_HEADERS))
def test_a_token_inside_any_header_value_is_redacted_when_recorded(tmp_path, name):
    sent, kept = TOKEN_HEADERS[name]
    path = tmp_path / "c.msgpack"
    live = answering([(name, sent)])
    session = CassetteSession(path, record="all", timing="instant", live=live)
    answer = session.transport(TransportRequest("POST", URL, {name: sent}, {"q": 1}))
    assert answer.headers[name] == sent  # the client reads what the server sent

    session.close()  # written, not refused: nothing of the token is left to refuse

    raw = path.read_bytes()
    for token in (k8s_protocol("alice"), b64url(jwt("alice")), jwt("alice"), OPAQUE):
        assert token.encode() not in raw
    (interaction,) = load_cassette(path).interactions
    assert interaction.request.headers[name] == kept
    assert interaction.response.headers[name] == kept


@pytest.mark.parametrize("prefix", ["openai-insecure-api-key", "OpenAI-Insecure-API-Key"])
def test_the_key_offered_as_a_realtime_subprotocol_is_redacted_when_recorded(tmp_path, prefix):
    # How a browser or Node client passes its key to OpenAI's Realtime API.
    name = "Sec-WebSocket-Protocol"
    sent = f"realtime, {prefix}.{KEY}, openai-beta.realtime-v1"
    path = tmp_path / "c.msgpack"
    session = CassetteSession(path, record="all", timing="instant", live=answering([]))
    session.transport(TransportRequest("GET", URL, {name: sent}))

    session.close()  # written, not refused: the key is gone before the scan

    assert KEY.encode() not in path.read_bytes()
    (interaction,) = load_cassette(path).interactions
    assert interaction.request.headers[name] == (
        f"realtime, {prefix}.REDACTED, openai-beta.realtime-v1"
    )


def test_a_redacted_token_header_still_matches_a_rotated_token(tmp_path):
    name = "Sec-WebSocket-Protocol"
    path = tmp_path / "c.msgpack"
    session = CassetteSession(path, record="all", timing="instant", live=answering([]))
    session.transport(TransportRequest("GET", URL, {name: k8s_protocol("alice")}))
    session.close()

    replay = CassetteSession(path, record="none", timing="instant", match_headers=[name])
    answer = replay.transport(TransportRequest("GET", URL, {name: k8s_protocol("bob")}))

    assert answer.status == 200
    replay.close()


def test_headers_without_a_token_are_kept_as_they_are():
    from pytest_toolnexus._safety.redact import redact_headers

    headers = Headers(
        [
            ("www-authenticate", 'Bearer realm="api", error="invalid_token"'),
            ("x-request-id", "req_" + "a1b2c3d4" * 3),
            ("etag", '"' + "3f2a" * 10 + '"'),
            ("sec-websocket-protocol", "base64.channel.k8s.io"),
        ]
    )

    assert redact_headers(headers) is headers
