"""A recorded URL that is not an absolute URL is damage, refused where the file is read (issue
23, row 9).

A cassette whose request URL is ``""`` used to load, and then failed on replay with httpx's
``ValueError: unknown url type: '/'``. Any URL without a scheme and a host is now refused with
``CassetteFormatError`` naming the file and the interaction: by ``load_cassette(...,
validate=True)``, by a session as it opens (before any request), and by ``check``.
``import-vcr`` gives a hand-edited uri without a scheme (``googleapis.com``, seen in the
corpus) ``https://`` with a warning, and refuses one that names no host.
"""

import subprocess
import sys

import pytest
import yaml

from pytest_toolnexus import (
    Cassette,
    CassetteFormatError,
    CassetteSession,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    load_cassette,
)
from pytest_toolnexus._cli.main import main
from pytest_toolnexus._store.cassette import JsonBody
from tests.test_cli import ROOT

BAD_URLS = [
    "",
    "/",
    "/v1/chat/completions",
    "api.openai.com/v1/chat",
    "127.0.0.1:8080/v1/x",
    "//no-scheme.invalid/v1",
    "http://",
    "https:///v1/x",
    "http://user@/v1/x",
    "mailto:someone@example.invalid",
]


def cassette_with(path, url):
    """Interaction 0 is sound; interaction 1 has ``url``."""
    headers = Headers([("content-type", "application/json")])
    interactions = [
        Interaction(
            RecordedRequest("POST", address, headers, JsonBody({"n": n})),
            RecordedResponse(200, headers, JsonBody({"ok": n}), 1.0, 2.0),
        )
        for n, address in enumerate(["http://127.0.0.1:9/v1/x", url])
    ]
    Cassette(path, interactions).save(unsafe_verbatim=True)
    return path


def assert_names_the_damage(error, path):
    message = str(error)
    assert f"cassette {path} is corrupt at interaction 1" in message
    assert "scheme and a host" in message
    assert error.path == str(path)


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_url_without_a_scheme_and_a_host_is_refused_at_load(url, tmp_path):
    path = cassette_with(tmp_path / "tape.msgpack", url)
    with pytest.raises(CassetteFormatError) as raised:
        load_cassette(path, validate=True)
    assert_names_the_damage(raised.value, path)


@pytest.mark.parametrize("url", ["", "/", "http://"])
def test_a_session_refuses_it_when_it_opens(url, tmp_path):
    path = cassette_with(tmp_path / "tape.msgpack", url)
    with pytest.raises(CassetteFormatError) as raised:
        CassetteSession(path)
    assert_names_the_damage(raised.value, path)


def test_check_fails_on_it_naming_the_file_and_the_interaction(tmp_path):
    path = cassette_with(tmp_path / "tape.msgpack", "")
    done = subprocess.run(
        [sys.executable, "-m", "pytest_toolnexus", "check", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"FAIL {path}: cassette {path} is corrupt at interaction 1" in done.stdout


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/v1/x",
        "https://api.openai.com/v1/chat/completions?beta=true",
        "http://[::1]:8080/",
        "https://user:REDACTED@h.invalid/x",
        "wss://realtime.example.invalid/v1",
    ],
)
def test_absolute_urls_still_load(url, tmp_path):
    path = cassette_with(tmp_path / "tape.msgpack", url)
    assert load_cassette(path, validate=True).interactions[1].request.url == url


# -- import-vcr: a hand-edited uri becomes absolute, or is refused -------------------------------


def vcr_file(tmp_path, uri):
    source = tmp_path / "hand.yaml"
    interaction = {
        "request": {"method": "POST", "uri": uri, "body": None, "headers": {}},
        "response": {"status": {"code": 200, "message": "OK"}, "headers": {}, "body": "{}"},
    }
    source.write_text(yaml.safe_dump({"version": 1, "interactions": [interaction]}))
    return source


@pytest.mark.parametrize(
    ("uri", "url"),
    [
        ("googleapis.com", "https://googleapis.com"),
        ("api.example.invalid/v1/chat", "https://api.example.invalid/v1/chat"),
        ("localhost:8080/v1", "https://localhost:8080/v1"),
    ],
)
def test_import_vcr_makes_a_uri_without_a_scheme_absolute_and_says_so(uri, url, tmp_path, capsys):
    source = vcr_file(tmp_path, uri)
    assert main(["import-vcr", str(source)]) == 0
    (interaction,) = load_cassette(tmp_path / "hand.msgpack", validate=True).interactions
    assert interaction.request.url == url
    assert f"the uri {uri!r} has no scheme; it is imported as {url!r}" in capsys.readouterr().err


@pytest.mark.parametrize("uri", ["", "/", "/v1/chat/completions", "http://"])
def test_import_vcr_refuses_a_uri_that_names_no_host(uri, tmp_path, capsys):
    source = vcr_file(tmp_path, uri)
    assert main(["import-vcr", str(source)]) == 1
    err = capsys.readouterr().err
    assert f"error: {source}: interaction #0" in err
    assert f"the request uri {uri!r} is not an absolute URL" in err
    assert not (tmp_path / "hand.msgpack").exists()
