"""``import-vcr --request``: a response-only fixture (``{status, headers, body}``, no request, as a
JavaScript test that mocks fetch writes it) imported as the answer to the request the user
names, and refused, with the fix, when no request is named.
"""

import json

import httpx
import pytest
import yaml

from pytest_toolnexus import CassetteMissError, use_cassette
from pytest_toolnexus._cli.import_vcr import VcrImportError, load_vcr_cassette
from pytest_toolnexus._cli.main import main
from pytest_toolnexus._store.cassette import AnyBody, JsonBody, SseBody, load_cassette

URL = "https://api.example.invalid/v1/messages"
REQUEST = f"POST {URL}"
ANSWER = {"type": "message", "content": [{"type": "text", "text": "42"}]}
EVENTS = [
    ("message_start", {"type": "message_start", "message": {"id": "m-1", "content": []}}),
    ("content_block_delta", {"type": "content_block_delta", "delta": {"text": "4"}}),
    ("content_block_delta", {"type": "content_block_delta", "delta": {"text": "2"}}),
    ("message_stop", {"type": "message_stop"}),
]


def fixture(body=None, *, status=200, headers=None, **extra):
    """A response-only fixture as the JS helper writes it: headers as {name: value}, the body
    as the text the client read."""
    return {
        "status": status,
        "headers": {"content-type": "application/json"} if headers is None else headers,
        "body": json.dumps(ANSWER) if body is None else body,
        **extra,
    }


def write(tmp_path, document, name="answer.json"):
    source = tmp_path / name
    source.write_text(json.dumps(document))
    return source


def test_a_fixture_is_imported_as_the_answer_to_the_named_request(tmp_path, capsys):
    headers = {"content-type": "application/json", "set-cookie": "session=abc"}
    source = write(tmp_path, fixture(headers=headers))

    assert main(["import-vcr", str(source), "--request", f"post {URL}"]) == 0

    printed = capsys.readouterr()
    assert printed.out.splitlines() == [
        f"#0 POST {URL} -> 200, json, any request body",
        f"wrote {tmp_path / 'answer.msgpack'} (1 interaction(s))",
    ]
    assert printed.err == ""
    cassette = load_cassette(tmp_path / "answer.msgpack")
    assert cassette.meta["converted_from"] == "response fixture"
    assert cassette.meta["imported_from"] == "answer.json (response fixture, JSON)"
    (stored,) = cassette.interactions
    assert (stored.request.method, stored.request.url) == ("POST", URL)
    assert list(stored.request.headers) == []
    assert stored.request.body == AnyBody()
    assert stored.response.status == 200
    assert stored.response.body == JsonBody(ANSWER)
    assert stored.response.headers.get("set-cookie") == "REDACTED"


@pytest.mark.parametrize("sent", [{"model": "a", "max_tokens": 1}, {"messages": []}])
def test_the_imported_fixture_answers_whatever_body_is_sent_at_its_url(tmp_path, sent):
    source = write(tmp_path, fixture())
    main(["import-vcr", str(source), "--request", REQUEST])

    with use_cassette(tmp_path / "answer.msgpack") as session:
        client = httpx.Client(transport=session.http_transport())
        answer = client.post(URL, json=sent)

    assert answer.status_code == 200
    assert answer.json() == ANSWER


def test_the_imported_fixture_does_not_answer_another_url(tmp_path):
    source = write(tmp_path, fixture())
    main(["import-vcr", str(source), "--request", REQUEST])

    with use_cassette(tmp_path / "answer.msgpack") as session:
        client = httpx.Client(transport=session.http_transport())
        with pytest.raises(CassetteMissError) as caught:
            client.post(URL.replace("messages", "complete"), json={})
        client.post(URL, json={})

    assert "POST https://api.example.invalid/v1/complete" in str(caught.value)


def test_an_event_stream_fixture_is_split_into_its_events(tmp_path, capsys):
    text = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in EVENTS)
    headers = {"content-type": "text/event-stream; charset=utf-8", "content-length": "999"}
    source = write(tmp_path, fixture(text, headers=headers), name="stream.json")

    assert main(["import-vcr", str(source), "--request", REQUEST]) == 0

    assert f"#0 POST {URL} -> 200, sse, 4 event(s), any request body" in capsys.readouterr().out
    (stored,) = load_cassette(tmp_path / "stream.msgpack").interactions
    assert isinstance(stored.response.body, SseBody)
    got = [(event["event"], event["data"]) for event in stored.response.body.events]
    assert got == EVENTS
    assert stored.response.body.tail == ""
    # The length of the text as recorded is not the length replay sends: it is dropped.
    assert "content-length" not in stored.response.headers
    with use_cassette(tmp_path / "stream.msgpack") as session:
        client = httpx.Client(transport=session.http_transport())
        with client.stream("POST", URL, json={"stream": True}) as answer:
            replayed = answer.read().decode()
    assert replayed.count("event: ") == 4
    assert [json.loads(line[6:]) for line in replayed.splitlines() if line[:6] == "data: "] == [
        data for _, data in EVENTS
    ]


def test_without_request_a_fixture_is_refused_with_the_fix(tmp_path, capsys):
    source = write(tmp_path, fixture())

    assert main(["import-vcr", str(source)]) == 2

    assert capsys.readouterr().err == (
        f"error: {source} is a response-only fixture ({{status, headers, body}}): it holds one "
        "response and no request, so there is no method or URL to replay it at. Name the "
        f'request it answers: pytest-toolnexus import-vcr {source} --request "METHOD URL" '
        '(for example --request "POST https://api.anthropic.com/v1/messages")\n'
    )
    assert not (tmp_path / "answer.msgpack").exists()


def test_the_api_takes_the_request_too(tmp_path):
    source = write(tmp_path, fixture())

    cassette, summaries = load_vcr_cassette(source, tmp_path / "a.msgpack", request=REQUEST)

    assert summaries == [f"#0 POST {URL} -> 200, json, any request body"]
    assert cassette.interactions[0].request.body == AnyBody()
    with pytest.raises(VcrImportError, match="is a response-only fixture"):
        load_vcr_cassette(source, tmp_path / "a.msgpack")
    with pytest.raises(ValueError, match="is not METHOD URL"):
        load_vcr_cassette(source, tmp_path / "a.msgpack", request=URL)


@pytest.mark.parametrize("with_request", [False, True])
def test_an_extra_key_is_refused_naming_it(tmp_path, capsys, with_request):
    source = write(tmp_path, fixture(statusText="OK", url=URL))

    argv = ["import-vcr", str(source), *(["--request", REQUEST] if with_request else [])]
    assert main(argv) == 2

    assert capsys.readouterr().err == (
        f"error: {source} is neither a vcrpy cassette nor a response-only fixture: it has no "
        "'interactions', and as a fixture ({status, headers, body}, exactly those) it has the "
        "field(s) 'statusText', 'url', which import-vcr does not understand\n"
    )
    assert not (tmp_path / "answer.msgpack").exists()


def test_a_missing_key_is_refused_naming_it(tmp_path, capsys):
    document = fixture()
    del document["headers"]
    source = tmp_path / "answer.yaml"
    source.write_text(yaml.safe_dump(document))

    assert main(["import-vcr", str(source), "--request", REQUEST]) == 2

    assert capsys.readouterr().err.endswith(
        "as a fixture ({status, headers, body}, exactly those) it lacks 'headers'\n"
    )


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"status": "200"}, "the fixture's 'status' is '200', not an integer status code"),
        ({"status": True}, "the fixture's 'status' is True, not an integer status code"),
        ({"status": 700}, "the response status must be 100-599, found 700"),
        ({"headers": ["content-type"]}, "the fixture's 'headers' is not a map"),
        ({"headers": {"x-n": ["1", "2"]}}, "the fixture's header 'x-n' is a list, not text"),
        ({"headers": {"x-n": 1}}, "the fixture's header 'x-n' is a number, not text"),
        ({"body": {"string": "{}"}}, "the fixture's 'body' is a map, not text"),
        ({"body": None}, "the fixture's 'body' is null, not text"),
    ],
)
def test_each_field_is_checked(tmp_path, capsys, change, problem):
    source = write(tmp_path, {**fixture(), **change})

    assert main(["import-vcr", str(source), "--request", REQUEST]) == 1

    err = capsys.readouterr().err
    assert err.startswith(f"error: {source}: interaction #0 (POST {URL}): {problem}")
    assert not (tmp_path / "answer.msgpack").exists()


def test_a_secret_in_a_fixture_is_refused(tmp_path, capsys):
    leak = json.dumps({"note": "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2})
    source = write(tmp_path, fixture(leak))

    assert main(["import-vcr", str(source), "--request", REQUEST]) == 1

    err = capsys.readouterr().err
    assert "answer.msgpack was not written: after redaction it would hold 1 secret(s)" in err
    assert "a1B2c3D4" not in err


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("POST", "'POST' is not METHOD URL"),
        (f"POST {URL} extra", "is not METHOD URL"),
        ("POST /v1/messages", "'/v1/messages' in 'POST /v1/messages' is not an absolute"),
        (f"P0ST {URL}", "'P0ST' in"),
        ("POST ftp://example.invalid/x", "is not an absolute http:// or https:// URL"),
    ],
)
def test_a_request_that_is_not_method_and_url_is_a_usage_error(tmp_path, capsys, value, problem):
    source = write(tmp_path, fixture())

    with pytest.raises(SystemExit) as caught:
        main(["import-vcr", str(source), "--request", value])

    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "pytest-toolnexus import-vcr: error: argument --request: " in err
    assert problem in err
    assert not (tmp_path / "answer.msgpack").exists()


def test_in_a_batch_the_request_applies_to_fixtures_only(tmp_path, capsys):
    tree = tmp_path / "cassettes"
    tree.mkdir()
    write(tree, fixture(), name="fixture.json")
    vcrpy_url = "https://api.example.invalid/v1/chat/completions"
    recorded = {
        "version": 1,
        "interactions": [
            {
                "request": {
                    "method": "POST",
                    "uri": vcrpy_url,
                    "body": '{"model": "m"}',
                    "headers": {"content-type": ["application/json"]},
                },
                "response": {
                    "status": {"code": 200, "message": "OK"},
                    "headers": {"content-type": ["application/json"]},
                    "body": {"string": "{}"},
                },
            }
        ],
    }
    (tree / "chat.yaml").write_text(yaml.safe_dump(recorded))
    out = tmp_path / "out"

    assert main(["import-vcr", str(tree), "--out", str(out), "--request", REQUEST]) == 0

    assert capsys.readouterr().out.rstrip().endswith("2 file(s): 2 written, 0 failed")
    chat = load_cassette(out / "chat.msgpack")
    assert chat.meta["converted_from"] == "vcrpy"
    (exchange,) = chat.interactions
    assert (exchange.request.url, exchange.request.body) == (vcrpy_url, JsonBody({"model": "m"}))
    answer = load_cassette(out / "fixture.msgpack")
    assert answer.meta["converted_from"] == "response fixture"
    assert answer.interactions[0].request.url == URL
