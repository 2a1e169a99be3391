"""``pytest-toolnexus import-vcr``: real vcrpy cassettes in, replayable msgpack cassettes out.

The vcrpy cassette is recorded here, by vcrpy itself, from an httpx client talking to an
``http.server`` on 127.0.0.1 (port 0) that this module starts and stops. The imported cassette
is then replayed through ``use_cassette`` and an httpx client, and what the client parses must
be what it parsed live, except where redaction masked a value on purpose.
"""

import base64
import gzip
import json
import os
import subprocess
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import vcr
import yaml

from pytest_toolnexus import use_cassette
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

ROOT = Path(__file__).resolve().parent.parent
SECRET = "sk-" + "a" * 24  # built at run time: no secret-shaped literal in the source

MODELS = {"object": "list", "data": [{"id": "m-1"}, {"id": "m-2"}]}
ZIPPED = {"id": "cmpl-9", "choices": [{"message": {"role": "assistant", "content": "héllo"}}]}
SSE = (
    b": keep-alive\n\n"
    b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
    b'event: delta\nid: 2\ndata: {"choices":[{"delta":{"content":"lo"}}]}\n\n'
    b"data: [DONE]\n\n"
)
NDJSON = [{"response": "Hel", "done": False}, {"response": "lo", "done": False}, {"done": True}]
BINARY = bytes(range(256)) * 3
HTML = "<html><body><h1>502 Bad Gateway</h1>\n<p>upstream gone</p></body></html>\n"


def _route(path, body):
    """(status, headers, payload) for one request."""
    json_type = ("content-type", "application/json")
    if path == "/v1/models":
        extra = [("x-multi", "a"), ("x-multi", "b"), ("set-cookie", "s=1"), ("set-cookie", "t=2")]
        return 200, [json_type, *extra], json.dumps(MODELS).encode()
    if path == "/v1/gzip":
        payload = gzip.compress(json.dumps(ZIPPED).encode())
        return 200, [json_type, ("content-encoding", "gzip")], payload
    if path == "/v1/deflate":
        payload = zlib.compress(json.dumps(ZIPPED).encode())
        return 200, [json_type, ("content-encoding", "deflate")], payload
    if path == "/v1/chat":
        return 200, [("content-type", "text/event-stream; charset=utf-8")], SSE
    if path == "/api/generate":
        lines = b"".join(json.dumps(line).encode() + b"\n" for line in NDJSON)
        return 200, [("content-type", "application/x-ndjson")], lines
    if path == "/v1/audio":
        return 200, [("content-type", "application/octet-stream")], BINARY
    if path == "/v1/broken":
        return 502, [("content-type", "text/html; charset=utf-8")], HTML.encode()
    if path == "/v1/secure":
        return 200, [json_type], b'{"ok": true}'
    if path == "/v1/account":
        sent = json.loads(body)
        answer = {"user_id": sent["user_id"], "account_id": 7, "balance": 12.5}
        return 200, [json_type], json.dumps(answer).encode()
    return 404, [("content-type", "text/plain")], b"no such route\n"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

    def _answer(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        status, headers, payload = _route(self.path.split("?", 1)[0], body)
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = _answer
    do_POST = _answer


def _sse_events(text):
    """(event, id, data) for each event of an SSE text, comments left out."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields = {"event": None, "id": None, "data": []}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            if name == "data":
                fields["data"].append(value)
            else:
                fields[name] = value
        if fields["data"]:
            data = "\n".join(fields["data"])
            parsed = data if data == "[DONE]" else json.loads(data)
            events.append((fields["event"], fields["id"], parsed))
    return events


def exercise(client):
    """Every request of the suite, and what the client made of each answer."""
    seen = {}
    response = client.get("/v1/models")
    seen["models"] = (response.status_code, response.json(), response.headers.get_list("x-multi"))
    response = client.get("/v1/gzip")
    seen["gzip"] = (response.status_code, response.json())
    response = client.get("/v1/deflate")
    seen["deflate"] = (response.status_code, response.json())
    with client.stream("POST", "/v1/chat", json={"model": "m", "stream": True}) as response:
        seen["sse"] = (response.status_code, _sse_events(response.read().decode()))
    with client.stream("POST", "/api/generate", json={"model": "m", "stream": True}) as response:
        seen["ndjson"] = [json.loads(line) for line in response.iter_lines() if line]
    response = client.get("/v1/audio")
    seen["binary"] = (response.status_code, response.content)
    response = client.get("/v1/broken")
    seen["html"] = (response.status_code, response.headers["content-type"], response.text)
    response = client.get(
        "/v1/secure", params={"key": SECRET}, headers={"Authorization": f"Bearer {SECRET}"}
    )
    seen["secure"] = (response.status_code, response.json())
    response = client.post("/v1/account", json={"user_id": "user-42", "question": "balance?"})
    seen["account"] = (response.status_code, response.json())
    return seen


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A vcrpy cassette of :func:`exercise`, recorded live, with what the client saw."""
    folder = tmp_path_factory.mktemp("vcr")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    source = folder / "suite.yaml"
    try:
        with (
            vcr.use_cassette(str(source), record_mode="all"),
            httpx.Client(base_url=base, timeout=10) as client,
        ):
            live = exercise(client)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    return source, base, live


@pytest.fixture
def imported(recorded, tmp_path):
    source, base, live = recorded
    dest = tmp_path / "suite.msgpack"
    assert main(["import-vcr", str(source), str(dest)]) == 0
    return dest, base, live


def test_the_vcrpy_cassette_is_what_vcrpy_wrote(recorded):
    source, _, _ = recorded
    # vcrpy writes !!binary for the gzip body, which safe_load reads as bytes.
    doc = yaml.safe_load(source.read_bytes())
    assert doc["version"] == 1
    assert len(doc["interactions"]) == 9
    zipped = doc["interactions"][1]["response"]
    assert zipped["headers"]["content-encoding"] == ["gzip"]
    assert isinstance(zipped["body"]["string"], bytes)
    assert zipped["body"]["string"][:2] == b"\x1f\x8b"


def test_import_prints_one_summary_line_per_interaction(recorded, tmp_path, capsys):
    source, base, _ = recorded
    dest = tmp_path / "out.msgpack"

    assert main(["import-vcr", str(source), str(dest)]) == 0

    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"#0 GET {base}/v1/models -> 200, json",
        f"#1 GET {base}/v1/gzip -> 200, json, gzip decoded",
        f"#2 GET {base}/v1/deflate -> 200, json, deflate decoded",
        f"#3 POST {base}/v1/chat -> 200, sse, 4 event(s)",
        f"#4 POST {base}/api/generate -> 200, ndjson, 3 line(s)",
        f"#5 GET {base}/v1/audio -> 200, bytes, 768 byte(s)",
        f"#6 GET {base}/v1/broken -> 502, text, {len(HTML)} char(s)",
        f"#7 GET {base}/v1/secure?key=REDACTED -> 200, json",
        f"#8 POST {base}/v1/account -> 200, json",
        f"wrote {dest} (9 interaction(s))",
    ]


def test_replaying_the_import_gives_the_client_what_it_saw_live(imported):
    dest, base, live = imported

    with (
        use_cassette(dest) as session,
        httpx.Client(transport=session.http_transport(), base_url=base) as client,
    ):
        replayed = exercise(client)

    assert session.unused() == []
    # The account ids were masked on import, as a recording masks them; all else is as live.
    assert live["account"] == (200, {"user_id": "user-42", "account_id": 7, "balance": 12.5})
    assert replayed["account"] == (200, {"user_id": "REDACTED", "account_id": 0, "balance": 12.5})
    for name in live.keys() - {"account"}:
        assert replayed[name] == live[name], name
    assert replayed["models"][2] == ["a", "b"]
    assert replayed["sse"][1][-1] == (None, None, "[DONE]")


def test_the_import_is_stored_parsed_decoded_and_redacted(imported):
    dest, _, _ = imported

    cassette = load_cassette(dest, validate=True)
    stored = cassette.interactions
    raw = dest.read_bytes()

    assert cassette.meta["imported_from"] == "suite.yaml (vcrpy format 1)"
    models, zipped, deflated, chat, generate, audio, broken, secure, account = stored
    # Multi-value headers survive, in order; cookies are redacted one by one.
    assert models.response.headers.get_list("x-multi") == ["a", "b"]
    assert models.response.headers.get_list("set-cookie") == ["REDACTED", "REDACTED"]
    assert models.response.body == JsonBody(MODELS)
    for decoded in (zipped, deflated):
        assert decoded.response.body == JsonBody(ZIPPED)
        for wire in ("content-encoding", "content-length", "transfer-encoding"):
            assert wire not in decoded.response.headers
    assert isinstance(chat.request.body, JsonBody)
    body = chat.response.body
    assert isinstance(body, SseBody)
    assert body.events[0] == {"t": 0.0, "comments": ["keep-alive"]}
    assert body.events[2] == {
        "t": 0.0,
        "event": "delta",
        "id": "2",
        "data": {"choices": [{"delta": {"content": "lo"}}]},
    }
    assert body.events[3] == {"t": 0.0, "text": "[DONE]"}
    assert (chat.response.t_headers, chat.response.t_end) == (0.0, 0.0)
    assert generate.response.body == NdjsonBody([{"t": 0.0, "value": v} for v in NDJSON])
    assert audio.response.body == BytesBody(BINARY)
    assert audio.request.body == EmptyBody()
    assert broken.response.status == 502
    assert broken.response.body == TextBody(HTML)
    assert secure.request.url.endswith("/v1/secure?key=REDACTED")
    assert secure.request.headers["authorization"] == "REDACTED"
    assert account.request.body == JsonBody({"user_id": "REDACTED", "question": "balance?"})
    assert SECRET.encode() not in raw
    assert b"user-42" not in raw


def test_a_remaining_secret_is_refused_and_never_printed(tmp_path, capsys):
    source = write_vcr(
        tmp_path / "leak.yaml",
        [
            interaction("GET", "https://api.example.invalid/v1/models", body=b'{"data": []}'),
            interaction(
                "GET",
                "https://api.example.invalid/v1/me",
                body=json.dumps({"note": f"your key is {SECRET}"}).encode(),
            ),
        ],
    )
    dest = tmp_path / "leak.msgpack"

    code = main(["import-vcr", str(source)])

    out, err = capsys.readouterr()
    assert code == 1
    assert not dest.exists()
    assert "interaction #1, response.body.value['note']: an OpenAI-style API key" in err
    assert f"{dest} was not written" in err
    assert SECRET not in out + err

    assert main(["import-vcr", str(source), "--allow-secret", SECRET]) == 0
    assert dest.exists()


def test_a_brotli_body_without_the_brotli_module_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "brotli", None)  # None in sys.modules: import fails
    monkeypatch.setitem(sys.modules, "brotlicffi", None)
    source = write_vcr(
        tmp_path / "br.yaml",
        [
            interaction("GET", "https://api.example.invalid/ok", body=b"{}"),
            interaction(
                "GET",
                "https://api.example.invalid/v1/br?key=abc",
                body=b"\x1b\x0f\x00\xf8\x8d",
                headers={"content-type": ["application/json"], "content-encoding": ["br"]},
            ),
        ],
    )

    code = main(["import-vcr", str(source)])

    err = capsys.readouterr().err
    assert code == 1
    assert (
        f"error: {source}: interaction #1 (GET https://api.example.invalid/v1/br?key=REDACTED): "
        "the response body is brotli-encoded (content-encoding: br) and no brotli module is "
        "installed: pip install brotli" in err
    )
    assert "1 interaction(s) could not be converted" in err
    assert not (tmp_path / "br.msgpack").exists()


def test_other_vcr_shapes_base64_bodies_and_ruby_vcr(tmp_path, capsys):
    document = {
        "http_interactions": [
            {
                "request": {
                    "method": "post",
                    "uri": "https://api.example.invalid/v1/embed",
                    "body": {"encoding": "UTF-8", "string": '{"input": "hi"}'},
                    "headers": {"Content-Type": ["application/json"], "X-Single": "one"},
                },
                "response": {
                    "status": {"code": 200, "message": "OK"},
                    "headers": {"Content-Type": ["application/json"], "Content-Length": ["14"]},
                    "body": {
                        "encoding": "ASCII-8BIT",
                        "base64_string": base64.b64encode(
                            gzip.compress(b'{"vector": [1]}')
                        ).decode(),
                    },
                },
            }
        ]
    }
    # The Ruby form also carries content-encoding: the base64 bytes are gzip.
    response = document["http_interactions"][0]["response"]
    response["headers"]["Content-Encoding"] = ["gzip"]
    source = tmp_path / "ruby.yml"
    source.write_text(yaml.safe_dump(document))

    assert main(["import-vcr", str(source)]) == 0

    (stored,) = load_cassette(tmp_path / "ruby.msgpack").interactions
    assert stored.request.method == "POST"
    assert stored.request.body == JsonBody({"input": "hi"})
    assert stored.request.headers["x-single"] == "one"
    assert stored.response.body == JsonBody({"vector": [1]})
    assert stored.response.headers.multi_items() == [("Content-Type", "application/json")]
    assert "gzip decoded" in capsys.readouterr().out


def test_exit_codes_in_a_separate_process(tmp_path):
    source = write_vcr(
        tmp_path / "chat.yaml",
        [
            interaction(
                "POST",
                "https://api.example.invalid/v1/chat",
                body=SSE,
                headers={"content-type": ["text/event-stream"]},
            ),
            interaction("GET", "https://api.example.invalid/x", body=f"k={SECRET}".encode()),
        ],
    )
    dest = tmp_path / "chat.msgpack"

    code, out = run("import-vcr", source, "--allow-secret", SECRET)
    assert code == 0, out
    assert "#0 POST https://api.example.invalid/v1/chat -> 200, sse, 4 event(s)" in out
    assert f"wrote {dest} (2 interaction(s))" in out

    assert dest.read_bytes().count(SECRET.encode()) == 1  # allowed, so kept

    code, out = run("import-vcr", source, tmp_path / "leaky.msgpack")
    assert code == 1
    assert "interaction #1, response.body.text: an OpenAI-style API key" in out
    assert SECRET not in out
    assert not (tmp_path / "leaky.msgpack").exists()

    garbage = tmp_path / "garbage.yaml"
    garbage.write_text("interactions: [unclosed\n")
    code, out = run("import-vcr", garbage)
    assert code == 2
    assert f"error: {garbage} is not a YAML file vcrpy could read" in out
    assert "Traceback" not in out


def test_force_overwrites_with_the_same_bytes(tmp_path, capsys):
    source = write_vcr(
        tmp_path / "chat.yaml",
        [interaction("GET", "https://api.example.invalid/v1/models", body=b'{"data": []}')],
    )
    dest = tmp_path / "chat.msgpack"
    assert main(["import-vcr", str(source)]) == 0
    first = dest.read_bytes()
    dest.write_bytes(b"stale")
    capsys.readouterr()

    assert main(["import-vcr", str(source)]) == 1

    assert f"error: {dest} exists; pass --force to overwrite it" in capsys.readouterr().err
    assert dest.read_bytes() == b"stale"

    assert main(["import-vcr", str(source), "--force"]) == 0

    assert dest.read_bytes() == first  # the same input always gives the same bytes
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "missing.yaml does not exist"),
        ("name: something else\n", "is not a vcrpy cassette: it has no 'interactions' list"),
        ("- request: {}\n", "is a cassette from vcrpy before 1.0"),
        ("version: 2\ninteractions: []\n", "of format version 2; import-vcr reads version 1"),
        ("interactions: 3\n", "'interactions' is not a list"),
    ],
)
def test_a_file_that_is_not_a_vcrpy_cassette_exits_2(tmp_path, capsys, content, message):
    source = tmp_path / "missing.yaml"
    if content is not None:
        source.write_text(content)

    assert main(["import-vcr", str(source)]) == 2

    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: ")
    assert message in err
    assert not (tmp_path / "missing.msgpack").exists()


OLD_VCRPY = """\
interactions:
- request:
    body: !!python/object/new:_io.BytesIO
      state: !!python/tuple
      - !!binary |
        eyJhIjogMX0=
      - 0
      - null
    headers:
      content-type: [application/json]
    method: POST
    uri: https://api.example.invalid/v1/upload
  response:
    body: {string: '{"ok": true}'}
    headers:
      content-type: [application/json]
    status: {code: 201, message: Created}
version: 1
"""


def test_python_tags_of_older_vcrpy_are_read_with_vcrpys_safe_loader(tmp_path, capsys):
    source = tmp_path / "old.yaml"
    source.write_text(OLD_VCRPY)

    assert main(["import-vcr", str(source)]) == 0

    (stored,) = load_cassette(tmp_path / "old.msgpack").interactions
    assert stored.request.body == JsonBody({"a": 1})
    assert stored.response.status == 201


def test_a_tag_that_would_run_code_is_refused(tmp_path, capsys):
    marker = tmp_path / "ran"
    source = tmp_path / "evil.yaml"
    source.write_text(
        "interactions:\n- request: !!python/object/apply:os.system\n"
        f"  - touch {marker}\n  response: {{}}\nversion: 1\n"
    )

    assert main(["import-vcr", str(source)]) == 2

    assert f"error: {source} is not a YAML file vcrpy could read" in capsys.readouterr().err
    assert not marker.exists()


def test_the_destination_cannot_be_the_source(tmp_path, capsys):
    source = tmp_path / "chat.msgpack"
    source.write_text("interactions: []\n")

    assert main(["import-vcr", str(source)]) == 2

    assert "is the source file" in capsys.readouterr().err
    assert source.read_text() == "interactions: []\n"


def test_an_interaction_that_is_broken_is_named(tmp_path, capsys):
    # gzip's magic, then garbage: bytes that are not UTF-8, so vcrpy writes them as !!binary.
    broken = interaction(
        "GET", "https://api.example.invalid/v1/gz?token=t0ps3cret", body=b"\x1f\x8b\x08xx"
    )
    broken["response"]["headers"]["content-encoding"] = ["gzip"]
    bad_status = interaction("GET", "https://api.example.invalid/v1/s", body=b"{}", status=42)
    source = write_vcr(tmp_path / "bad.yaml", [broken, bad_status])

    assert main(["import-vcr", str(source)]) == 1

    err = capsys.readouterr().err
    assert (
        f"error: {source}: interaction #0 (GET https://api.example.invalid/v1/gz?token=REDACTED): "
        "the response body says content-encoding 'gzip' but does not decode as gzip" in err
    )
    assert "interaction #1 (GET https://api.example.invalid/v1/s): the response status" in err
    assert "t0ps3cret" not in err


# ---------------------------------------------------------------------------------------------
# Helpers


def interaction(method, uri, *, body=b"", status=200, headers=None):
    """One interaction as vcrpy stores it."""
    return {
        "request": {"method": method, "uri": uri, "body": None, "headers": {}},
        "response": {
            "status": {"code": status, "message": "OK"},
            "headers": headers or {"content-type": ["application/json"]},
            "body": {"string": body},
        },
    }


def write_vcr(path, interactions):
    """A vcrpy cassette file, written with vcrpy's own serializer."""
    from vcr.serializers import yamlserializer

    path.write_text(yamlserializer.serialize({"version": 1, "interactions": interactions}))
    return path


def run(*args):
    result = subprocess.run(
        [sys.executable, "-m", "pytest_toolnexus", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    return result.returncode, result.stdout + result.stderr
