"""Well-known token families in every position a cassette holds text (issue 23, row 4).

Each family (GitHub classic and fine-grained, Slack bot and user, an AWS secret access key,
GitLab, Stripe live, npm, PyPI, and opaque values under credential-named fields) is planted in
each of 23 positions: request headers, query, URL path segments (a whole segment, and inside
one with other text), JSON leaves, multipart and form fields; response
headers, JSON leaves, SSE data (JSON, text, comments), NDJSON lines (JSON and text), error
bodies (JSON and HTML), byte chunks, text bodies, transport and stream errors; the cassette's
``meta``. The write must be refused, naming where, never the value. And what is no secret
(ordinary model text, UUIDs, request ids, an ``etag``'s hash, base64 audio, model and file
ids in URL paths, the committed cassettes) must still pass.

Every token here is generated at run time, shaped as its issuer shapes them, and fake.
"""

import contextlib
import json
import random
import string
import uuid
from pathlib import Path
from urllib.parse import quote

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
from pytest_toolnexus._safety.rules import RULES
from pytest_toolnexus._safety.secrets import SecretScanner

ROOT = Path(__file__).resolve().parent.parent
RNG = random.Random(23)
ALNUM = string.ascii_letters + string.digits


def draw(alphabet, n):
    return "".join(RNG.choice(alphabet) for _ in range(n))


def aws_secret():
    while True:
        value = draw(ALNUM + "/+", 40)
        if (
            any(c.isupper() for c in value)
            and any(c.islower() for c in value)
            and any(c.isdigit() for c in value)
        ):
            return value


def opaque():
    return draw(string.ascii_letters, 6) + draw(string.digits, 4) + draw(ALNUM, 14)


# family -> a fake token of its shape (a field family: (field name, opaque value))
TOKENS = {
    "ghp_": "ghp_" + draw(ALNUM, 36),
    "github_pat_": "github_pat_" + draw(ALNUM, 22) + "_" + draw(ALNUM, 59),
    "xoxb-": f"xoxb-{draw(string.digits, 12)}-{draw(string.digits, 13)}-"
    + draw(string.ascii_lowercase + string.digits, 24),
    "xoxp-": f"xoxp-{draw(string.digits, 12)}-{draw(string.digits, 12)}-"
    f"{draw(string.digits, 13)}-" + draw("0123456789abcdef", 32),
    "aws secret key": aws_secret(),
    "glpat-": "glpat-" + draw(ALNUM + "_-", 20),
    "sk_live_": "sk_live_" + draw(ALNUM, 24),
    "npm": "npm_" + draw(ALNUM, 36),
    "pypi": "pypi-AgEIcHlwaS5vcmc" + draw(ALNUM + "-_", 90),
}
FIELDS = {
    "clientSecret": ("clientSecret", opaque()),
    "refresh_token": ("refresh_token", opaque()),
    "password": ("password", opaque()),
}
FAMILIES = [*TOKENS, *FIELDS]

JSON = Headers([("content-type", "application/json")])
SSE = Headers([("content-type", "text/event-stream")])
NDJSON = Headers([("content-type", "application/x-ndjson")])
BYTES = Headers([("content-type", "application/octet-stream")])
TEXT = Headers([("content-type", "text/plain; charset=utf-8")])
HTML = Headers([("content-type", "text/html")])
HOST = "https://api.example.invalid"
URL = f"{HOST}/v1/things"


class Planted:
    """One family's secret, in the forms the positions need."""

    def __init__(self, family):
        if family in FIELDS:
            self.name, self.secret = FIELDS[family]
            self.value = {self.name: self.secret}  # a JSON leaf under its name
            self.text = f'{{"{self.name}": "{self.secret}"}}'  # inside text
            self.form = f"{self.name}={self.secret}"  # a query or form pair
            self.field = (self.name, self.secret)  # a header or multipart field
            quoted = quote(self.secret, safe="")
            self.path = f"{self.name}/{quoted}/usage"  # a segment after its name's
            self.in_segment = f"session;{self.name}={quoted}/refresh"  # a matrix parameter
        else:
            self.name, self.secret = "note", TOKENS[family]
            self.value = {"note": self.secret}
            self.text = f"the token is {self.secret} ok"
            self.form = f"note={self.secret}"
            self.field = ("x-note", self.secret)
            # quoted as a client puts a value in a path: an AWS key's '/' and '+' are escaped
            quoted = quote(self.secret, safe="")
            self.path = f"keys/{quoted}/usage"
            self.in_segment = f"keys/{quoted}:revoke"  # a custom method, as Google's APIs


def multipart(name, value):
    return (
        f'--b0undary\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        "--b0undary--\r\n"
    ).encode()


def _cut(p):
    yield b"data: {}\n\n"
    raise ReadError(f"reset while reading {p.text}")


# position -> (request, how the live transport answers it, meta), each built from a Planted
POSITIONS = {
    "request header": lambda p: (TransportRequest("POST", URL, dict([p.field]), {"q": 1}), None),
    "request query": lambda p: (TransportRequest("GET", f"{URL}?{p.form}&page=2"), None),
    "request URL path segment": lambda p: (TransportRequest("GET", f"{HOST}/v1/{p.path}"), None),
    "request URL path, inside a segment": lambda p: (
        TransportRequest("POST", f"{HOST}/v1/{p.in_segment}", body={"q": 1}),
        None,
    ),
    "request JSON leaf": lambda p: (
        TransportRequest("POST", URL, body={"messages": [{"content": "hi", "x": p.value}]}),
        None,
    ),
    "request multipart field": lambda p: (
        TransportRequest(
            "POST",
            URL,
            {"content-type": "multipart/form-data; boundary=b0undary"},
            multipart(*p.field),
        ),
        None,
    ),
    "request form body": lambda p: (
        TransportRequest(
            "POST",
            URL,
            {"content-type": "application/x-www-form-urlencoded"},
            f"grant_type=x&{p.form}".encode(),
        ),
        None,
    ),
    "response header": lambda p: (
        None,
        TransportResponse(200, Headers([*JSON.multi_items(), p.field]), {"ok": True}),
    ),
    "response JSON leaf": lambda p: (None, TransportResponse(200, JSON, {"data": p.value})),
    "response JSON list item": lambda p: (
        None,
        TransportResponse(200, JSON, {"items": [{"a": 1}, p.value]}),
    ),
    "SSE data (JSON)": lambda p: (
        None,
        TransportResponse(
            200, SSE, ByteStream([b"data: {}\n\n", f"data: {json.dumps(p.value)}\n\n".encode()])
        ),
    ),
    "SSE data (text)": lambda p: (
        None,
        TransportResponse(200, SSE, ByteStream([f"data: {p.text}\n\n".encode()])),
    ),
    "SSE comment": lambda p: (
        None,
        TransportResponse(200, SSE, ByteStream([f": {p.text}\ndata: {{}}\n\n".encode()])),
    ),
    "NDJSON line (JSON)": lambda p: (
        None,
        TransportResponse(
            200, NDJSON, ByteStream([b'{"done":false}\n', (json.dumps(p.value) + "\n").encode()])
        ),
    ),
    "NDJSON line (text)": lambda p: (
        None,
        TransportResponse(
            200, NDJSON, ByteStream([b'{"done":false}\n', f"oops {p.text}\n".encode()])
        ),
    ),
    "error body (JSON)": lambda p: (
        None,
        TransportResponse(401, JSON, {"error": {"message": "bad", "echo": p.value}}),
    ),
    "error body (HTML)": lambda p: (
        None,
        TransportResponse(502, HTML, f"<html><body>{p.text}</body></html>".encode()),
    ),
    "text body": lambda p: (None, TransportResponse(200, TEXT, f"echo {p.text}".encode())),
    "byte chunks": lambda p: (
        None,
        TransportResponse(200, BYTES, ByteStream([b"\x00\x01 ", f"{p.text} \xff".encode()])),
    ),
    "transport error": lambda p: (None, ConnectError(f"proxy said {p.text}")),
    "stream error": lambda p: (None, TransportResponse(200, SSE, ByteStream(_cut(p)))),
    "meta value": lambda p: (None, "meta", {"note": p.text}),
    "meta JSON leaf": lambda p: (None, "meta", {"by": {"tool": [p.value]}}),
}


def record(tmp_path, request, answer, meta=None):
    def live(sent):
        if isinstance(answer, Exception):
            raise answer
        return answer or TransportResponse(200, JSON, {"ok": True})

    path = tmp_path / "c.msgpack"
    session = CassetteSession(path, record="all", timing="instant", live=live, meta=meta)
    with contextlib.suppress(ConnectError, ReadError):
        response = session.transport(request or TransportRequest("POST", URL, body={"q": 1}))
        if isinstance(response.body, ByteStream):
            response.body.read()
    return session, path


@pytest.mark.parametrize("position", list(POSITIONS))
@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_is_refused_in_every_position(tmp_path, family, position):
    planted = Planted(family)
    made = POSITIONS[position](planted)
    if len(made) == 3:
        session, path = record(tmp_path, None, None, meta=made[2])
    else:
        session, path = record(tmp_path, *made)

    with pytest.raises(SecretFoundError) as caught:
        session.close()

    message = str(caught.value)
    assert planted.secret not in message
    assert planted.secret not in repr(caught.value)
    assert "secret(s)" in message
    assert not path.exists()


def test_every_rule_names_its_provenance_and_the_vendored_ones_their_plugin():
    for kind, provenance, _, pattern in RULES:
        assert kind
        assert pattern.pattern
        assert provenance.startswith("ours") or (
            provenance.startswith("detect-secrets 1.5.0, plugins/") and provenance.endswith(".py")
        )
    text = (ROOT / "LICENSE-thirdparty").read_text()
    assert "detect-secrets 1.5.0" in text
    assert "Apache License" in text
    assert "Version 2.0" in text


# -- what is no secret -------------------------------------------------------------------------


NOT_SECRETS = {
    "model text": "Sure! Here is a haiku about autumn leaves, falling slowly to the ground.",
    "code in an answer": 'api_key = os.environ["OPENAI_API_KEY"]  # never hard-code it',
    "a placeholder": '{"password": "<your-password>", "clientSecret": "${CLIENT_SECRET}"}',
    "a redacted field": '{"refresh_token": "REDACTED", "password": "[secret]"}',
    "a log-probability token": '{"token": "Paris2024", "logprob": -0.01}',
    "token counts": '{"max_tokens": 1024, "usage": {"total_tokens": 12345678}}',
    "a uuid": str(uuid.UUID(int=RNG.getrandbits(128))),
    "a request id": "req_" + draw(ALNUM, 24),
    "a chat id": "chatcmpl-" + draw(ALNUM, 29),
    "an etag (sha1 hex)": '"' + draw("0123456789abcdef", 40) + '"',
    "an etag (sha1 HEX)": 'W/"' + draw("0123456789ABCDEF", 40) + '"',
    "a sha256": draw("0123456789abcdef", 64),
    "base64 audio": draw(ALNUM + "+/", 4000) + "==",
    "a password rule": "password: must be at least 12 characters long",
}


@pytest.mark.parametrize("name", list(NOT_SECRETS))
def test_what_is_no_secret_passes(name):
    assert SecretScanner(environ={}).kind_of(NOT_SECRETS[name]) is None


HEX = "0123456789abcdef"
NOT_SECRET_URLS = {
    "a file id": "https://api.openai.com/v1/files/file-abc123",
    "a long file id": f"https://api.openai.com/v1/files/file-{draw(ALNUM, 24)}/content",
    "a model": "https://api.openai.com/v1/models/gpt-4o-mini",
    "a Gemini method": "https://generativelanguage.googleapis.com/v1beta/models/"
    "gemini-1.5-flash-002:streamGenerateContent?alt=sse",
    "thread and run ids": f"https://api.openai.com/v1/threads/thread_{draw(ALNUM, 24)}/runs/"
    f"run_{draw(ALNUM, 24)}",
    "a uuid": f"https://api.example.invalid/v1/jobs/{uuid.UUID(int=RNG.getrandbits(128))}/events",
    "a sha1 blob": f"https://api.github.com/repos/o/r/git/blobs/{draw(HEX, 40)}",
    "a sha256 digest": f"https://registry.example.invalid/v2/app/blobs/sha256:{draw(HEX, 64)}",
    "a key id under a plural": "https://api.openai.com/v1/organization/admin_api_keys/"
    f"key_{draw(ALNUM, 16)}",
    "a password route": "https://api.example.invalid/v1/users/me/password/reset",
    "a secret's name and version": "https://secretmanager.googleapis.com/v1/projects/p1/secrets/"
    "db-password/versions/3:access",
    "a message batch": f"https://api.anthropic.com/v1/messages/batches/msgbatch_{draw(ALNUM, 24)}"
    "/results",
    "a Bedrock model id": "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
    "anthropic.claude-3-5-sonnet-20241022-v2:0/invoke-with-response-stream",
    "an Azure deployment": "https://my-resource.openai.azure.com/openai/deployments/"
    "gpt-4o-2024-08-06/chat/completions?api-version=2024-10-21",
    "a redacted query key": "https://generativelanguage.googleapis.com/v1beta/models?key=REDACTED",
}


@pytest.mark.parametrize("name", list(NOT_SECRET_URLS))
def test_ids_models_and_hashes_in_a_url_path_are_no_secret(name):
    assert SecretScanner(environ={}).kind_of(NOT_SECRET_URLS[name]) is None


def test_a_recording_of_requests_to_those_urls_is_written(tmp_path):
    path = tmp_path / "urls.msgpack"
    session = CassetteSession(
        path, record="all", timing="instant", live=lambda sent: TransportResponse(200, JSON, {})
    )
    for url in NOT_SECRET_URLS.values():
        session.transport(TransportRequest("GET", url))
    session.close()
    assert len(load_cassette(path, validate=True).interactions) == len(NOT_SECRET_URLS)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_key_in_a_url_path_is_masked_where_a_message_quotes_the_url(family):
    # A miss message and show quote URLs through the scanner's mask.
    planted = Planted(family)
    scanner = SecretScanner(environ={})
    for url in (f"{HOST}/v1/{planted.path}", f"see <{HOST}/v1/{planted.in_segment}> for it"):
        masked = scanner.mask(url)
        assert "[secret]" in masked
        assert planted.secret not in masked
        assert quote(planted.secret, safe="") not in masked


def test_the_committed_cassettes_hold_no_false_positive():
    # check over them runs in tests/test_cli.py; this names any hit of the wider rule set.
    scanner = SecretScanner(environ={})
    paths = sorted((ROOT / "cassettes").rglob("*.msgpack"))
    assert paths
    hits = []
    for path in paths:
        cassette = load_cassette(path, validate=True)
        hits += [
            f"{path}: {h}" for h in scanner.scan_cassette(cassette.meta, cassette.interactions)
        ]
    assert hits == []
