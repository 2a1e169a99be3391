"""vcrpy's option names in a ``cassette_config`` that is code (issue 24, point 2).

``migrate`` renames a ``vcr_config`` fixture that returns ``make_vcr_config()`` to
``cassette_config`` but cannot rewrite what the call returns, so at run time the fixture hands
over vcrpy's keys. Each one with a meaning here is mapped, with a ``VcrpyOptionWarning`` (a
``DeprecationWarning``) naming the native option, once per run; every key with none is
listed in one error.

Each case is a pytester project recording against a loopback server, then replaying it
stopped.
"""

import msgpack
import pytest

from pytest_toolnexus._plugin.settings import OPTION_NAMES
from pytest_toolnexus._plugin.vcr_keys import translate
from tests.support.servers import Fixed, LoopbackServer

pytest_plugins = ["pytester"]

CONFTEST = """
import json

import pytest


def scrub_request(request):
    if request.path.endswith("/skip"):
        return None  # vcrpy's way to leave a request unrecorded
    request.headers["X-Scrubbed"] = "yes"
    return request


def scrub_response(response):
    response["headers"].pop("Set-Cookie", None)
    body = json.loads(response["body"]["string"])
    body["account"] = "REDACTED"
    response["body"]["string"] = json.dumps(body).encode()
    return response


def make_vcr_config():
    return {
        "record_mode": "once",
        "match_on": ["method", "uri"],
        "allow_playback_repeats": True,
        "decode_compressed_response": True,
        "serializer": "yaml",
        "cassette_library_dir": "tests/cassettes",
        "filter_headers": ["x-team-token", ("x-trace", "TRACE")],
        "filter_query_parameters": ["sig"],
        "filter_post_data_parameters": ["password"],
        "before_record_request": scrub_request,
        "before_record_response": scrub_response,
    }


@pytest.fixture
def cassette_config():
    return make_vcr_config()
"""

TESTS = """
import os

import httpx
import pytest

URL = os.environ["SERVER_URL"]


@pytest.mark.cassette
def test_one():
    headers = {"x-team-token": "team-4f1d", "x-trace": "abc"}
    answer = httpx.post(
        URL + "/v1/login?sig=s1gn4ture&page=2",
        json={"user": "ada", "password": "hunter2"},
        headers=headers,
    ).json()
    assert answer["ok"] is True
    if os.environ.get("RECORDING"):
        # Left unrecorded by before_record_request: vcrpy sent it live on every run
        assert httpx.get(URL + "/v1/skip").status_code == 200


@pytest.mark.cassette
def test_two():
    assert httpx.post(URL + "/v1/login?sig=other&page=2", json={"user": "x"}).json()["ok"]
"""

ANSWER = b'{"ok": true, "account": "acct-991"}'


def _server():
    headers = [("Content-Type", "application/json"), ("Set-Cookie", "session=s3cr3t")]
    return LoopbackServer(Fixed(200, headers, ANSWER))


def _cassette(pytester, name):
    (path,) = pytester.path.glob(f"cassettes/**/{name}.msgpack")
    return msgpack.unpackb(path.read_bytes())


def test_vcrpy_keys_in_a_config_made_by_a_function_record_and_replay_as_vcrpy_did(
    pytester, monkeypatch
):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_calls=TESTS)
    with _server() as server:
        monkeypatch.setenv("SERVER_URL", server.origin)
        monkeypatch.setenv("RECORDING", "1")
        first = pytester.runpytest_subprocess("-W", "default::DeprecationWarning")
        first.assert_outcomes(passed=2)
        assert len(server.requests) == 3
    # One warning per key for the whole run (two tests), each naming what replaces it.
    text = first.stdout.str()
    for key, native in [
        ("record_mode", "use record='once'"),
        ("match_on", "use match_on='vcrpy'"),
        ("allow_playback_repeats", "use allow_repeats=True"),
        ("decode_compressed_response", "it is ignored"),
        ("serializer", "it is ignored"),
        ("cassette_library_dir", "--cassette-dir"),
        ("filter_headers", "pytest_toolnexus_redact hook"),
        ("before_record_request", "pytest_toolnexus_redact hook"),
    ]:
        assert text.count(f"VcrpyOptionWarning: the cassette_config fixture: '{key}'") == 1, key
        assert native in text.split(f"'{key}' is vcrpy's option;")[1].split("\n")[0], key

    (login,) = _cassette(pytester, "test_one")["interactions"]  # /v1/skip was left out
    request, response = login["request"], login["response"]
    headers = {name.lower(): value for name, value in request["headers"]}
    assert "x-team-token" not in headers
    assert headers["x-trace"] == "TRACE"
    assert headers["x-scrubbed"] == "yes"
    assert "sig=" not in request["url"]
    assert "page=2" in request["url"]
    assert request["body"]["value"] == {"user": "ada"}
    assert "set-cookie" not in {name.lower() for name, _ in response["headers"]}
    assert response["body"]["value"] == {"ok": True, "account": "REDACTED"}

    monkeypatch.delenv("RECORDING")
    # The server is gone: the replay is served from the cassettes, matched as vcrpy matched
    # (method and URL, not the body), record_mode "once" replaying what exists.
    replay = pytester.runpytest_subprocess("-W", "error::pytest.PytestUnraisableExceptionWarning")
    replay.assert_outcomes(passed=2)


def test_ignore_localhost_lets_loopback_traffic_through_unrecorded(pytester, monkeypatch):
    pytester.makeconftest(
        "import pytest\n\n"
        "@pytest.fixture\n"
        "def cassette_config():\n"
        '    return dict(ignore_localhost=True, record_mode="none")\n'
    )
    pytester.makepyfile(test_calls=TESTS.split("\n\n@pytest.mark.cassette\ndef test_two")[0])
    with _server() as server:
        monkeypatch.setenv("SERVER_URL", server.origin)
        result = pytester.runpytest_subprocess()
        result.assert_outcomes(passed=1)
        assert len(server.requests) == 1  # it went live: localhost is not the cassette's
    assert not list(pytester.path.glob("cassettes/**/*.msgpack"))


def test_every_key_without_a_mapping_is_listed_in_one_error(pytester):
    pytester.makeconftest(
        "import pytest\n\n"
        "@pytest.fixture\n"
        "def cassette_config():\n"
        "    return {'ignore_localhost': True, 'frobnicate': 1, 'custom_patches': (),\n"
        "            'match_on': ['method', 'my_matcher'], 'record_mode': 'sometimes'}\n"
    )
    pytester.makepyfile("import pytest\n\n@pytest.mark.cassette\ndef test_x():\n    pass\n")
    result = pytester.runpytest_subprocess()
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        [
            "*the cassette_config fixture: 4 cassette option(s) cannot be used:*",
            "*'frobnicate' is not an option (native or vcrpy's)*",
            "*'custom_patches' is not an option (native or vcrpy's)*",
            "*match_on matcher(s) ?'my_matcher'? have no equivalent*",
            "*record_mode='sometimes' is not a vcrpy record mode*",
        ]
    )


@pytest.mark.parametrize("returned", ["None", "[]", "[('record', 'none')]"])
def test_a_cassette_config_that_is_not_a_mapping_is_a_usage_error(pytester, returned):
    # A fixture that forgets its return (None), or returns pairs: refused with what it gave,
    # not taken as no options (an empty dict is the way to give none).
    pytester.makeconftest(
        f"import pytest\n\n@pytest.fixture\ndef cassette_config():\n    return {returned}\n"
    )
    pytester.makepyfile("import pytest\n\n@pytest.mark.cassette\ndef test_x():\n    pass\n")
    result = pytester.runpytest_subprocess()
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        ["*test_x*the cassette_config fixture must return a dict of cassette options*"]
    )
    result.stdout.no_fnmatch_line("*AttributeError*")


VCRPY_DEFAULT = ["method", "scheme", "host", "port", "path", "query"]


@pytest.mark.parametrize(
    ("given", "values", "renamed"),
    [
        ({"record_mode": "new_episodes"}, {"record": "new"}, {"record_mode"}),
        ({"record_mode": "rewrite"}, {"record": "all"}, {"record_mode"}),
        # vcrpy's default matchers are native names too: they pass as they are
        ({"match_on": VCRPY_DEFAULT}, {"match_on": VCRPY_DEFAULT}, set()),
        (
            {"match_on": ["method", "url", "raw_body"]},
            {"match_on": [*VCRPY_DEFAULT, "body"]},
            {"match_on"},
        ),
        ({"match_on": ["method", "uri"]}, {"match_on": "vcrpy"}, {"match_on"}),
        (
            {"ignore_hosts": ["api.example.com"], "allow_hosts": ["a.test"]},
            {"allow_hosts": ["a.test", "api.example.com"]},
            {"ignore_hosts"},
        ),
        ({"record_on_exception": False}, {"record_on_error": False}, {"record_on_exception"}),
        ({"ignore_localhost": False}, {}, {"ignore_localhost"}),
        ({"timing": "instant"}, {"timing": "instant"}, set()),
    ],
)
def test_each_vcrpy_key_maps_to_its_native_option(given, values, renamed):
    translated = translate(given, OPTION_NAMES, "here")
    if renamed and "match_on" not in values:
        # a config of vcrpy's keys matches as vcrpy did unless it says otherwise
        values = {**values, "match_on": "vcrpy"}
        renamed = {*renamed, "match_on (not given)"}
    assert translated.values == values
    assert set(translated.renamed) == renamed
    assert translated.redact is None
