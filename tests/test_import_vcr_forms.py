"""``import-vcr``: every form a vcrpy cassette's body takes on disk, and the rule that a field
it does not understand is an error, never a silent empty body.

Each case writes a small cassette the way the serializer in question writes it, imports it,
and checks the stored body, and where it matters what a real client reads back on replay.
"""

import gzip
import json
import zlib

import brotli
import httpx
import pytest
import yaml

from pytest_toolnexus import use_cassette
from pytest_toolnexus._answers.views import provider_of, view
from pytest_toolnexus._cli.import_vcr import load_vcr_cassette
from pytest_toolnexus._cli.main import main
from pytest_toolnexus._store.cassette import (
    BytesBody,
    EmptyBody,
    JsonBody,
    NdjsonBody,
    SseBody,
    TextBody,
    load_cassette,
)

URL = "https://api.example.invalid/v1/chat/completions"
ANSWER = {"id": "c-1", "choices": [{"message": {"role": "assistant", "content": "héllo"}}]}
SSE = (
    'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
    'data: {"choices":[{"delta":{"content":"lo"}}]}\n\n'
    "data: [DONE]\n\n"
)


def doc(*interactions):
    return {"version": 1, "interactions": list(interactions)}


def exchange(body, *, headers=None, method="POST", uri=URL, status=200, request_body=None):
    return {
        "request": {"method": method, "uri": uri, "body": request_body, "headers": {}},
        "response": {
            "status": {"code": status, "message": "OK"},
            "headers": {} if headers is None else headers,
            "body": body,
        },
    }


def imported(tmp_path, document, name="c.yaml"):
    source = tmp_path / name
    source.write_text(yaml.safe_dump(document))
    cassette, _ = load_vcr_cassette(source, tmp_path / "c.msgpack")
    return cassette.interactions


YAML_STYLES = f"""\
interactions:
- request:
    body: '{{"model": "m", "messages": [{{"role": "user", "content": "hi"}}]}}'
    headers: {{}}
    method: POST
    uri: {URL}
  response:
    body:
      string: |+
        data: {{"choices":[{{"delta":{{"content":"Hel"}}}}]}}

        data: [DONE]

    headers: {{}}
    status: {{code: 200, message: OK}}
- request:
    body: "{{\\"model\\": \\"m\\"}}"
    headers: {{}}
    method: POST
    uri: {URL}
  response:
    body:
      string: >
        {{"id": "c-1",
        "object": "chat.completion"}}
    headers: {{}}
    status: {{code: 200, message: OK}}
- request:
    body: null
    headers: {{}}
    method: GET
    uri: https://api.example.invalid/v1/models
  response:
    body:
      string: plain words, unquoted
    headers: {{}}
    status: {{code: 200, message: OK}}
version: 1
"""


def test_every_yaml_string_style_is_read(tmp_path):
    source = tmp_path / "styles.yaml"
    source.write_text(YAML_STYLES)

    sse, folded, plain = load_vcr_cassette(source, tmp_path / "s.msgpack")[0].interactions

    # No content-type was kept: the stream and the JSON are known by their content.
    assert sse.request.body == JsonBody(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert isinstance(sse.response.body, SseBody)
    assert [e.get("data", e.get("text")) for e in sse.response.body.events] == [
        {"choices": [{"delta": {"content": "Hel"}}]},
        "[DONE]",
    ]
    assert folded.request.body == JsonBody({"model": "m"})
    assert folded.response.body == JsonBody({"id": "c-1", "object": "chat.completion"})
    assert plain.response.body == TextBody("plain words, unquoted")


def test_the_json_serializer_and_gzip_files(tmp_path):
    from vcr.serializers import jsonserializer, yamlserializer

    document = doc(
        exchange({"string": json.dumps(ANSWER)}, headers={"Content-Type": ["application/json"]})
    )
    as_json = tmp_path / "a.json"
    as_json.write_text(jsonserializer.serialize(document))
    as_json_gz = tmp_path / "b.json.gz"
    as_json_gz.write_bytes(gzip.compress(as_json.read_bytes()))
    as_yaml_gz = tmp_path / "c.yaml.gz"
    as_yaml_gz.write_bytes(gzip.compress(yamlserializer.serialize(document).encode()))

    for source in (as_json, as_json_gz, as_yaml_gz):
        cassette, _ = load_vcr_cassette(source, tmp_path / "out.msgpack")
        assert [i.response.body for i in cassette.interactions] == [JsonBody(ANSWER)], source
        assert cassette.meta["converted_from"] == "vcrpy"

    assert main(["import-vcr", str(as_yaml_gz)]) == 0
    assert load_cassette(tmp_path / "c.msgpack").meta["imported_from"] == (
        "c.yaml.gz (vcrpy format 1, gzip)"
    )


def test_parsed_bodies_and_string_maps(tmp_path):
    """pydantic-ai's serializer writes ``parsed_body`` in place of ``body``, on both sides."""
    document = doc(
        {
            "request": {
                "method": "POST",
                "uri": URL,
                "headers": {"content-type": ["application/json"]},
                "parsed_body": {"model": "m", "stream": False},
            },
            "response": {
                "status": {"code": 200, "message": "OK"},
                "headers": {"content-type": ["application/json"]},
                "parsed_body": ANSWER,
            },
        },
        {
            "request": {"method": "POST", "uri": URL, "headers": {}, "body": {"string": "{}"}},
            "response": {"status": {"code": 200}, "headers": {}, "parsed_body": {}},
        },
    )

    first, second = imported(tmp_path, document)

    assert first.request.body == JsonBody({"model": "m", "stream": False})
    assert first.response.body == JsonBody(ANSWER)
    assert second.request.body == JsonBody({})
    assert second.response.body == JsonBody({})  # an empty object is a value, not no body


@pytest.mark.parametrize(
    ("coding", "compress"),
    [("gzip", gzip.compress), ("deflate", zlib.compress), ("br", brotli.compress)],
)
@pytest.mark.parametrize("header_kept", [True, False])
def test_compressed_binary_bodies(tmp_path, coding, compress, header_kept):
    headers = {"content-type": ["application/json"]}
    if header_kept:
        headers["content-encoding"] = [coding]
    document = doc(exchange({"string": compress(json.dumps(ANSWER).encode())}, headers=headers))

    if not header_kept and coding != "gzip":
        # Only gzip carries a magic number; without its header a deflate or brotli body is
        # just bytes, and bytes are what is kept.
        (stored,) = imported(tmp_path, document)
        assert stored.response.body == BytesBody(compress(json.dumps(ANSWER).encode()))
        return
    (stored,) = imported(tmp_path, document)

    assert stored.response.body == JsonBody(ANSWER)
    assert "content-encoding" not in stored.response.headers


def test_text_under_a_content_encoding_header_was_already_decoded(tmp_path, capsys):
    """Gemini answers in the corpus keep ``Content-Encoding: gzip`` over plain text."""
    source = tmp_path / "g.yaml"
    source.write_text(
        yaml.safe_dump(
            doc(
                exchange(
                    {"string": json.dumps(ANSWER)},
                    headers={"Content-Type": ["application/json"], "Content-Encoding": ["gzip"]},
                )
            )
        )
    )

    assert main(["import-vcr", str(source)]) == 0

    (stored,) = load_cassette(tmp_path / "g.msgpack").interactions
    assert stored.response.body == JsonBody(ANSWER)
    assert "-> 200, json, gzip header over decoded text" in capsys.readouterr().out


def test_a_json_error_under_an_event_stream_type_is_kept_as_json(tmp_path):
    """Gemini answers a bad key with a 400 whose JSON sits under ``text/event-stream``; split
    into events, every line of it would be dropped."""
    error = {"error": {"code": 400, "message": "API key not valid.", "status": "INVALID"}}
    (stored,) = imported(
        tmp_path,
        doc(
            exchange(
                {"string": json.dumps(error, indent=2) + "\n"},
                headers={"Content-Type": ["text/event-stream"]},
                status=400,
            )
        ),
    )

    assert stored.response.body == JsonBody(error)
    assert stored.response.headers["content-type"] == "text/event-stream"


def test_binary_bodies_stay_byte_exact_and_replay_so(tmp_path):
    frames = bytes(range(256)) * 4 + b"\x00\x00\x00\x10:event-type\x07\x00\x05chunk"
    audio = b"RIFF" + bytes(200)  # valid UTF-8, yet audio: kept as bytes
    document = doc(
        exchange(
            {"string": frames},
            headers={"Content-Type": ["application/vnd.amazon.eventstream"]},
            uri="https://bedrock.example.invalid/model/m/invoke-with-response-stream",
        ),
        exchange({"string": audio}, headers={"Content-Type": ["audio/wav"]}, uri=URL + "/audio"),
    )
    source = tmp_path / "bin.yaml"
    source.write_text(yaml.safe_dump(document))
    dest = tmp_path / "bin.msgpack"
    assert main(["import-vcr", str(source), str(dest)]) == 0

    stream, speech = load_cassette(dest).interactions
    assert stream.response.body == BytesBody(frames)
    assert speech.response.body == BytesBody(audio)
    with use_cassette(dest) as session, httpx.Client(transport=session.http_transport()) as client:
        assert client.post(stream.request.url).content == frames
        assert client.post(URL + "/audio").content == audio


def test_a_head_answer_replays_its_recorded_content_length(tmp_path, capsys):
    document = doc(
        exchange(
            {"string": ""},
            method="HEAD",
            uri="https://files.example.invalid/big.bin",
            headers={"Content-Length": ["123456"], "Content-Type": ["application/octet-stream"]},
        ),
        exchange(
            {"string": ""},
            method="GET",
            uri="https://files.example.invalid/gone",
            status=304,
            headers={"Content-Length": ["99"]},
        ),
    )
    source = tmp_path / "head.yaml"
    source.write_text(yaml.safe_dump(document))
    dest = tmp_path / "head.msgpack"

    assert main(["import-vcr", str(source), str(dest)]) == 0
    out = capsys.readouterr().out
    assert "-> 200, no body, content-length 123456 kept" in out
    assert "empty" not in out

    with use_cassette(dest) as session, httpx.Client(transport=session.http_transport()) as client:
        head = client.head("https://files.example.invalid/big.bin")
        not_modified = client.get("https://files.example.invalid/gone")
    assert (head.status_code, head.headers["content-length"], head.content) == (200, "123456", b"")
    assert (not_modified.status_code, not_modified.headers["content-length"]) == (304, "99")

    assert main(["show", str(dest)]) == 0
    shown = capsys.readouterr().out.split("-> 200", 1)[1].split("\n#1", 1)[0]
    assert "(no body)" not in shown
    assert "(none sent: a bodiless answer; content-length 123456 is as recorded)" in shown


def test_a_url_with_a_fragment_is_still_a_known_provider_and_matches(tmp_path):
    url = "https://api.mistral.ai/v1/chat/completions#stream"
    document = doc(exchange({"string": SSE}, uri=url, request_body='{"stream": true}'))
    source = tmp_path / "frag.yaml"
    source.write_text(yaml.safe_dump(document))
    dest = tmp_path / "frag.msgpack"
    assert main(["import-vcr", str(source), str(dest)]) == 0

    (stored,) = load_cassette(dest).interactions
    assert provider_of(url) == "openai"
    assert view(stored).text == "Hello"
    with use_cassette(dest) as session, httpx.Client(transport=session.http_transport()) as client:
        # A client never sends the fragment; the recorded request matches without it.
        sent = client.post("https://api.mistral.ai/v1/chat/completions", json={"stream": True})
    assert sent.text == SSE


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ("interaction", "extra"),
        ("request", "bodyy"),
        ("response", "trailers"),
        ("body", "compressed"),
    ],
)
def test_an_unknown_field_is_an_error_naming_file_interaction_and_field(
    tmp_path, capsys, where, field
):
    bad = exchange({"string": "{}"}, headers={"content-type": ["application/json"]})
    target = {
        "interaction": bad,
        "request": bad["request"],
        "response": bad["response"],
        "body": bad["response"]["body"],
    }[where]
    target[field] = "x"
    source = tmp_path / "odd.yaml"
    source.write_text(yaml.safe_dump(doc(exchange({"string": "{}"}), bad)))

    assert main(["import-vcr", str(source)]) == 1

    err = capsys.readouterr().err
    assert f"error: {source}: interaction #1 (POST {URL}): " in err
    assert f"the field(s) '{field}', which import-vcr does not understand" in err
    assert not (tmp_path / "odd.msgpack").exists()


@pytest.mark.parametrize("body", [42, 4.5, True, [1, 2], {"string": 7}])
def test_a_body_of_an_unexpected_type_is_an_error_never_empty(tmp_path, capsys, body):
    source = tmp_path / "typed.yaml"
    source.write_text(yaml.safe_dump(doc(exchange(body))))

    assert main(["import-vcr", str(source)]) == 1

    err = capsys.readouterr().err
    assert f"error: {source}: interaction #0 (POST {URL}): the response body" in err
    assert "not text, bytes or a {string: ...} map" in err


def test_ndjson_without_a_content_type_is_split_into_lines(tmp_path):
    lines = [{"message": {"content": "Hel"}, "done": False}, {"done": True}]
    text = "".join(json.dumps(line) + "\n" for line in lines)

    (stored,) = imported(
        tmp_path, doc(exchange({"string": text}, uri="http://127.0.0.1:11434/api/chat"))
    )

    assert stored.response.body == NdjsonBody([{"t": 0.0, "value": v} for v in lines])


def test_an_empty_body_stays_empty(tmp_path, capsys):
    source = tmp_path / "e.yaml"
    source.write_text(yaml.safe_dump(doc(exchange({"string": ""}, status=204))))

    assert main(["import-vcr", str(source)]) == 0

    assert "-> 204, no body" in capsys.readouterr().out
    (stored,) = load_cassette(tmp_path / "e.msgpack").interactions
    assert stored.response.body == EmptyBody()


# ---------------------------------------------------------------------------------------------
# Batch mode


def test_a_folder_is_converted_in_one_run_keeping_relative_paths(tmp_path, capsys):
    tree = tmp_path / "cassettes"
    (tree / "a" / "b").mkdir(parents=True)
    good = doc(
        exchange({"string": json.dumps(ANSWER)}, headers={"content-type": ["application/json"]})
    )
    (tree / "top.yaml").write_text(yaml.safe_dump(good))
    (tree / "a" / "b" / "deep.json").write_text(json.dumps(good))
    broken = exchange({"string": "{}"})
    broken["response"]["mystery"] = 1
    (tree / "a" / "bad.yaml").write_text(yaml.safe_dump(doc(broken)))
    (tree / "notes.txt").write_text("not a cassette")
    out = tmp_path / "out"

    code = main(["import-vcr", str(tree), "--out", str(out)])

    printed = capsys.readouterr()
    assert code == 1
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.msgpack")) == [
        "a/b/deep.msgpack",
        "top.msgpack",
    ]
    assert f"wrote {out / 'top.msgpack'} (1 interaction(s))" in printed.out
    assert f"FAIL {tree / 'a' / 'bad.yaml'} (nothing written)" in printed.out
    assert printed.out.rstrip().endswith("3 file(s): 2 written, 1 failed")
    assert f"error: {tree / 'a' / 'bad.yaml'}: interaction #0 (POST {URL}): the response " in (
        printed.err
    )
    assert not (out / "a" / "bad.msgpack").exists()

    # Once the broken file is mended, a second run refuses to overwrite, unless --force.
    (tree / "a" / "bad.yaml").write_text(yaml.safe_dump(good))
    assert main(["import-vcr", str(tree), "--out", str(out)]) == 1
    assert main(["import-vcr", str(tree), "--out", str(out), "--force"]) == 0
    assert (out / "a" / "bad.msgpack").exists()


def test_several_sources_are_written_beside_each(tmp_path, capsys):
    good = yaml.safe_dump(doc(exchange({"string": "{}"})))
    first, second = tmp_path / "one.yaml", tmp_path / "two.yml"
    first.write_text(good)
    second.write_text(good)

    assert main(["import-vcr", str(first), str(second)]) == 0

    assert (tmp_path / "one.msgpack").exists()
    assert (tmp_path / "two.msgpack").exists()
    assert "2 file(s): 2 written, 0 failed" in capsys.readouterr().out


def test_an_empty_folder_is_a_usage_error(tmp_path, capsys):
    assert main(["import-vcr", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "error: no vcrpy cassettes" in capsys.readouterr().err
