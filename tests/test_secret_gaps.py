"""The secret classes an adversarial pass found open (issue 14, items 12 to 18): the cassette's
``meta``, compressed request bodies, credentials a test sets and takes away, credential names
beyond ``*_API_KEY``, URL passwords, the miss message's preview, and the local variables pytest
prints with ``-l``. Each is tested over its class: every pattern kind, every coding, every name
shape, generated passwords.

Every secret here is a fake built at run time.
"""

import gzip
import json
import os
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_toolnexus import (
    Cassette,
    CassetteMissError,
    CassetteSession,
    SecretFoundError,
    TransportRequest,
    TransportResponse,
    load_cassette,
)
from pytest_toolnexus._cli.main import main as cli
from pytest_toolnexus._safety.redact import ACCOUNT_KEYS, redact_url
from pytest_toolnexus._safety.rules import is_credential_field
from pytest_toolnexus._safety.secrets import SecretScanner, is_credential_name
from tests.support.fuzzing import counted, report_examples, scaled
from tests.test_secret_scan import FAKES, JSON

URL = "https://api.example.invalid/v1/chat"


@pytest.fixture(scope="module", autouse=True)
def _examples_report():
    yield
    report_examples("secret gaps")


def echo(request):
    return TransportResponse(200, JSON, {"ok": True})


def record(tmp_path, *requests, **options):
    path = tmp_path / "c.msgpack"
    session = CassetteSession(path, record="all", timing="instant", live=echo, **options)
    for request in requests:
        session.transport(request)
    return session, path


# -- 12: meta ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(FAKES))
def test_a_secret_in_meta_fails_the_write_and_check(tmp_path, kind, capsys):
    secret = FAKES[kind]
    session, path = record(
        tmp_path, TransportRequest("POST", URL, body={"q": 1}), meta={"note": {"by": secret}}
    )

    with pytest.raises(SecretFoundError) as caught:
        session.close()

    assert "meta['note']['by']: " + kind in str(caught.value)
    assert secret not in str(caught.value)
    assert not path.exists()

    # A file written by something else (an older version, a hand edit) fails check, and show
    # prints it masked.
    Cassette(path, [], {"note": secret}).save(unsafe_verbatim=True)
    capsys.readouterr()
    assert cli(["check", str(path)]) == 1
    assert cli(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "meta['note']: " + kind in out
    assert secret not in out
    assert "note: [secret]" in out


# -- 13: compressed request bodies ---------------------------------------------------------------


CODINGS = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "deflate (raw)": lambda data: zlib.compress(data)[2:-4],
}


@pytest.mark.parametrize("coding", list(CODINGS))
@settings(max_examples=scaled(25), deadline=None)
@given(
    value=st.dictionaries(
        # Account keys are masked on purpose (ADR 0027), so they would not read back equal, and
        # an opaque value under a credential-named key ("KEYPASS") is a secret the write refuses.
        st.text(min_size=1, max_size=8).filter(
            lambda key: key not in ACCOUNT_KEYS and not is_credential_field(key)
        ),
        st.integers(-(2**53), 2**53) | st.text(max_size=20),
        max_size=5,
    )
)
@counted("compressed request bodies")
def test_a_compressed_request_body_is_stored_decoded_and_still_matches(
    tmp_path_factory, coding, value
):
    tmp_path = tmp_path_factory.mktemp("coded")
    wire = CODINGS[coding](json.dumps(value).encode())
    headers = {
        "content-type": "application/json",
        "content-encoding": coding.split()[0],
        "content-length": str(len(wire)),
    }
    session, path = record(tmp_path, TransportRequest("POST", URL, headers, content=wire))
    session.close()

    [stored] = load_cassette(path).interactions
    assert stored.request.body.value == value
    assert "content-encoding" not in stored.request.headers
    replay = CassetteSession(path, record="none", timing="instant")
    with replay:
        assert replay.transport(TransportRequest("POST", URL, headers, content=wire)).status == 200


@pytest.mark.parametrize("coding", list(CODINGS))
def test_a_secret_in_a_compressed_request_body_is_found(tmp_path, coding):
    secret = FAKES["an Anthropic API key (sk-ant-...)"]
    wire = CODINGS[coding](json.dumps({"prompt": secret}).encode())
    headers = {"content-type": "application/json", "content-encoding": coding.split()[0]}
    session, path = record(tmp_path, TransportRequest("POST", URL, headers, content=wire))

    with pytest.raises(SecretFoundError, match=r"request.body.value\['prompt'\]"):
        session.close()
    assert not path.exists()


# -- 14: credentials set during the test ---------------------------------------------------------


def test_a_credential_set_and_removed_during_the_test_is_still_found(tmp_path):
    value = "plainValueThatLooksLikeNothing"
    session, _ = record(tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ACME_API_KEY", value)
        session.transport(TransportRequest("POST", URL, body={"auth": value}))
    assert "ACME_API_KEY" not in os.environ

    with pytest.raises(SecretFoundError) as caught:
        session.close()

    assert "the value of the environment variable ACME_API_KEY" in str(caught.value)
    assert value not in str(caught.value)


# -- 15: credential names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "GITHUB_TOKEN",
        "SECRET_KEY",
        "DJANGO_SECRET_KEY_FALLBACK",
        "DB_PASSWORD",
        "REDIS_PASS",
        "SMTP_PASSWD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "AZURE_CLIENT_CREDENTIAL",
        "MY_APIKEY",
        "stripe_key",
    ],
)
def test_credential_names_of_every_common_shape_are_caught(tmp_path, name):
    assert is_credential_name(name)
    value = "nothingSecretLooking" + name.lower()
    scanner = SecretScanner(environ={name: value})
    assert scanner.kind_of(f"echo {value} echo") == f"the value of the environment variable {name}"


@pytest.mark.parametrize(
    "name", ["PWD", "OLDPWD", "HOME", "PATH", "KEYBOARD_LAYOUT", "MONKEYPATCH", "TOKENIZERS_X"]
)
def test_names_that_only_contain_the_words_are_not_credentials(name):
    assert not is_credential_name(name)


# -- 16: URL userinfo ----------------------------------------------------------------------------


@settings(max_examples=scaled(200), deadline=None)
@given(
    user=st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=10),
    password=st.text(
        st.characters(categories=["L", "N"], include_characters="-_.~"), min_size=1
    ).filter(lambda p: p != "REDACTED"),  # the mask itself is not a password it could leak
    query=st.sampled_from(["", "?a=1", "?key=zz&a=1"]),
)
@counted("URL passwords")
def test_a_url_password_is_always_redacted(user, password, query):
    url = f"https://{user}:{password}@api.example.invalid:8443/v1/x{query}"
    redacted = redact_url(url)

    assert redacted.startswith(f"https://{user}:REDACTED@api.example.invalid:8443/v1/x")
    assert f":{password}@" not in redacted


def test_a_recorded_url_keeps_no_password_and_still_matches(tmp_path):
    url = "https://bot:ghp_notPatternShaped@api.example.invalid/v1/x"
    session, path = record(tmp_path, TransportRequest("POST", url, body={"q": 1}))
    session.close()

    [stored] = load_cassette(path).interactions
    assert stored.request.url == "https://bot:REDACTED@api.example.invalid/v1/x"
    with CassetteSession(path, record="none", timing="instant") as replay:
        assert replay.transport(TransportRequest("POST", url, body={"q": 1})).status == 200


# -- 17: the miss message's preview --------------------------------------------------------------


@pytest.mark.parametrize("kind", list(FAKES))
@pytest.mark.parametrize("offset", range(150, 215, 8))
def test_a_miss_message_never_shows_part_of_a_secret(tmp_path, kind, offset):
    secret = FAKES[kind]
    path = tmp_path / "c.msgpack"
    session, _ = record(tmp_path, TransportRequest("POST", URL, body={"q": 1}))
    session.close()
    body = {"pad": "x" * offset, "key": secret}

    replay = CassetteSession(path, record="none", timing="instant", on_unused="ignore")
    with replay, pytest.raises(CassetteMissError) as caught:
        replay.transport(TransportRequest("POST", URL, body=body))

    message = str(caught.value)
    pieces = {secret[i : i + 8] for i in range(len(secret) - 7)}
    shown = [piece for piece in pieces if piece in message and piece.strip("x ") == piece]
    assert shown == [], f"part of the secret shows: {shown}"


# -- 18: frames pytest can print -----------------------------------------------------------------


@pytest.mark.parametrize("flags", [("-l", "-vv"), ("-l", "--tb=long", "-vv"), ("--showlocals",)])
def test_showlocals_never_prints_a_refused_secret(pytester, monkeypatch, flags):
    from tests.test_secret_scan import PLUGIN_TEST

    secret = FAKES["an OpenAI project key (sk-proj-...)"]
    monkeypatch.setenv("FAKE_LEAKED_VALUE", secret)
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_leaky=PLUGIN_TEST)

    result = pytester.runpytest("-p", "no:cacheprovider", "--cassette-record=once", *flags)

    output = result.stdout.str() + result.stderr.str()
    assert "SecretFoundError" in output
    assert "was not written" in output
    assert secret not in output
    assert secret[8:24] not in output


def test_a_compressed_request_body_with_an_account_key_still_matches_its_recording(tmp_path):
    body = json.dumps({"user_id": "u-123", "q": 1}).encode()
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    session, path = record(
        tmp_path, TransportRequest("POST", URL, headers, content=gzip.compress(body))
    )
    session.close()

    [stored] = load_cassette(path).interactions
    assert stored.request.body.value == {"user_id": "REDACTED", "q": 1}
    with CassetteSession(path, record="none", timing="instant") as replay:
        again = TransportRequest("POST", URL, headers, content=gzip.compress(body))
        assert replay.transport(again).status == 200


def test_match_on_headers_ignores_the_headers_of_a_compressed_bodys_wire_form(tmp_path):
    wire = gzip.compress(b'{"q": 1}')
    headers = {
        "content-type": "application/json",
        "content-encoding": "gzip",
        "content-length": str(len(wire)),
        "accept": "application/json",
    }
    session, path = record(tmp_path, TransportRequest("POST", URL, headers, content=wire))
    session.close()

    replay = CassetteSession(
        path, record="none", timing="instant", match_on=["method", "path", "headers", "body"]
    )
    with replay:
        assert replay.transport(TransportRequest("POST", URL, headers, content=wire)).status == 200


@pytest.mark.parametrize(
    ("headers", "url", "hidden"),
    [
        ({"authorization": "Basic dXNlcjpwYXNzd29yZA=="}, URL, "dXNlcjpwYXNzd29yZA"),
        ({"api-key": "0123456789abcdef0123"}, URL, "0123456789abcdef0123"),
        ({}, "https://bot:hunter2pass@api.example.invalid/v1", "hunter2pass"),
        ({}, URL + "?api_key=zzzzzzzzzzzz&q=1", "zzzzzzzzzzzz"),
    ],
)
def test_reprs_hide_credentials_by_name_not_only_by_shape(headers, url, hidden):
    from pytest_toolnexus import Interaction, RecordedRequest, RecordedResponse
    from pytest_toolnexus._store.cassette import EmptyBody

    request = TransportRequest("POST", url, headers, body={"q": 1})
    recorded = RecordedRequest("POST", url, request.headers, EmptyBody())
    answered = Interaction(recorded, RecordedResponse(200, request.headers, EmptyBody(), 0, 0))
    for shown in (repr(request), repr(request.headers), repr(answered)):
        assert hidden not in shown
